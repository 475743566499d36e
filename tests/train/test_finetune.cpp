// Fine-tuning through the one training loop: with LoRA only the adapters change (every other
// tensor bit-identical after training) and only they have optimizer state; --freeze patterns
// leave what they name bit-identical; an adapter-only checkpoint resumes bit for bit and refuses
// a base that changed; merged and unmerged models agree; sliding-window perplexity scores every
// token once, equals the loss op where windows do not overlap, and refuses bad strides and texts.
#include <cmath>
#include <filesystem>
#include <set>

#include "attograd/models/gpt/eval_text.h"
#include "attograd/models/gpt/finetune.h"
#include "attograd/models/gpt/gpt_job.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/losses.h"
#include "attograd/train/report/metrics_log.h"
#include "attograd/train/trainer.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

std::string verse_text() {
  std::string text;
  for (int i = 0; i < 20; ++i) {
    text += "the cat sat on the mat and the dog sat on the log\na bird in the hand is worth two in the bush\n";
  }
  return text;
}

GPTOptions small_gpt(int64_t vocab) {
  return {.vocab = vocab, .block_size = 16, .d_model = 16, .n_head = 2, .n_layers = 2, .dropout = 0.0, .bias = true};
}

TrainerOptions options(int64_t steps) {
  return {.optimizer = OptimizerKind::adamw, .lr = 1e-2, .weight_decay = 0.1, .warmup_steps = 2, .steps = steps,
          .eval_every = 4, .threads = 1};
}

// A model and its job built as train_gpt builds a fine-tuning run: seeded, then the base, the
// freezing and the adapters (prepare_finetune), or, resuming, restore_finetune.
struct TuneRun {
  Tokenizer tok = Tokenizer::characters(verse_text());
  std::unique_ptr<GPT> model;
  std::unique_ptr<GPTJob> job;
  std::unique_ptr<Trainer> trainer;

  TuneRun(const FineTuneOptions& f, int64_t steps, TrainerOutputs outputs = {}, const Checkpoint* resume = nullptr) {
    manual_seed(3);
    model = std::make_unique<GPT>(small_gpt(tok.vocab_size()));
    GPTJobOptions j{.batch = 4, .seed = 3, .eval_windows = 8, .sample_tokens = 0};
    if (resume != nullptr) {
      restore_finetune(*resume, *model);
      j.finetune = resume->entry("finetune");
    } else if (f.active()) {
      j.finetune = prepare_finetune(*model, f);
    }
    outputs.save_trainable_only = (resume != nullptr ? finetune_options_from(*resume) : f).adapter_only;
    job = std::make_unique<GPTJob>(*model, tok, tok.encode(verse_text()), j);
    trainer = std::make_unique<Trainer>(*job, options(steps), std::move(outputs));
    if (resume != nullptr) trainer->resume(*resume);
  }
};

// A base checkpoint: a few updates of the plain model.
void write_base(const std::string& path, int64_t steps) {
  TuneRun base({}, steps, {.checkpoint_path = path});
  base.trainer->run();
}

std::map<std::string, Tensor> snapshot(const Module& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : m.state_dict()) out[name] = t.clone();
  return out;
}

bool is_adapter(const std::string& name) { return name.ends_with(".lora_a") || name.ends_with(".lora_b"); }

}  // namespace

BOOST_AUTO_TEST_SUITE(finetune)

BOOST_AUTO_TEST_CASE(freeze_patterns_are_globs_or_leading_parts_ending_at_a_dot) {
  BOOST_TEST(parameter_matches("embed", "embed.weight"));
  BOOST_TEST(!parameter_matches("embed", "embedding.weight"));
  BOOST_TEST(parameter_matches("blocks.1", "blocks.1.attn.w_q.weight"));
  BOOST_TEST(!parameter_matches("blocks.1", "blocks.10.attn.w_q.weight"));
  BOOST_TEST(parameter_matches("blocks.*.attn.*", "blocks.3.attn.w_o.bias"));
  BOOST_TEST(!parameter_matches("blocks.*.attn.*", "blocks.3.ff.linear1.bias"));
  BOOST_TEST(parameter_matches("*.bias", "norm.bias"));
  BOOST_TEST(parameter_matches("?os.weight", "pos.weight"));
  BOOST_TEST(!parameter_matches("pos.weight.x", "pos.weight"));
}

BOOST_AUTO_TEST_CASE(lora_training_changes_only_the_adapters_and_gives_only_them_optimizer_state) {
  TempDir dir;
  TuneRun run({.lora_rank = 2}, 6, {.checkpoint_path = dir.file("lora.safetensors")});
  const auto before = snapshot(*run.model);
  std::set<std::string> trainable;
  for (const auto& [name, p] : run.trainer->optimizer().params()) trainable.insert(name);
  BOOST_TEST(trainable.size() == 2u * 4u * 2u);  // 2 blocks, 4 projections, A and B
  for (const std::string& name : trainable) BOOST_TEST(is_adapter(name), name);
  run.trainer->run();
  int changed = 0;
  for (const auto& [name, t] : run.model->state_dict()) {
    const double diff = max_abs_diff(t, before.at(name));
    if (is_adapter(name)) {
      changed += diff > 0 ? 1 : 0;
    } else {
      BOOST_TEST(diff == 0.0, name << " changed by " << diff);
    }
  }
  BOOST_TEST(changed == 16);
  // The checkpoint keeps every tensor, and optimizer state for the adapters alone.
  const SafetensorsFile file = load_safetensors(dir.file("lora.safetensors"));
  int state = 0;
  for (const SafetensorsEntry& e : file.entries) {
    const std::string& name = e.name;
    if (name.rfind("optimizer/", 0) == 0) {
      ++state;
      BOOST_TEST(is_adapter(name.substr(10, name.rfind('/') - 10)), name);
    }
  }
  BOOST_TEST(state == 16 * 3);  // step, exp_avg, exp_avg_sq
  BOOST_TEST(file.contains("embed.weight"));
}

BOOST_AUTO_TEST_CASE(freeze_leaves_what_it_names_bit_identical) {
  TuneRun run({.freeze = {"embed", "blocks.0.attn", "*.norm2.*"}}, 5);
  const auto before = snapshot(*run.model);
  run.trainer->run();
  for (const auto& [name, t] : run.model->state_dict()) {
    const bool frozen = name == "embed.weight" || name.rfind("blocks.0.attn.", 0) == 0 || name.find(".norm2.") != std::string::npos;
    const double diff = max_abs_diff(t, before.at(name));
    if (frozen) {
      BOOST_TEST(diff == 0.0, name);
    } else if (!name.ends_with("w_k.bias")) {  // softmax cancels the key bias's gradient: it never moves
      BOOST_TEST(diff > 0.0, name << " did not train");
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_finetune_options_are_refused_naming_the_value) {
  const Tokenizer tok = Tokenizer::characters(verse_text());
  GPT model(small_gpt(tok.vocab_size()));
  AG_CHECK_THROWS_WITH(prepare_finetune(model, {.freeze = {"blocks.9"}}), std::invalid_argument, "'blocks.9'",
                       "names no parameter", "embed.weight");
  AG_CHECK_THROWS_WITH(prepare_finetune(model, {.lora_rank = 2, .lora_targets = {"c_attn"}}), std::invalid_argument,
                       "'c_attn'", "attn.w_q", "ff.linear2");
  AG_CHECK_THROWS_WITH(prepare_finetune(model, {.lora_rank = 17}), std::invalid_argument, "rank 17", "[1, 16]");
  AG_CHECK_THROWS_WITH(prepare_finetune(model, {.lora_rank = 2, .adapter_only = true}), std::invalid_argument,
                       "init_from");
  AG_CHECK_THROWS_WITH(prepare_finetune(model, {.init_from = "/nonexistent/base.safetensors"}), std::runtime_error,
                       "/nonexistent/base.safetensors");
  for (const auto& [name, p] : model.named_parameters()) BOOST_TEST(p.requires_grad(), name);
  freeze_parameters(model, {"*"});
  const GPTJobOptions j{.batch = 4, .seed = 3, .eval_windows = 8, .sample_tokens = 0};
  GPTJob job(model, tok, tok.encode(verse_text()), j);
  AG_CHECK_THROWS_WITH(Trainer(job, options(4)), std::invalid_argument, "frozen", "nothing would train");
}

BOOST_AUTO_TEST_CASE(an_adapter_only_checkpoint_resumes_bit_for_bit_and_refuses_another_base) {
  TempDir dir;
  const std::string base = dir.file("base.safetensors");
  write_base(base, 4);
  const FineTuneOptions f{.init_from = base, .lora_rank = 2, .lora_alpha = 4, .adapter_only = true};
  TuneRun straight(f, 8, {.checkpoint_path = dir.file("straight.safetensors")});
  straight.trainer->run();

  TuneRun* handle = nullptr;
  TuneRun stopped(f, 8,
                  {.checkpoint_path = dir.file("stopped.safetensors"),
                   .on_step = [&](int64_t step, double) { if (step == 3) handle->trainer->request_stop(); }});
  handle = &stopped;
  BOOST_TEST(stopped.trainer->run().interrupted);
  const Checkpoint ck = Checkpoint::open(dir.file("stopped.safetensors"));
  for (const SafetensorsEntry& e : load_safetensors(ck.path()).entries) {
    const std::string& name = e.name;
    const std::string param = name.rfind("optimizer/", 0) == 0 ? name.substr(10, name.rfind('/') - 10) : name;
    BOOST_TEST(is_adapter(param), name);
  }
  TuneRun resumed({}, 8, {.checkpoint_path = dir.file("resumed.safetensors")}, &ck);
  BOOST_TEST(resumed.trainer->step() == 3);
  resumed.trainer->run();
  for (const auto& [name, t] : straight.model->state_dict()) {
    BOOST_TEST(max_abs_diff(t, snapshot(*resumed.model).at(name)) == 0.0, name);
  }
  // generate's loader puts the adapter on the base again.
  const LoadedGPT loaded = load_gpt_checkpoint(dir.file("straight.safetensors"));
  for (const auto& [name, t] : straight.model->state_dict()) {
    BOOST_TEST(max_abs_diff(t, snapshot(*loaded.model).at(name)) == 0.0, name);
  }

  // Another base at the recorded path: refused, naming the file and both checksums.
  write_base(base, 5);
  AG_CHECK_THROWS_WITH(load_gpt_checkpoint(dir.file("straight.safetensors")), std::runtime_error, "straight.safetensors",
                       "base.safetensors", "CRC-32C");
  const Checkpoint again = Checkpoint::open(dir.file("stopped.safetensors"));
  AG_CHECK_THROWS_WITH(TuneRun({}, 8, {}, &again), std::runtime_error, "another base");
}

BOOST_AUTO_TEST_CASE(merged_and_unmerged_models_give_the_same_logits) {
  TempDir dir;
  TuneRun run({.lora_rank = 3, .lora_alpha = 6, .lora_targets = {"w_q", "w_v", "linear1"}}, 6,
              {.checkpoint_path = dir.file("lora.safetensors")});
  run.trainer->run();
  LoadedGPT loaded = load_gpt_checkpoint(dir.file("lora.safetensors"));
  loaded.model->to(DType::f64);
  const Indices ids(Shape{2, 16}, run.tok.encode(verse_text().substr(0, 32)));
  const Tensor unmerged = loaded.model->forward(ids).value().clone();
  BOOST_TEST(merge_lora(*loaded.model) == 6);
  const Tensor merged = loaded.model->forward(ids).value();
  const double diff = max_abs_diff(merged, unmerged);
  BOOST_TEST(diff < 1e-6);
  // Merged back, the model is a plain GPT: its tensors load strictly into one, which computes the same.
  GPT plain(small_gpt(run.tok.vocab_size()));
  plain.to(DType::f64);
  plain.load_state_dict(loaded.model->state_dict());
  BOOST_TEST(max_abs_diff(plain.forward(ids).value(), merged) == 0.0);
}

BOOST_AUTO_TEST_CASE(sliding_windows_score_every_token_once) {
  // 10 tokens, windows of 4 every 2: [0,4) scores 1..3, [2,6) scores 4..5, [4,8) 6..7, [6,10) 8..9.
  const std::vector<ScoredWindow> w = sliding_windows(10, 4, 2);
  BOOST_REQUIRE(w.size() == 4u);
  const int64_t expect[4][3] = {{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}};
  for (size_t i = 0; i < 4; ++i) {
    BOOST_TEST(w[i].begin == expect[i][0]);
    BOOST_TEST(w[i].end == expect[i][1]);
    BOOST_TEST(w[i].first_scored == expect[i][2]);
  }
  for (int64_t n : {2, 3, 7, 16, 33}) {
    for (int64_t window : {2, 5, 8}) {
      for (int64_t stride = 1; stride < window; ++stride) {
        std::vector<int> count(static_cast<size_t>(n), 0);
        for (const ScoredWindow& s : sliding_windows(n, window, stride)) {
          BOOST_TEST(s.end - s.begin <= window);
          for (int64_t t = s.first_scored; t < s.end; ++t) ++count[static_cast<size_t>(t)];
        }
        for (int64_t t = 0; t < n; ++t) BOOST_TEST(count[static_cast<size_t>(t)] == (t == 0 ? 0 : 1));
      }
    }
  }
  // stride == window: the first token of each later window has no context inside it, and a
  // last window of one token scores nothing (it is left out).
  const std::vector<ScoredWindow> tiled = sliding_windows(9, 4, 4);
  BOOST_TEST(tiled.size() == 2u);
  BOOST_TEST(tiled[1].begin == 4);
  BOOST_TEST(tiled[1].first_scored == 5);
  AG_CHECK_THROWS_WITH(sliding_windows(1, 4, 2), std::invalid_argument, "1 token", "at least 2");
  AG_CHECK_THROWS_WITH(sliding_windows(10, 4, 5), std::invalid_argument, "stride 5", "window = 4");
  AG_CHECK_THROWS_WITH(sliding_windows(10, 4, 0), std::invalid_argument, "stride 0");
}

BOOST_AUTO_TEST_CASE(sliding_window_perplexity_is_the_loss_where_windows_tile_the_text) {
  const Tokenizer tok = Tokenizer::characters(verse_text());
  manual_seed(4);
  GPT model(small_gpt(tok.vocab_size()));
  model.to(DType::f64);
  const std::vector<int64_t> all = tok.encode(verse_text());
  // 3 windows of 16 that share no token: [0,16), [16,32), [32,48); scored 1..15, 17..31, 33..47.
  const std::vector<int64_t> tokens(all.begin(), all.begin() + 48);
  const TextScore s = sliding_window_perplexity(model, tokens, tok.token_bytes(), {.window = 16, .stride = 16, .batch = 2});
  double nats = 0;
  for (int64_t b = 0; b < 48; b += 16) {
    const Indices in(Shape{1, 15}, std::vector<int64_t>(tokens.begin() + b, tokens.begin() + b + 15));
    const Indices target(Shape{1, 15}, std::vector<int64_t>(tokens.begin() + b + 1, tokens.begin() + b + 16));
    nats += 15 * cross_entropy(model(in), target).item();
  }
  BOOST_TEST(s.windows == 3);
  BOOST_TEST(s.tokens == 45);
  BOOST_TEST(s.bytes == 45);  // one byte a character here
  BOOST_TEST(std::abs(s.nats - nats) / nats < 1e-12);
  BOOST_TEST(std::abs(s.bits_per_byte() - s.nats_per_token() / std::log(2.0)) < 1e-12);
  // The batch only groups windows: any batch gives the same sums.
  const TextScore one = sliding_window_perplexity(model, all, tok.token_bytes(), {.window = 12, .stride = 5, .batch = 1});
  const TextScore many = sliding_window_perplexity(model, all, tok.token_bytes(), {.window = 12, .stride = 5, .batch = 7});
  BOOST_TEST(one.tokens == static_cast<int64_t>(all.size()) - 1);
  BOOST_TEST(std::abs(one.nats - many.nats) / one.nats < 1e-12);
  AG_CHECK_THROWS_WITH(sliding_window_perplexity(model, all, tok.token_bytes(), {.window = 17, .stride = 4}),
                       std::invalid_argument, "window 17", "block_size 16");
  AG_CHECK_THROWS_WITH(sliding_window_perplexity(model, {1, 99}, tok.token_bytes(), {.stride = 4}), std::invalid_argument,
                       "token 1 is 99");
}

BOOST_AUTO_TEST_CASE(an_evaluation_logs_the_sliding_window_perplexity_when_asked) {
  TempDir dir;
  const Tokenizer tok = Tokenizer::characters(verse_text());
  manual_seed(3);
  GPT model(small_gpt(tok.vocab_size()));
  GPTJob job(model, tok, tok.encode(verse_text()), {.batch = 4, .seed = 3, .eval_windows = 8, .sample_tokens = 0, .eval_stride = 8});
  Trainer trainer(job, options(4), {.log_path = dir.file("metrics.jsonl")});
  const TrainSummary s = trainer.run();
  const TextScore direct = sliding_window_perplexity(model, job.data().val, tok.token_bytes(), {.stride = 8, .batch = 4});
  BOOST_TEST(s.eval.sliding_loss == direct.nats_per_token());
  const std::vector<MetricsRow> rows = read_metrics_log(dir.file("metrics.jsonl"));
  BOOST_TEST(rows.back().sliding_perplexity == std::exp(direct.nats_per_token()));
  BOOST_TEST(rows.back().sliding_bits_per_byte == direct.bits_per_byte());
  BOOST_TEST(metrics_row_json(MetricsRow{}).find("sliding") == std::string::npos);  // other runs' lines as before
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
