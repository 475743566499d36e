// train_sequence: trains a small transformer encoder on a toy sequence task (copy, reverse, sort,
// shift), with no data to download, and reports how well it does on held-out sequences.
//
//   build/tools/train_sequence                      # reverse, length 16, vocab 16, to 99%
//   build/tools/train_sequence --task sort --steps 3000 --save runs/sort/ckpt.safetensors
//   build/tools/train_sequence --resume runs/sort/ckpt.safetensors
//
// Its metrics log, plot and configuration go to runs/<program>/<task>/<n>/ unless --log / --plot say
// otherwise; what every training program shares is in training_program.h.
#include "attograd/models/toy/sequence_job.h"
#include "attograd/models/toy/sequence_memory.h"
#include "attograd/models/toy/sequence_options.h"
#include "train_sequence_cli.h"

namespace {

using namespace ag;

// Row `row` of x, one character a token (0-9, then a-z) when the vocabulary allows, else numbers.
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

int run(const TrainSequenceArgs& a) {
  TrainingRun run(a, "sequence");
  const SequenceModelOptions m = run.options("model", sequence_model_options_from_json, a.model);
  const SequenceTaskOptions task = run.options("task", sequence_task_options_from_json, a.task);
  const TrainerOptions& t = run.trainer;
  run.check_fits(task.batch_size, estimate_training_memory(m, task, t, a.eval_sequences),
                   "the size is driven by --d-model, --d-ff, --layers and --vocab (parameters and optimizer state) "
                   "and by --batch, --length and --heads (activations)");
  std::ostringstream title, about;
  title << sequence_task_name(task.kind) << ": vocab " << task.vocab_size << ", length " << task.seq_len << ", d_model "
        << m.d_model << ", " << m.n_layers << " layers";
  run.prepare(sequence_task_name(task.kind), title.str());

  SequenceModel model(m);
  SequenceJob job(model, task, a.eval_sequences);
  about << "task   " << sequence_task_name(task.kind);
  if (task.kind == SequenceTaskKind::shift) about << " (k=" << task.shift << ")";
  about << ", vocab " << task.vocab_size << ", length " << task.seq_len << ", batch " << task.batch_size << ", seed "
        << task.seed << "\n"
        << describe_block_model(m, std::to_string(m.n_layers), model.num_parameters())
        << describe_training(t, "budget " + std::to_string(t.steps) + " steps, target " + percent(t.target_seq_acc) +
                                    " exact");
  const TrainSummary s = run.train(job, about.str());

  std::cout << "held-out (" << a.eval_sequences << " sequences): loss " << std::setprecision(4) << s.eval.loss
            << ", token accuracy " << percent(s.eval.token_acc) << ", exact-sequence accuracy "
            << percent(s.eval.seq_acc) << "\n";
  // A few held-out examples: the first rows of the first held-out batch.
  const SequenceBatch examples = job.task().eval_batch(0);
  const Indices predicted = job.predict(examples.inputs);
  const int64_t length = examples.inputs.shape[1];
  std::cout << "examples (input -> predicted, expected):\n";
  for (int64_t r = 0; r < std::min<int64_t>(4, examples.inputs.shape[0]); ++r) {
    const auto begin = static_cast<std::ptrdiff_t>(r * length);
    const bool ok = std::equal(predicted.data.begin() + begin, predicted.data.begin() + begin + length,
                               examples.targets.data.begin() + begin);
    std::cout << "  " << format_tokens(examples.inputs, r, task.vocab_size) << " -> "
              << format_tokens(predicted, r, task.vocab_size) << "  " << (ok ? "ok " : "BAD") << "  "
              << format_tokens(examples.targets, r, task.vocab_size) << "\n";
  }
  return run.finish(s);
}

}  // namespace

int main(int argc, char** argv) { return ag::training_program_main<ag::TrainSequenceArgs>(argc, argv, run); }
