// Export of GPT weights (models/gpt/gpt_weights.h) to Hugging Face's GPT-2 layout and to llm.c's .bin.
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"

namespace ag {

namespace {

constexpr Named<GPTExportFormat> kFormatNames[] = {{GPTExportFormat::hugging_face, "hf"}, {GPTExportFormat::llmc, "llmc"}};

// One block's tensors in the (out, in) orientation of its Linears; zeros where the model has no bias.
struct BlockTensors {
  Tensor ln1w, ln1b, q, k, v, qb, kb, vb, o, ob, ln2w, ln2b, fc, fcb, proj, projb;
};

Tensor bias_or_zeros(Linear& linear) {
  const Variable& b = linear.bias();
  return b.defined() ? b.value() : zeros(Shape{linear.weight().shape()[0]}, linear.weight().dtype());
}

BlockTensors block_tensors(TransformerBlock& b) {
  MultiHeadAttention& a = b.attn();
  PositionwiseFeedForward& ff = b.ff_as<PositionwiseFeedForward>();
  LayerNorm& n1 = b.norm1_as<LayerNorm>();
  LayerNorm& n2 = b.norm2_as<LayerNorm>();
  return {n1.weight().value(),          n1.bias().value(),           a.w_q().weight().value(), a.w_k().weight().value(),
          a.w_v().weight().value(),     bias_or_zeros(a.w_q()),      bias_or_zeros(a.w_k()),   bias_or_zeros(a.w_v()),
          a.w_o().weight().value(),     bias_or_zeros(a.w_o()),      n2.weight().value(),      n2.bias().value(),
          ff.linear1().weight().value(), bias_or_zeros(ff.linear1()), ff.linear2().weight().value(),
          bias_or_zeros(ff.linear2())};
}

// The first `rows` rows of the table, or the table with zero rows added up to `rows`.
Tensor table_rows(const Tensor& table, int64_t rows) {
  if (rows <= table.shape()[0]) return table.narrow(0, 0, rows).contiguous();
  Tensor out = zeros(Shape{rows, table.shape()[1]}, table.dtype());
  out.narrow(0, 0, table.shape()[0]).copy_(table);
  return out;
}

// (in, parts * out): the transposes of `weights` side by side, as Conv1D stores a fused projection.
Tensor conv1d(const std::vector<Tensor>& weights) {
  const int64_t out = weights[0].shape()[0], in = weights[0].shape()[1];
  Tensor t = zeros(Shape{in, out * static_cast<int64_t>(weights.size())}, weights[0].dtype());
  for (size_t p = 0; p < weights.size(); ++p) t.narrow(1, static_cast<int64_t>(p) * out, out).copy_(weights[p].t());
  return t;
}

Tensor concat(const std::vector<Tensor>& parts) {
  int64_t n = 0;
  for (const Tensor& p : parts) n += p.numel();
  Tensor t = zeros(Shape{n}, parts[0].dtype());
  int64_t at = 0;
  for (const Tensor& p : parts) {
    t.narrow(0, at, p.numel()).copy_(p.reshape(Shape{p.numel()}));
    at += p.numel();
  }
  return t;
}

const char* hf_activation(Activation a) {
  switch (a) {
    case Activation::gelu_tanh: return "gelu_new";
    case Activation::gelu: return "gelu";
    case Activation::relu: return "relu";
  }
  return "gelu_new";
}

void write_hugging_face(GPT& model, const std::string& dir) {
  const GPTOptions& o = model.options();
  SafetensorsFile file;
  file.metadata["format"] = "pt";  // what Hugging Face's loaders look for
  file.add("wte.weight", table_rows(model.embed().weight().value(), o.vocab));
  file.add("wpe.weight", model.pos().weight().value());
  for (size_t l = 0; l < model.num_blocks(); ++l) {
    const BlockTensors t = block_tensors(model.block(l));
    const std::string h = "h." + std::to_string(l) + ".";
    file.add(h + "ln_1.weight", t.ln1w);
    file.add(h + "ln_1.bias", t.ln1b);
    file.add(h + "attn.c_attn.weight", conv1d({t.q, t.k, t.v}));
    file.add(h + "attn.c_attn.bias", concat({t.qb, t.kb, t.vb}));
    file.add(h + "attn.c_proj.weight", conv1d({t.o}));
    file.add(h + "attn.c_proj.bias", t.ob);
    file.add(h + "ln_2.weight", t.ln2w);
    file.add(h + "ln_2.bias", t.ln2b);
    file.add(h + "mlp.c_fc.weight", conv1d({t.fc}));
    file.add(h + "mlp.c_fc.bias", t.fcb);
    file.add(h + "mlp.c_proj.weight", conv1d({t.proj}));
    file.add(h + "mlp.c_proj.bias", t.projb);
  }
  file.add("ln_f.weight", model.norm().weight().value());
  file.add("ln_f.bias", model.norm().bias().value());

  OrderedJson config;
  config["architectures"] = {"GPT2LMHeadModel"};
  config["model_type"] = "gpt2";
  config["vocab_size"] = o.vocab;
  config["n_positions"] = o.block_size;
  config["n_ctx"] = o.block_size;
  config["n_embd"] = o.d_model;
  config["n_layer"] = o.n_layers;
  config["n_head"] = o.n_head;
  config["n_inner"] = nullptr;  // 4 n_embd
  config["activation_function"] = hf_activation(o.activation);
  config["layer_norm_epsilon"] = 1e-5;
  config["resid_pdrop"] = o.dropout;
  config["embd_pdrop"] = o.dropout;
  config["attn_pdrop"] = o.dropout;
  config["initializer_range"] = 0.02;
  config["scale_attn_weights"] = true;
  config["tie_word_embeddings"] = true;
  config["torch_dtype"] = model.embed().weight().dtype() == DType::f32 ? "float32" : "float64";

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("export: cannot create the directory '" + dir + "': " + ec.message());
  save_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), file);
  write_file_atomically((std::filesystem::path(dir) / "config.json").string(), config.dump(2) + "\n");
}

void write_llmc(GPT& model, const std::string& path) {
  const GPTOptions& o = model.options();
  if (o.activation != Activation::gelu_tanh) {
    throw std::invalid_argument(std::string("export to llm.c: this model's activation is ") + activation_name(o.activation) +
                                ", and llm.c's GPT-2 always computes the tanh GELU (gelu_tanh): export it as hf, whose "
                                "config names the activation");
  }
  // llm.c pads the table to a multiple of 128 when it writes one; a padded model keeps its own rows.
  const int64_t padded = o.vocab_multiple > 1 ? padded_vocab(o) : (o.vocab + 127) / 128 * 128;
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = kLlmcMagic;
  header[1] = kLlmcVersionF32;
  header[2] = static_cast<int32_t>(o.block_size);
  header[3] = static_cast<int32_t>(o.vocab);
  header[4] = static_cast<int32_t>(o.n_layers);
  header[5] = static_cast<int32_t>(o.n_head);
  header[6] = static_cast<int32_t>(o.d_model);
  header[7] = static_cast<int32_t>(padded);
  std::vector<BlockTensors> blocks;
  for (size_t l = 0; l < model.num_blocks(); ++l) blocks.push_back(block_tensors(model.block(l)));

  AtomicFile out(path);
  out.write(header, sizeof header);
  const auto write = [&](const Tensor& t) {
    const Tensor f = t.to(DType::f32).contiguous();
    out.write(f.raw_data(), static_cast<size_t>(f.numel()) * 4);
  };
  // Embedding rows past the vocabulary are zero, as llm.c writes them.
  Tensor table = table_rows(model.embed().weight().value(), padded);
  if (padded > o.vocab) table.narrow(0, o.vocab, padded - o.vocab).fill_(0.0);
  write(table);
  write(model.pos().weight().value());
  // Then one kind of tensor at a time, every layer's in order.
  const auto each = [&](auto member) {
    for (const BlockTensors& b : blocks) member(b);
  };
  each([&](const BlockTensors& b) { write(b.ln1w); });
  each([&](const BlockTensors& b) { write(b.ln1b); });
  each([&](const BlockTensors& b) { write(b.q), write(b.k), write(b.v); });
  each([&](const BlockTensors& b) { write(b.qb), write(b.kb), write(b.vb); });
  each([&](const BlockTensors& b) { write(b.o); });
  each([&](const BlockTensors& b) { write(b.ob); });
  each([&](const BlockTensors& b) { write(b.ln2w); });
  each([&](const BlockTensors& b) { write(b.ln2b); });
  each([&](const BlockTensors& b) { write(b.fc); });
  each([&](const BlockTensors& b) { write(b.fcb); });
  each([&](const BlockTensors& b) { write(b.proj); });
  each([&](const BlockTensors& b) { write(b.projb); });
  write(model.norm().weight().value());
  write(model.norm().bias().value());
  out.commit();
}

}  // namespace

GPTExportFormat parse_gpt_export_format(const std::string& name) { return named(kFormatNames, name, "export format"); }
const char* gpt_export_format_name(GPTExportFormat format) { return name_of(kFormatNames, format); }

void write_gpt_weights(GPT& model, GPTExportFormat format, const std::string& out) {
  switch (format) {
    case GPTExportFormat::hugging_face: return write_hugging_face(model, out);
    case GPTExportFormat::llmc: return write_llmc(model, out);
  }
}

}  // namespace ag
