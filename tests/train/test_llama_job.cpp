// A Llama-family model through the language model job (text/lm_job.h) and the one training loop:
// it learns a small text, its checkpoint names the family and holds its config, a stopped and
// resumed run is bit for bit the uninterrupted one with every optimizer, the window is a job
// option recorded in the checkpoint (a Llama's context is far longer than what a run trains on),
// and what does not fit the model is refused by name.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attograd/models/llama/llama.h"
#include "attograd/models/llama/llama_hf.h"
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

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
