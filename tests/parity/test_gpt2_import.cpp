// GPT-2's weights in and out (models/gpt/gpt_weights.h) against a PyTorch GPT-2 written with Hugging
// Face's names and Conv1D orientation (tests/parity/torch_gpt2.py): the files of
// tests/parity/fixtures/gpt2/ (make_gpt2_fixtures.py) in every layout give PyTorch's logits and its
// 100 greedy tokens, a 20-step AdamW fine-tune from an imported file follows PyTorch's losses, export
// writes back the very tensors (and the very llm.c file) it read, and bad files are refused by name
// with the model left as it was.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "attograd.h"
#include "attograd/models/gpt/generate.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_options.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/train/io/json_text.h"
#include "tools/parity/parity.h"
#include "support.h"

using namespace ag;
using namespace ag::testing;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return std::string(AG_PARITY_FIXTURES) + "/gpt2/" + name; }

GPTOptions fixture_options() {
  return {.vocab = 97, .block_size = 128, .d_model = 32, .n_head = 4, .n_layers = 2, .dropout = 0.0, .bias = true,
          .activation = Activation::gelu_tanh};
}

// A model of `o` in `dtype` holding the weights of the file at `path`, in eval mode.
std::unique_ptr<GPT> imported_from(const std::string& path, DType dtype, GPTOptions o = fixture_options(),
                                   GPTWeightsLayout* layout = nullptr) {
  manual_seed(5);
  auto m = std::make_unique<GPT>(o);
  m->to(dtype);
  const GPTWeightsLayout l = read_gpt_weights(*m, path);
  if (layout) *layout = l;
  m->eval();
  return m;
}

std::unique_ptr<GPT> imported(const std::string& file, DType dtype, GPTOptions o = fixture_options(),
                              GPTWeightsLayout* layout = nullptr) {
  return imported_from(fixture(file), dtype, o, layout);
}

const SafetensorsFile& expect(DType dtype) {
  static const SafetensorsFile f32 = load_safetensors(fixture("expect_f32.safetensors"));
  static const SafetensorsFile f64 = load_safetensors(fixture("expect_f64.safetensors"));
  return dtype == DType::f32 ? f32 : f64;
}

// The largest |a - b| over the largest |b|: f32 logits are compared relative to their scale.
double relative_error(const Tensor& a, const Tensor& b) {
  const double scale = kernels::amax(kernels::unary(kernels::UnaryOp::abs, b.to(DType::f64)), {}).item();
  return max_abs_diff(a.to(DType::f64), b.to(DType::f64)) / scale;
}

// f64: PyTorch's float64 logits to 1e-10 (the issue asks 1e-5; a LayerNorm eps of 1e-6 instead of
// 1e-5 moves them by about 1e-6). f32: 1e-4 of the logits' scale.
double allowed(DType dtype) { return dtype == DType::f64 ? 1e-10 : 1e-4; }

struct Case {
  const char* file;
  GPTWeightsLayout layout;
};
const Case kCases[] = {{"hf_f32.safetensors", GPTWeightsLayout::hugging_face},
                       {"hf_f64.safetensors", GPTWeightsLayout::hugging_face},
                       {"nanogpt_f32.safetensors", GPTWeightsLayout::nanogpt},
                       {"llmc_f32.bin", GPTWeightsLayout::llmc}};

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("attograd_gpt2_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::vector<Tensor> parameter_values(const GPT& m) {
  std::vector<Tensor> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(p.value().clone());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpt2_import)

BOOST_AUTO_TEST_CASE(every_layout_gives_pytorchs_logits_in_both_dtypes) {
  for (const Case& c : kCases) {
    for (const DType dtype : {DType::f32, DType::f64}) {
      BOOST_TEST_CONTEXT(c.file << " " << dtype_name(dtype)) {
        GPTWeightsLayout layout{};
        auto m = imported(c.file, dtype, fixture_options(), &layout);
        BOOST_TEST(gpt_weights_layout_name(layout) == gpt_weights_layout_name(c.layout));
        const SafetensorsFile& e = expect(dtype);
        const Tensor logits = m->forward(e.find("ids")->indices).value();
        BOOST_TEST(logits.shape() == e.find("logits")->tensor.shape());
        const double err = relative_error(logits, e.find("logits")->tensor);
        BOOST_TEST(err <= allowed(dtype), "relative error " << err);
      }
    }
  }
  // The f64 tolerance bites: the exact GELU instead of the tanh form moves the logits by about 1e-4
  // of their scale, a thousandfold the f64 tolerance (and only just outside the f32 one, which
  // is why both dtypes are checked).
  GPTOptions exact = fixture_options();
  exact.activation = Activation::gelu;
  auto m = imported("hf_f64.safetensors", DType::f64, exact);
  const double err = relative_error(m->forward(expect(DType::f64).find("ids")->indices).value(),
                                    expect(DType::f64).find("logits")->tensor);
  BOOST_TEST(err > 1e3 * allowed(DType::f64), "relative error " << err);
}

BOOST_AUTO_TEST_CASE(a_hundred_greedy_tokens_are_pytorchs) {
  for (const Case& c : kCases) {
    for (const DType dtype : {DType::f32, DType::f64}) {
      BOOST_TEST_CONTEXT(c.file << " " << dtype_name(dtype)) {
        auto m = imported(c.file, dtype);
        const SafetensorsFile& e = expect(dtype);
        GenerateOptions g;
        g.max_new_tokens = 100;
        g.sampling.temperature = 0;
        const std::vector<int64_t> got = generate(*m, e.find("prompt")->indices.data, g);
        const std::vector<int64_t>& want = e.find("greedy")->indices.data;
        BOOST_TEST_REQUIRE(want.size() == 100u);
        BOOST_TEST(got == want, boost::test_tools::per_element());
      }
    }
  }
}

// Twenty AdamW steps from the imported weights on the stored batches: f64 within 1e-10 + 1e-8
// relative of PyTorch's loss at every step (the parity fixtures' f64 tolerance), f32 within 1e-4.
BOOST_AUTO_TEST_CASE(a_fine_tune_from_an_imported_file_follows_pytorch) {
  for (const auto& [file, dtype] : {std::pair{"hf_f64.safetensors", DType::f64}, std::pair{"llmc_f32.bin", DType::f32}}) {
    BOOST_TEST_CONTEXT(file) {
      auto m = imported(file, dtype);
      m->train();
      const SafetensorsFile& e = expect(dtype);
      const Indices& ids = e.find("finetune.ids")->indices;
      const Indices& targets = e.find("finetune.targets")->indices;
      const std::vector<double> want = e.find("finetune.loss")->tensor.to_vector();
      AdamWOptions o;
      o.lr = 3e-3, o.beta1 = 0.9, o.beta2 = 0.95, o.eps = 1e-8, o.weight_decay = 0.1;
      AdamW optimizer(m->named_parameters(), o);
      const int64_t B = ids.shape[1], T = ids.shape[2];
      for (size_t s = 0; s < want.size(); ++s) {
        const auto step = [&](const Indices& all) {
          const auto first = all.data.begin() + static_cast<std::ptrdiff_t>(s * B * T);
          return Indices(Shape{B, T}, std::vector<int64_t>(first, first + B * T));
        };
        optimizer.zero_grad();
        const Variable loss = cross_entropy(m->forward(step(ids)), step(targets));
        const double tol = dtype == DType::f64 ? 1e-10 + 1e-8 * std::abs(want[s]) : parity::kTrainingLossAtol;
        BOOST_TEST(std::abs(loss.item() - want[s]) <= tol, "step " << s << ": " << loss.item() << " vs " << want[s]);
        loss.backward();
        optimizer.step();
      }
      BOOST_TEST(want.back() < want.front() - 0.1);
    }
  }
}

// Export is import's inverse: the Hugging Face export holds the fixture's tensors bit for bit
// (unprefixed, no buffers, no head) with GPT-2's config keys, and the llm.c export is the
// fixture's file byte for byte. Both read back to the same logits.
BOOST_AUTO_TEST_CASE(export_writes_back_what_was_imported) {
  TempDir dir;
  auto m = imported("hf_f64.safetensors", DType::f64);
  write_gpt_weights(*m, GPTExportFormat::hugging_face, dir.file("hf"));
  const SafetensorsFile written = load_safetensors(dir.file("hf/model.safetensors"));
  const SafetensorsFile original = load_safetensors(fixture("hf_f64.safetensors"));
  BOOST_TEST(written.entries.size() == original.entries.size());
  for (const SafetensorsEntry& e : original.entries) {
    const SafetensorsEntry* w = written.find(e.name);
    BOOST_TEST_REQUIRE(w != nullptr, e.name);
    BOOST_TEST(w->tensor.shape() == e.tensor.shape(), e.name);
    BOOST_TEST(max_abs_diff(w->tensor, e.tensor) == 0.0, e.name);
  }
  BOOST_TEST(written.metadata.at("format") == "pt");
  const Json config = parse_json(read_file(dir.file("hf/config.json")));
  BOOST_TEST(config.at("model_type") == "gpt2");
  BOOST_TEST(config.at("architectures")[0] == "GPT2LMHeadModel");
  BOOST_TEST(config.at("activation_function") == "gelu_new");
  BOOST_TEST(config.at("n_embd") == 32);
  BOOST_TEST(config.at("n_head") == 4);
  BOOST_TEST(config.at("n_layer") == 2);
  BOOST_TEST(config.at("n_positions") == 128);
  BOOST_TEST(config.at("n_ctx") == 128);
  BOOST_TEST(config.at("vocab_size") == 97);
  BOOST_TEST(config.at("layer_norm_epsilon") == 1e-5);

  auto f32 = imported("llmc_f32.bin", DType::f32);
  write_gpt_weights(*f32, GPTExportFormat::llmc, dir.file("model.bin"));
  BOOST_TEST((bytes_of(dir.file("model.bin")) == bytes_of(fixture("llmc_f32.bin"))));

  // A padded model (128 rows, 31 of them padding) reads the same, and writes the same .bin.
  GPTOptions padded = fixture_options();
  padded.vocab_multiple = 64;
  auto p = imported("hf_f32.safetensors", DType::f32, padded);
  BOOST_TEST(p->embed().weight().shape() == Shape({128, 32}));
  BOOST_TEST(kernels::amax(kernels::unary(kernels::UnaryOp::abs, p->embed().weight().value().narrow(0, 97, 31)), {}).item() == 0.0);
  BOOST_TEST(relative_error(p->forward(expect(DType::f32).find("ids")->indices).value(),
                            expect(DType::f32).find("logits")->tensor) <= allowed(DType::f32));
  write_gpt_weights(*p, GPTExportFormat::llmc, dir.file("padded.bin"));
  BOOST_TEST((bytes_of(dir.file("padded.bin")) == bytes_of(fixture("llmc_f32.bin"))));

  // Read back, each export gives the logits again.
  for (const std::string& back : {dir.file("hf/model.safetensors"), dir.file("model.bin")}) {
    manual_seed(6);
    GPT again(fixture_options());
    again.to(DType::f64);
    read_gpt_weights(again, back);
    BOOST_TEST(relative_error(again.forward(expect(DType::f64).find("ids")->indices).value(),
                              expect(DType::f64).find("logits")->tensor) <= allowed(DType::f64), back);
  }
}

// A model of a shorter context takes the first rows of the file's positions (nanoGPT's crop):
// its logits are PyTorch's for the positions it has; a longer context is refused.
BOOST_AUTO_TEST_CASE(a_shorter_context_takes_the_first_positions) {
  GPTOptions shorter = fixture_options();
  shorter.block_size = 32;  // the ids are 24 long
  for (const char* file : {"hf_f64.safetensors", "nanogpt_f32.safetensors", "llmc_f32.bin"}) {
    BOOST_TEST_CONTEXT(file) {
      auto m = imported(file, DType::f64, shorter);
      BOOST_TEST(m->pos().weight().shape() == Shape({32, 32}));
      BOOST_TEST(relative_error(m->forward(expect(DType::f64).find("ids")->indices).value(),
                                expect(DType::f64).find("logits")->tensor) <= allowed(DType::f64));
    }
  }
  GPTOptions longer = fixture_options();
  longer.block_size = 256;
  GPT m(longer);
  AG_CHECK_THROWS_WITH(read_gpt_weights(m, fixture("hf_f64.safetensors")), std::runtime_error, "'wpe.weight'", "(128, 32)",
                       "(256, 32)");
  AG_CHECK_THROWS_WITH(read_gpt_weights(m, fixture("llmc_f32.bin")), std::runtime_error, "max_seq_len is 128",
                       "block_size 256");
}

BOOST_AUTO_TEST_CASE(llmc_cannot_express_the_exact_gelu_and_nothing_is_written) {
  TempDir dir;
  GPTOptions exact = fixture_options();
  exact.activation = Activation::gelu;
  auto m = imported("hf_f32.safetensors", DType::f32, exact);
  AG_CHECK_THROWS_WITH(write_gpt_weights(*m, GPTExportFormat::llmc, dir.file("x.bin")), std::invalid_argument,
                       "llm.c", "gelu_tanh", "export it as hf");
  BOOST_TEST(!fs::exists(dir.file("x.bin")));
  write_gpt_weights(*m, GPTExportFormat::hugging_face, dir.file("hf"));
  BOOST_TEST(parse_json(read_file(dir.file("hf/config.json"))).at("activation_function") == "gelu");
}

// Each bad file is refused with its path, the tensor and both shapes where they differ, and the
// model keeps the weights it had.
BOOST_AUTO_TEST_CASE(bad_files_are_refused_by_name_and_change_nothing) {
  TempDir dir;
  manual_seed(7);
  GPT model(fixture_options());
  const std::vector<Tensor> before = parameter_values(model);
  const auto refused = [&](const std::string& path, std::initializer_list<std::string> parts, GPT& m) {
    for (const std::string& part : parts) AG_CHECK_THROWS_WITH(read_gpt_weights(m, path), std::runtime_error, part);
  };
  const SafetensorsFile hf = load_safetensors(fixture("hf_f64.safetensors"));
  const auto without = [&](const std::string& name, const std::string& prefix) {
    SafetensorsFile f;
    for (const SafetensorsEntry& e : hf.entries) {
      if (e.name.rfind(prefix, 0) != 0) f.add(e.name, e.tensor);
    }
    const std::string path = dir.file(name);
    save_safetensors(path, f);
    return path;
  };
  // An HF file missing its second layer, or one tensor of it.
  refused(without("no_layer.safetensors", "h.1."), {"no_layer.safetensors", "1 layers", "the model 2"}, model);
  refused(without("no_fc.safetensors", "h.1.mlp.c_fc.weight"),
          {"no_fc.safetensors", "'h.1.mlp.c_fc.weight'", "blocks.1.ff.linear1.weight", "(32, 128)"}, model);
  // Another architecture: a Llama-style file.
  {
    SafetensorsFile f;
    f.add("model.embed_tokens.weight", zeros(Shape{97, 32}));
    f.add("model.layers.0.self_attn.q_proj.weight", zeros(Shape{32, 32}));
    save_safetensors(dir.file("llama.safetensors"), f);
  }
  refused(dir.file("llama.safetensors"), {"llama.safetensors", "model.embed_tokens.weight", "another architecture"}, model);
  // A wrong vocabulary: the file's 97 tokens for a model of 98.
  GPTOptions wider = fixture_options();
  wider.vocab = 98;
  GPT wide(wider);
  refused(fixture("hf_f64.safetensors"), {"'wte.weight'", "(97, 32)", "(98, 32)", "vocab is 98"}, wide);
  refused(fixture("llmc_f32.bin"), {"llmc_f32.bin", "vocab_size is 97", "vocab 98"}, wide);
  // Another size: a wider model.
  GPTOptions other = fixture_options();
  other.d_model = 48;
  GPT wider_model(other);
  refused(fixture("hf_f64.safetensors"), {"'h.0.attn.c_attn.weight'", "(32, 96)", "d_model 48"}, wider_model);

  // A truncated safetensors file: its header's index names the tensor that no longer fits.
  const std::vector<char> st = bytes_of(fixture("hf_f64.safetensors"));
  write_bytes(dir.file("cut.safetensors"), std::vector<char>(st.begin(), st.end() - 8));
  refused(dir.file("cut.safetensors"), {"cut.safetensors", "data truncated", "'ln_f.bias'"}, model);
  const std::vector<char> bin = bytes_of(fixture("llmc_f32.bin"));
  std::vector<char> cut(bin.begin(), bin.end() - 100);
  write_bytes(dir.file("cut.bin"), cut);
  refused(dir.file("cut.bin"), {"cut.bin", "truncated", "'lnfb'"}, model);
  std::vector<char> head_only(bin.begin(), bin.begin() + 100);
  write_bytes(dir.file("head.bin"), head_only);
  refused(dir.file("head.bin"), {"head.bin", "truncated llm.c header"}, model);
  std::vector<char> magic = bin;
  magic[0] ^= 1;
  write_bytes(dir.file("magic.bin"), magic);
  refused(dir.file("magic.bin"), {"magic.bin", "neither a safetensors file", "llm.c's magic is 20240326"}, model);
  for (const int32_t version : {5, 4}) {
    std::vector<char> v = bin;
    std::memcpy(v.data() + 4, &version, 4);
    write_bytes(dir.file("version.bin"), v);
    refused(dir.file("version.bin"), {"version.bin", version == 5 ? "bfloat16" : "unknown llm.c version 4"}, model);
  }
  // An untied head.
  {
    SafetensorsFile f;
    for (const SafetensorsEntry& e : hf.entries) f.add(e.name, e.tensor);
    f.add("lm_head.weight", kernels::affine(hf.find("wte.weight")->tensor, 1.0, 1e-3));
    save_safetensors(dir.file("untied.safetensors"), f);
  }
  refused(dir.file("untied.safetensors"), {"'lm_head.weight' differs from 'wte.weight'"}, model);
  // One tensor under both spellings, with different values: neither can be taken for the model's.
  {
    SafetensorsFile f;
    for (const SafetensorsEntry& e : hf.entries) f.add(e.name, e.tensor);
    f.add("transformer.ln_f.bias", kernels::affine(hf.find("ln_f.bias")->tensor, 1.0, 1.0));
    save_safetensors(dir.file("twice.safetensors"), f);
  }
  refused(dir.file("twice.safetensors"), {"twice.safetensors", "'ln_f.bias'", "'transformer.ln_f.bias'", "two names"}, model);
  // A weight no trained model has, anywhere in the file (here the last layer's MLP and, for
  // Conv1D's shared c_attn, its value part), named with its tensor and element.
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity(), 3e38}) {
    for (const char* name : {"h.1.mlp.c_proj.weight", "h.0.attn.c_attn.weight"}) {
      SafetensorsFile f;
      for (const SafetensorsEntry& e : hf.entries) {
        Tensor t = e.tensor.clone();
        if (e.name == name) t.set({5, t.shape()[1] - 1}, bad);
        f.add(e.name, t);
      }
      save_safetensors(dir.file("bad.safetensors"), f);
      refused(dir.file("bad.safetensors"), {"bad.safetensors", std::string("'") + name + "'", "must be finite"}, model);
    }
  }
  {
    std::vector<char> v = bin;
    const float huge = 3e38f;
    std::memcpy(v.data() + v.size() - 4, &huge, 4);  // lnfb's last element
    write_bytes(dir.file("huge.bin"), v);
    refused(dir.file("huge.bin"), {"huge.bin", "'lnfb'", "3e+38", "element 31"}, model);
  }
  // llm.c's model is the tanh GELU's: its weights in a model of the exact GELU are refused.
  GPTOptions exact = fixture_options();
  exact.activation = Activation::gelu;
  GPT exact_model(exact);
  refused(fixture("llmc_f32.bin"), {"llmc_f32.bin", "tanh GELU", "--activation gelu_tanh"}, exact_model);

  const std::vector<Tensor> after = parameter_values(model);
  for (size_t i = 0; i < before.size(); ++i) BOOST_TEST(max_abs_diff(before[i], after[i]) == 0.0);
}

// Half precision, as Hugging Face ships many GPT-2s: the same weights rounded by PyTorch to F16 and
// BF16 import into float32 within the rounding of their format (half an ulp: 2^-11 of the value
// for F16, plus its subnormals' step 2^-24; 2^-8 for BF16) of the float64 file's.
BOOST_AUTO_TEST_CASE(half_precision_files_import_within_their_rounding) {
  auto exact = imported("hf_f64.safetensors", DType::f64);
  struct Half {
    const char* file;
    double relative, absolute;
  };
  for (const Half& h : {Half{"hf_f16.safetensors", std::ldexp(1.0, -11), std::ldexp(1.0, -24)},
                        Half{"hf_bf16.safetensors", std::ldexp(1.0, -8), 0.0}}) {
    BOOST_TEST_CONTEXT(h.file) {
      GPTWeightsLayout layout{};
      auto half = imported(h.file, DType::f32, fixture_options(), &layout);
      BOOST_TEST(gpt_weights_layout_name(layout) == std::string("Hugging Face"));
      const auto want = exact->named_parameters();
      const auto got = half->named_parameters();
      BOOST_REQUIRE(want.size() == got.size());
      int64_t rounded = 0, total = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const Tensor r = want[i].second.value().reshape({-1});
        const Tensor g = got[i].second.value().to(DType::f64).reshape({-1});
        for (int64_t j = 0; j < r.numel(); ++j) {
          const double a = g.at({j}), b = r.at({j});
          if (std::abs(a - b) > h.relative * std::abs(b) + h.absolute) {
            BOOST_ERROR(want[i].first << "[" << j << "]: " << a << " against " << b);
            break;
          }
          rounded += a != b;
          ++total;
        }
      }
      BOOST_TEST(rounded > total / 2);  // the file was rounded: a test of the conversion, not a copy
    }
  }
}

BOOST_AUTO_TEST_CASE(half_values_widen_exactly) {
  BOOST_TEST(f16_to_float(0x3C00) == 1.0f);
  BOOST_TEST(f16_to_float(0xC000) == -2.0f);
  BOOST_TEST(f16_to_float(0x7BFF) == 65504.0f);                // the largest
  BOOST_TEST(f16_to_float(0x0400) == std::ldexp(1.0f, -14));   // the smallest normal
  BOOST_TEST(f16_to_float(0x0001) == std::ldexp(1.0f, -24));   // the smallest subnormal
  BOOST_TEST(f16_to_float(0x03FF) == std::ldexp(1023.0f, -24));  // the largest subnormal
  BOOST_TEST(std::signbit(f16_to_float(0x8000)));
  BOOST_TEST(f16_to_float(0x7C00) == std::numeric_limits<float>::infinity());
  BOOST_TEST(std::isnan(f16_to_float(0x7E00)));
  BOOST_TEST(bf16_to_float(0x3F80) == 1.0f);
  BOOST_TEST(bf16_to_float(0xC2F7) == -123.5f);
  BOOST_TEST(bf16_to_float(0xFF80) == -std::numeric_limits<float>::infinity());
}

// An attograd checkpoint is the fourth layout: the fine-tuned model's own file, checked against
// its options and checksums.
BOOST_AUTO_TEST_CASE(an_attograd_checkpoint_is_read_and_checked) {
  TempDir dir;
  auto m = imported("hf_f32.safetensors", DType::f32);
  save_checkpoint(dir.file("ck.safetensors"), m->named_parameters(), {{"model", gpt_options_to_json(m->options())}},
                  GeneratorState{}, 0);
  GPTWeightsLayout layout{};
  auto back = imported_from(dir.file("ck.safetensors"), DType::f32, fixture_options(), &layout);
  BOOST_TEST(gpt_weights_layout_name(layout) == std::string("attograd"));
  BOOST_TEST(max_abs_diff(back->embed().weight().value(), m->embed().weight().value()) == 0.0);
  GPTOptions heads = fixture_options();
  heads.n_head = 2;
  GPT two_heads(heads);
  AG_CHECK_THROWS_WITH(read_gpt_weights(two_heads, dir.file("ck.safetensors")), std::runtime_error, "n_head 4",
                       "this model 2");
}

BOOST_AUTO_TEST_SUITE_END()
