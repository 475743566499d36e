// train_gpt: trains a small GPT language model on a text (by default Debian's fortunes, one token
// per character) and prints a sample at every evaluation, so you can watch it learn to spell.
//
//   build/examples/train_gpt                                  # the baby model, a few minutes
//   build/examples/train_gpt --data my.txt --steps 2000 --save runs/my/ckpt.safetensors
//   build/examples/train_gpt --resume runs/gpt/ckpt.safetensors
//   build/examples/generate --checkpoint runs/gpt/ckpt.safetensors --prompt "The "
//
// Writes the checkpoint, the metrics log (JSON lines), an SVG plot and the run's configuration
// under runs/gpt/ unless --save / --log / --plot say otherwise; what every training program
// shares (resume, Ctrl-C, mpirun, exit codes) is in training_program.h. A text too short for
// the context is a usage error (exit 2).
#include <optional>

#include "attograd/train/data/text.h"
#include "train_gpt_cli.h"

namespace {

using namespace ag;

class GPTProgram : public TrainingProgram {
 public:
  explicit GPTProgram(const TrainGPTArgs& a) : TrainingProgram(a.kInfo, a), a_(a) {
    checkpoint_hint_ = ", sample with generate --checkpoint " + a.save_path;
  }

 private:
  void configure(const Checkpoint* ck, const TrainerOptions& t) override {
    const std::string text = read_corpus(a_.data_path);
    tokenizer_ = ck ? gpt_tokenizer_from(*ck) : a_.tokenizer == "char" ? Tokenizer::characters(text) : Tokenizer::bytes();
    model_options_ = ck ? gpt_options_from(*ck) : a_.model;
    model_options_.vocab = tokenizer_.vocab_size();
    job_options_ = ck ? gpt_job_options_from(*ck, a_.job) : a_.job;
    tokens_ = tokenizer_.encode(text);
    if (static_cast<int64_t>(tokens_.size()) < model_options_.block_size + 1) {
      throw UsageError("--data '" + data_name() + "': the text is " + std::to_string(tokens_.size()) +
                       " tokens long, shorter than --block-size " + std::to_string(model_options_.block_size) +
                       " + 1 = " + std::to_string(model_options_.block_size + 1) +
                       " (give more text or lower --block-size)");
    }
    run_dir_ = kGPTRunDir;
    std::ostringstream title;
    title << "GPT on " << std::filesystem::path(data_name()).filename().string() << ": " << model_options_.n_layers
          << " layers, d_model " << model_options_.d_model << ", context " << model_options_.block_size << ", lr "
          << t.lr;
    plot_title_ = title.str();
  }
  std::string data_name() const { return a_.data_path.empty() ? std::string(kFortunesDir) : a_.data_path; }
  TrainingJob& build() override {
    model_.emplace(model_options_);
    return job_.emplace(*model_, tokenizer_, tokens_, job_options_);
  }
  std::string describe(const TrainerOptions& t, int64_t params) const override {
    const GPTOptions& m = model_options_;
    const TextSplit& split = job_->data();
    std::ostringstream os;
    os << "data   " << data_name() << ": " << split.train.size() + split.val.size() << " tokens ("
       << split.train.size() << " train, " << split.val.size() << " validation), " << tokenizer_.kind_name()
       << " tokenizer, vocab " << tokenizer_.vocab_size() << "\n"
       << "model  GPT " << m.n_layers << " layers, " << m.n_head << " heads, d_model " << m.d_model << ", context "
       << m.block_size << ", dropout " << m.dropout << ", " << params << " parameters\n"
       << describe_training(t, "batch " + std::to_string(job_options_.batch) + ", " + std::to_string(t.steps) +
                                   " steps, seed " + std::to_string(job_options_.seed));
    return os.str();
  }
  void report(const TrainSummary& s) override {
    std::cout << std::fixed << std::setprecision(4) << "final train loss " << s.train_loss << ", validation loss "
              << s.eval.loss << " (nats per token)\n";
  }

  const TrainGPTArgs& a_;
  Tokenizer tokenizer_ = Tokenizer::bytes();
  GPTOptions model_options_;
  GPTJobOptions job_options_;
  std::vector<int64_t> tokens_;
  std::optional<GPT> model_;
  std::optional<GPTJob> job_;
};

int run(const TrainGPTArgs& args) { return GPTProgram(args).run(); }

}  // namespace

int main(int argc, char** argv) { return ag::training_program_main<ag::TrainGPTArgs>(argc, argv, run); }
