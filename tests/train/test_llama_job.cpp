// A Llama-family model through the language model job (text/lm_job.h) and the one training loop:
// it learns a small text, its checkpoint names the family and holds its config, a stopped and
// resumed run is bit for bit the uninterrupted one with every optimizer, the window is a job
// option recorded in the checkpoint (a Llama's context is far longer than what a run trains on),
// and what does not fit the model is refused by name. Fine-tuning a Hugging Face directory with
// LoRA leaves its base bit for bit, an adapter-only checkpoint loads on that base and on no
// other, and the options are checked against a shape without building it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attograd/models/llama/llama.h"
#include "attograd/models/llama/llama_finetune.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/models/llama/llama_load.h"
#include "attograd/text/lm_job.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/trainer.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

// Grouped-query attention (2 query heads over 1 key/value head), untied head, a context of 64.
LlamaOptions tiny_llama(int64_t vocab) {
  LlamaOptions o;
  o.vocab = vocab;
  o.max_positions = 64;
  o.d_model = 16;
  o.n_layers = 2;
  o.n_head = 2;
  o.n_kv_head = 1;
  o.d_hidden = 32;
  return o;
}

LanguageModelJobOptions tiny_job() {
  LanguageModelJobOptions j;
  j.batch = 8;
  j.block_size = 16;
  j.seed = 11;
  j.eval_windows = 16;
  j.sample_tokens = 8;
  return j;
}

struct Run {
  Tokenizer tok;
  std::unique_ptr<Llama> model;
  std::unique_ptr<LanguageModelJob> job;
  std::unique_ptr<Trainer> trainer;

  // `dropout` is there for the shared resume check: the family has none.
  Run(const TrainerOptions& o, TrainerOutputs outputs = {}, double /*dropout*/ = 0.0,
      const LanguageModelJobOptions& j = tiny_job()) {
    tok = Tokenizer::characters(lm_test_text());
    manual_seed(j.seed);
    model = std::make_unique<Llama>(tiny_llama(tok.vocab_size()));
    job = std::make_unique<LanguageModelJob>(*model, tok, tok.encode(lm_test_text()), j);
    trainer = std::make_unique<Trainer>(*job, o, std::move(outputs));
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(llama_job)

BOOST_AUTO_TEST_CASE(a_llama_learns_the_text_and_its_checkpoint_names_the_family) {
  TempDir dir;
  Run run(lm_test_options(60), {.checkpoint_path = dir.file("ckpt.safetensors")});
  BOOST_TEST(run.job->block_size() == 16);
  const Evaluation before = run.trainer->evaluate();
  const TrainSummary done = run.trainer->run();
  BOOST_TEST(before.loss > 2.8);  // about ln 27 = 3.3 untrained
  BOOST_TEST(done.eval.loss < 0.75 * before.loss, "validation loss " << before.loss << " -> " << done.eval.loss);
  BOOST_TEST(std::isfinite(done.eval.bits_per_byte));

  const Checkpoint ck = Checkpoint::open(dir.file("ckpt.safetensors"));
  BOOST_TEST(checkpoint_model_kind(ck.info()) == "llama");
  // The "model" entry is the family's config.json: it builds the very same model again.
  const LlamaOptions back = llama_options_from_hf_json(ck.entry("model"), "the checkpoint's model entry");
  BOOST_TEST(llama_hf_config_json(back) == ck.entry("model"));
  BOOST_TEST(back.n_kv_head == 1);
  BOOST_TEST(back.max_positions == 64);
  // The window is the job's, recorded with the trajectory.
  BOOST_TEST(parse_json(ck.entry("data")).at("block_size").get<int64_t>() == 16);
  BOOST_TEST(lm_job_options_from(ck, "llama", {}).block_size == 16);
  AG_CHECK_THROWS_WITH(lm_job_options_from(ck, "gpt", {}), std::runtime_error, "llama", "gpt");

  // The evaluation's sample comes from the family's own generation.
  const Evaluation e = run.trainer->evaluate();
  bool sampled = false;
  for (const std::string& line : e.details) sampled = sampled || line.find("    | ") == 0;
  BOOST_TEST(sampled);
}

BOOST_AUTO_TEST_CASE(every_optimizer_trains_and_resumes_bit_exact) {
  check_every_optimizer_resumes_bit_exact<Run>([](OptimizerKind kind) { return lm_test_options(12, kind); },
                                               [](const Llama& model) { return parameter_values(model); },
                                               [](const Checkpoint& ck, const char*) {
                                                 BOOST_TEST(checkpoint_model_kind(ck.info()) == "llama");
                                               });
}

BOOST_AUTO_TEST_CASE(another_window_does_not_resume_and_one_beyond_the_context_is_refused) {
  TempDir dir;
  Run first(lm_test_options(8));
  first.trainer->train_step();
  first.trainer->save_checkpoint(dir.file("ckpt.safetensors"));
  LanguageModelJobOptions longer = tiny_job();
  longer.block_size = 32;
  Run other(lm_test_options(8), {}, 0.0, longer);
  AG_CHECK_THROWS_WITH(other.trainer->resume(dir.file("ckpt.safetensors")), std::runtime_error, "'data'");

  const Tokenizer tok = Tokenizer::characters(lm_test_text());
  Llama model(tiny_llama(tok.vocab_size()));
  LanguageModelJobOptions too_long = tiny_job();
  too_long.block_size = 65;
  AG_CHECK_THROWS_WITH(LanguageModelJob(model, tok, tok.encode(lm_test_text()), too_long), std::invalid_argument,
                       "block_size 65", "context of 64");
  LanguageModelJobOptions stride = tiny_job();
  stride.eval_stride = 17;
  AG_CHECK_THROWS_WITH(LanguageModelJob(model, tok, tok.encode(lm_test_text()), stride), std::invalid_argument,
                       "eval_stride 17", "block_size 16");
  // Without the option the window is the model's whole context.
  LanguageModelJobOptions whole = tiny_job();
  whole.block_size = 0;
  BOOST_TEST(LanguageModelJob(model, tok, tok.encode(lm_test_text()), whole).block_size() == 64);
  const Tokenizer bytes = Tokenizer::bytes();
  AG_CHECK_THROWS_WITH(LanguageModelJob(model, bytes, bytes.encode(lm_test_text()), tiny_job()), std::invalid_argument,
                       "vocab " + std::to_string(tok.vocab_size()), "256");
}

BOOST_AUTO_TEST_CASE(a_lora_run_on_a_hugging_face_directory_keeps_its_base_and_needs_that_base) {
  TempDir dir;
  const Tokenizer tok = Tokenizer::characters(lm_test_text());
  // The directory's table is longer than the tokenizer's ids, as Hugging Face's models pad it.
  const LlamaOptions padded = tiny_llama(tok.vocab_size() + 5);
  const std::string base = dir.file("base");
  manual_seed(5);
  {
    Llama written(padded);
    write_llama_hf(written, base);
  }
  std::map<std::string, std::vector<double>> before;
  for (const auto& [name, t] : load_llama_hf(base)->state_dict()) before[name] = t.to_vector();

  manual_seed(11);
  Llama model(padded);
  LanguageModelJobOptions j = tiny_job();
  j.finetune = prepare_finetune(model, {.init_from = base, .lora_rank = 2, .adapter_only = true});
  BOOST_TEST(parse_json(j.finetune).at("lora").at("targets").dump() == R"(["q_proj","k_proj","v_proj","o_proj"])");
  LanguageModelJob job(model, tok, tok.encode(lm_test_text()), j);
  Trainer trainer(job, lm_test_options(6), {.checkpoint_path = dir.file("ckpt.safetensors"), .save_trainable_only = true});
  const Evaluation start = trainer.evaluate();
  const TrainSummary done = trainer.run();
  BOOST_TEST(done.eval.loss < start.loss);
  int64_t adapters = 0;
  for (const auto& [name, t] : model.state_dict()) {
    if (name.ends_with(".lora_a") || name.ends_with(".lora_b")) {
      ++adapters;
    } else {
      BOOST_TEST((t.to_vector() == before.at(name)), name << " changed under LoRA");
    }
  }
  BOOST_TEST(adapters == 2 * 4 * 2);

  // The checkpoint holds the adapters alone; loading it reads the base again.
  const LoadedLlama loaded = load_llama_checkpoint(dir.file("ckpt.safetensors"));
  BOOST_TEST((parameter_values(*loaded.model) == parameter_values(model)));
  BOOST_TEST(loaded.model->vocab_size() == tok.vocab_size() + 5);
  // One byte of the base changes: the adapter is refused, naming the base.
  {
    std::fstream f(base + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char c = static_cast<char>(f.get() ^ 1);
    f.seekp(-1, std::ios::end);
    f.put(c);
  }
  AG_CHECK_THROWS_WITH(load_llama_checkpoint(dir.file("ckpt.safetensors")), std::runtime_error, "another base", base);
  // A directory is described by its config.json and its tensors files together.
  const BaseWeights b = describe_base_weights(base);
  BOOST_TEST(b.bytes == std::filesystem::file_size(base + "/config.json") +
                            std::filesystem::file_size(base + "/model.safetensors"));
  std::filesystem::remove(base + "/model.safetensors");
  AG_CHECK_THROWS_WITH(describe_base_weights(base), std::runtime_error, "no *.safetensors");
}

BOOST_AUTO_TEST_CASE(fine_tuning_options_are_checked_against_a_shape_without_building_it) {
  // Llama 3.2 1B: key/value projections 512 wide, queries 2048, 16 layers, a tied head.
  const LlamaOptions m = llama_preset("llama3.2-1b");
  validate_finetune(m, {.lora_rank = 8});
  validate_finetune(m, {.lora_rank = 600, .lora_targets = {"q_proj", "gate_proj"}});
  AG_CHECK_THROWS_WITH(validate_finetune(m, {.lora_rank = 600}), std::invalid_argument, "rank 600", "[1, 512]",
                       "k_proj");
  AG_CHECK_THROWS_WITH(validate_finetune(m, {.lora_rank = 2, .lora_targets = {"w_q"}}), std::invalid_argument, "'w_q'",
                       "q_proj");
  validate_finetune(m, {.freeze = {"model.layers.15"}});
  AG_CHECK_THROWS_WITH(validate_finetune(m, {.freeze = {"model.layers.16"}}), std::invalid_argument,
                       "'model.layers.16' names no parameter");
  AG_CHECK_THROWS_WITH(validate_finetune(m, {.lora_rank = 2, .adapter_only = true}), std::invalid_argument,
                       "init_from");
}

// What LoRA trains, counted from the shape, is what prepare_finetune leaves trainable; the memory
// estimate gives gradients and optimizer state to those alone, so that Llama 3.2 1B's LoRA run is
// not refused for the 15 GB that a full fine-tune's would need.
BOOST_AUTO_TEST_CASE(lora_counts_what_trains_and_the_memory_estimate_counts_only_that) {
  const LlamaOptions tiny = tiny_llama(40);  // an untied head
  for (const std::vector<std::string>& targets :
       {std::vector<std::string>{}, {"gate_proj", "down_proj"}, {"self_attn.k_proj", "up_proj"}}) {
    const FineTuneOptions f{.lora_rank = 3, .lora_targets = targets};
    Llama model(tiny);
    prepare_finetune(model, f);
    int64_t trainable = 0;
    for (const auto& [name, p] : model.trainable_parameters()) trainable += p.numel();
    BOOST_TEST(llama_lora_parameter_count(tiny, f) == trainable);
  }
  const LlamaOptions big = llama_preset("llama3.2-1b");
  BOOST_TEST(llama_lora_parameter_count(big, {.lora_rank = 8}) == 16 * 8 * (4096 + 2560 + 2560 + 4096));
  TrainerOptions t;
  t.optimizer = OptimizerKind::adamw;
  const MemoryEstimate full = estimate_llama_training_memory(big, 4, 256, t);
  const MemoryEstimate lora = estimate_llama_training_memory(big, 4, 256, t, {.lora_rank = 8});
  const double adapters = 4.0 * static_cast<double>(llama_lora_parameter_count(big, {.lora_rank = 8}));
  BOOST_TEST(lora.gradients == adapters);
  BOOST_TEST(lora.optimizer_state == memory::optimizer_bytes(t, adapters));
  BOOST_TEST(lora.parameters == full.parameters + adapters);
  BOOST_TEST(lora.total() < 0.5 * full.total(), lora.breakdown() << " against " << full.breakdown());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
