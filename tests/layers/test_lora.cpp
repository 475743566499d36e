// LoRALinear and apply_lora: the layer keeps the check_layer contract with only its adapter
// trainable; a fresh adapter changes nothing; the update is (alpha / r) x A^T B^T; merging
// gives the same outputs and never applies the update twice; apply_lora replaces projections by
// name, keeps the base's parameter names and refuses names, ranks and alphas that cannot be.
#include <boost/test/unit_test.hpp>

#include "layer_support.h"

namespace ag::testing {
namespace {

// A LoRALinear in f64 whose B is not zero, so that gradients reach A.
std::unique_ptr<LoRALinear> lora_f64(uint64_t seed, int64_t in, int64_t out, int64_t rank, double alpha) {
  manual_seed(seed);
  Linear base(in, out);
  base.to(DType::f64);
  auto l = std::make_unique<LoRALinear>(base, LoRAOptions{.rank = rank, .alpha = alpha});
  Variable b = l->lora_b();
  b.mutable_value().copy_(randn(b.shape(), seed + 1));
  return l;
}

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}

TransformerEncoder small_encoder() {
  manual_seed(7);
  return TransformerEncoder(TransformerEncoderOptions{
      .n_layers = 2, .block = {.d_model = 8, .n_head = 2, .d_ff = 16, .dropout = 0.0, .norm_first = true}});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lora)

BOOST_AUTO_TEST_CASE(passes_check_layer_on_input_and_adapter_with_the_base_frozen) {
  auto l = lora_f64(3, 6, 5, 2, 4.0);
  const Variable x = randn_leaf({3, 4, 6}, 11, "x");
  LayerCheckOptions o;
  o.make_twin = [] { return lora_f64(99, 6, 5, 2, 4.0); };
  const LayerCheckReport r = check_layer(*l, [](LoRALinear& m, const std::vector<Variable>& in) { return m(in[0]); }, {x}, o);
  BOOST_TEST(static_cast<bool>(r), r.table());
  // The gradient check covered A and B: only they train.
  for (const auto& [name, p] : l->named_parameters()) {
    BOOST_TEST(p.requires_grad() == (name == "lora_a" || name == "lora_b"), name);
  }
  sum((*l)(x)).backward();
  BOOST_TEST(!l->weight().grad().defined());
  BOOST_TEST(!l->bias().grad().defined());
  BOOST_TEST(l->lora_a().grad().defined());
}

BOOST_AUTO_TEST_CASE(a_fresh_adapter_computes_exactly_the_base) {
  manual_seed(5);
  Linear base(7, 9);
  LoRALinear l(base, {.rank = 3, .alpha = 6.0});
  for (double v : l.lora_b().value().to_vector()) BOOST_TEST(v == 0.0);
  const double bound = 1.0 / std::sqrt(7.0);
  double largest = 0;
  for (double v : l.lora_a().value().to_vector()) largest = std::max(largest, std::abs(v));
  BOOST_TEST(largest <= bound);
  BOOST_TEST(largest > 0.5 * bound);
  const Variable x(randn({2, 7}, 4, DType::f32));
  BOOST_TEST(max_abs_diff(l(x).value(), base(x).value()) == 0.0);
}

BOOST_AUTO_TEST_CASE(the_update_is_alpha_over_r_times_x_a_t_b_t) {
  auto l = lora_f64(8, 5, 4, 2, 3.0);
  const Variable x(randn({3, 5}, 12));
  const Variable at = transpose(Variable(l->lora_a().value()), 0, 1);
  const Variable bt = transpose(Variable(l->lora_b().value()), 0, 1);
  const Variable wt = transpose(Variable(l->weight().value()), 0, 1);
  const Variable expected = matmul(x, wt) + Variable(l->bias().value()) + matmul(matmul(x, at), bt) * 1.5;
  BOOST_TEST(l->scaling() == 1.5);
  BOOST_TEST(max_abs_diff((*l)(x).value(), expected.value()) < 1e-12);
}

BOOST_AUTO_TEST_CASE(merge_gives_the_same_outputs_once) {
  auto l = lora_f64(9, 6, 6, 3, 5.0);
  const Variable x(randn({4, 6}, 13));
  const Tensor before = (*l)(x).value().clone();
  const Tensor base_weight = l->weight().value().clone();
  l->merge();
  BOOST_TEST(l->merged());
  BOOST_TEST(max_abs_diff(l->weight().value(), base_weight) > 1e-3);  // the update is in the weight now
  BOOST_TEST(max_abs_diff((*l)(x).value(), before) < 1e-12);
  AG_CHECK_THROWS_WITH(l->merge(), std::logic_error, "merge() called twice");
}

BOOST_AUTO_TEST_CASE(apply_lora_replaces_projections_by_name_and_keeps_the_base_names) {
  TransformerEncoder enc = small_encoder();
  const StateDict base = enc.state_dict();
  std::vector<std::string> base_names;
  for (const auto& [name, t] : base) base_names.push_back(name);
  const std::vector<std::string> done = apply_lora(enc, {"w_q", "attn.w_v"}, {.rank = 2, .alpha = 4.0});
  BOOST_TEST(done == (std::vector<std::string>{"blocks.0.attn.w_q", "blocks.0.attn.w_v", "blocks.1.attn.w_q",
                                              "blocks.1.attn.w_v"}), boost::test_tools::per_element());
  BOOST_TEST(dynamic_cast<LoRALinear*>(&enc.block(1).attn().w_q()) != nullptr);  // the owner calls the new layer
  BOOST_TEST(dynamic_cast<LoRALinear*>(&enc.block(1).attn().w_k()) == nullptr);
  const std::vector<std::string> names = names_of(enc);
  for (const std::string& n : base_names) BOOST_TEST((std::find(names.begin(), names.end(), n) != names.end()), n);
  BOOST_TEST(names.size() == base_names.size() + 8);
  BOOST_TEST((std::find(names.begin(), names.end(), "blocks.1.attn.w_v.lora_b") != names.end()));
  int trainable = 0;
  for (const auto& [name, p] : enc.named_parameters()) trainable += p.requires_grad() ? 1 : 0;
  BOOST_TEST(trainable == static_cast<int>(names.size()) - 8);  // w_q, w_v weight and bias frozen in 2 blocks

  // A checkpoint of the base loads (the adapter stays as it is), and the outputs are the base's.
  TransformerEncoder plain = small_encoder();
  Variable w = plain.block(0).attn().w_q().weight();
  w.mutable_value().fill_(0.5);
  enc.load_state_dict(plain.state_dict(), /*strict=*/false);
  const Variable x(randn({2, 3, 8}, 21, DType::f32));
  BOOST_TEST(max_abs_diff(enc(x).value(), plain(x).value()) == 0.0);

  // Merged back into plain Linears: the base's names and the adapted model's outputs.
  Variable b = enc.block(0).attn().w_q().named_parameters()[3].second;
  b.mutable_value().copy_(randn(b.shape(), 22, DType::f32));
  const Tensor adapted = enc(x).value().clone();
  BOOST_TEST(max_abs_diff(adapted, plain(x).value()) > 1e-4);
  BOOST_TEST(merge_lora(enc) == 4);
  BOOST_TEST(names_of(enc) == names_of(plain), boost::test_tools::per_element());
  BOOST_TEST(max_abs_diff(enc(x).value(), adapted) < 1e-5);
}

BOOST_AUTO_TEST_CASE(bad_targets_ranks_and_alphas_are_refused_before_anything_changes) {
  TransformerEncoder enc = small_encoder();
  const std::vector<std::string> before = names_of(enc);
  AG_CHECK_THROWS_WITH(apply_lora(enc, {"w_q", "query"}, {}), std::invalid_argument, "no Linear is named 'query'",
                       "attn.w_q", "attn.w_o", "ff.linear1", "ff.linear2");
  AG_CHECK_THROWS_WITH(apply_lora(enc, {}, {}), std::invalid_argument, "no target");
  AG_CHECK_THROWS_WITH(apply_lora(enc, {"w_q"}, {.rank = 0}), std::invalid_argument, "rank 0", "[1, 8]", "in=8 out=8");
  AG_CHECK_THROWS_WITH(apply_lora(enc, {"w_q"}, {.rank = -2}), std::invalid_argument, "rank -2");
  AG_CHECK_THROWS_WITH(apply_lora(enc, {"linear1"}, {.rank = 9}), std::invalid_argument, "rank 9", "[1, 8]",
                       "in=8 out=16", "blocks.0.ff.linear1");
  AG_CHECK_THROWS_WITH(apply_lora(enc, {"w_q"}, {.rank = 2, .alpha = 0.0}), std::invalid_argument, "alpha");
  AG_CHECK_THROWS_WITH(apply_lora(enc, {"w_q"}, {.rank = 2, .alpha = std::nan("")}), std::invalid_argument, "alpha");
  BOOST_TEST(names_of(enc) == before, boost::test_tools::per_element());
  apply_lora(enc, {"w_q"}, {.rank = 2});
  AG_CHECK_THROWS_WITH(apply_lora(enc, {"w_q"}, {.rank = 2}), std::invalid_argument, "already has an adapter");
}

BOOST_AUTO_TEST_CASE(replace_module_takes_only_a_registered_replaceable_child_of_its_type) {
  TransformerEncoder enc = small_encoder();
  AG_CHECK_THROWS_WITH(enc.replace_module("blocks.0.norm1", std::make_unique<Linear>(8, 8)), std::invalid_argument,
                       "blocks.0.norm1", "register_module");
  AG_CHECK_THROWS_WITH(enc.replace_module("blocks.0.attn.w_x", std::make_unique<Linear>(8, 8)), std::invalid_argument,
                       "no child 'w_x'");
  AG_CHECK_THROWS_WITH(enc.replace_module("blocks.0.attn.w_q", std::make_unique<Dropout>(0.1)), std::invalid_argument,
                       "holds a Linear");
  auto old = enc.replace_module("blocks.0.attn.w_q", std::make_unique<Linear>(8, 8, false));
  BOOST_TEST(old->name() == "Linear");
  BOOST_TEST(!enc.block(0).attn().w_q().bias().defined());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
