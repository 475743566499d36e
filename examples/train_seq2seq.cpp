// train_seq2seq: trains an encoder-decoder transformer on a generated task of variable-length
// sequences and decodes held-out sources with greedy decoding or beam search.
//
//   build/examples/train_seq2seq                        # reverse-var, to 99% exact held-out outputs
//   build/examples/train_seq2seq --task addition --beam 4
//   build/examples/train_seq2seq --task dedup --save runs/dedup/ckpt.safetensors
//   build/examples/train_seq2seq --resume runs/dedup/ckpt.safetensors
//
// Writes the metrics log (JSON lines), an SVG plot and the run's configuration under
// runs/<task>/ unless --log / --plot say otherwise. At the end it decodes the held-out sources
// (greedy, and with --beam N also beam search), reports exact-match rates and decoding speed,
// and shows a few examples. What every training program shares (resume, Ctrl-C, mpirun, exit
// codes) is in training_program.h.
#include <optional>

#include "attograd/train/io/model_options.h"
#include "attograd/train/seq2seq_job.h"
#include "train_seq2seq_cli.h"

namespace {

using namespace ag;

std::string decoding_line(const std::string& name, const Seq2SeqMetrics& m) {
  std::ostringstream os;
  os << name << ": exact " << percent(m.exact_accuracy()) << " of " << m.sequences << ", " << std::fixed
     << std::setprecision(1) << m.sequences_per_s() << " sequences/s";
  return os.str();
}

class Seq2SeqProgram : public TrainingProgram {
 public:
  explicit Seq2SeqProgram(const TrainSeq2SeqArgs& a) : TrainingProgram(a.kInfo, a), a_(a) {}

 private:
  void configure(const Checkpoint* ck, const TrainerOptions& t) override {
    model_options_ = ck ? checkpoint_entry(*ck, "model", seq2seq_options_from_json) : a_.model;
    task_ = ck ? checkpoint_entry(*ck, "task", seq2seq_task_options_from_json) : a_.task;
    run_dir_ = std::string("runs/") + seq2seq_task_name(task_.kind);
    std::ostringstream title;
    title << seq2seq_task_name(task_.kind) << ": lengths " << task_.min_len << "-" << task_.max_len << ", d_model "
          << model_options_.d_model << ", " << model_options_.n_encoder_layers << "+"
          << model_options_.n_decoder_layers << " layers, " << optimizer_kind_name(t.optimizer) << " lr " << t.lr;
    plot_title_ = title.str();
  }
  TrainingJob& build() override {
    model_.emplace(model_options_);
    return job_.emplace(*model_, task_, a_.eval_sequences);
  }
  std::string describe(const TrainerOptions& t, int64_t params) const override {
    const Seq2SeqOptions& m = model_options_;
    std::ostringstream os;
    os << "task   " << seq2seq_task_name(task_.kind);
    if (task_.kind == Seq2SeqTaskKind::addition) {
      os << ", " << task_.min_len << " to " << task_.max_len << " digits per operand";
    } else {
      os << ", " << task_.symbols << " symbols, length " << task_.min_len << " to " << task_.max_len;
    }
    os << ", batch " << task_.batch_size << ", seed " << task_.seed << "\n"
       << describe_block_model(m, std::to_string(m.n_encoder_layers) + "+" + std::to_string(m.n_decoder_layers), params)
       << describe_training(t, "budget " + std::to_string(t.steps) + " steps, target " + percent(t.target_seq_acc) +
                                   " exact (greedy)");
    return os.str();
  }
  void report(const TrainSummary& s) override {
    std::cout << "held-out (" << job_->last_metrics().sequences << " sources): loss " << std::setprecision(4)
              << s.eval.loss << ", token accuracy " << percent(s.eval.token_acc) << " (teacher-forced)\n";
    // The final decoding of the held-out set, timed: greedy in batches, beam search source by source.
    decode_ = job_->decode_options();
    decode_.beam = a_.beam;
    decode_.length_penalty = a_.length_penalty;
    greedy_ = job_->decode_held_out(decode_, /*beam=*/false);
    std::cout << decoding_line("greedy", greedy_) << "\n";
    if (a_.beam > 1) {
      beam_ = job_->decode_held_out(decode_, /*beam=*/true);
      std::cout << decoding_line("beam " + std::to_string(a_.beam), beam_) << "\n";
    }
    // A few held-out examples, decoded the way the last line above did.
    const Seq2SeqBatch& held_out = job_->held_out().front();
    const Seq2SeqBatch first = padded_rows(held_out, {.begin = 0, .rows = std::min<int64_t>(5, held_out.src.shape[0])});
    const std::vector<Hypothesis> out = a_.beam > 1 ? beam_search(*model_, first.src, first.src_lengths, decode_)
                                                    : greedy_decode(*model_, first.src, first.src_lengths, decode_);
    const Seq2SeqTask& t = job_->task();
    std::cout << "examples (source -> decoded, expected):\n";
    for (int64_t r = 0; r < first.src.shape[0]; ++r) {
      const Hypothesis& h = out[static_cast<size_t>(r)];
      const std::vector<int64_t> expected = target_of(first, r);
      std::cout << "  " << t.to_text(source_of(first, r)) << " -> " << t.to_text(h.tokens)
                << (h.ended ? "" : " (no eos)") << "  " << (h.ended && h.tokens == expected ? "ok " : "BAD") << "  "
                << t.to_text(expected) << "\n";
    }
  }
  void last_lines(const TrainSummary& s) override {
    if (!a_.json) return;
    // One line for scripts: the run (run_s counts its evaluations too) and the final decoding.
    std::cout << std::setprecision(17) << "{\"steps\": " << s.steps << ", \"reached\": "
              << (s.reached_target ? "true" : "false") << ", \"train_s\": " << s.run_s
              << ", \"seq_acc\": " << greedy_.exact_accuracy() << ", \"greedy_seq_per_s\": " << greedy_.sequences_per_s()
              << ", \"beam\": " << a_.beam;
    if (a_.beam > 1) {
      std::cout << ", \"beam_seq_per_s\": " << beam_.sequences_per_s() << ", \"beam_seq_acc\": " << beam_.exact_accuracy();
    }
    std::cout << "}\n";
  }

  const TrainSeq2SeqArgs& a_;
  Seq2SeqOptions model_options_;
  Seq2SeqTaskOptions task_;
  std::optional<Seq2Seq> model_;
  std::optional<Seq2SeqJob> job_;
  Seq2SeqDecodeOptions decode_;
  Seq2SeqMetrics greedy_, beam_;
};

int run(const TrainSeq2SeqArgs& args) { return Seq2SeqProgram(args).run(); }

}  // namespace

int main(int argc, char** argv) { return ag::training_program_main<ag::TrainSeq2SeqArgs>(argc, argv, run); }
