// train_seq2seq: trains an encoder-decoder transformer on a generated task of variable-length
// sequences and decodes held-out sources with greedy decoding or beam search.
//
//   build/tools/train_seq2seq                        # reverse-var, to 99% exact held-out outputs
//   build/tools/train_seq2seq --task addition --beam 4
//   build/tools/train_seq2seq --task dedup --save runs/dedup/ckpt.safetensors
//   build/tools/train_seq2seq --resume runs/dedup/ckpt.safetensors
//
// Its metrics log, plot and configuration go to runs/<program>/<task>/<n>/ unless --log / --plot say
// otherwise. At the end it decodes the held-out sources (greedy, and with --beam N also beam
// search), reports exact-match rates and decoding speed, and shows a few examples. What every
// training program shares is in training_program.h.
#include "attograd/models/seq2seq/seq2seq_job.h"
#include "attograd/models/seq2seq/seq2seq_memory.h"
#include "attograd/models/seq2seq/seq2seq_options.h"
#include "train_seq2seq_cli.h"

namespace {

using namespace ag;

std::string decoding_line(const std::string& name, const Seq2SeqMetrics& m) {
  std::ostringstream os;
  os << name << ": exact " << percent(m.exact_accuracy()) << " of " << m.sequences << ", " << std::fixed
     << std::setprecision(1) << m.sequences_per_s() << " sequences/s\n";
  return os.str();
}

// The model's switches away from nn.Transformer's defaults (the seed's model sets them all), as a
// line under the model's, or nothing.
std::string describe_switches(const Seq2SeqOptions& m) {
  std::ostringstream os;
  const Seq2SeqOptions d;
  if (m.input_norm) os << ", input norms";
  if (!m.final_norm) os << ", no final norms";
  if (m.layer_norm_eps != d.layer_norm_eps) os << ", LayerNorm eps " << m.layer_norm_eps;
  if (!m.attn_bias) os << ", no attention bias";
  if (m.d_k != 0) os << ", d_k " << m.d_k;
  if (m.d_v != 0) os << ", d_v " << m.d_v;
  if (!m.scale_embeddings) os << ", unscaled embeddings";
  if (m.scale_logits) os << ", logits times d_model^-1/2";
  if (m.share_embeddings) os << ", one token table";
  if (m.tie_head) os << ", tied head";
  return os.str().empty() ? "" : "       " + os.str().substr(2) + "\n";
}

int run(const TrainSeq2SeqArgs& a) {
  TrainingRun run(a, "seq2seq");
  const Seq2SeqOptions m = run.options("model", seq2seq_options_from_json, a.model);
  const Seq2SeqTaskOptions task = run.options("task", seq2seq_task_options_from_json, a.task);
  const std::string layers = std::to_string(m.n_encoder_layers) + "+" + std::to_string(m.n_decoder_layers);
  const TrainerOptions& t = run.trainer;
  run.check_fits(task.batch_size, estimate_training_memory(m, task, t, a.eval_sequences),
                   "the size is driven by --d-model, --d-ff, --d-k, --d-v, --encoder-layers, --decoder-layers and "
                   "--symbols (parameters and optimizer state), by --batch, --max-len and --heads (activations) and by "
                   "--eval-sequences and --max-len (the held-out set, kept for the run)");
  std::ostringstream title, about;
  title << seq2seq_task_name(task.kind) << ": lengths " << task.min_len << "-" << task.max_len << ", d_model "
        << m.d_model << ", " << layers << " layers";
  run.prepare(seq2seq_task_name(task.kind), title.str());

  Seq2Seq model(m);
  Seq2SeqJob job(model, task, a.eval_sequences);
  about << "task   " << seq2seq_task_name(task.kind);
  if (task.kind == Seq2SeqTaskKind::addition) {
    about << ", " << task.min_len << " to " << task.max_len << " digits per operand";
  } else {
    about << ", " << task.symbols << " symbols, length " << task.min_len << " to " << task.max_len;
  }
  about << ", batch " << task.batch_size << ", seed " << task.seed << "\n"
        << describe_block_model(m, layers, model.num_parameters()) << describe_switches(m)
        << describe_training(t, "budget " + std::to_string(t.steps) + " steps, target " + percent(t.target_seq_acc) +
                                    " exact (greedy)");
  const TrainSummary s = run.train(job, about.str());

  std::cout << "held-out (" << job.last_metrics().sequences << " sources): loss " << std::setprecision(4) << s.eval.loss
            << ", token accuracy " << percent(s.eval.token_acc) << " (teacher-forced)\n";
  // The final decoding of the held-out set, timed: greedy in batches, beam search source by source.
  Seq2SeqDecodeOptions decode = job.decode_options();
  decode.beam = a.beam;
  decode.length_penalty = a.length_penalty;
  const Seq2SeqMetrics greedy = job.decode_held_out(decode, /*beam=*/false);
  const Seq2SeqMetrics beam = a.beam > 1 ? job.decode_held_out(decode, /*beam=*/true) : Seq2SeqMetrics{};
  std::cout << decoding_line("greedy", greedy) << (a.beam > 1 ? decoding_line("beam " + std::to_string(a.beam), beam) : "");
  // A few held-out examples, decoded the way the last line above did.
  const Seq2SeqBatch& held_out = job.held_out().front();
  const Seq2SeqBatch first = padded_rows(held_out, {.begin = 0, .rows = std::min<int64_t>(5, held_out.src.shape[0])});
  const std::vector<Hypothesis> out = a.beam > 1 ? beam_search(model, first.src, first.src_lengths, decode)
                                                 : greedy_decode(model, first.src, first.src_lengths, decode);
  std::cout << "examples (source -> decoded, expected):\n";
  for (int64_t r = 0; r < first.src.shape[0]; ++r) {
    const Hypothesis& h = out[static_cast<size_t>(r)];
    const std::vector<int64_t> expected = target_of(first, r);
    std::cout << "  " << job.task().to_text(source_of(first, r)) << " -> " << job.task().to_text(h.tokens)
              << (h.ended ? "" : " (no eos)") << "  " << (h.ended && h.tokens == expected ? "ok " : "BAD") << "  "
              << job.task().to_text(expected) << "\n";
  }
  const int status = run.finish(s);
  if (a.json) {
    // One line for scripts: the run (run_s counts its evaluations too) and the final decoding.
    std::cout << std::setprecision(17) << "{\"steps\": " << s.steps << ", \"reached\": "
              << (s.reached_target ? "true" : "false") << ", \"train_s\": " << s.run_s
              << ", \"seq_acc\": " << greedy.exact_accuracy() << ", \"greedy_seq_per_s\": " << greedy.sequences_per_s()
              << ", \"beam\": " << a.beam;
    if (a.beam > 1) std::cout << ", \"beam_seq_per_s\": " << beam.sequences_per_s() << ", \"beam_seq_acc\": " << beam.exact_accuracy();
    std::cout << "}\n";
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) { return ag::training_program_main<ag::TrainSeq2SeqArgs>(argc, argv, run); }
