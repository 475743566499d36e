// The Module system: registration and names, traversal, train/eval, zero_grad, to(dtype),
// state_dict round trips and load errors, the summary and its parameter counts, Sequential.
#include <boost/test/unit_test.hpp>

#include <type_traits>

#include "layer_support.h"

namespace ag::testing {
namespace {

// y = x * weight + bias, with a counter buffer and an optional child, to exercise registration.
class Affine : public Module {
 public:
  explicit Affine(int64_t n, bool with_child = false)
      : weight_(register_parameter("weight", full({n}, 2.0))),
        bias_(register_parameter("bias", zeros({n}))),
        steps_(register_buffer("steps", zeros({1}))) {
    if (with_child) inner_ = &register_module("inner", std::make_unique<Affine>(n));
  }
  Variable forward(const Variable& x) {
    const Variable y = x * weight_ + bias_;
    return inner_ ? inner_->forward(y) : y;
  }
  std::string name() const override { return "Affine"; }
  Variable& weight_;
  Variable& bias_;
  Tensor& steps_;
  Affine* inner_ = nullptr;
};

std::vector<std::string> names_of(const NamedVariables& named) {
  std::vector<std::string> out;
  for (const auto& [name, v] : named) out.push_back(name);
  return out;
}

std::vector<std::string> keys_of(const StateDict& state) {
  std::vector<std::string> out;
  for (const auto& [name, t] : state) out.push_back(name);
  return out;
}

TransformerEncoderOptions small_encoder(bool norm_first) {
  TransformerEncoderOptions o;
  o.n_layers = 2;
  o.block.d_model = 8;
  o.block.n_head = 2;
  o.block.d_ff = 16;
  o.block.norm_first = norm_first;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(module_system)

BOOST_AUTO_TEST_CASE(register_returns_live_handles_with_dotted_names) {
  Affine m(3, /*with_child=*/true);
  BOOST_TEST(names_of(m.named_parameters()) ==
                 (std::vector<std::string>{"weight", "bias", "inner.weight", "inner.bias"}),
             boost::test_tools::per_element());
  // The handle is the parameter: writing through it shows in named_parameters().
  m.weight_.mutable_value().fill_(5.0);
  BOOST_TEST(m.named_parameters()[0].second.value().at({1}) == 5.0);
  BOOST_TEST(m.parameters().size() == 4u);
  // Variables carry their full path, so gradcheck reports name them.
  BOOST_TEST(m.inner_->weight_.name() == "inner.weight");
  const auto buffers = m.named_buffers();
  BOOST_REQUIRE(buffers.size() == 2u);
  BOOST_TEST(buffers[0].first == "steps");
  BOOST_TEST(buffers[1].first == "inner.steps");
  m.steps_.fill_(7.0);
  BOOST_TEST(m.named_buffers()[0].second.item() == 7.0);
  BOOST_TEST(m.named_children().size() == 1u);
  BOOST_TEST(m.named_children()[0].first == "inner");
}

BOOST_AUTO_TEST_CASE(registered_parameters_own_their_storage) {
  Tensor source = ones({4});
  Affine m(4);
  Variable& p = m.register_parameter("extra", source);
  source.fill_(3.0);
  BOOST_TEST(p.value().at({0}) == 1.0);
  BOOST_TEST(!p.value().shares_storage_with(source));
}

BOOST_AUTO_TEST_CASE(register_rejects_bad_and_duplicate_names) {
  Affine m(2);
  AG_CHECK_THROWS_WITH(m.register_parameter("", ones({1})), std::invalid_argument, "register_parameter", "''");
  AG_CHECK_THROWS_WITH(m.register_parameter("a.b", ones({1})), std::invalid_argument, "'a.b'", "'.'");
  AG_CHECK_THROWS_WITH(m.register_buffer("weight", ones({1})), std::invalid_argument, "register_buffer", "'weight'",
                       "already used");
  AG_CHECK_THROWS_WITH(m.register_module("bias", std::make_unique<Affine>(2)), std::invalid_argument,
                       "register_module", "'bias'", "already used");
  AG_CHECK_THROWS_WITH(m.register_module("child", std::unique_ptr<Affine>()), std::invalid_argument, "'child'",
                       "null");
  AG_CHECK_THROWS_WITH(m.register_parameter("w2", Tensor()), std::invalid_argument, "'w2'", "undefined");
}

BOOST_AUTO_TEST_CASE(train_and_eval_reach_every_descendant) {
  TransformerEncoder enc(small_encoder(false));
  BOOST_TEST(enc.is_training());
  enc.eval();
  BOOST_TEST(!enc.is_training());
  BOOST_TEST(!enc.block(1).attn().attention().is_training());
  BOOST_TEST(!enc.block(0).ff().is_training());
  enc.train();
  BOOST_TEST(enc.block(1).attn().attention().is_training());
  // A child registered into an eval-mode parent starts in eval mode too.
  Affine parent(2);
  parent.eval();
  Affine& child = parent.register_module("late", std::make_unique<Affine>(2));
  BOOST_TEST(!child.is_training());
}

BOOST_AUTO_TEST_CASE(trainable_parameters_leave_out_the_frozen_ones_in_order) {
  Sequential net;
  net.push_back(std::make_unique<Linear>(4, 3));
  net.push_back(std::make_unique<Linear>(3, 2));
  Variable frozen = net.named_parameters()[1].second;  // "0.bias"
  frozen.set_requires_grad(false);
  std::vector<std::string> names;
  for (const auto& [name, p] : net.trainable_parameters()) names.push_back(name);
  BOOST_TEST(names == (std::vector<std::string>{"0.weight", "1.weight", "1.bias"}), boost::test_tools::per_element());
  BOOST_TEST(net.named_parameters().size() == 4u);
}

BOOST_AUTO_TEST_CASE(zero_grad_drops_every_gradient) {
  Affine m(3, true);
  const Variable x = randn_leaf({2, 3}, 1, "x", DType::f32);
  sum(m.forward(x)).backward();
  for (const auto& [name, p] : m.named_parameters()) BOOST_TEST(p.grad().defined(), name);
  m.zero_grad();
  for (const auto& [name, p] : m.named_parameters()) BOOST_TEST(!p.grad().defined(), name);
}

BOOST_AUTO_TEST_CASE(to_converts_parameters_buffers_and_grads_in_place) {
  manual_seed(3);
  Sequential net;
  net.push_back(std::make_unique<SinusoidalPositionalEncoding>(4, 8));
  Linear& lin = net.push_back(std::make_unique<Linear>(4, 2));
  const Variable w = lin.weight();
  const std::vector<double> before = w.value().to_vector();
  sum(net.forward(Variable(randn({3, 4}, 4, DType::f32)))).backward();
  net.to(DType::f64);
  BOOST_TEST(w.dtype() == DType::f64);  // the old handle sees the converted value
  BOOST_TEST(w.grad().dtype() == DType::f64);
  BOOST_TEST(w.value().to_vector() == before, boost::test_tools::per_element());
  for (const auto& [name, b] : net.named_buffers()) BOOST_TEST(b.dtype() == DType::f64, name);
  // And it runs in f64 now.
  BOOST_TEST(net.forward(Variable(randn({3, 4}, 5))).dtype() == DType::f64);
  AG_CHECK_THROWS_WITH(lin.forward(Variable(randn({3, 4}, 5, DType::f32))), std::invalid_argument, "Linear", "f32",
                       "f64", "(3, 4)");
}

BOOST_AUTO_TEST_CASE(state_dict_keys_follow_pytorch_dotted_paths) {
  TransformerEncoder enc(small_encoder(true));
  const std::vector<std::string> keys = keys_of(enc.state_dict());
  const std::vector<std::string> first_block{
      "blocks.0.attn.w_q.weight", "blocks.0.attn.w_q.bias",  "blocks.0.attn.w_k.weight", "blocks.0.attn.w_k.bias",
      "blocks.0.attn.w_v.weight", "blocks.0.attn.w_v.bias",  "blocks.0.attn.w_o.weight", "blocks.0.attn.w_o.bias",
      "blocks.0.ff.linear1.weight", "blocks.0.ff.linear1.bias", "blocks.0.ff.linear2.weight",
      "blocks.0.ff.linear2.bias", "blocks.0.norm1.weight", "blocks.0.norm1.bias", "blocks.0.norm2.weight",
      "blocks.0.norm2.bias"};
  BOOST_REQUIRE(keys.size() == 2 * first_block.size() + 2);
  for (size_t i = 0; i < first_block.size(); ++i) BOOST_TEST(keys[i] == first_block[i]);
  BOOST_TEST(keys[first_block.size()] == "blocks.1.attn.w_q.weight");
  BOOST_TEST(keys[keys.size() - 2] == "norm.weight");
  BOOST_TEST(keys.back() == "norm.bias");
  // Buffers are saved after the parameters of their module.
  SinusoidalPositionalEncoding pe(4, 6);
  BOOST_TEST(keys_of(pe.state_dict()) == std::vector<std::string>{"pe"}, boost::test_tools::per_element());
  BOOST_TEST(pe.parameters().empty());
}

BOOST_AUTO_TEST_CASE(state_dict_round_trip_gives_identical_outputs) {
  manual_seed(11);
  TransformerEncoder a(small_encoder(false));
  manual_seed(12);
  TransformerEncoder b(small_encoder(false));
  a.eval();
  b.eval();
  const Variable x(randn({2, 5, 8}, 13, DType::f32));
  const AttentionMask mask = AttentionMask::key_padding({5, 3}, 5);
  BOOST_TEST(max_abs_diff(a(x, mask).value(), b(x, mask).value()) > 1e-3);  // different inits differ
  b.load_state_dict(a.state_dict());
  BOOST_TEST(max_abs_diff(a(x, mask).value(), b(x, mask).value()) == 0.0);
  // The load copied: changing a afterwards leaves b alone.
  Variable w = a.block(0).attn().w_q().weight();
  w.mutable_value().fill_(0.0);
  BOOST_TEST(max_abs_diff(a(x, mask).value(), b(x, mask).value()) > 1e-3);
}

BOOST_AUTO_TEST_CASE(load_state_dict_converts_dtype) {
  manual_seed(21);
  Linear a(3, 2);
  Linear b(3, 2);
  b.to(DType::f64);
  b.load_state_dict(a.state_dict());
  BOOST_TEST(b.weight().dtype() == DType::f64);
  BOOST_TEST(max_abs_diff(b.weight().value(), a.weight().value().to(DType::f64)) == 0.0);
}

BOOST_AUTO_TEST_CASE(load_state_dict_errors_name_each_tensor) {
  manual_seed(31);
  TransformerEncoder enc(small_encoder(true));
  const StateDict good = enc.state_dict();
  const Tensor before = enc.block(0).attn().w_q().weight().value().clone();

  StateDict missing(good.begin() + 1, good.end());
  AG_CHECK_THROWS_WITH(enc.load_state_dict(missing), std::invalid_argument, "load_state_dict", "missing",
                       "'blocks.0.attn.w_q.weight'", "(8, 8)");

  StateDict extra = good;
  extra.emplace_back("blocks.0.attn.w_z.weight", zeros({8, 8}));
  AG_CHECK_THROWS_WITH(enc.load_state_dict(extra), std::invalid_argument, "unexpected", "'blocks.0.attn.w_z.weight'");

  StateDict wrong = good;
  wrong[3].second = zeros({7});
  AG_CHECK_THROWS_WITH(enc.load_state_dict(wrong), std::invalid_argument, "'blocks.0.attn.w_k.bias'", "(7,)", "(8,)");

  StateDict twice = good;
  twice.push_back(good[0]);
  AG_CHECK_THROWS_WITH(enc.load_state_dict(twice), std::invalid_argument, "duplicate", "'blocks.0.attn.w_q.weight'");

  // Non-strict loading tolerates missing and extra names, never a wrong shape.
  StateDict changed = missing;
  changed.emplace_back("unknown", zeros({1}));
  changed[0].second = full(changed[0].second.shape(), 0.25);  // blocks.0.attn.w_q.bias
  enc.load_state_dict(changed, /*strict=*/false);
  BOOST_TEST(enc.block(0).attn().w_q().bias().value().at({0}) == 0.25);
  AG_CHECK_THROWS_WITH(enc.load_state_dict(wrong, /*strict=*/false), std::invalid_argument, "'blocks.0.attn.w_k.bias'");

  // A failed load changes nothing.
  StateDict partly_wrong = good;
  for (auto& [name, t] : partly_wrong) t = zeros(t.shape());
  partly_wrong.back().second = zeros({3});
  AG_CHECK_THROWS_WITH(enc.load_state_dict(partly_wrong), std::invalid_argument, "'norm.bias'");
  BOOST_TEST(max_abs_diff(enc.block(0).attn().w_q().weight().value(), before) == 0.0);
}

// Parameter counts from PyTorch 1.13 for the same configurations (/usr/bin/python3):
//   nn.Linear(5, 3) -> 18; bias=False -> 15
//   nn.MultiheadAttention(16, 4) -> 1088; bias=False -> 1024
//   nn.Linear(64,256) + nn.Linear(128,256) + nn.Linear(256,256) + nn.Linear(256,256) -> 181248 (no bias: 180224)
//   nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, norm_first=True), 2,
//                         norm=nn.LayerNorm(32)) -> 17152
//   nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, dim_feedforward=64), 3) -> 25632
//   nn.TransformerEncoderLayer(512, 8) -> 3152384
//   nn.Embedding(100, 16, padding_idx=0) -> 1600; nn.LayerNorm(16) -> 32
BOOST_AUTO_TEST_CASE(parameter_counts_equal_pytorch) {
  const auto expect = [](const Module& m, int64_t count) {
    BOOST_TEST(m.num_parameters() == count, m.name());
    const std::string s = m.summary();
    BOOST_TEST(s.find("total parameters: " + std::to_string(count)) != std::string::npos, s);
  };
  expect(Linear(5, 3), 18);
  expect(Linear(5, 3, false), 15);
  expect(MultiHeadAttention({.d_model = 16, .n_head = 4}), 1088);
  expect(MultiHeadAttention({.d_model = 16, .n_head = 4, .bias = false}), 1024);
  expect(MultiHeadAttention({.d_model = 256, .n_head = 4, .q_dim = 64, .k_dim = 128, .v_dim = 256}), 181248);
  expect(MultiHeadAttention({.d_model = 256, .n_head = 4, .q_dim = 64, .k_dim = 128, .v_dim = 256, .bias = false}),
         180224);
  TransformerEncoderOptions pre{.n_layers = 2, .block = {.d_model = 32, .n_head = 4, .d_ff = 64, .norm_first = true}};
  expect(TransformerEncoder(pre), 17152);
  TransformerEncoderOptions post{.n_layers = 3, .block = {.d_model = 32, .n_head = 4, .d_ff = 64}};
  expect(TransformerEncoder(post), 25632);
  expect(TransformerBlock({.d_model = 512, .n_head = 8}), 3152384);
  expect(Embedding(100, 16, 0), 1600);
  expect(LayerNorm(16), 32);
}

BOOST_AUTO_TEST_CASE(summary_shows_the_tree_shapes_and_counts) {
  TransformerEncoder enc({.n_layers = 2, .block = {.d_model = 8, .n_head = 2, .d_ff = 16, .norm_first = true}});
  const std::string s = enc.summary();
  for (const char* part : {"TransformerEncoder", "blocks: ModuleList", "0: TransformerBlock(pre-norm)",
                           "attn: MultiHeadAttention", "w_q: Linear", "weight (8, 8) f32", "bias (8,) f32",
                           "linear1: Linear", "weight (16, 8) f32", "norm: LayerNorm(8,)"}) {
    BOOST_TEST(s.find(part) != std::string::npos, "summary lacks '" << part << "':\n" << s);
  }
  // Each block: 4 * (8*8 + 8) + (16*8 + 16) + (8*16 + 8) + 2 * 16 = 600 parameters.
  BOOST_TEST(s.find("0: TransformerBlock(pre-norm)  [600 params]") != std::string::npos, s);
}

BOOST_AUTO_TEST_CASE(modules_are_neither_copyable_nor_movable) {
  static_assert(!std::is_copy_constructible_v<Linear>);
  static_assert(!std::is_copy_assignable_v<TransformerBlock>);
  static_assert(!std::is_move_constructible_v<Module>);
  BOOST_TEST(true);
}

BOOST_AUTO_TEST_CASE(sequential_runs_children_in_order_named_by_position) {
  manual_seed(41);
  Sequential net(std::make_unique<Linear>(3, 4), std::make_unique<ReLU>(), std::make_unique<Linear>(4, 2));
  BOOST_TEST(net.size() == 3u);
  BOOST_TEST(names_of(net.named_parameters()) == (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}),
             boost::test_tools::per_element());
  net.to(DType::f64);
  const Variable x = randn_leaf({5, 3}, 42);
  const NamedVariables p = net.named_parameters();
  const Variable manual = matmul(relu(matmul(x, transpose(p[0].second, 0, 1)) + p[1].second),
                                 transpose(p[2].second, 0, 1)) + p[3].second;
  BOOST_TEST(max_abs_diff(net(x).value(), manual.value()) < 1e-12);
  check_module_gradients(net, [&](const std::vector<Variable>& in) { return net(in[0]); }, {x});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
