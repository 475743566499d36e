// Gradient accumulation (TrainerOptions::grad_accum): K micro-batches per update give the update
// of the whole batch. Each kind's job trains the same batch once in one piece and once in K,
// in float64 (equal within 1e-12 after 20 AdamW steps) and float32 (within 1e-6); the loop is
// seen to ask the job for K equal parts of the rows; a K that does not divide the rows is refused
// by name; the option survives the checkpoint and older checkpoints read as K = 1. The same over
// two processes, with one gradient exchange per update, is tests/mpi/run_dp_checks.sh.
#include <cmath>
#include <vector>

#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_job.h"
#include "attograd/models/seq2seq/seq2seq.h"
#include "attograd/models/seq2seq/seq2seq_job.h"
#include "attograd/models/toy/sequence_job.h"
#include "attograd/models/toy/sequence_model.h"
#include "attograd/train/trainer.h"
#include "support.h"

namespace ag::testing {
namespace {

// A job that passes everything to another and records the rows it was asked for.
class RecordingJob : public TrainingJob {
 public:
  explicit RecordingJob(TrainingJob& inner)
      : TrainingJob(inner.kind(), inner.model(), inner.batch_rows(), inner.vocab()), inner_(inner) {}
  StepLoss loss(uint64_t index, const Shard& rows) override {
    asked.push_back(rows);
    return inner_.loss(index, rows);
  }
  Evaluation evaluate(const Ranks& ranks) override { return inner_.evaluate(ranks); }
  std::map<std::string, std::string> metadata() const override { return inner_.metadata(); }

  std::vector<Shard> asked;

 private:
  TrainingJob& inner_;
};

TrainerOptions adamw(int64_t steps, int64_t grad_accum) {
  return {.optimizer = OptimizerKind::adamw, .lr = 1e-2, .min_lr = 1e-3, .weight_decay = 0.1,
          .warmup_steps = steps > 3 ? 3 : 0, .steps = steps, .clip_norm = 1.0, .grad_accum = grad_accum, .eval_every = steps, .threads = 1};
}

// Every parameter value after training, in state_dict order, but for the attention's key
// biases: softmax ignores a shift shared by all keys, so their exact gradient is 0, and what
// backward computes for them is rounding noise, which Adam's normalised step turns into moves of
// up to lr whatever its size. Parts summed in another order give other noise; tests/mpi leaves
// them out of its comparisons for the same reason.
std::vector<double> values_of(const Module& model) {
  std::vector<double> out;
  for (const auto& [name, t] : model.state_dict()) {
    if (name.ends_with("w_k.bias")) continue;
    const std::vector<double> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

std::string gpt_text() {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "the cat sat on the mat and the dog sat on the log\n";
  return text;
}

// A tiny GPT trained for `steps` AdamW updates of 8 windows, the batch in `k` parts; returns its
// parameters and the losses of the updates.
std::pair<std::vector<double>, std::vector<double>> train_gpt(DType dtype, int64_t k, int64_t steps,
                                                              std::vector<Shard>* asked = nullptr) {
  const Tokenizer tok = Tokenizer::characters(gpt_text());
  manual_seed(7);
  GPT model({.vocab = tok.vocab_size(), .block_size = 16, .d_model = 16, .n_head = 2, .n_layers = 2, .bias = true});
  model.to(dtype);
  GPTJob inner(model, tok, tok.encode(gpt_text()), {.batch = 8, .seed = 7, .eval_windows = 8, .sample_tokens = 4});
  RecordingJob job(inner);
  Trainer trainer(job, adamw(steps, k));
  std::vector<double> losses;
  for (int64_t i = 0; i < steps; ++i) losses.push_back(trainer.train_step().loss);
  if (asked != nullptr) *asked = job.asked;
  return {values_of(model), losses};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grad_accum)

BOOST_AUTO_TEST_CASE(the_loop_asks_for_k_equal_parts_of_the_rows_in_order) {
  std::vector<Shard> asked;
  train_gpt(DType::f32, 4, 2, &asked);
  BOOST_REQUIRE_EQUAL(asked.size(), 8u);  // two updates of four parts
  for (size_t i = 0; i < asked.size(); ++i) {
    BOOST_TEST(asked[i].begin == static_cast<int64_t>(i % 4) * 2);
    BOOST_TEST(asked[i].rows == 2);
  }
  train_gpt(DType::f32, 1, 2, &asked);
  BOOST_REQUIRE_EQUAL(asked.size(), 2u);
  BOOST_TEST(asked[0].rows == 8);
}

BOOST_AUTO_TEST_CASE(a_gpt_batch_in_parts_trains_as_the_whole_batch) {
  for (const int64_t k : {2, 4, 8}) {
    const auto [whole, whole_losses] = train_gpt(DType::f64, 1, 20);
    const auto [parts, part_losses] = train_gpt(DType::f64, k, 20);
    BOOST_TEST(largest_difference(whole, parts) <= 1e-12, "f64, k " << k);
    BOOST_TEST(largest_difference(whole_losses, part_losses) <= 1e-12, "f64 losses, k " << k);
    // Not the same bits: the parts really were summed.
    BOOST_TEST(largest_difference(whole, parts) > 0, "k " << k);
  }
  const auto [whole32, l32] = train_gpt(DType::f32, 1, 20);
  const auto [parts32, p32] = train_gpt(DType::f32, 4, 20);
  BOOST_TEST(largest_difference(whole32, parts32) <= 1e-6);
  BOOST_TEST(largest_difference(l32, p32) <= 1e-6);
}

BOOST_AUTO_TEST_CASE(variable_length_pairs_in_parts_weigh_every_target_token_once) {
  // The parts hold different numbers of target tokens: a plain mean of the parts' means would not
  // be the batch's mean.
  const Seq2SeqTaskOptions task{.kind = Seq2SeqTaskKind::sort_var, .symbols = 6, .min_len = 1, .max_len = 7,
                                .batch_size = 8, .seed = 3};
  std::vector<std::vector<double>> runs;
  for (const int64_t k : {1, 4}) {
    const Seq2SeqTask t(task);
    manual_seed(5);
    Seq2Seq model({.src_vocab = t.vocab_size(), .tgt_vocab = t.vocab_size(),
                   .max_len = std::max(t.max_source_len(), t.max_target_len() + 1), .d_model = 8, .n_head = 2,
                   .d_ff = 16, .n_encoder_layers = 1, .n_decoder_layers = 1, .dropout = 0.0});
    model.to(DType::f64);
    Seq2SeqJob job(model, task, 8);
    Trainer trainer(job, adamw(20, k));
    for (int i = 0; i < 20; ++i) trainer.train_step();
    runs.push_back(values_of(model));
  }
  BOOST_TEST(largest_difference(runs[0], runs[1]) <= 1e-12);
  BOOST_TEST(largest_difference(runs[0], runs[1]) > 0);
}

BOOST_AUTO_TEST_CASE(the_tagger_in_parts_trains_as_the_whole_batch) {
  const SequenceTaskOptions task{.kind = SequenceTaskKind::reverse, .vocab_size = 6, .seq_len = 5, .batch_size = 6, .seed = 2};
  std::vector<std::vector<double>> runs;
  for (const int64_t k : {1, 3}) {
    manual_seed(4);
    SequenceModel model({.vocab = 6, .max_len = 5, .d_model = 8, .n_head = 2, .d_ff = 16, .n_layers = 1,
                         .dropout = 0.0});
    model.to(DType::f64);
    SequenceJob job(model, task, 12);
    Trainer trainer(job, adamw(20, k));
    for (int i = 0; i < 20; ++i) trainer.train_step();
    runs.push_back(values_of(model));
  }
  BOOST_TEST(largest_difference(runs[0], runs[1]) <= 1e-12);
  BOOST_TEST(largest_difference(runs[0], runs[1]) > 0);
}

BOOST_AUTO_TEST_CASE(parts_that_do_not_divide_the_rows_are_refused_by_name) {
  const Tokenizer tok = Tokenizer::characters(gpt_text());
  GPT model({.vocab = tok.vocab_size(), .block_size = 16, .d_model = 8, .n_head = 2, .n_layers = 1});
  GPTJob job(model, tok, tok.encode(gpt_text()), {.batch = 8, .seed = 7});
  AG_CHECK_THROWS_WITH(Trainer(job, adamw(5, 3)), std::invalid_argument, "--grad-accum 3", "8", "multiple of 3");
  AG_CHECK_THROWS_WITH(Trainer(job, adamw(5, 0)), std::invalid_argument, "grad_accum", "got 0");
}

BOOST_AUTO_TEST_CASE(the_parts_are_stored_with_the_trajectory_and_older_checkpoints_read_as_one) {
  TrainerOptions o = adamw(5, 4);
  BOOST_TEST(trainer_options_from_json(trainer_options_to_json(o)).grad_accum == 4);
  std::string older = trainer_options_to_json(adamw(5, 1));
  const size_t at = older.find(",\"grad_accum\":1");
  BOOST_REQUIRE(at != std::string::npos);
  older.erase(at, std::string(",\"grad_accum\":1").size());
  BOOST_TEST(trainer_options_from_json(older, adamw(5, 7)).grad_accum == 1);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
