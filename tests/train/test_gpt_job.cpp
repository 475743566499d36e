// GPTJob through the one training loop (Trainer): a tiny GPT learns a small text, every
// optimizer trains it, a stopped and resumed run is bit for bit the uninterrupted one (for every
// optimizer, and from a Checkpoint opened once with the file gone), request_stop saves, the
// options survive their JSON, the checkpoint names its kind and holds the tied weight once and
// reloads it tied (and a byte-pair encoding with it), a checkpoint of another model kind is
// refused by name, divergence stops without saving the bad state, weight decay on matrices
// leaves the other parameters alone, the loss over the whole validation split is every window
// once, and a golden run guards the whole trajectory.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "attograd/autograd/grad_mode.h"
#include "attograd/models/gpt/gpt_job.h"
#include "attograd/models/gpt/gpt_options.h"
#include "attograd/models/seq2seq/seq2seq_job.h"
#include "attograd/models/toy/sequence_job.h"
#include "attograd/models/toy/sequence_model.h"
#include "attograd/text/bpe.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/losses.h"
#include "attograd/train/report/metrics_log.h"
#include "attograd/train/trainer.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

void write_text_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

GPTOptions tiny_gpt(int64_t vocab, double dropout = 0.0) {
  return {.vocab = vocab, .block_size = 16, .d_model = 16, .n_head = 2, .n_layers = 1, .dropout = dropout, .bias = true};
}

// The job's options: what the data and the batches are (seed 11 also seeds the model below).
GPTJobOptions tiny_job() { return {.batch = 8, .seed = 11, .eval_windows = 16, .sample_tokens = 8}; }

// A model, tokenizer, job and trainer built as train_gpt builds them: seeded before the model.
struct Run {
  Tokenizer tok;
  std::unique_ptr<GPT> model;
  std::unique_ptr<GPTJob> job;
  std::unique_ptr<Trainer> trainer;

  Run(const TrainerOptions& o, TrainerOutputs outputs = {}, double dropout = 0.0, const GPTJobOptions& j = tiny_job(),
      const std::string& text = lm_test_text()) {
    tok = Tokenizer::characters(lm_test_text());
    manual_seed(j.seed);
    model = std::make_unique<GPT>(tiny_gpt(tok.vocab_size(), dropout));
    job = std::make_unique<GPTJob>(*model, tok, tok.encode(text), j);
    trainer = std::make_unique<Trainer>(*job, o, std::move(outputs));
  }
};

// An encoder-decoder checkpoint after one update, to hand to the GPT side.
void write_seq2seq_checkpoint(const std::string& path) {
  const Seq2SeqTaskOptions task = {.kind = Seq2SeqTaskKind::reverse_var, .symbols = 5, .min_len = 1, .max_len = 5,
                                   .batch_size = 4, .seed = 3};
  const Seq2SeqTask t(task);
  manual_seed(5);
  Seq2Seq model({.src_vocab = t.vocab_size(), .tgt_vocab = t.vocab_size(),
                 .max_len = std::max(t.max_source_len(), t.max_target_len() + 1), .d_model = 8, .n_head = 2, .d_ff = 16,
                 .n_encoder_layers = 1, .n_decoder_layers = 1});
  Seq2SeqJob job(model, task, 4);
  Trainer trainer(job, {.warmup_steps = 0, .steps = 2, .eval_every = 1});
  trainer.train_step();
  trainer.save_checkpoint(path);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpt_job)

BOOST_AUTO_TEST_CASE(gpt_options_round_trip_through_json_and_bad_json_is_refused) {
  const GPTOptions o = {.vocab = 65, .block_size = 32, .d_model = 48, .n_head = 3, .n_layers = 2, .dropout = 0.125,
                        .bias = false};
  const GPTOptions back = gpt_options_from_json(gpt_options_to_json(o));
  BOOST_TEST(gpt_options_to_json(back) == gpt_options_to_json(o));
  BOOST_TEST(back.block_size == 32);
  BOOST_TEST(back.dropout == 0.125);
  BOOST_TEST(!back.bias);

  const std::string json = gpt_options_to_json(o);
  AG_CHECK_THROWS_WITH(gpt_options_from_json(json.substr(0, json.size() - 1)), std::invalid_argument,
                       "gpt_options_from_json");
  AG_CHECK_THROWS_WITH(gpt_options_from_json(R"({"vocab":4})"), std::invalid_argument, "missing");
  std::string extra = json;
  extra.insert(1, R"("d_ff":99,)");
  AG_CHECK_THROWS_WITH(gpt_options_from_json(extra), std::invalid_argument, "unknown field", "d_ff");
  std::string bad_heads = json;
  bad_heads.replace(bad_heads.find("\"n_head\":3"), 10, "\"n_head\":5");
  AG_CHECK_THROWS_WITH(gpt_options_from_json(bad_heads), std::invalid_argument, "n_head 5", "d_model 48");
  std::string huge = json;
  huge.replace(huge.find("\"block_size\":32"), 15, "\"block_size\":99999999");
  AG_CHECK_THROWS_WITH(gpt_options_from_json(huge), std::invalid_argument, "block_size", "99999999");
  std::string bias = json;
  bias.replace(bias.find("\"bias\":false"), 12, "\"bias\":0");
  AG_CHECK_THROWS_WITH(gpt_options_from_json(bias), std::invalid_argument, "bias", "boolean");
}

BOOST_AUTO_TEST_CASE(trainer_options_round_trip_and_refuse_bad_values) {
  for (const OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
    const TrainerOptions o = lm_test_options(40, kind);
    const TrainerOptions back = trainer_options_from_json(trainer_options_to_json(o));
    BOOST_TEST(trainer_options_to_json(back) == trainer_options_to_json(o));
    BOOST_TEST((back.optimizer == kind));
  }
  TrainerOptions bad = lm_test_options(40);
  bad.warmup_steps = 40;
  AG_CHECK_THROWS_WITH(validate(bad), std::invalid_argument, "warmup_steps 40", "steps 40");
  bad = lm_test_options(40);
  bad.min_lr = 1.0;
  AG_CHECK_THROWS_WITH(validate(bad), std::invalid_argument, "min_lr", "1");
  AG_CHECK_THROWS_WITH(trainer_options_from_json(R"({"lr":1})"), std::invalid_argument, "missing");
  GPTJobOptions job = tiny_job();
  job.batch = 0;
  AG_CHECK_THROWS_WITH(validate(job), std::invalid_argument, "language model job", "batch", "got 0");
  job = tiny_job();
  job.train_fraction = 1.0;
  AG_CHECK_THROWS_WITH(validate(job), std::invalid_argument, "train_fraction", "got 1");
}

// The job's trajectory options travel in the checkpoint's "data" entry; the whole uint64 range
// of the seed survives, and what only observes the run comes from the caller.
BOOST_AUTO_TEST_CASE(job_options_come_back_from_the_checkpoint_with_the_whole_seed) {
  TempDir dir;
  GPTJobOptions j = tiny_job();
  j.seed = std::numeric_limits<uint64_t>::max();
  j.batch = 3;
  j.train_fraction = 0.75;
  Run run(lm_test_options(10), {}, 0.0, j);
  run.trainer->save_checkpoint(dir.file("ckpt.safetensors"));
  const Checkpoint ck = Checkpoint::open(dir.file("ckpt.safetensors"));
  const GPTJobOptions back = gpt_job_options_from(ck, {.eval_windows = 5, .sample_tokens = 0});
  BOOST_TEST(back.seed == std::numeric_limits<uint64_t>::max());
  BOOST_TEST(back.batch == 3);
  BOOST_TEST(back.train_fraction == 0.75);
  BOOST_TEST(back.eval_windows == 5);
  BOOST_TEST(back.sample_tokens == 0);
}

// GPT-2's recipe: with weight decay on matrices, one AdamW update of the embedding tables, the
// biases and the LayerNorms is bit for bit the update without decay, and each matrix's is that
// update less lr * wd times the matrix before the step (p (1 - lr wd) + u = (p + u) - lr wd p).
BOOST_AUTO_TEST_CASE(decay_on_matrices_leaves_biases_norms_and_embedding_tables_alone) {
  TrainerOptions decayed = lm_test_options(10);
  decayed.weight_decay = 0.5;
  decayed.decay = DecayParams::matrices;
  decayed.warmup_steps = 0;  // the first update at the peak lr
  TrainerOptions plain = decayed;
  plain.weight_decay = 0.0;
  Run a(decayed), b(plain);
  const NamedVariables params = a.model->named_parameters();
  std::vector<std::vector<double>> before;
  for (const auto& [name, p] : params) before.push_back(p.value().to_vector());
  a.trainer->train_step();
  b.trainer->train_step();
  const double lr_wd = LrSchedule(schedule_options(decayed)).at(0) * decayed.weight_decay;
  const NamedVariables plain_params = b.model->named_parameters();
  int64_t matrices = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    const bool matrix = name.ends_with(".weight") &&
                        (name.find(".attn.w_") != std::string::npos || name.find(".ff.linear") != std::string::npos);
    BOOST_TEST(decays(name, params[i].second.shape(), DecayParams::matrices) == matrix, name);
    BOOST_TEST(decays(name, params[i].second.shape(), DecayParams::all), name);
    const std::vector<double> got = params[i].second.value().to_vector();
    const std::vector<double> undecayed = plain_params[i].second.value().to_vector();
    if (!matrix) {
      BOOST_TEST(got == undecayed, name);
      continue;
    }
    ++matrices;
    double largest_decay = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      const double want = undecayed[k] - lr_wd * before[i][k];
      BOOST_TEST(std::abs(got[k] - want) <= 1e-6, name << "[" << k << "]: " << got[k] << " vs " << want);
      largest_decay = std::max(largest_decay, std::abs(got[k] - undecayed[k]));
    }
    BOOST_TEST(largest_decay > 1e-5, name);  // the decay did reach the matrix
  }
  BOOST_TEST(matrices == 6);  // w_q, w_k, w_v, w_o, linear1, linear2 of the one block
}

// train_gpt --eval-full: the loss over the whole validation split is the mean over every
// non-overlapping window, as a loop over the windows one at a time computes it (the last batch
// of 4 windows is short, and weighs by its rows); the model's mode is restored. --eval-windows:
// evaluate() reads that many evenly spaced windows instead.
BOOST_AUTO_TEST_CASE(the_whole_split_is_every_window_once_and_eval_windows_sets_the_sample) {
  GPTJobOptions j = tiny_job();
  j.batch = 4;
  Run run(lm_test_options(10), {}, 0.0, j);
  const std::vector<int64_t>& val = run.job->data().val;
  const int64_t block = run.model->options().block_size;
  const SplitLoss whole = run.job->evaluate_whole_split();
  BOOST_TEST(whole.windows == static_cast<int64_t>((val.size() - 1) / static_cast<size_t>(block)));
  BOOST_TEST(whole.windows % j.batch != 0);  // a short last batch
  BOOST_TEST(run.model->is_training());
  double sum = 0;
  {
    NoGradGuard no_grad;
    EvalModeGuard eval_mode(*run.model);
    for (int64_t w = 0; w < whole.windows; ++w) {
      const auto at = val.begin() + w * block;
      const Indices ids(Shape{1, block}, std::vector<int64_t>(at, at + block));
      const Indices next(Shape{1, block}, std::vector<int64_t>(at + 1, at + block + 1));
      sum += cross_entropy((*run.model)(ids), next).item();
    }
  }
  BOOST_TEST(whole.loss == sum / static_cast<double>(whole.windows), boost::test_tools::tolerance(1e-5));
  // Fewer evaluation windows read another sample of the split; the default evaluation is unchanged.
  const double sampled = run.trainer->evaluate().loss;
  j.eval_windows = 5;
  Run fewer(lm_test_options(10), {}, 0.0, j);
  BOOST_TEST(fewer.trainer->evaluate().loss != sampled);
  BOOST_TEST(sampled != whole.loss);
}

// Bits per byte with the byte tokenizer: every token is one byte, so the figure is the loss in
// nats / ln 2 to the last bit, for the sampled evaluation and for the whole split.
BOOST_AUTO_TEST_CASE(bits_per_byte_of_the_byte_tokenizer_is_the_loss_over_ln2_exactly) {
  const Tokenizer tok = Tokenizer::bytes();
  manual_seed(3);
  GPT model(tiny_gpt(tok.vocab_size()));
  GPTJob job(model, tok, tok.encode(lm_test_text()), tiny_job());
  Trainer trainer(job, lm_test_options(10));
  for (int i = 0; i < 3; ++i) trainer.train_step();
  const Evaluation e = trainer.evaluate();
  BOOST_TEST(std::isfinite(e.loss));
  BOOST_TEST(e.bits_per_byte == e.loss / std::log(2.0));
  BOOST_TEST(e.summary.find("bits per byte") != std::string::npos, e.summary);
  const SplitLoss whole = job.evaluate_whole_split();
  BOOST_TEST(whole.bits_per_byte == whole.loss / std::log(2.0));
}

// Bits per byte with the character tokenizer on a text of 1- to 4-byte characters: the total
// nats over the whole split's targets / ln 2 / the UTF-8 bytes of those targets, computed here
// window by window with the bytes counted from the decoded text. It is not the loss / ln 2:
// the multi-byte characters make a token worth more than a byte.
BOOST_AUTO_TEST_CASE(bits_per_byte_of_the_char_tokenizer_counts_the_utf8_bytes_of_the_targets) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "the caf\u00e9 sat \u2014 na\u00efve se\u00f1or \u2713 \U0001F600 on the mat\n";
  const Tokenizer tok = Tokenizer::characters(text);
  const std::vector<int64_t> lengths = tok.token_bytes();
  BOOST_TEST(*std::max_element(lengths.begin(), lengths.end()) == 4);
  GPTJobOptions j = tiny_job();
  j.batch = 4;
  manual_seed(5);
  GPT model(tiny_gpt(tok.vocab_size()));
  GPTJob job(model, tok, tok.encode(text), j);
  const SplitLoss whole = job.evaluate_whole_split();

  const std::vector<int64_t>& val = job.data().val;
  const int64_t block = model.options().block_size;
  double nats = 0;
  int64_t bytes = 0, tokens = 0;
  {
    NoGradGuard no_grad;
    EvalModeGuard eval_mode(model);
    for (int64_t w = 0; w < whole.windows; ++w) {
      const auto at = val.begin() + w * block;
      const std::vector<int64_t> targets(at + 1, at + block + 1);
      const Indices ids(Shape{1, block}, std::vector<int64_t>(at, at + block));
      nats += cross_entropy(model(ids), Indices(Shape{1, block}, targets)).item() * static_cast<double>(block);
      bytes += static_cast<int64_t>(tok.decode(targets).size());
      tokens += block;
    }
  }
  BOOST_REQUIRE(bytes > tokens);  // the split does hold multi-byte characters
  const double by_hand = nats / std::log(2.0) / static_cast<double>(bytes);
  BOOST_TEST(whole.bits_per_byte == by_hand, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(std::abs(whole.bits_per_byte - whole.loss / std::log(2.0)) > 0.05);
  // The sampled evaluation counts its own windows' bytes the same way.
  const Evaluation e = Trainer(job, lm_test_options(10)).evaluate();
  BOOST_TEST(e.bits_per_byte < e.loss / std::log(2.0));
  BOOST_TEST(e.bits_per_byte > e.loss / std::log(2.0) / 4);
}

// The metrics log of a language model carries its validation loss in bits per byte at every
// evaluation, the baseline included: the figure the evaluation computed.
BOOST_AUTO_TEST_CASE(the_metrics_log_carries_bits_per_byte) {
  TempDir dir;
  Run run(lm_test_options(10), {.log_path = dir.file("metrics.jsonl")});
  const TrainSummary s = run.trainer->run();
  const std::vector<MetricsRow> rows = read_metrics_log(dir.file("metrics.jsonl"));
  BOOST_REQUIRE(rows.size() == 3u);  // steps 0, 5 and 10
  for (const MetricsRow& r : rows) {
    BOOST_TEST(std::isfinite(r.eval_bits_per_byte), "step " << r.step);
    BOOST_TEST(r.eval_bits_per_byte == r.eval_loss / std::log(2.0), boost::test_tools::tolerance(1e-12));
  }
  BOOST_TEST(rows.back().eval_bits_per_byte == s.eval.bits_per_byte);
  BOOST_TEST(read_file(dir.file("metrics.jsonl")).find("\"eval_bits_per_byte\":") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_loss_falls_over_fifty_steps) {
  Run run(lm_test_options(50));
  const Evaluation before = run.trainer->evaluate();
  std::vector<double> losses;
  for (int i = 0; i < 50; ++i) losses.push_back(run.trainer->train_step().loss);
  const Evaluation after = run.trainer->evaluate();
  BOOST_TEST(before.loss > 2.8);  // about ln 27 = 3.3 untrained
  BOOST_TEST(after.loss < 0.75 * before.loss, "validation loss " << before.loss << " -> " << after.loss);
  BOOST_TEST(losses.back() < 0.75 * losses.front());
  // A language model measures no accuracy: NaN, so that no target accuracy ever stops it.
  BOOST_TEST(std::isnan(after.token_acc));
  BOOST_TEST(std::isnan(after.seq_acc));
  BOOST_TEST(after.summary.find("validation loss") != std::string::npos, after.summary);
}

BOOST_AUTO_TEST_CASE(a_text_too_short_for_the_context_is_refused_naming_both_numbers) {
  const Tokenizer tok = Tokenizer::characters("abcdefghij");
  manual_seed(0);
  GPT model(tiny_gpt(tok.vocab_size()));
  AG_CHECK_THROWS_WITH(GPTJob(model, tok, tok.encode("abcdefghij"), tiny_job()), std::invalid_argument, "10 tokens",
                       "17");
}

BOOST_AUTO_TEST_CASE(a_stopped_and_resumed_run_is_bit_exact_and_request_stop_saves) {
  TempDir dir;
  const TrainerOptions o = lm_test_options(12);
  // Dropout draws from the default generator, so its state must travel in the checkpoint too.
  std::vector<double> straight_losses;
  Run straight(o, {.on_step = [&](int64_t, double loss) { straight_losses.push_back(loss); }}, 0.1);
  const TrainSummary full = straight.trainer->run();
  BOOST_TEST(full.steps == 12);
  BOOST_TEST(!full.interrupted);

  // The first session stops itself at step 7 (between evaluations), as Ctrl-C would.
  std::vector<double> losses;
  Trainer* first_trainer = nullptr;
  TrainerOutputs first_out{.checkpoint_path = dir.file("ckpt.safetensors"),
                           .on_step = [&](int64_t step, double loss) {
                             losses.push_back(loss);
                             if (step == 7) first_trainer->request_stop();
                           }};
  Run first(o, first_out, 0.1);
  first_trainer = first.trainer.get();
  const TrainSummary stopped = first.trainer->run();
  BOOST_TEST(stopped.interrupted);
  BOOST_TEST(stopped.steps == 7);
  BOOST_TEST(read_checkpoint_info(dir.file("ckpt.safetensors")).data_position == 7u);
  BOOST_TEST(checkpoint_model_kind(read_checkpoint_info(dir.file("ckpt.safetensors"))) == "gpt");

  manual_seed(999);  // whatever the generator holds now, resume() restores the run's
  Run second(o, {.on_step = [&](int64_t, double loss) { losses.push_back(loss); }}, 0.1);
  second.trainer->resume(dir.file("ckpt.safetensors"));
  BOOST_TEST(second.trainer->step() == 7);
  const TrainSummary rest = second.trainer->run();
  BOOST_TEST(rest.steps == 12);
  BOOST_TEST(rest.steps_this_run == 5);

  BOOST_TEST(losses == straight_losses, boost::test_tools::per_element());
  const std::vector<double> a = parameter_values(*straight.model), b = parameter_values(*second.model);
  BOOST_TEST(a == b, boost::test_tools::per_element());
  BOOST_TEST(full.eval.loss == rest.eval.loss);
  BOOST_TEST(full.train_loss == rest.train_loss);  // the metrics window travels too
}

// The GPT kind trains with every optimizer the loop offers (it had AdamW only before the one
// loop), each optimizer's state travels in the checkpoint, and the resumed run is the
// uninterrupted one bit for bit. The three trajectories differ, so the choice is not ignored.
BOOST_AUTO_TEST_CASE(every_optimizer_trains_and_resumes_bit_exact) {
  check_every_optimizer_resumes_bit_exact<Run>(
      [](OptimizerKind kind) { return lm_test_options(12, kind); },
      [](const GPT& model) { return parameter_values(model); },
      [](const Checkpoint& ck, const char* name) {
        BOOST_TEST(ck.entry("trainer").find(std::string("\"optimizer\":\"") + name + "\"") != std::string::npos,
                   ck.entry("trainer"));
      });
}

// A program resuming a run opens the checkpoint once and asks that object for everything: the
// model kind, the model, tokenizer, job and trainer options, the step, and then the resume
// itself. The file is deleted right after the open, so any second read of it would fail: that
// Checkpoint::open is the only read is what this test shows (no strace needed).
BOOST_AUTO_TEST_CASE(a_resume_reads_the_checkpoint_once_from_the_opened_object) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const TrainerOptions o = lm_test_options(12);
  std::vector<double> straight_losses;
  Run straight(o, {.on_step = [&](int64_t, double loss) { straight_losses.push_back(loss); }}, 0.1);
  straight.trainer->run();

  std::vector<double> losses;
  {
    Run first(o, {}, 0.1);
    for (int i = 0; i < 7; ++i) losses.push_back(first.trainer->train_step().loss);
    first.trainer->save_checkpoint(path);
  }
  manual_seed(999);
  const Checkpoint ck = Checkpoint::open(path);
  BOOST_REQUIRE(std::filesystem::remove(path));
  AG_CHECK_THROWS_WITH(Checkpoint::open(path), std::runtime_error, path);  // the file is really gone

  // What train_gpt --resume rebuilds the run from, all from memory.
  require_model_kind(ck, "gpt");
  BOOST_TEST(checkpoint_model_kind(ck.info()) == "gpt");
  BOOST_TEST(checkpoint_step(ck) == 7);
  const GPTOptions model_options = gpt_options_from(ck);
  const Tokenizer tok = gpt_tokenizer_from(ck);
  const GPTJobOptions job_options = gpt_job_options_from(ck, {.eval_windows = 16, .sample_tokens = 8});
  TrainerOptions observing;
  observing.eval_every = 3;  // what only observes the run comes from the command line
  observing.target_seq_acc = 2.0;
  const TrainerOptions trainer_options = resumed_trainer_options(ck, observing);
  BOOST_TEST(trainer_options_to_json(trainer_options) == trainer_options_to_json(o));
  BOOST_TEST(trainer_options.eval_every == 3);
  BOOST_TEST(trainer_options.target_seq_acc == 2.0);
  BOOST_TEST(job_options.seed == tiny_job().seed);
  BOOST_TEST(job_options.batch == tiny_job().batch);
  BOOST_TEST(gpt_options_to_json(model_options) == gpt_options_to_json(straight.model->options()));

  GPT model(model_options);
  GPTJob job(model, tok, tok.encode(lm_test_text()), job_options);
  Trainer trainer(job, trainer_options, {.on_step = [&](int64_t, double loss) { losses.push_back(loss); }});
  trainer.resume(ck);
  BOOST_TEST(trainer.step() == 7);
  trainer.run();
  BOOST_TEST(losses == straight_losses, boost::test_tools::per_element());
  const std::vector<double> a = parameter_values(*straight.model), b = parameter_values(model);
  BOOST_TEST(a == b, boost::test_tools::per_element());

  // Loading for generation reads the same object too.
  const LoadedGPT loaded = load_gpt_checkpoint(ck);
  BOOST_TEST(loaded.step == 7);
  BOOST_TEST(loaded.tokenizer.to_json() == tok.to_json());
}

BOOST_AUTO_TEST_CASE(resume_refuses_another_text_or_configuration) {
  TempDir dir;
  const TrainerOptions o = lm_test_options(10);
  Run run(o);
  run.trainer->train_step();
  run.trainer->save_checkpoint(dir.file("ckpt.safetensors"));

  std::string other = lm_test_text();
  other[5] = 'd';  // one character differs: same vocabulary, same length
  Run on_other(o, {}, 0.0, tiny_job(), other);
  const std::vector<double> before = parameter_values(*on_other.model);
  // The "data" entry holds the token count and checksum: both JSON values are named.
  const std::string ours = on_other.job->metadata().at("data");
  const std::string theirs = run.job->metadata().at("data");
  BOOST_REQUIRE(ours != theirs);
  AG_CHECK_THROWS_WITH(on_other.trainer->resume(dir.file("ckpt.safetensors")), std::runtime_error, "ckpt.safetensors",
                       "'data'", ours, theirs);
  BOOST_TEST(parameter_values(*on_other.model) == before, boost::test_tools::per_element());
  BOOST_TEST(on_other.trainer->step() == 0);
  // A shorter budget is another trajectory; a longer one extends the run (train/trainer.h).
  TrainerOptions shorter = o;
  shorter.steps = 8;
  Run different(shorter);
  AG_CHECK_THROWS_WITH(different.trainer->resume(dir.file("ckpt.safetensors")), std::runtime_error, "trainer",
                       "\"steps\":10", "\"steps\":8");
  TrainerOptions longer = o;
  longer.steps = 20;
  Run extended(longer);
  extended.trainer->resume(dir.file("ckpt.safetensors"));
  BOOST_TEST(extended.trainer->step() == checkpoint_step(Checkpoint::open(dir.file("ckpt.safetensors"))));
  BOOST_TEST(extended.trainer->options().steps == 20);
  // Another optimizer is another trajectory.
  Run sgd(lm_test_options(10, OptimizerKind::sgd));
  AG_CHECK_THROWS_WITH(sgd.trainer->resume(dir.file("ckpt.safetensors")), std::runtime_error, "trainer",
                       "\"optimizer\":\"adamw\"", "\"optimizer\":\"sgd\"");
}

// The "data" entry names every source of the text, in order, by name, size and checksum: a resume
// (or a rank) on the same files in another order is refused with both lists in the message, and
// the same files resume. A checkpoint written before the entry named its sources still reads and
// resumes with a job given none: the token checksum alone guards its text.
BOOST_AUTO_TEST_CASE(the_data_entry_names_every_source_and_old_entries_without_them_still_resume) {
  TempDir dir;
  write_text_file(dir.file("a.txt"), lm_test_text());
  write_text_file(dir.file("b.txt"), "the dog sat on the cat\n");
  const TrainerOptions o = lm_test_options(10);
  const auto job_on = [&](const Tokenizer& tok, const Corpus& c, GPT& model) {
    return std::make_unique<GPTJob>(model, tok, tok.encode(c.text), tiny_job(), c.parts);
  };
  const Corpus ab = read_corpus_sources({dir.file("a.txt"), dir.file("b.txt")});
  const Corpus ba = read_corpus_sources({dir.file("b.txt"), dir.file("a.txt")});
  const Tokenizer tok = Tokenizer::characters(lm_test_text());
  manual_seed(1);
  GPT model(tiny_gpt(tok.vocab_size()));
  const auto job = job_on(tok, ab, model);
  const std::string entry = job->metadata().at("data");
  const std::string a_part = R"({"name":"a.txt","bytes":)" + std::to_string(lm_test_text().size()) +
                             R"(,"crc32c":)" + std::to_string(crc32c(lm_test_text().data(), lm_test_text().size())) + "}";
  BOOST_TEST(entry.find(R"("corpus":[)" + a_part + R"(,{"name":"b.txt","bytes":23,)") != std::string::npos, entry);
  Trainer trainer(*job, o);
  trainer.train_step();
  const std::string path = dir.file("ckpt.safetensors");
  trainer.save_checkpoint(path);
  BOOST_TEST(gpt_data_names_corpus(Checkpoint::open(path)));

  GPT same_model(tiny_gpt(tok.vocab_size()));
  const auto same = job_on(tok, ab, same_model);
  Trainer same_trainer(*same, o);
  same_trainer.resume(path);
  BOOST_TEST(same_trainer.step() == 1);

  GPT other_model(tiny_gpt(tok.vocab_size()));
  const auto reordered = job_on(tok, ba, other_model);
  Trainer reordered_trainer(*reordered, o);
  AG_CHECK_THROWS_WITH(reordered_trainer.resume(path), std::runtime_error, "ckpt.safetensors", "'data'", entry,
                       reordered->metadata().at("data"));

  // An old checkpoint: its data entry without "corpus".
  SafetensorsFile f = load_safetensors(path);
  std::string old = f.metadata.at("data");
  old.erase(old.find(R"(,"corpus":)"), std::string::npos);
  old += "}";
  f.metadata["data"] = old;
  const std::string old_path = dir.file("old.safetensors");
  save_safetensors(old_path, f);
  const Checkpoint old_ck = Checkpoint::open(old_path);
  BOOST_TEST(!gpt_data_names_corpus(old_ck));
  BOOST_TEST(gpt_job_options_from(old_ck, {}).batch == tiny_job().batch);
  GPT old_model(tiny_gpt(tok.vocab_size()));
  GPTJob without_sources(old_model, tok, tok.encode(ab.text), tiny_job());
  BOOST_TEST(without_sources.metadata().at("data") == old);
  Trainer old_trainer(without_sources, o);
  old_trainer.resume(old_ck);
  BOOST_TEST(old_trainer.step() == 1);
  // A job that names its sources does not take the old entry for its own.
  GPT named_model(tiny_gpt(tok.vocab_size()));
  const auto named = job_on(tok, ab, named_model);
  Trainer named_trainer(*named, o);
  AG_CHECK_THROWS_WITH(named_trainer.resume(old_ck), std::runtime_error, "old.safetensors", "'data'");
}

BOOST_AUTO_TEST_CASE(the_checkpoint_names_its_kind_and_holds_the_tied_weight_once_and_reloads_it_tied) {
  TempDir dir;
  Run run(lm_test_options(10));
  for (int i = 0; i < 3; ++i) run.trainer->train_step();
  const std::string path = dir.file("ckpt.safetensors");
  run.trainer->save_checkpoint(path);

  const SafetensorsFile file = load_safetensors(path);
  BOOST_TEST(file.contains("embed.weight"));
  int vocab_sized = 0;  // tensors of the head's shape among the parameters: the embedding only
  for (const SafetensorsEntry& e : file.entries) {
    if (e.name.find('/') == std::string::npos && e.shape() == Shape{run.model->options().vocab, 16}) ++vocab_sized;
  }
  BOOST_TEST(vocab_sized == 1);
  BOOST_TEST(file.metadata.at("model_kind") == "gpt");
  BOOST_TEST(checkpoint_model_kind(read_checkpoint_info(path)) == "gpt");
  BOOST_TEST(file.metadata.at("tokenizer") == run.tok.to_json());
  BOOST_TEST(file.metadata.at("model") == gpt_options_to_json(run.model->options()));
  BOOST_TEST(file.metadata.at("trainer") == trainer_options_to_json(lm_test_options(10)));
  BOOST_TEST(file.metadata.count("data") == 1u);
  BOOST_TEST(file.metadata.count("loop") == 1u);

  const LoadedGPT loaded = load_gpt_checkpoint(path);
  BOOST_TEST(loaded.step == 3);
  BOOST_TEST(loaded.tokenizer.to_json() == run.tok.to_json());
  GPT& m = *loaded.model;
  BOOST_TEST(m.head_weight().value().raw_data() == m.embed().weight().value().raw_data());
  // The same logits as the trained model: embedding and head both read the loaded table.
  run.model->eval();
  NoGradGuard no_grad;
  const Indices ids(Shape{1, 6}, run.tok.encode("the ca"));
  BOOST_TEST(max_abs_diff(m(ids).value(), (*run.model)(ids).value()) == 0.0);
}

BOOST_AUTO_TEST_CASE(a_model_on_a_byte_pair_encoding_reloads_with_it_from_its_checkpoint) {
  TempDir dir;
  const std::string text = lm_test_text();
  const Tokenizer tok = Tokenizer::bpe(train_bpe({{.name = "tiny", .text = text}}, {.vocab_size = 300}));
  manual_seed(tiny_job().seed);
  GPT model(tiny_gpt(tok.vocab_size()));
  GPTJob job(model, tok, tok.encode(text), tiny_job());
  Trainer trainer(job, lm_test_options(10));
  trainer.train_step();
  const std::string path = dir.file("ckpt.safetensors");
  trainer.save_checkpoint(path);
  // generate needs nothing but the checkpoint: the merges travel in its metadata.
  const LoadedGPT loaded = load_gpt_checkpoint(path);
  BOOST_TEST(std::string(loaded.tokenizer.kind_name()) == "bpe");
  BOOST_TEST(loaded.tokenizer.vocab_size() == 300);
  BOOST_TEST(loaded.tokenizer.to_json() == tok.to_json());
  BOOST_TEST(loaded.tokenizer.encode("the cat sat on the log") == tok.encode("the cat sat on the log"));
  BOOST_TEST(loaded.model->options().vocab == 300);
}

// GPT checkpoints written before the one loop kept the model's options under "gpt" and the
// loop's under "gpt_trainer": they still load for generation (gpt_options_from reads the old
// key), while resuming one is refused by name (its trajectory options are not the loop's).
BOOST_AUTO_TEST_CASE(a_checkpoint_from_before_the_one_loop_still_loads_for_generation) {
  TempDir dir;
  Run run(lm_test_options(10));
  for (int i = 0; i < 3; ++i) run.trainer->train_step();
  const std::string path = dir.file("old.safetensors");
  run.trainer->save_checkpoint(path);
  SafetensorsFile f = load_safetensors(path);
  f.metadata["gpt"] = f.metadata.at("model");
  f.metadata.erase("model");
  f.metadata.erase("trainer");
  f.metadata["gpt_trainer"] = R"({"batch":8,"lr":0.01})";
  save_safetensors(path, f);

  const LoadedGPT loaded = load_gpt_checkpoint(path);
  BOOST_TEST(loaded.step == 3);
  BOOST_TEST(gpt_options_to_json(loaded.model->options()) == gpt_options_to_json(run.model->options()));
  run.model->eval();
  NoGradGuard no_grad;
  const Indices ids(Shape{1, 6}, run.tok.encode("the ca"));
  BOOST_TEST(max_abs_diff((*loaded.model)(ids).value(), (*run.model)(ids).value()) == 0.0);

  Run fresh(lm_test_options(10));
  AG_CHECK_THROWS_WITH(fresh.trainer->resume(path), std::runtime_error, "old.safetensors", "'model'");
  BOOST_TEST(fresh.trainer->step() == 0);
}

BOOST_AUTO_TEST_CASE(loading_for_generation_refuses_a_checkpoint_of_another_model_kind) {
  TempDir dir;
  const SequenceTaskOptions task = {.kind = SequenceTaskKind::copy, .vocab_size = 6, .seq_len = 4, .batch_size = 4, .seed = 1};
  SequenceModel seq({.vocab = 6, .max_len = 4, .d_model = 8, .n_head = 2, .d_ff = 16, .n_layers = 1});
  SequenceJob seq_job(seq, task, 4);
  Trainer seq_trainer(seq_job, {.warmup_steps = 0, .steps = 2, .eval_every = 1});
  seq_trainer.save_checkpoint(dir.file("seq.safetensors"));
  AG_CHECK_THROWS_WITH(load_gpt_checkpoint(dir.file("seq.safetensors")), std::runtime_error, "seq.safetensors",
                       "sequence tagger", "not a GPT");
  const Checkpoint seq_ck = Checkpoint::open(dir.file("seq.safetensors"));
  AG_CHECK_THROWS_WITH(gpt_options_from(seq_ck), std::runtime_error, "sequence tagger");
  AG_CHECK_THROWS_WITH(gpt_tokenizer_from(seq_ck), std::runtime_error, "sequence tagger");
  AG_CHECK_THROWS_WITH(gpt_job_options_from(seq_ck, {}), std::runtime_error, "sequence tagger");

  write_seq2seq_checkpoint(dir.file("s2s.safetensors"));
  AG_CHECK_THROWS_WITH(load_gpt_checkpoint(dir.file("s2s.safetensors")), std::runtime_error, "s2s.safetensors",
                       "encoder-decoder", "not a GPT");

  SGD sgd(seq.named_parameters(), {.lr = 0.1});
  save_checkpoint(dir.file("other.safetensors"), seq.named_parameters(), sgd, {{"model_kind", "vae"}}, {}, 0);
  AG_CHECK_THROWS_WITH(load_gpt_checkpoint(dir.file("other.safetensors")), std::runtime_error, "other.safetensors",
                       "'vae'");
}

// A GPT run resuming a checkpoint of another kind is refused before anything changes, and the
// message names the file and both kinds (with the program that writes each).
BOOST_AUTO_TEST_CASE(resuming_a_checkpoint_of_another_kind_is_refused_naming_both_kinds) {
  TempDir dir;
  write_seq2seq_checkpoint(dir.file("s2s.safetensors"));
  Run run(lm_test_options(10));
  const std::vector<double> before = parameter_values(*run.model);
  AG_CHECK_THROWS_WITH(run.trainer->resume(dir.file("s2s.safetensors")), std::runtime_error, "s2s.safetensors",
                       "encoder-decoder", "train_seq2seq", "not a GPT language model", "train_gpt");
  BOOST_TEST(parameter_values(*run.model) == before, boost::test_tools::per_element());
  BOOST_TEST(run.trainer->step() == 0);
  // A file without a marker is not taken for a GPT's either.
  SGD sgd(run.model->named_parameters(), {.lr = 0.1});
  save_checkpoint(dir.file("bare.safetensors"), run.model->named_parameters(), sgd, {}, {}, 0);
  AG_CHECK_THROWS_WITH(run.trainer->resume(dir.file("bare.safetensors")), std::runtime_error, "bare.safetensors",
                       "no model kind marker", "not a GPT language model");
}

BOOST_AUTO_TEST_CASE(divergence_stops_with_a_message_and_leaves_the_last_good_checkpoint) {
  TempDir dir;
  TrainerOptions o = lm_test_options(30);
  o.lr = 1e3;  // each AdamW step moves every weight by about lr: the logits explode at once
  o.min_lr = 0;
  o.warmup_steps = 0;
  o.clip_norm = 0;
  o.eval_every = 1;
  const std::string path = dir.file("ckpt.safetensors");
  Run run(o, {.checkpoint_path = path});
  std::string message;
  try {
    run.trainer->run();
  } catch (const TrainingDiverged& e) {
    message = e.what();
  }
  BOOST_TEST(message.find("diverged at update") != std::string::npos, message);
  BOOST_TEST(message.find("learning rate") != std::string::npos, message);
  // The message opens with the loop and the kind it trains.
  BOOST_TEST(message.rfind("Trainer (gpt): ", 0) == 0u, message);
  // Whatever was saved is a state from before the divergence: it loads (finite, in bounds).
  if (std::filesystem::exists(path)) {
    const LoadedGPT good = load_gpt_checkpoint(path);
    BOOST_TEST(good.step < run.trainer->step() + 1);
  }
}

// A golden run: fixed seed, 20 updates, the last loss equal to the value recorded when this test
// was written. It fails on any silent change to the trajectory (the batches, the schedule, AdamW,
// clipping, the initialisation, the model's arithmetic); if a change is intended, record the new
// value and say why in its commit. (Recorded with GPTTrainer; the one loop reproduces it.)
BOOST_AUTO_TEST_CASE(a_golden_run_ends_at_its_recorded_loss) {
  double last = 0;
  Run run(lm_test_options(20), {.on_step = [&](int64_t, double loss) { last = loss; }}, 0.1);
  run.trainer->run();
  constexpr double kRecorded = 2.3643419742584229;  // recorded 2026 on x86-64, 1 thread, f32
  BOOST_TEST(last == kRecorded, boost::test_tools::tolerance(1e-6));  // relative
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
