// libFuzzer target: the checkpoint loader, the way tools/train_sequence.cpp resumes a run
// (docs/fuzzing.md):
//
//   ck = Checkpoint::open(path)                    the one read: checksums, header, metadata
//   model, task and trainer options from ck's metadata
//   SequenceModel model(...); SequenceJob job(model, task); Trainer trainer(job, options);
//   trainer.resume(ck)                             parameters, optimizer state, RNG, loop state
//
// The loader takes a path, so each input is written to a scratch file first (fuzz_support.h).
// Any std::exception is an expected outcome; a crash, a sanitizer report, a leak or a hang
// (libFuzzer's -timeout) is a finding. A resume that succeeds must leave the trainer at the
// step the file's configuration names.
//
// Building the model is not the loader, so configurations whose model is large are skipped
// (the input is rejected: it does not enter the corpus) rather than built:
//   * more than kMaxParameters parameters: a fuzzed d_model or vocab would otherwise spend the
//     time budget (and memory) on initialising weights;
//   * more parameter bytes than the input holds: such a file cannot carry the parameters, so
//     resume() can only refuse it for the first missing tensor, a path that small models reach
//     too.
// Both use a lower bound on the parameter count (the weight matrices and tables, no biases or
// norms), so no configuration that could load is skipped for the second reason.
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "attograd/models/toy/sequence_job.h"
#include "attograd/models/toy/sequence_options.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/trainer.h"
#include "fuzz_support.h"

namespace {

constexpr double kMaxParameters = 1e6;

// At most SequenceModel's parameter count (in double: fuzzed sizes may overflow int64).
double parameters_lower_bound(const ag::SequenceModelOptions& m) {
  const auto v = static_cast<double>(m.vocab), len = static_cast<double>(m.max_len);
  const auto d = static_cast<double>(m.d_model), ff = static_cast<double>(m.d_ff), layers = static_cast<double>(m.n_layers);
  const double embed_and_head = 2 * v * d;                       // embed.weight, head.weight
  const double positions = m.positional == ag::PositionalKind::learned ? len * d : 0;  // pos.weight
  const double blocks = layers * (4 * d * d + 2 * d * ff);          // w_q, w_k, w_v, w_o, linear1, linear2
  return embed_and_head + positions + blocks;
}

bool too_large_to_build(const ag::SequenceModelOptions& m, size_t input_size) {
  for (int64_t dim : {m.vocab, m.max_len, m.d_model, m.d_ff, m.n_layers}) {
    if (dim < 0) return false;  // not large: the model's own validation refuses it
  }
  const double params = parameters_lower_bound(m);
  // Sinusoidal tables are buffers, not parameters, but they are allocated all the same.
  const double table = m.positional == ag::PositionalKind::sinusoidal ? static_cast<double>(m.max_len) * m.d_model : 0;
  return params + table > kMaxParameters || params * sizeof(float) > static_cast<double>(input_size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = ag::fuzz::scratch_path("checkpoint");
  ag::fuzz::write_scratch(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const ag::Checkpoint ck = ag::Checkpoint::open(path);
    ag::require_model_kind(ck, "sequence");
    const auto model_options = ag::parse_entry(ck, "model", ag::sequence_model_options_from_json);
    const auto task = ag::parse_entry(ck, "task", ag::sequence_task_options_from_json);
    const ag::TrainerOptions options = ag::resumed_trainer_options(ck, {});
    const int64_t step = ag::checkpoint_step(ck);
    if (too_large_to_build(model_options, size)) return -1;
    ag::SequenceModel model(model_options);
    ag::SequenceJob job(model, task);
    ag::Trainer trainer(job, options);
    trainer.resume(ck);
    if (trainer.step() != step) {
      ag::fuzz::finding("resume() reached step " + std::to_string(trainer.step()) + ", the configuration says " +
                        std::to_string(step));
    }
  } catch (const std::exception&) {
    // refused, with a message: the expected outcome for a damaged checkpoint
  }
  return 0;
}
