// The Llama family (models/llama/): the whole model gradient-checked in float64 (inputs and every
// parameter, tied and untied, Qwen2's biases, Qwen3's norms), its loss equal to cross-entropy of
// its logits, cached decoding equal to the uncached forward, the presets' published sizes, and
// Hugging Face directories written and read back (F32, BF16, sharded) with malformed ones refused
// naming the file. Its values against a PyTorch twin: tests/parity/test_llama_parity.cpp.
#include <filesystem>
#include <fstream>

#include "attograd/models/llama/llama.h"
#include "attograd/models/llama/llama_generate.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/train/io/safetensors.h"
#include "models_support.h"

namespace ag::testing {
namespace {

namespace fs = std::filesystem;

LlamaOptions tiny_llama() {
  LlamaOptions o;
  o.vocab = 11;
  o.max_positions = 16;
  o.d_model = 8;
  o.n_layers = 2;
  o.n_head = 4;
  o.n_kv_head = 2;
  o.d_hidden = 12;
  o.rms_norm_eps = 1e-5;
  o.rope_theta = 100.0;
  return o;
}

struct Variant {
  const char* what;
  bool tied, bias, qk_norm;
};
const std::vector<Variant> kVariants = {
    {"Llama, untied", false, false, false}, {"SmolLM, tied", true, false, false},
    {"Qwen2, biases", false, true, false},  {"Qwen3, q/k norms, tied", true, false, true}};

LlamaOptions variant(const Variant& v) {
  LlamaOptions o = tiny_llama();
  o.tie_word_embeddings = v.tied;
  o.attention_bias = v.bias;
  o.qk_norm = v.qk_norm;
  return o;
}

// A scratch directory removed at the end of the test.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

Indices some_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> v(static_cast<size_t>(B * T));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<int64_t>(Generator::uniform_f64(seed, i) * static_cast<double>(vocab)) % vocab;
  }
  return Indices(Shape{B, T}, v);
}

BOOST_AUTO_TEST_SUITE(llama)

BOOST_AUTO_TEST_CASE(the_model_gradchecks_on_embeddings_and_every_parameter) {
  for (const Variant& v : kVariants) {
    BOOST_TEST_CONTEXT(v.what) {
      manual_seed(3);
      Llama model(variant(v));
      BOOST_TEST(model.num_parameters() == llama_parameter_count(variant(v)));
      const LayerCheckReport r = check_layer(
          model, [](Llama& m, const std::vector<Variable>& in) { return m.forward_embedded(in[0]); },
          {randn_leaf({2, 5, 8}, 4, "x")}, [&] {
            LayerCheckOptions o;
            o.make_twin = [v] { return std::make_unique<Llama>(variant(v)); };
            // From the embeddings on, an untied model reads its token table nowhere.
            if (!v.tied) o.unused = {"model.embed_tokens.weight"};
            o.log = nullptr;
            return o;
          }());
      BOOST_TEST(r.ok, r.table());
    }
  }
}

BOOST_AUTO_TEST_CASE(loss_is_cross_entropy_of_the_logits_and_recompute_changes_no_bit) {
  manual_seed(5);
  Llama model(variant(kVariants[3]));
  const Indices ids = some_ids(2, 7, 11, 6), targets = some_ids(2, 7, 11, 7);
  const double loss = model.loss(ids, targets).value().item();
  BOOST_TEST(std::abs(loss - cross_entropy(model(ids), targets).value().item()) < 1e-6);
  const auto grads = [&](bool recompute) {
    model.zero_grad();
    model.set_recompute(recompute);
    model.loss(ids, targets).backward();
    std::vector<Tensor> g;
    for (const Variable& p : model.parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const std::vector<Tensor> plain = grads(false), again = grads(true);
  for (size_t i = 0; i < plain.size(); ++i) BOOST_TEST(max_abs_diff(plain[i], again[i]) == 0.0);
}

// Greedy decoding one token at a time through the cache picks what the full forward picks, and
// its logits are the full forward's rows.
BOOST_AUTO_TEST_CASE(cached_decoding_equals_the_uncached_forward) {
  manual_seed(8);
  Llama model(variant(kVariants[0]));
  model.to(DType::f64);
  NoGradGuard no_grad;
  std::vector<int64_t> seq = {3, 1, 4};
  KvCache cache = model.make_cache(1, 16);
  Tensor logits = model.forward(row_ids(seq), cache).value();
  for (int step = 0; step < 12; ++step) {
    const Tensor full = model(row_ids(seq)).value();
    const int64_t T = static_cast<int64_t>(seq.size());
    BOOST_TEST(max_abs_diff(logits.narrow(1, logits.shape()[1] - 1, 1), full.narrow(1, T - 1, 1)) < 1e-12);
    const Tensor last = full.narrow(1, T - 1, 1).reshape({11});
    int64_t best = 0;
    for (int64_t j = 1; j < 11; ++j) best = last.at({j}) > last.at({best}) ? j : best;
    seq.push_back(best);
    logits = model.forward(row_ids({best}), cache).value();
  }
  BOOST_TEST(cache.length() == 15);
  AG_CHECK_THROWS_WITH(model.forward(row_ids({1, 2}), cache), std::invalid_argument, "holds 15", "max_len=16");
  KvCache other = model.make_cache(2);
  AG_CHECK_THROWS_WITH(model.forward(row_ids({1}), other), std::invalid_argument, "batch=2", "make_cache(1)");
}

// generate() with and without the cache, across slides of the window (a context of 16, 40 new
// tokens, shifts of 1 and 5), draws the same tokens, greedy and sampled.
BOOST_AUTO_TEST_CASE(generation_is_the_same_cached_and_uncached_across_window_slides) {
  manual_seed(21);
  Llama model(variant(kVariants[1]));
  const std::vector<int64_t> prompt = {1, 5, 9};
  for (const double temperature : {0.0, 0.9}) {
    for (const int64_t shift : {int64_t{1}, int64_t{5}}) {
      BOOST_TEST_CONTEXT("temperature " << temperature << " shift " << shift) {
        GenerateOptions o;
        o.max_new_tokens = 40;
        o.sampling.temperature = temperature;
        o.sampling.seed = 3;
        o.window_shift = shift;
        const std::vector<int64_t> cached = generate(model, prompt, o);
        o.use_cache = false;
        const std::vector<int64_t> uncached = generate(model, prompt, o);
        BOOST_TEST(cached == uncached, boost::test_tools::per_element());
        BOOST_TEST(cached.size() == 40u);
      }
    }
  }
  // The decoder's window moves once the sequence outgrows the context.
  LlamaDecoder decoder(model, {}, 16);
  decoder.feed(std::vector<int64_t>(16, 2));
  BOOST_TEST(decoder.window_start() == 0);
  decoder.feed({3});
  BOOST_TEST(decoder.window_start() == 1);
  GenerateOptions bad;
  bad.max_new_tokens = 1;
  AG_CHECK_THROWS_WITH(generate(model, {11}, bad), std::invalid_argument, "token id 11", "vocab=11");
  AG_CHECK_THROWS_WITH(LlamaDecoder(model, {}, 17), std::invalid_argument, "max_positions=16", "17");
}

BOOST_AUTO_TEST_CASE(presets_have_their_published_sizes) {
  BOOST_TEST(llama_parameter_count(llama_preset("smollm2-135m")) == 134515008);
  BOOST_TEST(llama_parameter_count(llama_preset("llama3.2-1b")) == 1235814400);
  const LlamaOptions q = llama_preset("qwen3-0.6b");
  BOOST_TEST(q.head_dim == 128);
  BOOST_TEST(q.head_dim * q.n_head != q.d_model);  // Qwen3's heads are wider than d_model / n_head
  manual_seed(1);
  Llama tiny(llama_preset("llama-tiny"));
  BOOST_TEST(tiny.num_parameters() == llama_parameter_count(llama_preset("llama-tiny")));
  AG_CHECK_THROWS_WITH(llama_preset("llama-huge"), std::invalid_argument, "llama-huge", "smollm2-135m");
  LlamaOptions bad = tiny_llama();
  bad.n_kv_head = 3;
  AG_CHECK_THROWS_WITH(Llama{bad}, std::invalid_argument, "n_kv_head=3", "n_head=4");
  bad = tiny_llama();
  bad.d_model = 10;
  AG_CHECK_THROWS_WITH(Llama{bad}, std::invalid_argument, "d_model=10", "head_dim");
}

// Written and read back: F32 to the bit, BF16 to bfloat16's rounding, and the config says the
// architecture that computes the model.
BOOST_AUTO_TEST_CASE(hugging_face_directories_round_trip) {
  for (const Variant& v : kVariants) {
    BOOST_TEST_CONTEXT(v.what) {
      ScratchDir dir("llama-hf");
      manual_seed(9);
      Llama model(variant(v));
      const Indices ids = some_ids(1, 6, 11, 10);
      const Tensor logits = model(ids).value();
      write_llama_hf(model, dir / "f32");
      const LlamaOptions read = llama_options_from_hf_config(dir / "f32/config.json");
      BOOST_TEST(read.qk_norm == v.qk_norm);
      BOOST_TEST(read.attention_bias == v.bias);
      BOOST_TEST(read.tie_word_embeddings == v.tied);
      BOOST_TEST(is_llama_hf_directory(dir / "f32"));
      const std::unique_ptr<Llama> back = load_llama_hf(dir / "f32");
      BOOST_TEST(max_abs_diff((*back)(ids).value(), logits) == 0.0);
      write_llama_hf(model, dir / "bf16", HfWeightsDType::bf16);
      const SafetensorsFile file = load_safetensors(dir / "bf16/model.safetensors");
      BOOST_TEST((file.entries.front().dtype == SafetensorsDType::BF16));
      BOOST_TEST(file.metadata.at("format") == "pt");
      const std::unique_ptr<Llama> half = load_llama_hf(dir / "bf16");
      const Tensor w = model.model().embed_tokens().weight().value();
      const Tensor hw = half->model().embed_tokens().weight().value();
      BOOST_TEST(max_abs_diff(w, hw) <= 0.004 * 0.1);  // N(0, 0.02) weights, 8 bits of mantissa
      BOOST_TEST(max_abs_diff(w, hw) > 0.0);
    }
  }
}

// A sharded directory: two shards and the index that maps every tensor to one of them.
void write_sharded(Llama& model, const ScratchDir& dir, const std::string& missing_from_shard = "") {
  SafetensorsFile a, b;
  a.metadata["format"] = b.metadata["format"] = "pt";
  std::string map;
  int i = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const bool first = i++ % 2 == 0;
    if (name != missing_from_shard) (first ? a : b).add(name, p.value());
    map += std::string(map.empty() ? "" : ",") + "\"" + name + "\":\"model-0000" + (first ? "1" : "2") +
           "-of-00002.safetensors\"";
  }
  save_safetensors(dir / "model-00001-of-00002.safetensors", a);
  save_safetensors(dir / "model-00002-of-00002.safetensors", b);
  std::ofstream(dir / "model.safetensors.index.json") << "{\"metadata\":{},\"weight_map\":{" << map << "}}";
  std::ofstream(dir / "config.json") << llama_hf_config_json(model.options());
}

BOOST_AUTO_TEST_CASE(sharded_directories_load_and_malformed_ones_name_the_file) {
  manual_seed(11);
  Llama model(variant(kVariants[2]));
  const Indices ids = some_ids(1, 5, 11, 12);
  const Tensor logits = model(ids).value();
  {
    ScratchDir dir("llama-shards");
    write_sharded(model, dir);
    BOOST_TEST(max_abs_diff((*load_llama_hf(dir.path.string()))(ids).value(), logits) == 0.0);
    // A truncated shard.
    fs::resize_file(dir / "model-00002-of-00002.safetensors", fs::file_size(dir / "model-00002-of-00002.safetensors") - 8);
    AG_CHECK_THROWS_WITH(load_llama_hf(dir.path.string()), std::runtime_error, "model-00002-of-00002.safetensors");
    // A missing shard.
    fs::remove(dir / "model-00002-of-00002.safetensors");
    AG_CHECK_THROWS_WITH(load_llama_hf(dir.path.string()), std::runtime_error, "model.safetensors.index.json",
                         "model-00002-of-00002.safetensors", "missing");
  }
  {
    ScratchDir dir("llama-shards");
    write_sharded(model, dir, "model.norm.weight");  // the index names it, no shard has it
    AG_CHECK_THROWS_WITH(load_llama_hf(dir.path.string()), std::runtime_error, "model.norm.weight", "no such tensor");
  }
  {
    ScratchDir dir("llama-shards");
    write_llama_hf(model, dir.path.string());
    // The config and the tensors disagree: a wider MLP in the config.
    LlamaOptions wide = model.options();
    wide.d_hidden = 16;
    std::ofstream(dir / "config.json") << llama_hf_config_json(wide);
    AG_CHECK_THROWS_WITH(load_llama_hf(dir.path.string()), std::runtime_error, "model.safetensors",
                         "mlp.down_proj.weight", "(8, 12)", "(8, 16)");
    // Another architecture, and a scaling this model cannot compute.
    std::ofstream(dir / "config.json") << R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})";
    AG_CHECK_THROWS_WITH(load_llama_hf(dir.path.string()), std::runtime_error, "config.json", "gpt2",
                         "LlamaForCausalLM");
    std::string config = llama_hf_config_json(model.options());
    config.replace(config.find("\"rope_scaling\": null"), 20, R"("rope_scaling": {"rope_type": "yarn"})");
    std::ofstream(dir / "config.json") << config;
    AG_CHECK_THROWS_WITH(load_llama_hf(dir.path.string()), std::runtime_error, "config.json", "yarn");
    fs::remove(dir / "model.safetensors");
    std::ofstream(dir / "config.json") << llama_hf_config_json(model.options());
    AG_CHECK_THROWS_WITH(load_llama_hf(dir.path.string()), std::runtime_error, "neither model.safetensors");
  }
}

// Llama::quantize: every Linear and the head (lm_head when untied, the token table when tied)
// in int8 or q4_0. The forward of 2 x 10 rows (the tiles-and-gemm path) equals the float32
// model whose weights are their round trip through the format; training is refused naming the
// format; a second quantization and an f64 model are refused.
BOOST_AUTO_TEST_CASE(a_quantized_llama_computes_its_dequantized_twin) {
  for (const bool tied : {false, true}) {
    for (const WeightFormat format : {WeightFormat::int8, WeightFormat::q4_0}) {
      BOOST_TEST_CONTEXT((tied ? "tied, " : "untied, ") << format_name(format)) {
        LlamaOptions o = tiny_llama();
        o.d_model = 40;  // a full block of 32 and a partial one
        o.d_hidden = 72;
        o.tie_word_embeddings = tied;
        manual_seed(5);
        Llama model(o);
        manual_seed(5);
        Llama twin(o);
        model.eval();
        twin.eval();
        {
          NoGradGuard no_grad;
          for (auto& [path, module] : twin.named_modules()) {
            if (auto* l = dynamic_cast<Linear*>(module)) {
              Tensor w = l->weight().value();
              w.copy_(dequantize(quantize(w, format)));
            }
          }
          if (tied) {
            Tensor table = twin.head_weight().value();
            table.copy_(dequantize(quantize(table, format)));
          }
        }
        model.quantize(format);
        BOOST_TEST(model.is_quantized());
        NoGradGuard no_grad;
        std::vector<int64_t> ids(20);
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 11);
        const Variable x = model.model().embed_tokens()(Indices(Shape{2, 10}, ids));
        const Tensor want = twin.forward_embedded(x).value();
        BOOST_TEST(max_abs_diff(model.forward_embedded(x).value(), want) <= 1e-5);
        manual_seed(5);
        Llama float_model(o);
        BOOST_TEST(max_abs_diff(float_model.forward_embedded(x).value(), want) > 1e-5);  // the twin is not the float model
      }
    }
  }
  LlamaOptions o = tiny_llama();
  Llama model(o);
  model.quantize(WeightFormat::q4_0);
  model.train();
  const Indices ids(Shape{1, 4}, {1, 2, 3, 4});
  AG_CHECK_THROWS_WITH(model.loss(ids, ids), std::logic_error, "q_proj.weight", "quantized to q4_0");
  AG_CHECK_THROWS_WITH(model.quantize(WeightFormat::int8), std::invalid_argument, "Llama::quantize (int8)",
                       "already quantized");
  Llama f64(o);
  f64.to(DType::f64);
  AG_CHECK_THROWS_WITH(f64.quantize(WeightFormat::int8), std::invalid_argument, "Llama::quantize", "f64");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
