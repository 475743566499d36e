// The Llama family against its PyTorch twin (tests/parity/torch_llama.py, written from the
// architecture's published definition; fixtures by make_llama_fixtures.py):
//   * each layer alone (RMSNorm, rotary, SwiGLU, grouped-query attention as Llama, Qwen2 and Qwen3
//     have it, the decoder layer): output and every gradient within 1e-10 in float64;
//   * Hugging Face directories the twin wrote (Llama untied with Llama 3 scaling in F32 and BF16,
//     Qwen2 with biases in two shards, Qwen3 with q/k norms): the twin's logits (float64 within
//     1e-10, float32 within 1e-4 of their scale), its 100 greedy tokens cached and uncached, and
//     its losses over 20 steps of a LoRA fine-tune (rank 4 on q_proj and v_proj, AdamW);
//   * what write_llama_hf exports after that fine-tune reads back to the fine-tuned logits.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "attograd.h"
#include "attograd/models/llama/llama.h"
#include "attograd/train/text_score.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/train/io/json_text.h"
#include "support.h"
#include "tools/parity/parity.h"

using namespace ag;
using namespace ag::testing;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return std::string(AG_PARITY_FIXTURES) + "/llama/" + name; }

const SafetensorsFile& layer_fixtures() {
  static const SafetensorsFile f = load_safetensors(fixture("layers.safetensors"));
  return f;
}

const Tensor& tensor(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsEntry* e = f.find(name);
  BOOST_REQUIRE_MESSAGE(e != nullptr, "fixture tensor " << name << " is missing");
  return e->tensor;
}

const Indices& indices(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsEntry* e = f.find(name);
  BOOST_REQUIRE_MESSAGE(e != nullptr, "fixture tensor " << name << " is missing");
  return e->indices;
}

// The largest |a - b| over the largest |b|.
double relative_error(const Tensor& a, const Tensor& b) {
  const double scale = kernels::amax(kernels::unary(kernels::UnaryOp::abs, b.to(DType::f64)), {}).item();
  return max_abs_diff(a.to(DType::f64), b.to(DType::f64)) / scale;
}

RopeScaling scaling_of(const Json& c) {
  RopeScaling s;
  if (!c.contains("rope_scaling") || c["rope_scaling"].is_null()) return s;
  const Json& r = c["rope_scaling"];
  s.kind = RopeScaling::Kind::llama3;
  s.factor = r["factor"];
  s.low_freq_factor = r["low_freq_factor"];
  s.high_freq_factor = r["high_freq_factor"];
  s.original_max_position_embeddings = r["original_max_position_embeddings"];
  return s;
}

// A resolved config of the twin as the layers' options.
GroupedQueryAttentionOptions attention_options(const Json& c) {
  GroupedQueryAttentionOptions o;
  o.d_model = c["hidden_size"];
  o.n_head = c["num_attention_heads"];
  o.n_kv_head = c["num_key_value_heads"];
  o.head_dim = c["head_dim"];
  o.qkv_bias = c["attention_bias"];
  o.qk_norm = c["qk_norm"];
  o.norm_eps = c["rms_norm_eps"];
  o.rotary.max_positions = c["max_position_embeddings"];
  o.rotary.theta = c["rope_theta"];
  o.rotary.scaling = scaling_of(c);
  return o;
}

// Loads the case's parameters into `m`, runs forward(x) and backward(g), and holds the output,
// dx and every parameter's gradient to the twin's within 1e-10.
template <class M, class F>
void check_layer_case(const std::string& c, M& m, F forward) {
  const SafetensorsFile& f = layer_fixtures();
  m.to(DType::f64);
  StateDict state;
  for (const auto& [name, p] : m.named_parameters()) state.emplace_back(name, tensor(f, c + ".param." + name));
  m.load_state_dict(state);
  const Variable x(tensor(f, c + ".x"), true, "x");
  const Variable y = forward(m, x);
  y.backward(tensor(f, c + ".g"));
  BOOST_TEST(max_abs_diff(y.value(), tensor(f, c + ".y")) < 1e-10, c << ": output");
  BOOST_TEST(max_abs_diff(x.grad(), tensor(f, c + ".dx")) < 1e-10, c << ": dx");
  for (const auto& [name, p] : m.named_parameters()) {
    BOOST_TEST(max_abs_diff(p.grad(), tensor(f, c + ".grad." + name)) < 1e-10, c << ": gradient of " << name);
  }
}

std::unique_ptr<Llama> loaded(const std::string& variant, DType dtype) {
  std::unique_ptr<Llama> m = load_llama_hf(fixture(variant));
  m->to(dtype);
  m->eval();
  return m;
}

const char* const kVariants[] = {"llama_f32", "llama_bf16", "qwen2_sharded", "qwen3_f32"};

BOOST_AUTO_TEST_SUITE(llama_parity)

BOOST_AUTO_TEST_CASE(each_layer_matches_the_twin_in_float64) {
  const Json cases = parse_json(layer_fixtures().metadata.at("cases"));
  RMSNorm norm(32, cases["rms_norm"]["eps"].get<double>());
  check_layer_case("rms_norm", norm, [](RMSNorm& m, const Variable& x) { return m(x); });
  SwiGLU mlp(32, 48);
  check_layer_case("swiglu", mlp, [](SwiGLU& m, const Variable& x) { return m(x); });
  RotaryOptions r;
  r.head_dim = 8;
  r.max_positions = 16;
  r.theta = cases["rotary"]["theta"];
  r.scaling = scaling_of(cases["rotary"]["scaling"].is_null() ? Json::object() : Json{{"rope_scaling", cases["rotary"]["scaling"]}});
  RotaryEmbedding rope(r);
  const int64_t offset = cases["rotary"]["offset"];
  check_layer_case("rotary", rope, [offset](RotaryEmbedding& m, const Variable& x) { return m(x, offset); });
  for (const std::string variant : {"llama_f32", "qwen2_sharded", "qwen3_f32"}) {
    const Json& c = cases["attention_" + variant];
    GroupedQueryAttention attn(attention_options(c));
    check_layer_case("attention_" + variant, attn,
                     [](GroupedQueryAttention& m, const Variable& x) { return m(x, AttentionMask::causal(x.shape()[1])); });
    LlamaBlockOptions b;
    b.attention = attention_options(c);
    b.d_hidden = c["intermediate_size"];
    b.norm_eps = c["rms_norm_eps"];
    LlamaBlock block(b);
    check_layer_case("block_" + variant, block,
                     [](LlamaBlock& m, const Variable& x) { return m(x, AttentionMask::causal(x.shape()[1])); });
  }
}

BOOST_AUTO_TEST_CASE(hugging_face_directories_give_the_twins_logits) {
  for (const char* variant : kVariants) {
    BOOST_TEST_CONTEXT(variant) {
      const SafetensorsFile e = load_safetensors(fixture(std::string(variant) + ".expect.safetensors"));
      const Indices& ids = indices(e, "ids");
      const Tensor f64 = loaded(variant, DType::f64)->forward(ids).value();
      BOOST_TEST(max_abs_diff(f64, tensor(e, "logits.f64")) < 1e-10);
      const Tensor f32 = loaded(variant, DType::f32)->forward(ids).value();
      BOOST_TEST(relative_error(f32, tensor(e, "logits.f32")) < 1e-4);
    }
  }
  // The BF16 file is the F32 one rounded: the logits move, and the rounded weights are what count.
  const SafetensorsFile a = load_safetensors(fixture("llama_f32.expect.safetensors"));
  const SafetensorsFile b = load_safetensors(fixture("llama_bf16.expect.safetensors"));
  BOOST_TEST(max_abs_diff(tensor(a, "logits.f64"), tensor(b, "logits.f64")) > 1e-4);
}

// The sliding-window score of a 61-token text (windows of 24 every 8, each token scored once)
// is the twin's sum of -ln p within 1e-10 relative, in float64.
BOOST_AUTO_TEST_CASE(sliding_window_perplexity_is_the_twins) {
  for (const char* variant : kVariants) {
    BOOST_TEST_CONTEXT(variant) {
      const SafetensorsFile e = load_safetensors(fixture(std::string(variant) + ".expect.safetensors"));
      const std::vector<int64_t> text = indices(e, "perplexity.ids").data;
      const double want = tensor(e, "perplexity.nats").to_vector()[0];
      const std::unique_ptr<Llama> m = loaded(variant, DType::f64);
      const std::vector<int64_t> one_byte_each(static_cast<size_t>(m->options().vocab), 1);
      const TextScore s = sliding_window_perplexity(*m, text, one_byte_each, {.window = 24, .stride = 8, .batch = 2});
      BOOST_TEST(std::abs(s.nats - want) <= 1e-10 * std::abs(want), s.nats << " vs " << want);
      BOOST_TEST(s.tokens == 60);
      BOOST_TEST(s.windows == 6);
    }
  }
}

// 100 argmax tokens after the prompt, one forward per token over the whole sequence, and one new
// position per step through the cache: both are the twin's tokens.
BOOST_AUTO_TEST_CASE(greedy_tokens_are_the_twins_cached_and_uncached) {
  for (const char* variant : kVariants) {
    BOOST_TEST_CONTEXT(variant) {
      const SafetensorsFile e = load_safetensors(fixture(std::string(variant) + ".expect.safetensors"));
      const std::vector<int64_t> want = indices(e, "greedy").data;
      const std::unique_ptr<Llama> m = loaded(variant, DType::f64);
      NoGradGuard no_grad;
      const auto argmax_last = [](const Tensor& logits) {
        const Tensor last = logits.narrow(1, logits.shape()[1] - 1, 1).reshape({logits.shape()[2]});
        int64_t best = 0;
        for (int64_t j = 1; j < last.numel(); ++j) best = last.at({j}) > last.at({best}) ? j : best;
        return best;
      };
      std::vector<int64_t> seq = indices(e, "prompt").data, uncached, cached;
      for (size_t s = 0; s < want.size(); ++s) {
        const int64_t t = argmax_last(m->forward(Indices(Shape{1, static_cast<int64_t>(seq.size())}, seq)).value());
        uncached.push_back(t);
        seq.push_back(t);
      }
      KvCache cache = m->make_cache(1, 128);
      const std::vector<int64_t>& prompt = indices(e, "prompt").data;
      Tensor logits = m->forward(Indices(Shape{1, static_cast<int64_t>(prompt.size())}, prompt), cache).value();
      for (size_t s = 0; s < want.size(); ++s) {
        cached.push_back(argmax_last(logits));
        logits = m->forward(Indices(Shape{1, 1}, {cached.back()}), cache).value();
      }
      BOOST_TEST(uncached == want, boost::test_tools::per_element());
      BOOST_TEST(cached == want, boost::test_tools::per_element());
    }
  }
}

// LoRA on q_proj and v_proj from the twin's initial A matrices: every step's loss within 1e-10
// (plus 1e-8 relative) of the twin's; then the export, with the updates merged, reads back to the
// fine-tuned model's logits (F32 exactly, BF16 within its rounding).
BOOST_AUTO_TEST_CASE(a_lora_fine_tune_follows_the_twin_and_exports_merged) {
  for (const char* variant : kVariants) {
    BOOST_TEST_CONTEXT(variant) {
      const SafetensorsFile e = load_safetensors(fixture(std::string(variant) + ".expect.safetensors"));
      const Json lora = parse_json(e.metadata.at("lora"));
      std::unique_ptr<Llama> m = loaded(variant, DType::f64);
      m->train();
      LoRAOptions lo;
      lo.rank = lora["rank"];
      lo.alpha = lora["alpha"];
      const std::vector<std::string> paths = apply_lora(*m, {"q_proj", "v_proj"}, lo);
      BOOST_REQUIRE_EQUAL(paths.size(), 4u);
      // The base frozen (peft's way), A from the twin.
      for (const auto& [name, p] : m->named_parameters()) {
        Variable handle = p;
        if (name.ends_with(".lora_a")) handle.mutable_value().copy_(tensor(e, "lora.a." + name.substr(0, name.size() - 7)));
        else if (!name.ends_with(".lora_b")) handle.set_requires_grad(false);
      }
      AdamWOptions o;
      o.lr = lora["adamw"]["lr"], o.beta1 = lora["adamw"]["betas"][0], o.beta2 = lora["adamw"]["betas"][1];
      o.eps = lora["adamw"]["eps"], o.weight_decay = lora["adamw"]["weight_decay"];
      AdamW optimizer(m->trainable_parameters(), o);
      const Indices& ids = indices(e, "lora.ids");
      const Indices& targets = indices(e, "lora.targets");
      const std::vector<double> want = tensor(e, "lora.loss").to_vector();
      const int64_t B = ids.shape[1], T = ids.shape[2];
      const auto step_of = [&](const Indices& all, size_t s) {
        const auto first = all.data.begin() + static_cast<std::ptrdiff_t>(s * B * T);
        return Indices(Shape{B, T}, std::vector<int64_t>(first, first + B * T));
      };
      for (size_t s = 0; s < want.size(); ++s) {
        optimizer.zero_grad();
        const Variable loss = m->loss(step_of(ids, s), step_of(targets, s));
        BOOST_TEST(std::abs(loss.item() - want[s]) <= 1e-10 + 1e-8 * std::abs(want[s]),
                   "step " << s << ": " << loss.item() << " vs " << want[s]);
        loss.backward();
        optimizer.step();
      }
      BOOST_TEST(want.back() < want.front() - 0.05);
      // The export merges the adapters: a plain model reads back what the adapted one computes.
      m->eval();
      m->to(DType::f32);
      const Indices& probe = indices(e, "ids");
      const Tensor tuned = m->forward(probe).value();
      const fs::path dir = fs::temp_directory_path() / ("attograd_llama_export_" + std::to_string(::getpid()));
      write_llama_hf(*m, dir.string());
      BOOST_TEST(relative_error(load_llama_hf(dir.string())->forward(probe).value(), tuned) < 1e-5);
      write_llama_hf(*m, dir.string(), HfWeightsDType::bf16);
      BOOST_TEST(relative_error(load_llama_hf(dir.string())->forward(probe).value(), tuned) < 5e-2);
      fs::remove_all(dir);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
