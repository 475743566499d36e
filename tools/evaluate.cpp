// evaluate: the sliding-window perplexity of a trained GPT over a text (models/gpt/eval_text.h): mean
// nats per token, perplexity and bits per byte, each token scored once with up to a window of
// context.
//
//   build/tools/evaluate --checkpoint runs/train_gpt/fortunes/latest/ckpt.safetensors --data fortunes --stride 32
//   mpirun -np 2 build/tools/evaluate --checkpoint ckpt.safetensors --data my.txt --stride 512   # windows split
//
// The text is read as train_gpt reads it (files joined in order, or a corpus name) and encoded
// with the checkpoint's tokenizer. --quantize int8 scores the model with int8 weights
// (GPT::quantize_int8), to see what quantization costs in perplexity. A fine-tuning checkpoint
// comes with its adapters (and its base, when it holds only the adapter). On a terminal a
// progress line (windows done, tokens/s, time, ETA) is redrawn on stderr while the windows run.
// Exit codes: 0 done, 1 error (a file), 2 bad command line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/core/threads.h"
#include "attograd/models/gpt/eval_text.h"
#include "attograd/models/gpt/gpt_load.h"
#include "attograd/models/gpt/gpt_memory.h"
#include "attograd/text/corpus.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/report/progress.h"
#include "common/quantize_flag.h"
#include "common/weights_flags.h"
#include "common/threads_flag.h"
#include "common/tool_main.h"

namespace {

using namespace ag;

struct Args {
  std::string checkpoint;
  std::vector<std::string> data;
  int64_t stride = 0;
  int64_t block_size = 0;  // 0: the model's
  int64_t batch = 8;
  std::string threads = "auto";
  std::string quantize = "none";
  GPTFileHints hints;  // for weights of another tool
};

int run(const Args& a) {
  Communicator& comm = Communicator::world();
  if (!comm.is_root()) std::cout.rdbuf(nullptr);  // rank 0 alone prints
  set_num_threads(parse_threads(a.threads));
  if (comm.is_root()) std::cerr << blas_kernel_note();
  LoadedGPTFile file = load_gpt(a.checkpoint, a.hints);
  LoadedGPT& loaded = file.gpt;
  apply_quantize(*loaded.model, a.quantize);
  const GPTOptions& m = loaded.model->options();
  const int64_t window = a.block_size == 0 ? m.block_size : a.block_size;
  if (window > m.block_size) {
    throw UsageError("--block-size " + std::to_string(window) + " is longer than the model's context, " +
                     std::to_string(m.block_size) + " tokens");
  }
  if (a.stride > window) {
    throw UsageError("--stride " + std::to_string(a.stride) + " is longer than the window of " + std::to_string(window) +
                     " tokens: the tokens between two windows would not be scored");
  }
  const Corpus corpus = read_corpus_sources(a.data);
  const std::vector<int64_t> tokens = loaded.tokenizer.encode(corpus.text);
  if (tokens.size() < 2) {
    throw UsageError("--data: the text is " + std::to_string(tokens.size()) +
                     " token(s) long; scoring needs at least 2 (one to predict from, one to predict)");
  }
  // A forward pass over `batch` windows holds their logits (a row of the vocabulary per token)
  // and a block's activations: estimated before it runs, with the largest --batch that fits.
  const int64_t windows = static_cast<int64_t>(sliding_windows(static_cast<int64_t>(tokens.size()), window, a.stride).size());
  const int64_t rows = std::min(a.batch, windows);
  const double per_window = static_cast<double>(window) * sizeof(float) *
                            (static_cast<double>(m.vocab) + 16.0 * static_cast<double>(m.d_model) +
                             2.0 * static_cast<double>(m.n_head) * static_cast<double>(window));
  const double available = available_memory_bytes() - parameter_count(m) * sizeof(float);
  if (static_cast<double>(rows) * per_window > available) {
    const int64_t fits = std::max<int64_t>(0, static_cast<int64_t>(available / per_window));
    throw UsageError("--batch " + std::to_string(a.batch) + ": " + std::to_string(rows) + " windows of " +
                     std::to_string(window) + " tokens at once need about " +
                     format_bytes(static_cast<double>(rows) * per_window) + " (their logits over " +
                     std::to_string(m.vocab) + " tokens, and activations) but " + format_bytes(std::max(0.0, available)) +
                     " is available beside the model; " +
                     (fits > 0 ? "--batch " + std::to_string(fits) + " fits" : "not even one window fits"));
  }
  // On a terminal, a progress line on stderr (rewritten in place, erased at the end): a long
  // text on a large model takes minutes. Rank 0 speaks for the processes, which share the work.
  const bool tty = comm.is_root() && ::isatty(STDERR_FILENO) == 1;
  const auto start = std::chrono::steady_clock::now();
  const auto progress = [&](int64_t done, int64_t total) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double per_window = seconds / static_cast<double>(std::max<int64_t>(done, 1));
    std::cerr << "\r\033[Kevaluate: window " << done << "/" << total << " " << 100 * done / std::max<int64_t>(total, 1)
              << "% | " << format_rate(static_cast<double>(done * window) / std::max(seconds, 1e-9)) << " tok/s | "
              << format_duration(seconds) << " | ETA " << format_duration(per_window * static_cast<double>(total - done))
              << std::flush;
  };
  if (tty) std::cerr << "evaluate: scoring " << windows << " windows of up to " << window << " tokens..." << std::flush;
  const TextScore s = sliding_window_perplexity(*loaded.model, tokens, loaded.tokenizer.token_bytes(),
                                                {.window = window, .stride = a.stride, .batch = a.batch}, Ranks(&comm),
                                                tty ? WindowProgress(progress) : WindowProgress());
  if (tty) std::cerr << "\r\033[K" << std::flush;
  std::string names;
  for (const std::string& d : a.data) names += (names.empty() ? "" : " + ") + d;
  const std::string origin = file.layout == GPTWeightsLayout::attograd
                                 ? "step " + std::to_string(loaded.step)
                                 : std::string(gpt_weights_layout_name(file.layout)) + " weights; " + file.shape_from;
  std::cout << "model      " << a.checkpoint << " (" << origin << "), GPT " << m.n_layers << " layers, d_model "
            << m.d_model << ", context " << m.block_size
            << (a.quantize == "int8" ? ", int8 weights" : "") << "\n"
            << "text       " << names << ": " << corpus.text.size() << " bytes, " << tokens.size() << " tokens ("
            << loaded.tokenizer.kind_name() << " tokenizer)\n"
            << "windows    " << s.windows << " of up to " << window << " tokens, stride " << a.stride << ", over "
            << comm.size() << (comm.size() == 1 ? " process" : " processes") << "\n"
            << "scored     " << s.tokens << " tokens, " << s.bytes << " bytes, " << std::setprecision(12) << s.nats
            << " nats\n"
            << std::fixed << std::setprecision(6) << "nats/token " << s.nats_per_token() << "\n"
            << "perplexity " << s.perplexity() << "\n"
            << "bits/byte  " << s.bits_per_byte() << "\n";
  std::cout.flush();
  if (!std::cout && comm.is_root()) throw std::runtime_error("cannot write to standard output");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Sliding-window perplexity of a GPT checkpoint over a text: nats per token, perplexity, bits per byte.",
               tool_name(argc, argv, "evaluate")};
  app.add_option("--checkpoint", args.checkpoint,
                 "a checkpoint written by train_gpt, or GPT-2 weights of another tool: a Hugging Face directory or "
                 "model.safetensors, a nanoGPT state_dict as safetensors, an llm.c .bin")
      ->required()
      ->check(nonempty_path());
  app.add_option("--data", args.data,
                 "the text: one or more files, joined in order, or a corpus name (fortunes, bible)")
      ->required()
      ->check(nonempty_path())
      ->expected(1, CLI::detail::expected_max_vector_size);
  app.add_option("--stride", args.stride, "a window starts every N tokens; each scores the tokens the last one did not")
      ->required()
      ->check(integer_in<int64_t>(1, int64_t{GPTLimits::block_size}));
  app.add_option("--block-size", args.block_size, "tokens per window (default: the model's context)")
      ->check(integer_in<int64_t>(2, int64_t{GPTLimits::block_size}));
  app.add_option("--batch", args.batch, "windows per forward pass")
      ->capture_default_str()
      ->check(integer_in<int64_t>(1, int64_t{1} << 16));
  add_threads_flag(app, args.threads, "threads for the forward passes");
  add_quantize_flag(app, args.quantize);
  add_weights_flags(app, args.hints);
  return tool_main(app, argc, argv, [&] { return run(args); });
}
