// GPT weights in the layouts other tools write and read: import into a GPT (models/gpt/gpt.h) from
// four layouts, export to two.
//
//   GPT model(options);                                   // options describe the file's model
//   const GPTWeightsLayout layout = read_gpt_weights(model, "gpt2/model.safetensors");
//   write_gpt_weights(model, GPTExportFormat::hugging_face, "out/gpt2");  // model.safetensors + config.json
//
// Import: the layout is told by the file's content, never by its name.
//   llm.c        a file whose first int32 is llm.c's magic 20240326: 256 int32 of header (version,
//                max_seq_len, vocab_size, num_layers, num_heads, channels, padded_vocab_size), then
//                every parameter in llm.c's order as float32 (version 3): wte (Vp, C), wpe (T, C),
//                then per kind for all L layers at once: ln1w, ln1b (L, C), qkvw (L, 3C, C),
//                qkvb (L, 3C), attprojw (L, C, C), attprojb, ln2w, ln2b, fcw (L, 4C, C), fcb (L, 4C),
//                fcprojw (L, C, 4C), fcprojb (L, C), then lnfw, lnfb (C). Version 5 (bfloat16) is
//                refused with a message.
//   safetensors  by the names and shapes of its tensors:
//     attograd      a checkpoint of ours (embed.weight, blocks.N.attn.w_q.weight, ...)
//     Hugging Face  GPT-2's names (wte.weight, h.N.attn.c_attn.weight, h.N.mlp.c_fc.weight, ln_f.*), with
//                   or without the "transformer." prefix, weights stored (in, out) as its Conv1D
//                   stores them: h.N.attn.c_attn.weight is (C, 3C), q, k, v side by side along out
//     nanoGPT       the same names stored (out, in) as nn.Linear stores them: c_attn.weight is (3C, C).
//                   nanoGPT saves torch pickles, which are not read here: what is read is its
//                   model's state_dict saved as safetensors (safetensors.torch.save_file).
//   The causal-mask buffers (h.N.attn.bias, h.N.attn.masked_bias) are skipped; lm_head.weight,
//   when present, must equal wte.weight (the head is tied to the embedding here).
//   The orientation is the file's, told once from h.0.attn.c_attn.weight (C x 3C or 3C x C);
//   every other weight is read in it. A square weight (attn.c_proj, C x C) stored the other way
//   round in a file whose c_attn follows the layout has the same shape either way: nothing in
//   the file tells it apart, and it loads as the layout says (no tool writes such a file).
//
// The model's options must describe the file's network; the file is checked against them, not
// the other way round: layers, width, vocabulary (a padded llm.c table gives its first vocab
// rows; extra rows of ours are zeroed), context (a shorter one takes the first rows of the
// positions' table, as nanoGPT's crop_block_size does; an attograd checkpoint must match),
// biases or not, and n_head where the file says it (llm.c's header, an attograd checkpoint's
// options). Hugging Face and nanoGPT files do not store n_head (it lives in a config beside
// them): the model's is used.
//
// Everything is checked before any parameter changes: the layout, every tensor present with the
// shape the model needs and a dtype of F32 or F64, no tensor left unknown, the file long enough
// for every byte it should hold, and an attograd checkpoint's checksums as each tensor is read.
// Each problem is a std::runtime_error naming the file and the tensor, with both shapes when
// they differ. Each parameter is read straight into its storage; only a tensor stored
// transposed (Hugging Face) or in another dtype passes through a scratch buffer of its size, so
// the peak memory is the model plus its largest matrix, not plus the file.
//
// Export: Hugging Face (a directory with model.safetensors under GPT-2's names in Conv1D
// orientation, unprefixed and unpadded, and config.json with GPT2LMHeadModel's keys) or llm.c
// (a version 3 .bin, table padded with zero rows to padded_vocab). A model without biases is
// written with zero biases, which computes the same function. llm.c's model always uses the tanh
// GELU: a model with another activation is refused for llm.c (Hugging Face names it in
// activation_function: "gelu_new" for gelu_tanh, "gelu" for the exact form, "relu"). Files are
// written atomically (train/io/atomic_file.h); on an error nothing is written.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/models/gpt/gpt.h"

namespace ag {

enum class GPTWeightsLayout { attograd, hugging_face, nanogpt, llmc };
const char* gpt_weights_layout_name(GPTWeightsLayout layout);  // "attograd", "Hugging Face", "nanoGPT", "llm.c"

// llm.c's header constants.
inline constexpr int32_t kLlmcMagic = 20240326;
inline constexpr int32_t kLlmcVersionF32 = 3;
inline constexpr int32_t kLlmcVersionBF16 = 5;
inline constexpr int kLlmcHeaderInts = 256;

// Reads the weights of the file at `path` into `model` (its dtype kept), as described above, and
// says which layout it found.
GPTWeightsLayout read_gpt_weights(GPT& model, const std::string& path);
// The layout of the file at `path`, from its header alone (no weights are read);
// std::runtime_error naming the file when it holds none of them.
GPTWeightsLayout gpt_weights_layout(const std::string& path);

enum class GPTExportFormat { hugging_face, llmc };
// "hf" or "llmc"; std::invalid_argument listing the choices otherwise.
GPTExportFormat parse_gpt_export_format(const std::string& name);
const char* gpt_export_format_name(GPTExportFormat format);

// Writes `model` to `out`: a directory for Hugging Face (created when missing; model.safetensors
// and config.json inside), a file for llm.c. std::invalid_argument when the format cannot express
// the model, std::runtime_error for I/O, both before anything is written.
void write_gpt_weights(GPT& model, GPTExportFormat format, const std::string& out);

// A Hugging Face GPT-2 directory's config.json, as the model it describes: n_layer, n_head,
// n_embd, n_positions (or n_ctx), vocab_size, activation_function ("gelu_new" and its aliases
// are the tanh GELU, "gelu" the exact one, "relu"), with biases; a layer_norm_epsilon other than
// 1e-5, an n_inner other than 4 n_embd, or an untied head are refused, since this GPT cannot
// express them. std::runtime_error naming the file and the key.
GPTOptions gpt_options_from_hf_config(const std::string& config_path);

// The network a weight file of another tool describes, for using it without a checkpoint
// (generate, evaluate, export_gpt). llm.c's header says everything (the tanh GELU is its only
// activation). A Hugging Face or nanoGPT safetensors file gives its layers, width, context,
// vocabulary and biases by its tensors' shapes; its heads and activation come from the
// config.json beside it (`config`, when not empty; what gpt_options_from_hf_config reads, and the
// file must agree with it), else from `n_head` (0: d_model / 64, GPT-2's head size, for a
// Hugging Face file; a nanoGPT file must be told) and `activation` (empty: the tanh GELU for
// Hugging Face, as GPT-2's gelu_new; the exact GELU for nanoGPT, its nn.GELU). An attograd
// checkpoint is refused: its options are its own (load_gpt_checkpoint). std::runtime_error naming
// the file; std::invalid_argument when n_head does not divide the width.
struct GPTFileShape {
  GPTOptions options;
  GPTWeightsLayout layout = GPTWeightsLayout::hugging_face;
  std::string heads_from;       // "the file's header", "config.json", "--heads", "d_model / 64"
  std::string activation_from;  // likewise
};
GPTFileShape gpt_shape_of_weights(const std::string& path, const std::string& config = "", int64_t n_head = 0,
                                  const std::string& activation = "");

}  // namespace ag
