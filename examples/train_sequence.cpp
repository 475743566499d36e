// train_sequence: trains a small transformer encoder on a toy sequence task (copy, reverse, sort,
// shift), with no data to download, and reports how well it does on held-out sequences.
//
//   build/examples/train_sequence                      # reverse, length 16, vocab 16, to 99%
//   build/examples/train_sequence --task sort --steps 3000 --save runs/sort/ckpt.safetensors
//   build/examples/train_sequence --resume runs/sort/ckpt.safetensors
//
// Writes the metrics log (JSON lines), an SVG plot of loss and accuracy and the run's
// configuration under runs/<task>/ unless --log / --plot say otherwise; what every training
// program shares (resume, Ctrl-C, mpirun, exit codes) is in training_program.h.
#include <optional>

#include "attograd/train/io/model_options.h"
#include "attograd/train/memory.h"
#include "attograd/train/sequence_job.h"
#include "train_sequence_cli.h"

namespace {

using namespace ag;

// Tokens as one character each (0-9, then a-z) when the vocabulary allows, else numbers.
std::string format_tokens(const Indices& x, int64_t row, int64_t vocab) {
  std::string out;
  for (int64_t i = 0, t = x.shape[1]; i < t; ++i) {
    const int64_t token = x.data[static_cast<size_t>(row * t + i)];
    if (vocab <= 36) {
      out += static_cast<char>(token < 10 ? '0' + token : 'a' + (token - 10));
    } else {
      out += (i > 0 ? " " : "") + std::to_string(token);
    }
  }
  return out;
}

class SequenceProgram : public TrainingProgram {
 public:
  explicit SequenceProgram(const TrainSequenceArgs& a) : TrainingProgram(a.kInfo, a), a_(a) {}

 private:
  void configure(const Checkpoint* ck, const TrainerOptions& t) override {
    model_options_ = ck ? checkpoint_entry(*ck, "model", sequence_model_options_from_json) : a_.model;
    task_ = ck ? checkpoint_entry(*ck, "task", sequence_task_options_from_json) : a_.task;
    const SequenceModelOptions& m = model_options_;
    run_dir_ = std::string("runs/") + sequence_task_name(task_.kind);
    std::ostringstream title;
    title << sequence_task_name(task_.kind) << ": vocab " << task_.vocab_size << ", length " << task_.seq_len
          << ", d_model " << m.d_model << ", " << m.n_layers << " layers, " << optimizer_kind_name(t.optimizer)
          << " lr " << t.lr;
    plot_title_ = title.str();
    // The model, its optimizer and its activations must fit in memory before anything is built.
    check_memory_fits(estimate_training_memory(m, task_, t, a_.eval_sequences), available_memory_bytes(),
                      ck ? "the checkpoint's model and task settings are too large for this machine"
                         : "the size is driven by --d-model, --d-ff, --layers and --vocab (parameters and optimizer "
                           "state) and by --batch, --length and --heads (activations)");
  }
  TrainingJob& build() override {
    model_.emplace(model_options_);
    return job_.emplace(*model_, task_, a_.eval_sequences);
  }
  std::string describe(const TrainerOptions& t, int64_t params) const override {
    std::ostringstream os;
    os << "task   " << sequence_task_name(task_.kind);
    if (task_.kind == SequenceTaskKind::shift) os << " (k=" << task_.shift << ")";
    os << ", vocab " << task_.vocab_size << ", length " << task_.seq_len << ", batch " << task_.batch_size
       << ", seed " << task_.seed << "\n"
       << describe_block_model(model_options_, std::to_string(model_options_.n_layers), params)
       << describe_training(t, "budget " + std::to_string(t.steps) + " steps, target " + percent(t.target_seq_acc) +
                                   " exact");
    return os.str();
  }
  void report(const TrainSummary& s) override {
    std::cout << "held-out (" << job_->eval_sequences() << " sequences): loss " << std::setprecision(4) << s.eval.loss
              << ", token accuracy " << percent(s.eval.token_acc) << ", exact-sequence accuracy "
              << percent(s.eval.seq_acc) << "\n";
    // A few held-out examples: the first rows of the first held-out batch.
    const SequenceBatch examples = job_->task().eval_batch(0);
    const Indices predicted = job_->predict(examples.inputs);
    const int64_t vocab = task_.vocab_size, per_row = examples.inputs.shape[1];
    std::cout << "examples (input -> predicted, expected):\n";
    for (int64_t r = 0; r < std::min<int64_t>(4, examples.inputs.shape[0]); ++r) {
      const auto row = [&](const Indices& x) { return std::vector<int64_t>(x.data.begin() + r * per_row, x.data.begin() + (r + 1) * per_row); };
      std::cout << "  " << format_tokens(examples.inputs, r, vocab) << " -> " << format_tokens(predicted, r, vocab)
                << "  " << (row(predicted) == row(examples.targets) ? "ok " : "BAD") << "  "
                << format_tokens(examples.targets, r, vocab) << "\n";
    }
  }

  const TrainSequenceArgs& a_;
  SequenceModelOptions model_options_;
  SequenceTaskOptions task_;
  std::optional<SequenceModel> model_;
  std::optional<SequenceJob> job_;
};

int run(const TrainSequenceArgs& args) { return SequenceProgram(args).run(); }

}  // namespace

int main(int argc, char** argv) { return ag::training_program_main<ag::TrainSequenceArgs>(argc, argv, run); }
