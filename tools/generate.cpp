// generate: continues a prompt with a GPT trained by train_gpt, streaming each token to stdout as
// soon as it is drawn. The tokenizer comes from the checkpoint, so no data file is needed.
//
//   build/tools/generate --checkpoint runs/train_gpt/fortunes/latest/ckpt.safetensors --prompt "The " --tokens 400
//       --temperature 0.8 --top-k 40 --seed 1         (one command line)
//
// Temperature 0 is greedy. The same checkpoint, prompt, options and seed print the same text,
// with or without the KV cache (--no-cache recomputes the whole window for every token: slower,
// the same tokens). --quantize int8 or q4_0 runs the model with quantized weights (GPT::quantize): more
// tokens per second than float32 (bench/RESULTS.md), and tokens that may part from the float
// model's where two candidates are close (sooner in q4_0). The prompt must fit the model's context
// (block_size tokens); once the text grows past it, the window slides and the model sees the
// last block_size tokens.
// Every write to stdout is checked: a closed stdout, a full disk or a pipe whose reader has gone
// (with SIGPIPE ignored) stops generation at once with an error.
// Exit codes: 0 done, 1 error (the checkpoint, or stdout), 2 bad command line or prompt.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/core/threads.h"
#include "attograd/models/gpt/generate.h"
#include "attograd/models/gpt/gpt_load.h"
#include "attograd/models/llama/llama_generate.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/models/llama/llama_load.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/text/corpus.h"
#include "attograd/train/io/atomic_file.h"
#include "common/quantize_flag.h"
#include "common/weights_flags.h"
#include "common/threads_flag.h"
#include "common/tool_main.h"

namespace {

using namespace ag;

struct Args {
  std::string checkpoint;
  std::string prompt;
  int64_t tokens = 200;
  SamplingOptions sampling{.temperature = 0.8, .top_k = 0, .top_p = 1.0, .seed = 0};
  bool no_cache = false;
  std::string threads = "auto";
  std::string quantize = "none";
  GPTFileHints hints;  // for weights of another tool
};

// The characters of `prompt` the tokenizer does not know, each once, in order of appearance.
std::vector<std::string> unknown_characters(const Tokenizer& tok, const std::string& prompt) {
  std::vector<std::string> unknown;
  for (size_t i = 0; i < prompt.size();) {
    // One UTF-8 character (a byte tokenizer knows every byte, so this only matters for char).
    const unsigned char lead = static_cast<unsigned char>(prompt[i]);
    const size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
    const std::string ch = prompt.substr(i, len);
    i += len;
    try {
      tok.encode(ch);
    } catch (const std::invalid_argument&) {
      if (std::find(unknown.begin(), unknown.end(), ch) == unknown.end()) unknown.push_back(ch);
    }
  }
  return unknown;
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string shown = items[i] == "\n" ? "\\n" : items[i] == "\t" ? "\\t" : items[i];
    out += (i ? ", '" : "'") + shown + "'";
  }
  return out;
}

// Writes `text` to stdout at once, unbuffered; 0 or the errno of the failed write.
int print(std::string_view text) { return write_all(STDOUT_FILENO, text.data(), text.size()); }

std::runtime_error stdout_error(int err) {
  return std::runtime_error(std::string("cannot write to standard output: ") + std::strerror(err));
}

// A model ready to continue a prompt, whichever family it is.
struct LoadedModel {
  Tokenizer tokenizer;
  int64_t context = 0;  // the longest prompt
  std::function<std::vector<int64_t>(const std::vector<int64_t>&, const GenerateOptions&)> generate;
  std::shared_ptr<void> owner;  // keeps the model alive
};

LoadedModel llama_model(Tokenizer tokenizer, std::shared_ptr<Llama> model, const std::string& path,
                        const std::string& quantize);

// A Hugging Face directory of the Llama family (config.json, weights, tokenizer.json).
LoadedModel llama_generator(const Args& args) {
  const std::string json = (std::filesystem::path(args.checkpoint) / "tokenizer.json").string();
  const bool has_json = std::filesystem::exists(json);
  if (!has_json && args.hints.tokenizer.empty()) {
    throw UsageError("--checkpoint: '" + args.checkpoint + "' has no tokenizer.json; name one with --tokenizer");
  }
  return llama_model(load_tokenizer(args.hints.tokenizer.empty() ? json : args.hints.tokenizer),
                     load_llama_hf(args.checkpoint), args.checkpoint, args.quantize);
}

// A checkpoint of a Llama-family run of train_gpt: its model and tokenizer are the file's.
LoadedModel llama_checkpoint_generator(const Args& args) {
  if (!args.hints.empty()) {
    throw UsageError("--tokenizer, --heads and --activation describe another tool's weights; '" + args.checkpoint +
                     "' is a checkpoint of train_gpt, which says all of them");
  }
  LoadedLlama loaded = load_llama_checkpoint(args.checkpoint);
  return llama_model(loaded.tokenizer, std::move(loaded.model), args.checkpoint, args.quantize);
}

// A Llama-family model with its tokenizer, sampling only the tokenizer's ids.
LoadedModel llama_model(Tokenizer tokenizer, std::shared_ptr<Llama> model, const std::string& path,
                        const std::string& quantize) {
  apply_quantize(*model, quantize);
  LoadedModel g;
  g.tokenizer = std::move(tokenizer);
  if (g.tokenizer.vocab_size() > model->options().vocab) {
    throw std::runtime_error("'" + path + "': its tokenizer has " + std::to_string(g.tokenizer.vocab_size()) +
                             " ids, more than the model's vocabulary of " + std::to_string(model->options().vocab));
  }
  g.context = model->options().max_positions;
  const int64_t vocab = g.tokenizer.vocab_size();
  g.generate = [model, vocab](const std::vector<int64_t>& prompt, const GenerateOptions& given) {
    // The ids past the tokenizer's vocabulary (a model's table may be padded beyond it) decode
    // to nothing: they are never drawn.
    GenerateOptions o = given;
    o.vocab_limit = vocab;
    check_generate_options(o, prompt, model->options().vocab, model->options().max_positions, "max_positions");
    if (o.max_new_tokens == 0) return std::vector<int64_t>{};
    EvalModeGuard eval(*model);
    const int64_t needed = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
    LlamaDecoder decoder(*model, DecodeOptions{o.use_cache, o.window_shift},
                         std::min(model->options().max_positions, needed));
    return generate_with(decoder, prompt, o);
  };
  g.owner = model;
  return g;
}

LoadedModel gpt_generator(const Args& args) {
  LoadedGPT loaded = load_gpt(args.checkpoint, args.hints).gpt;  // refuses other kinds of checkpoint by name
  std::shared_ptr<GPT> model(std::move(loaded.model));
  apply_quantize(*model, args.quantize);
  LoadedModel g;
  g.tokenizer = loaded.tokenizer;
  g.context = model->options().block_size;
  g.generate = [model](const std::vector<int64_t>& prompt, const GenerateOptions& o) { return generate(*model, prompt, o); };
  g.owner = model;
  return g;
}

int run(const Args& args) {
  // Closed, it would be the next file opened (the checkpoint's descriptor) that receives the text.
  if (::fcntl(STDOUT_FILENO, F_GETFD) < 0) throw stdout_error(errno);
  set_num_threads(parse_threads(args.threads));
  std::cerr << blas_kernel_note();  // stdout holds the text alone
  // The families, each claiming what it reads: a Llama-family directory, else the GPT's formats.
  const LoadedModel model = is_llama_hf_directory(args.checkpoint) ? llama_generator(args)
                             : is_llama_checkpoint(args.checkpoint) ? llama_checkpoint_generator(args)
                                                                    : gpt_generator(args);
  const Tokenizer& tok = model.tokenizer;

  const std::vector<std::string> unknown = unknown_characters(tok, args.prompt);
  if (!unknown.empty()) {
    throw UsageError("--prompt: " + quoted_list(unknown) + (unknown.size() == 1 ? " is" : " are") +
                     " not in the vocabulary of '" + args.checkpoint + "' (its " + tok.kind_name() +
                     " tokenizer knows " + std::to_string(tok.vocab_size()) + " symbols from the training text)");
  }
  const std::vector<int64_t> prompt = tok.encode(args.prompt);
  const int64_t context = model.context;
  if (static_cast<int64_t>(prompt.size()) > context) {
    throw UsageError("--prompt: is " + std::to_string(prompt.size()) + " tokens long, longer than the context of '" +
                     args.checkpoint + "', " + std::to_string(context) + " tokens (shorten the prompt)");
  }

  GenerateOptions g;
  g.max_new_tokens = args.tokens;
  g.sampling = args.sampling;
  g.use_cache = !args.no_cache;
  g.crop_prompt = false;
  int failed = print(args.prompt);
  // A byte-level token can hold part of a character: what is printed is always UTF-8.
  Utf8Printer text;
  g.on_token = [&](int64_t token) {
    failed = print(text.push(tok.decode(token)));  // as it is drawn, not at the end
    return failed == 0;                             // a failed write stops generation after this token
  };
  if (failed == 0) model.generate(prompt, g);
  if (failed == 0) failed = print(text.finish() + "\n");
  if (failed != 0) throw stdout_error(failed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Continues a prompt with a GPT checkpoint written by train_gpt, printing tokens as they come.",
               tool_name(argc, argv, "generate")};
  app.add_option("--checkpoint", args.checkpoint,
                 "a checkpoint written by train_gpt, or weights of another tool: a Hugging Face directory (GPT-2, "
                 "or Llama, Qwen2/3, Mistral, SmolLM with its tokenizer.json) or model.safetensors, a nanoGPT "
                 "state_dict as safetensors, an llm.c .bin")
      ->required()
      ->check(nonempty_path());
  app.add_option("--prompt", args.prompt, "the text to continue (at least one character)")->required();
  app.add_option("--tokens", args.tokens, "new tokens to generate")
      ->check(integer_in<int64_t>(0, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--temperature", args.sampling.temperature,
                 "0 is greedy; below 1 more likely tokens, above 1 more random")
      ->check(real_in(0, 1e6))
      ->capture_default_str();
  app.add_option("--top-k", args.sampling.top_k, "keep the K most likely tokens, 0 keeps all")
      ->check(integer_in<int64_t>(0, INT64_MAX))
      ->capture_default_str();
  app.add_option("--top-p", args.sampling.top_p, "keep the fewest most likely tokens reaching probability P, in (0, 1]")
      ->check(real_in(0, 1, /*high_open=*/false, /*low_open=*/true))
      ->capture_default_str();
  app.add_option("--seed", args.sampling.seed, "the sampling stream")->check(any_seed())->capture_default_str();
  app.add_flag("--no-cache", args.no_cache, "recompute the whole window for every token (same tokens, slower)");
  add_threads_flag(app, args.threads, "threads for matrix products");
  add_quantize_flag(app, args.quantize);
  add_weights_flags(app, args.hints);
  return tool_main(app, argc, argv, [&] {
    if (args.prompt.empty()) {
      throw UsageError("--prompt: is empty; the model needs at least one character to continue (try --prompt \"\\n\")");
    }
    return run(args);
  });
}
