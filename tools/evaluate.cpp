// evaluate: the sliding-window perplexity of a trained model over a text (train/text_score.h): mean
// nats per token, perplexity and bits per byte, each token scored once with up to a window of
// context.
//
//   build/tools/evaluate --checkpoint runs/train_gpt/fortunes/latest/ckpt.safetensors --data fortunes --stride 32
//   mpirun -np 2 build/tools/evaluate --checkpoint ckpt.safetensors --data my.txt --stride 512   # windows split
//
// The text is read as train_gpt reads it (files joined in order, or a corpus name) and encoded
// with the checkpoint's tokenizer. --quantize int8 or q4_0 scores the model with quantized weights
// (GPT::quantize), to see what quantization costs in perplexity. A fine-tuning checkpoint
// comes with its adapters (and its base, when it holds only the adapter). On a terminal a
// progress line (windows done, tokens/s, time, ETA) is redrawn on stderr while the windows run.
// Exit codes: 0 done, 1 error (a file), 2 bad command line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/core/threads.h"
#include "attograd/train/text_score.h"
#include "attograd/models/gpt/gpt_load.h"
#include "attograd/models/gpt/gpt_memory.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/models/llama/llama_load.h"
#include "attograd/text/hf_tokenizer.h"
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

// A model that scores text, whichever family it is.
struct Scorer {
  Tokenizer tokenizer;
  int64_t context = 0, vocab = 0, d_model = 0, n_head = 0;
  double parameters = 0;
  std::string description;  // "GPT 2 layers, d_model 16, context 64", for the report
  std::string origin;       // "step 10", or where another tool's weights came from
  std::shared_ptr<LanguageModel> model;  // scored through train/text_score.h, whatever its family
};

Scorer gpt_scorer(const Args& a) {
  LoadedGPTFile file = load_gpt(a.checkpoint, a.hints);
  std::shared_ptr<GPT> model(std::move(file.gpt.model));
  apply_quantize(*model, a.quantize);
  const GPTOptions& m = model->options();
  Scorer s;
  s.tokenizer = file.gpt.tokenizer;
  s.context = m.block_size, s.vocab = m.vocab, s.d_model = m.d_model, s.n_head = m.n_head;
  s.parameters = parameter_count(m);
  s.description = "GPT " + std::to_string(m.n_layers) + " layers, d_model " + std::to_string(m.d_model) + ", context " +
                  std::to_string(m.block_size) + (a.quantize != "none" ? ", " + a.quantize + " weights" : "");
  s.origin = file.layout == GPTWeightsLayout::attograd
                 ? "step " + std::to_string(file.gpt.step)
                 : std::string(gpt_weights_layout_name(file.layout)) + " weights; " + file.shape_from;
  s.model = std::move(model);
  return s;
}

// A Llama-family model with its tokenizer; `what` names the model in the report.
Scorer llama_scorer_of(Tokenizer tokenizer, std::shared_ptr<Llama> model, const std::string& path,
                       const std::string& what, const std::string& origin, const std::string& quantize) {
  apply_quantize(*model, quantize);
  Scorer s;
  s.tokenizer = std::move(tokenizer);
  const LlamaOptions& o = model->options();
  if (s.tokenizer.vocab_size() > o.vocab) {
    throw std::runtime_error("'" + path + "': its tokenizer has " + std::to_string(s.tokenizer.vocab_size()) +
                             " ids, more than the model's vocabulary of " + std::to_string(o.vocab));
  }
  s.context = o.max_positions, s.vocab = o.vocab, s.d_model = o.d_model, s.n_head = o.n_head;
  s.parameters = static_cast<double>(llama_parameter_count(o));
  s.description = what + " " + std::to_string(o.n_layers) + " layers, d_model " + std::to_string(o.d_model) +
                  ", context " + std::to_string(o.max_positions) + (quantize != "none" ? ", " + quantize + " weights" : "");
  s.origin = origin;
  s.model = std::move(model);
  return s;
}

// A Hugging Face directory of the Llama family with its tokenizer.json (or --tokenizer).
Scorer llama_scorer(const Args& a) {
  const std::filesystem::path dir(a.checkpoint);
  const std::string json = (dir / "tokenizer.json").string();
  if (!std::filesystem::exists(json) && a.hints.tokenizer.empty()) {
    throw UsageError("--checkpoint: '" + a.checkpoint + "' has no tokenizer.json; name one with --tokenizer");
  }
  std::shared_ptr<Llama> model = load_llama_hf(a.checkpoint);
  const std::string architecture = llama_hf_architecture(model->options());
  return llama_scorer_of(load_tokenizer(a.hints.tokenizer.empty() ? json : a.hints.tokenizer), std::move(model),
                         a.checkpoint, architecture, "Hugging Face directory", a.quantize);
}

// A checkpoint of a Llama-family run of train_gpt: its model and tokenizer are the file's.
Scorer llama_checkpoint_scorer(const Args& a) {
  if (!a.hints.empty()) {
    throw UsageError("--tokenizer, --heads and --activation describe another tool's weights; '" + a.checkpoint +
                     "' is a checkpoint of train_gpt, which says all of them");
  }
  LoadedLlama loaded = load_llama_checkpoint(a.checkpoint);
  const int64_t step = loaded.step;
  return llama_scorer_of(loaded.tokenizer, std::move(loaded.model), a.checkpoint, "Llama", "step " + std::to_string(step),
                         a.quantize);
}

int run(const Args& a) {
  Communicator& comm = Communicator::world();
  if (!comm.is_root()) std::cout.rdbuf(nullptr);  // rank 0 alone prints
  set_num_threads(parse_threads(a.threads));
  if (comm.is_root()) std::cerr << blas_kernel_note();
  // The families, each claiming what it reads: a Llama-family directory, else the GPT's formats.
  const Scorer m = is_llama_hf_directory(a.checkpoint)   ? llama_scorer(a)
                   : is_llama_checkpoint(a.checkpoint) ? llama_checkpoint_scorer(a)
                                                       : gpt_scorer(a);
  const int64_t window = a.block_size == 0 ? m.context : a.block_size;
  if (window > m.context) {
    throw UsageError("--block-size " + std::to_string(window) + " is longer than the model's context, " +
                     std::to_string(m.context) + " tokens");
  }
  if (a.stride > window) {
    throw UsageError("--stride " + std::to_string(a.stride) + " is longer than the window of " + std::to_string(window) +
                     " tokens: the tokens between two windows would not be scored");
  }
  const Corpus corpus = read_corpus_sources(a.data);
  const std::vector<int64_t> tokens = m.tokenizer.encode(corpus.text);
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
  const double available = available_memory_bytes() - m.parameters * sizeof(float);
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
  const TextScore s = sliding_window_perplexity(*m.model, tokens, m.tokenizer.token_bytes(),
                                                {.window = window, .stride = a.stride, .batch = a.batch}, Ranks(&comm),
                                                tty ? WindowProgress(progress) : WindowProgress());
  if (tty) std::cerr << "\r\033[K" << std::flush;
  std::string names;
  for (const std::string& d : a.data) names += (names.empty() ? "" : " + ") + d;
  std::cout << "model      " << a.checkpoint << " (" << m.origin << "), " << m.description << "\n"
            << "text       " << names << ": " << corpus.text.size() << " bytes, " << tokens.size() << " tokens ("
            << m.tokenizer.kind_name() << " tokenizer)\n"
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
  CLI::App app{"Sliding-window perplexity of a language model over a text: nats per token, perplexity, bits per byte.",
               tool_name(argc, argv, "evaluate")};
  app.add_option("--checkpoint", args.checkpoint,
                 "a checkpoint written by train_gpt, or weights of another tool: a Hugging Face directory (GPT-2, "
                 "or Llama, Qwen2/3, Mistral, SmolLM with its tokenizer.json) or model.safetensors, a nanoGPT "
                 "state_dict as safetensors, an llm.c .bin")
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
