// The one training loop on the toy tagger's job (SequenceJob): a model that can learn (one batch overfitted, a short reverse run to high held-out
// accuracy, both within a bounded number of steps), bit-exact resume, checkpoint round trips
// and mismatches, the stopping rules, the metrics log, plot and progress outputs, and bad options.
#include <cmath>
#include <sstream>

#include "attograd/models/toy/sequence_job.h"
#include "attograd/models/toy/sequence_options.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/report/metrics_log.h"
#include "attograd/train/trainer.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

SequenceTaskOptions tiny_task() {
  return {.kind = SequenceTaskKind::reverse, .vocab_size = 6, .seq_len = 6, .batch_size = 16, .seed = 3};
}

SequenceModelOptions tiny_model(double dropout = 0.1, int64_t d_model = 16) {
  return {.vocab = 6, .max_len = 6, .d_model = d_model, .n_head = 2, .d_ff = 32, .n_layers = 2, .dropout = dropout};
}

// Never stops early (target above 1): the runs below end at their budget.
TrainerOptions tiny_trainer(int64_t steps) {
  return {.lr = 3e-3, .warmup_steps = 5, .schedule = LrDecay::cosine, .steps = steps, .eval_every = 5,
          .target_seq_acc = 2.0};
}

// The toy tagger's job and the loop over it, built together as train_sequence builds them.
struct ToyRun {
  SequenceJob job;
  Trainer trainer;

  ToyRun(SequenceModel& model, const SequenceTaskOptions& task, const TrainerOptions& options, TrainerOutputs out = {},
         int64_t eval_sequences = 64)
      : job(model, task, eval_sequences), trainer(job, options, std::move(out)) {}

  TrainSummary run() { return trainer.run(); }
  StepResult train_step() { return trainer.train_step(); }
  Evaluation evaluate() { return trainer.evaluate(); }
  int64_t step() const { return trainer.step(); }
  void request_stop() { trainer.request_stop(); }
  void save_checkpoint(const std::string& path) const { trainer.save_checkpoint(path); }
  void resume(const std::string& path) { trainer.resume(path); }
  const Optimizer& optimizer() const { return trainer.optimizer(); }
};

std::vector<double> values_of(const StateDict& state) {
  std::vector<double> out;
  for (const auto& [name, t] : state) {
    const std::vector<double> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Logits of the model in eval mode on the first held-out batch of `task`.
std::vector<double> held_out_logits(SequenceModel& model, const SequenceTaskOptions& task) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const std::vector<double> out = model(SequenceTask(task).eval_batch(0).inputs).value().to_vector();
  model.train(was_training);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trainer)

BOOST_AUTO_TEST_CASE(one_fixed_batch_is_overfitted_to_near_zero_loss) {
  manual_seed(5);
  SequenceModel model(tiny_model(0.0));
  const SequenceBatch batch = SequenceTask(tiny_task()).train_batch(0);
  Adam adam(model.named_parameters(), {.lr = 1e-2});
  double first = 0, loss = 0;
  int steps = 0;
  for (; steps < 300; ++steps) {
    adam.zero_grad();
    const Variable l = cross_entropy(model(batch.inputs), batch.targets);
    loss = l.item();
    if (steps == 0) first = loss;
    if (loss < 1e-2) break;
    l.backward();
    adam.step();
  }
  BOOST_TEST(first > 1.5);  // about ln 6 for an untrained model
  BOOST_TEST(loss < 1e-2, "loss " << loss << " after " << steps << " steps");
}

BOOST_AUTO_TEST_CASE(a_short_reverse_run_reaches_high_exact_sequence_accuracy) {
  manual_seed(0);
  const SequenceTaskOptions task = {.kind = SequenceTaskKind::reverse, .vocab_size = 8, .seq_len = 8, .batch_size = 32, .seed = 0};
  SequenceModel model({.vocab = 8, .max_len = 8, .d_model = 32, .n_head = 4, .d_ff = 64, .n_layers = 2});
  ToyRun trainer(model, task, {.lr = 3e-3, .warmup_steps = 20, .steps = 300, .eval_every = 20, .target_seq_acc = 0.99},
                 {}, 256);
  BOOST_TEST(trainer.evaluate().seq_acc < 0.05);  // the run below does the work
  const TrainSummary s = trainer.run();
  BOOST_TEST(s.reached_target);
  BOOST_TEST(s.steps < 300);
  BOOST_TEST(s.steps % 20 == 0);  // stopped at an evaluation
  BOOST_TEST(trainer.job.last_metrics().sequences == 256);
  BOOST_TEST(s.eval.seq_acc >= 0.99);
  BOOST_TEST(trainer.evaluate().seq_acc == s.eval.seq_acc);
}

BOOST_AUTO_TEST_CASE(resume_continues_the_run_bit_for_bit) {
  // Dropout makes the generator state matter, K off the evaluation grid makes the metrics window
  // matter, and batches differ per step, so the data position matters too.
  constexpr int64_t kSteps = 30, kStop = 13;
  const SequenceTaskOptions task = tiny_task();
  const TrainerOptions options = tiny_trainer(kSteps);
  TempDir dir;

  manual_seed(21);
  SequenceModel a_model(tiny_model());
  std::vector<double> a_losses;
  TrainerOutputs a_out;
  a_out.log_path = dir.file("a.jsonl");
  a_out.on_step = [&](int64_t, double loss) { a_losses.push_back(loss); };
  ToyRun a(a_model, task, options, a_out);
  BOOST_TEST(a.run().steps == kSteps);

  // The same run, interrupted after update kStop.
  manual_seed(21);
  SequenceModel b_model(tiny_model());
  std::vector<double> b_losses;
  ToyRun* b_handle = nullptr;
  TrainerOutputs b_out;
  b_out.checkpoint_path = dir.file("b.safetensors");
  b_out.log_path = dir.file("b.jsonl");
  b_out.on_step = [&](int64_t step, double loss) {
    b_losses.push_back(loss);
    if (step == kStop) b_handle->request_stop();
  };
  ToyRun b(b_model, task, options, b_out);
  b_handle = &b;
  const TrainSummary stopped = b.run();
  BOOST_TEST(stopped.interrupted);
  BOOST_TEST(b.step() == kStop);
  BOOST_REQUIRE(b_losses.size() == static_cast<size_t>(kStop));

  // A fresh start as a new process would make it: another initialisation, another generator
  // state, and only the checkpoint to go on.
  manual_seed(999);
  SequenceModel c_model(tiny_model());
  default_generator().set_step(4242);
  std::vector<double> c_losses;
  TrainerOutputs c_out;
  c_out.checkpoint_path = dir.file("b.safetensors");
  c_out.log_path = dir.file("b.jsonl");
  c_out.on_step = [&](int64_t, double loss) { c_losses.push_back(loss); };
  ToyRun c(c_model, task, options, c_out);
  c.resume(dir.file("b.safetensors"));
  BOOST_TEST(c.step() == kStop);
  const TrainSummary resumed = c.run();
  BOOST_TEST(resumed.steps == kSteps);
  BOOST_TEST(resumed.steps_this_run == kSteps - kStop);

  BOOST_REQUIRE(c_losses.size() == static_cast<size_t>(kSteps - kStop));
  for (int64_t i = 0; i < kSteps - kStop; ++i) {
    // Exact equality: the same bits, not merely close.
    BOOST_TEST(c_losses[i] == a_losses[kStop + i], "step " << kStop + i + 1);
  }
  BOOST_TEST(values_of(c_model.state_dict()) == values_of(a_model.state_dict()));

  // The resumed log continues the interrupted one and matches the uninterrupted log row by row
  // in everything but timing.
  const std::vector<MetricsRow> ra = read_metrics_log(dir.file("a.jsonl")), rc = read_metrics_log(dir.file("b.jsonl"));
  BOOST_REQUIRE(ra.size() == 7u);  // the baseline at step 0, then steps 5, 10, ..., 30
  BOOST_REQUIRE(rc.size() == ra.size());
  // Compares doubles bit for bit, the missing values (NaN) of the baseline row included.
  const auto same = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  for (size_t i = 0; i < ra.size(); ++i) {
    BOOST_TEST(rc[i].step == ra[i].step);
    BOOST_TEST(same(rc[i].train_loss, ra[i].train_loss), "row " << i);
    BOOST_TEST(same(rc[i].eval_loss, ra[i].eval_loss), "row " << i);
    BOOST_TEST(same(rc[i].seq_acc, ra[i].seq_acc), "row " << i);
    BOOST_TEST(same(rc[i].lr, ra[i].lr), "row " << i);
    BOOST_TEST(same(rc[i].grad_norm, ra[i].grad_norm), "row " << i);
  }
}

BOOST_AUTO_TEST_CASE(a_checkpoint_round_trip_gives_identical_outputs_and_state) {
  const SequenceTaskOptions task = tiny_task();
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  manual_seed(31);
  SequenceModel a_model(tiny_model());
  ToyRun a(a_model, task, tiny_trainer(20));
  for (int i = 0; i < 7; ++i) a.train_step();
  a.save_checkpoint(path);

  const Checkpoint ck = Checkpoint::open(path);
  BOOST_TEST(checkpoint_step(ck) == 7);
  BOOST_TEST(checkpoint_model_kind(ck.info()) == "sequence");
  const SequenceModelOptions saved_model = parse_entry(ck, "model", sequence_model_options_from_json);
  BOOST_TEST(saved_model.d_model == 16);
  BOOST_TEST(saved_model.dropout == 0.1);
  BOOST_TEST(sequence_task_options_to_json(parse_entry(ck, "task", sequence_task_options_from_json)) == sequence_task_options_to_json(task));
  BOOST_TEST(trainer_options_to_json(resumed_trainer_options(ck, {})) == trainer_options_to_json(tiny_trainer(20)));
  const CheckpointInfo& info = ck.info();
  BOOST_TEST(info.data_position == 7u);
  BOOST_TEST(info.rng_state.step == 7u);  // update 7 drew from step 7
  BOOST_TEST(info.optimizer == "Adam");

  manual_seed(32);  // a different initialisation: only the file can make the models agree
  SequenceModel b_model(tiny_model());
  BOOST_TEST(held_out_logits(b_model, task) != held_out_logits(a_model, task));
  ToyRun b(b_model, task, tiny_trainer(20));
  b.resume(path);
  BOOST_TEST(held_out_logits(b_model, task) == held_out_logits(a_model, task));
  BOOST_TEST(b.step() == 7);
  const OptimizerState sa = a.optimizer().state(), sb = b.optimizer().state();
  BOOST_REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    BOOST_TEST(sa[i].first == sb[i].first);
    BOOST_TEST(sa[i].second.step == sb[i].second.step);
    BOOST_TEST(sa[i].second.exp_avg_sq.to_vector() == sb[i].second.exp_avg_sq.to_vector());
  }

  // The parameters alone load into a bare model (no trainer) as well.
  manual_seed(33);
  SequenceModel c_model(saved_model);
  load_checkpoint(path, c_model.named_parameters());
  BOOST_TEST(held_out_logits(c_model, task) == held_out_logits(a_model, task));
}

BOOST_AUTO_TEST_CASE(resume_rejects_a_checkpoint_of_another_run_and_changes_nothing) {
  const SequenceTaskOptions task = tiny_task();
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  manual_seed(41);
  SequenceModel saved_model(tiny_model());
  ToyRun saved(saved_model, task, tiny_trainer(20));
  saved.train_step();
  saved.save_checkpoint(path);

  manual_seed(42);
  SequenceModel wider(tiny_model(0.1, 8));
  ToyRun t_wider(wider, task, tiny_trainer(20));
  const std::vector<double> before = values_of(wider.state_dict());
  AG_CHECK_THROWS_WITH(t_wider.resume(path), std::runtime_error, path, "model", "\"d_model\":16", "\"d_model\":8");
  BOOST_TEST(values_of(wider.state_dict()) == before);
  BOOST_TEST(t_wider.step() == 0);

  SequenceModel same(tiny_model());
  SequenceTaskOptions other_seed = task;
  other_seed.seed = 4;
  ToyRun t_task(same, other_seed, tiny_trainer(20));
  AG_CHECK_THROWS_WITH(t_task.resume(path), std::runtime_error, path, "task", "\"seed\":3");
  TrainerOptions other_lr = tiny_trainer(20);
  other_lr.lr = 1e-3;
  ToyRun t_lr(same, task, other_lr);
  AG_CHECK_THROWS_WITH(t_lr.resume(path), std::runtime_error, path, "trainer", "\"lr\":0.001");

  // A checkpoint written without the trainer's metadata.
  const std::string bare = dir.file("bare.safetensors");
  save_checkpoint(bare, same.named_parameters(), {}, default_generator().state(), 0);
  AG_CHECK_THROWS_WITH(t_lr.resume(bare), std::runtime_error, bare, "no model kind");
  AG_CHECK_THROWS_WITH(require_model_kind(Checkpoint::open(bare), "sequence"), std::runtime_error, bare, "no model kind");
  AG_CHECK_THROWS_WITH(t_lr.resume(dir.file("absent.safetensors")), std::runtime_error, "absent.safetensors");
}

BOOST_AUTO_TEST_CASE(run_stops_at_the_budget_evaluating_logging_plotting_and_saving) {
  TempDir dir;
  manual_seed(51);
  SequenceModel model(tiny_model());
  std::ostringstream progress;
  TrainerOutputs out;
  out.progress = &progress;
  out.checkpoint_path = dir.file("run.safetensors");
  out.log_path = dir.file("run.jsonl");
  out.plot_path = dir.file("run.svg");
  out.plot_title = "tiny reverse";
  ToyRun trainer(model, tiny_task(), tiny_trainer(12), out);
  const TrainSummary s = trainer.run();
  BOOST_TEST(s.steps == 12);
  BOOST_TEST(!s.reached_target);
  BOOST_TEST(!s.interrupted);
  BOOST_TEST(trainer.job.last_metrics().sequences == 64);
  BOOST_TEST(s.tokens_per_s > 0);

  const std::vector<MetricsRow> rows = read_metrics_log(dir.file("run.jsonl"));
  BOOST_REQUIRE(rows.size() == 4u);  // the untrained baseline, evaluations at 5, 10 and the last step
  BOOST_TEST(rows[0].step == 0);
  BOOST_TEST(rows[1].step == 5);
  BOOST_TEST(rows[2].step == 10);
  BOOST_TEST(rows[3].step == 12);
  BOOST_TEST(rows[3].eval_loss == s.eval.loss);
  BOOST_TEST(rows[3].seq_acc == s.eval.seq_acc);
  BOOST_TEST(rows[2].lr == LrSchedule({.lr = 3e-3, .warmup_steps = 5, .total_steps = 12, .decay = LrDecay::cosine}).at(9));
  // Before any update there is no training loss, rate or gradient; the held-out loss of an
  // untrained model is about ln 6.
  BOOST_TEST((std::isnan(rows[0].train_loss) && std::isnan(rows[0].lr) && std::isnan(rows[0].grad_norm)));
  BOOST_TEST(std::abs(rows[0].eval_loss - std::log(6.0)) < 0.5);
  for (size_t i = 1; i < rows.size(); ++i) {
    BOOST_TEST((std::isfinite(rows[i].train_loss) && std::isfinite(rows[i].grad_norm) && rows[i].elapsed_s > 0));
  }
  BOOST_TEST(rows[3].eval_loss < rows[0].eval_loss);

  const std::string svg = slurp(dir.file("run.svg"));
  BOOST_TEST(svg.find("<svg") != std::string::npos);
  BOOST_TEST(svg.find("tiny reverse") != std::string::npos);
  BOOST_TEST(checkpoint_step(Checkpoint::open(dir.file("run.safetensors"))) == 12);

  // Not a terminal: one plain line per evaluation period and one for the last step.
  const std::string text = progress.str();
  BOOST_TEST(text.find('\r') == std::string::npos);
  BOOST_TEST(text.find("step  5/12") != std::string::npos, text);
  BOOST_TEST(text.find("step 10/12") != std::string::npos, text);
  BOOST_TEST(text.find("step 12/12") != std::string::npos, text);
  BOOST_TEST(text.find("step  7/12") == std::string::npos, text);

  // Nothing left to train: run() reports where the run stands.
  const TrainSummary again = trainer.run();
  BOOST_TEST(again.steps_this_run == 0);
  BOOST_TEST(again.eval.seq_acc == s.eval.seq_acc);
}

// A user's observer sees what the built-in reports see, in the loop's order: the start, each
// evaluation's row before its step's report, every update, the end.
BOOST_AUTO_TEST_CASE(an_observer_of_its_own_sees_every_evaluation_and_update) {
  struct Recorder : TrainingObserver {
    std::vector<std::string> events;
    void on_run_start(int64_t step, bool resumed) override {
      events.push_back("start " + std::to_string(step) + (resumed ? " resumed" : ""));
    }
    void on_evaluation(const MetricsRow& row, const Evaluation& eval) override {
      events.push_back("eval " + std::to_string(row.step) + (row.eval_loss == eval.loss ? "" : " mismatch"));
    }
    void on_step(const StepReport& r) override {
      events.push_back("step " + std::to_string(r.step) + "/" + std::to_string(r.total_steps) +
                       (std::isfinite(r.loss) && r.elapsed_s > 0 ? "" : " incomplete"));
    }
    void on_run_end(const TrainSummary& s) override { events.push_back("end " + std::to_string(s.steps)); }
  };
  TempDir dir;
  manual_seed(52);
  SequenceModel model(tiny_model());
  Recorder recorder;
  TrainerOutputs out;
  out.log_path = dir.file("run.jsonl");
  out.observers = {&recorder};
  ToyRun trainer(model, tiny_task(), tiny_trainer(6), out);
  trainer.run();
  const std::vector<std::string> want = {"start 0", "eval 0", "step 1/6", "step 2/6", "step 3/6", "step 4/6", "eval 5",
                                         "step 5/6", "eval 6", "step 6/6", "end 6"};
  BOOST_TEST(recorder.events == want, boost::test_tools::per_element());
  BOOST_TEST(read_metrics_log(dir.file("run.jsonl")).size() == 3u);  // the built-in log beside it
}

BOOST_AUTO_TEST_CASE(each_update_follows_the_schedule_and_claims_its_own_random_step) {
  manual_seed(61);
  SequenceModel model(tiny_model());
  TrainerOptions options = tiny_trainer(10);
  options.clip_norm = 0.05;  // small enough to bite
  ToyRun trainer(model, tiny_task(), options);
  const LrSchedule schedule({.lr = 3e-3, .warmup_steps = 5, .total_steps = 10, .decay = LrDecay::cosine});
  for (int64_t i = 0; i < 4; ++i) {
    const StepResult r = trainer.train_step();
    BOOST_TEST(r.lr == schedule.at(i));
    BOOST_TEST(trainer.optimizer().lr() == schedule.at(i));
    BOOST_TEST(default_generator().state().step == static_cast<uint64_t>(i + 1));
    BOOST_TEST(r.grad_norm > 0.05);  // the norm before clipping ...
    BOOST_TEST(grad_norm(model.named_parameters()) <= 0.05 + 1e-6);  // ... and after
  }
}

BOOST_AUTO_TEST_CASE(evaluation_counts_exactly_the_requested_sequences_and_keeps_the_mode) {
  manual_seed(71);
  SequenceModel model(tiny_model(0.5));
  // 300: one full batch of 256 and part of the next
  ToyRun trainer(model, tiny_task(), tiny_trainer(10), {}, 300);
  model.train();
  const Evaluation e = trainer.evaluate();
  const SequenceMetrics m = trainer.job.last_metrics();
  BOOST_TEST(m.sequences == 300);
  BOOST_TEST(m.tokens == 300 * 6);
  BOOST_TEST(e.loss == m.loss());
  BOOST_TEST(model.is_training());
  BOOST_TEST(trainer.evaluate().loss == m.loss());  // eval mode: no dropout, no randomness
  const Indices p = trainer.job.predict(SequenceTask(tiny_task()).eval_batch(0).inputs);
  BOOST_TEST(p.shape == Shape({16, 6}));
}

BOOST_AUTO_TEST_CASE(a_non_finite_loss_stops_training_before_the_update) {
  manual_seed(81);
  SequenceModel model(tiny_model());
  ToyRun trainer(model, tiny_task(), tiny_trainer(10));
  Variable bias = model.head().bias();
  bias.mutable_value().fill_(std::nan(""));
  const std::vector<double> before = model.embed().weight().value().to_vector();
  AG_CHECK_THROWS_WITH(trainer.train_step(), std::runtime_error, "update 1", "diverged");
  BOOST_TEST(trainer.step() == 0);
  BOOST_TEST(model.embed().weight().value().to_vector() == before);
}

BOOST_AUTO_TEST_CASE(every_optimizer_kind_trains) {
  for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
    manual_seed(91);
    SequenceModel model(tiny_model(0.0));
    TrainerOptions options = tiny_trainer(10);
    options.optimizer = kind;
    options.weight_decay = 0.01;
    options.lr = kind == OptimizerKind::sgd ? 0.1 : 3e-3;
    ToyRun trainer(model, tiny_task(), options);
    const std::string expected = kind == OptimizerKind::sgd ? "SGD" : kind == OptimizerKind::adam ? "Adam" : "AdamW";
    BOOST_TEST(trainer.optimizer().name() == expected);
    const std::vector<double> before = values_of(model.state_dict());
    trainer.train_step();
    BOOST_TEST(values_of(model.state_dict()) != before);
    BOOST_TEST((parse_optimizer_kind(optimizer_kind_name(kind)) == kind));
  }
  manual_seed(91);
  SequenceModel model(tiny_model(0.0));
  TrainerOptions betas = tiny_trainer(10);
  betas.optimizer = OptimizerKind::adamw;
  betas.beta1 = 0.8;
  betas.beta2 = 0.95;
  ToyRun adamw(model, tiny_task(), betas);
  const AdamOptions& made = dynamic_cast<const AdamW&>(adamw.optimizer()).options();
  BOOST_TEST(made.beta1 == 0.8);
  BOOST_TEST(made.beta2 == 0.95);
  AG_CHECK_THROWS_WITH(parse_optimizer_kind("lion"), std::invalid_argument, "lion", "sgd", "adamw");
}

BOOST_AUTO_TEST_CASE(the_thread_count_is_set_explicitly) {
  manual_seed(95);
  SequenceModel model(tiny_model());
  TrainerOptions options = tiny_trainer(10);
  options.threads = 2;
  { ToyRun trainer(model, tiny_task(), options); }
  BOOST_TEST(num_threads() == 2);
  options.threads = 1;
  { ToyRun trainer(model, tiny_task(), options); }
  BOOST_TEST(num_threads() == 1);
}

BOOST_AUTO_TEST_CASE(bad_options_name_the_option_and_its_value) {
  manual_seed(1);
  SequenceModel model(tiny_model());
  const auto with = [](auto change) {
    TrainerOptions o = tiny_trainer(10);
    change(o);
    return o;
  };
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.lr = 0; })), std::invalid_argument, "lr");
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.warmup_steps = 10; })), std::invalid_argument,
                       "warmup_steps 10", "steps 10", "cosine");
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.eval_every = 0; })), std::invalid_argument,
                       "eval_every", "0");
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.threads = 0; })), std::invalid_argument,
                       "threads", "0");
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.clip_norm = -1; })), std::invalid_argument,
                       "clip_norm");
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.momentum = 1; })), std::invalid_argument,
                       "momentum");
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.beta1 = 1; })), std::invalid_argument,
                       "beta1 must lie in [0, 1), got 1");
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), with([](auto& o) { o.beta2 = -0.5; })), std::invalid_argument,
                       "beta2", "-0.5");
  SequenceTaskOptions longer = tiny_task();
  longer.seq_len = 7;
  AG_CHECK_THROWS_WITH(ToyRun(model, longer, tiny_trainer(10)), std::invalid_argument, "max_len 6", "seq_len 7");
  SequenceTaskOptions bigger_vocab = tiny_task();
  bigger_vocab.vocab_size = 7;
  AG_CHECK_THROWS_WITH(ToyRun(model, bigger_vocab, tiny_trainer(10)), std::invalid_argument, "vocab 6", "vocab 7");
  TrainerOutputs plot_only;
  plot_only.plot_path = "x.svg";
  AG_CHECK_THROWS_WITH(ToyRun(model, tiny_task(), tiny_trainer(10), plot_only), std::logic_error,
                       "x.svg", "log_path");
}

// decays()'s rule on the names attograd's models and nanoGPT give their parameters.
BOOST_AUTO_TEST_CASE(weight_decay_on_matrices_skips_vectors_and_embedding_tables_by_name) {
  const Shape matrix{4, 3}, vector{4};
  for (const char* table : {"embed.weight", "src_embed.weight", "tgt_embed.weight", "pos.weight", "encoder.pos.weight",
                            "transformer.wte.weight", "transformer.wpe.weight"}) {
    BOOST_TEST(!decays(table, matrix, DecayParams::matrices), table);
    BOOST_TEST(decays(table, matrix, DecayParams::all), table);
  }
  for (const char* weight : {"head.weight", "blocks.0.attn.w_q.weight", "encoder.blocks.1.ff.linear2.weight",
                             "embedder.weight", "w", "pos.proj"}) {
    BOOST_TEST(decays(weight, matrix, DecayParams::matrices), weight);
  }
  for (const char* small : {"blocks.0.attn.w_q.bias", "norm.weight", "blocks.0.norm1.bias", "b"}) {
    BOOST_TEST(!decays(small, vector, DecayParams::matrices), small);
    BOOST_TEST(decays(small, vector, DecayParams::all), small);
  }
}

BOOST_AUTO_TEST_CASE(trainer_options_round_trip_through_json) {
  TrainerOptions o = tiny_trainer(77);
  o.optimizer = OptimizerKind::adamw;
  o.min_lr = 1e-4;
  o.weight_decay = 0.05;
  o.schedule = LrDecay::linear;
  o.clip_norm = 0.5;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  o.decay = DecayParams::matrices;
  TrainerOptions base;
  base.eval_every = 33;
  const TrainerOptions back = trainer_options_from_json(trainer_options_to_json(o), base);
  BOOST_TEST(trainer_options_to_json(back) == trainer_options_to_json(o));
  BOOST_TEST(back.steps == 77);
  BOOST_TEST(back.min_lr == 1e-4);
  BOOST_TEST(back.beta2 == 0.95);
  BOOST_TEST((back.decay == DecayParams::matrices));
  BOOST_TEST(back.eval_every == 33);  // observing options come from the base
  const std::string json = trainer_options_to_json(o);
  std::string extra = json;
  extra.insert(1, R"("beta3":1,)");
  AG_CHECK_THROWS_WITH(trainer_options_from_json(extra), std::invalid_argument, "unknown field", "beta3");
  std::string bad = json;
  bad.replace(bad.find("\"steps\":77"), 10, "\"steps\":\"77\"");
  AG_CHECK_THROWS_WITH(trainer_options_from_json(bad), std::invalid_argument, "\"steps\" must be an integer");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
