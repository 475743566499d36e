// TransformerDecoderLayer (pre- and post-norm) and TransformerDecoder: each equal to its formula
// written from its children, f64 gradient checks on the target, the memory and every parameter
// with a causal mask, target padding and memory padding (lengths from 1 to the maximum), the
// whole check_layer contract, padding that changes nothing, and errors that name the layer and
// the shapes. PyTorch parity is in tests/parity (decoder_layer_* fixtures).
#include <boost/test/unit_test.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layer_support.h"

namespace ag::testing {
namespace {

constexpr int64_t kMemory = 6;  // memory narrower than d_model = 8: keys and values come from 6 features

TransformerDecoderLayerOptions small_decoder(bool norm_first, double dropout = 0.1) {
  return {.block = small_block(norm_first, dropout), .d_memory = kMemory};
}

// Causal and the target's padding: what a decoder is trained with.
AttentionMask target_mask(const std::vector<int64_t>& lengths, int64_t T) {
  return AttentionMask::causal(T) & AttentionMask::key_padding(lengths, T);
}

// The layer's formula, written from its children (dropout off).
Variable decoder_formula(TransformerDecoderLayer& layer, const Variable& x, const Variable& memory,
                         const AttentionMask& tgt_mask, const AttentionMask& memory_mask) {
  const auto self = [&](const Variable& v) { return layer.self_attn().forward(v, tgt_mask).output; };
  const auto cross = [&](const Variable& v) {
    return layer.multihead_attn().forward(v, memory, memory, memory_mask).output;
  };
  if (layer.options().block.norm_first) {
    const Variable h = x + self(layer.norm1()(x));
    const Variable c = h + cross(layer.norm2()(h));
    return c + layer.ff()(layer.norm3()(c));
  }
  const Variable h = layer.norm1()(x + self(x));
  const Variable c = layer.norm2()(h + cross(h));
  return layer.norm3()(c + layer.ff()(c));
}

// 1 at the real target positions, 0 at the padded ones: (B, T, 1).
Tensor real_positions(const std::vector<int64_t>& lengths, int64_t T) {
  Tensor m = zeros({static_cast<int64_t>(lengths.size()), T, 1}, DType::f64);
  for (size_t b = 0; b < lengths.size(); ++b) m.select(0, static_cast<int64_t>(b)).narrow(0, 0, lengths[b]).fill_(1.0);
  return m;
}

// `x` (B, T, C) copied into the first T positions of a (B, T_padded, C) tensor whose other
// positions hold noise: padding with anything in it.
Tensor padded(const Tensor& x, int64_t T_padded, uint64_t seed) {
  Tensor out = randn({x.shape()[0], T_padded, x.shape()[2]}, seed);
  out.narrow(1, 0, x.shape()[1]).copy_(x);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transformer_decoder_layer)

BOOST_AUTO_TEST_CASE(children_are_named_as_in_pytorch_and_memory_sets_the_key_width) {
  manual_seed(60);
  TransformerDecoderLayer layer(small_decoder(false));
  std::vector<std::string> names;
  for (const auto& [name, p] : layer.named_parameters()) names.push_back(name);
  const std::vector<std::string> expected = {
      "self_attn.w_q.weight", "self_attn.w_q.bias", "self_attn.w_k.weight", "self_attn.w_k.bias",
      "self_attn.w_v.weight", "self_attn.w_v.bias", "self_attn.w_o.weight", "self_attn.w_o.bias",
      "multihead_attn.w_q.weight", "multihead_attn.w_q.bias", "multihead_attn.w_k.weight",
      "multihead_attn.w_k.bias", "multihead_attn.w_v.weight", "multihead_attn.w_v.bias",
      "multihead_attn.w_o.weight", "multihead_attn.w_o.bias", "ff.linear1.weight", "ff.linear1.bias",
      "ff.linear2.weight", "ff.linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
      "norm3.weight", "norm3.bias"};
  BOOST_TEST(names == expected, boost::test_tools::per_element());
  BOOST_TEST(layer.multihead_attn().w_q().weight().shape() == (Shape{8, 8}));
  BOOST_TEST(layer.multihead_attn().w_k().weight().shape() == (Shape{8, kMemory}));
  BOOST_TEST(layer.multihead_attn().w_v().weight().shape() == (Shape{8, kMemory}));
  BOOST_TEST(layer.name() == "TransformerDecoderLayer(post-norm)");
  // The block's dropout reaches both attentions' weights, as in the encoder block.
  BOOST_TEST(layer.self_attn().attention().options().dropout == 0.1);
  BOOST_TEST(layer.multihead_attn().attention().options().dropout == 0.1);
  // d_memory 0 means d_model; separate d_k and d_v per head reach both attentions.
  TransformerBlockOptions seeds_style = small_block(true, 0.0);
  seeds_style.d_k = 3;
  seeds_style.d_v = 5;
  seeds_style.attn_bias = false;
  TransformerDecoderLayer plain({.block = seeds_style});
  BOOST_TEST(plain.options().d_memory == 8);
  BOOST_TEST(plain.multihead_attn().w_k().weight().shape() == (Shape{6, 8}));
  BOOST_TEST(plain.multihead_attn().w_v().weight().shape() == (Shape{10, 8}));
  BOOST_TEST(plain.self_attn().w_o().weight().shape() == (Shape{8, 10}));
  BOOST_TEST(!plain.self_attn().w_q().bias().defined());
}

BOOST_AUTO_TEST_CASE(the_block_factories_fill_all_three_norms_and_the_feed_forward) {
  int norms = 0, ffs = 0;
  TransformerDecoderLayerOptions o = small_decoder(true);
  o.block.make_norm = [&](const TransformerBlockOptions& b) {
    ++norms;
    return std::make_unique<LayerNorm>(b.d_model, 1e-3);
  };
  o.block.make_ff = [&](const TransformerBlockOptions& b) {
    ++ffs;
    return std::make_unique<PositionwiseFeedForward>(
        PositionwiseFeedForwardOptions{.d_model = b.d_model, .d_hidden = 5, .dropout = 0.0});
  };
  TransformerDecoderLayer layer(o);
  BOOST_TEST(norms == 3);
  BOOST_TEST(ffs == 1);
  BOOST_TEST(layer.ff_as<PositionwiseFeedForward>().linear1().weight().shape() == (Shape{5, 8}));
  o.block.make_norm = [](const TransformerBlockOptions&) { return std::unique_ptr<Sublayer>(); };
  AG_CHECK_THROWS_WITH(TransformerDecoderLayer{o}, std::invalid_argument, "TransformerDecoderLayer(pre-norm)",
                       "norm1", "null");
}

BOOST_AUTO_TEST_CASE(pre_and_post_norm_equal_their_formulas_and_are_causal) {
  for (const bool norm_first : {false, true}) {
    manual_seed(61);
    TransformerDecoderLayer layer(small_decoder(norm_first));
    layer.eval();
    layer.to(DType::f64);
    const Variable x(randn({2, 4, 8}, 62)), memory(randn({2, 5, kMemory}, 63));
    const AttentionMask tgt_mask = target_mask({4, 2}, 4), memory_mask = AttentionMask::key_padding({5, 3}, 5);
    const Tensor y = layer(x, memory, tgt_mask, memory_mask).value();
    BOOST_TEST(max_abs_diff(y, decoder_formula(layer, x, memory, tgt_mask, memory_mask).value()) < 1e-12);
    // Both masks reach their attention: without either the output changes.
    BOOST_TEST(max_abs_diff(y, layer(x, memory, {}, memory_mask).value()) > 1e-3);
    BOOST_TEST(max_abs_diff(y, layer(x, memory, tgt_mask).value()) > 1e-3);
    // Causal: a change at target position 2 leaves positions 0 and 1 alone and moves position 2.
    Tensor changed = x.value().clone();
    changed.narrow(1, 2, 2).copy_(randn({2, 2, 8}, 64));
    const Tensor y2 = layer(Variable(changed), memory, tgt_mask, memory_mask).value();
    BOOST_TEST(max_abs_diff(y2.narrow(1, 0, 2), y.narrow(1, 0, 2)) == 0.0);
    BOOST_TEST(max_abs_diff(y2.narrow(1, 2, 1), y.narrow(1, 2, 1)) > 1e-3);
    // Cross-attention reads the memory at every real source position, at no padded one.
    Tensor moved = memory.value().clone();
    moved.select(0, 1).narrow(0, 3, 2).fill_(5.0);  // batch 1's padding
    BOOST_TEST(max_abs_diff(layer(x, Variable(moved), tgt_mask, memory_mask).value(), y) == 0.0);
    moved.select(0, 1).narrow(0, 2, 1).fill_(5.0);  // its last real position
    BOOST_TEST(max_abs_diff(layer(x, Variable(moved), tgt_mask, memory_mask).value(), y) > 1e-3);
  }
}

// Target lengths 1..T and memory lengths 1..S in one batch, train (with dropout) and eval.
BOOST_AUTO_TEST_CASE(gradcheck_target_memory_and_parameters_pre_and_post_norm_with_padding) {
  for (const bool norm_first : {false, true}) {
    for (const bool training : {true, false}) {
      BOOST_TEST_CONTEXT("norm_first=" << norm_first << " training=" << training) {
        manual_seed(65);
        TransformerDecoderLayer layer(small_decoder(norm_first, 0.15));
        layer.train(training);
        const AttentionMask tgt_mask = target_mask({4, 1, 3}, 4);
        const AttentionMask memory_mask = AttentionMask::key_padding({1, 5, 3}, 5);
        const Variable x = randn_leaf({3, 4, 8}, 66, "tgt"), memory = randn_leaf({3, 5, kMemory}, 67, "memory");
        check_module_gradients(
            layer, [&](const std::vector<Variable>& in) { return layer(in[0], in[1], tgt_mask, memory_mask); },
            {x, memory}, {layer.self_attn().w_k().bias(), layer.multihead_attn().w_k().bias()});
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(keeps_the_whole_layer_contract) {
  for (const bool norm_first : {false, true}) {
    manual_seed(68);
    TransformerDecoderLayer layer(small_decoder(norm_first, 0.2));
    const AttentionMask tgt_mask = target_mask({3, 1}, 3);
    const AttentionMask memory_mask = AttentionMask::key_padding({4, 1}, 4);
    LayerCheckOptions options;
    options.zero_ok = {"w_k.bias"};
    options.make_twin = [norm_first] {
      return std::make_unique<TransformerDecoderLayer>(small_decoder(norm_first, 0.2));
    };
    const LayerCheckReport r = check_layer(
        layer,
        [&](TransformerDecoderLayer& m, const std::vector<Variable>& in) {
          return m(in[0], in[1], tgt_mask, memory_mask);
        },
        {randn_leaf({2, 3, 8}, 69, "tgt"), randn_leaf({2, 4, kMemory}, 70, "memory")}, options);
    BOOST_TEST(r.ok, r.table());
    BOOST_TEST(r.failed() == 0);
    BOOST_TEST(r.checked() >= 8);
  }
}

// A memory row that is all padding (a length-0 source): cross-attention adds nothing to that
// batch element and every gradient stays finite.
BOOST_AUTO_TEST_CASE(memory_without_real_positions_leaves_the_cross_branch_empty) {
  for (const bool norm_first : {false, true}) {
    manual_seed(71);
    TransformerDecoderLayer layer(small_decoder(norm_first, 0.0));
    layer.to(DType::f64);
    const Variable x = randn_leaf({2, 3, 8}, 72, "tgt"), memory = randn_leaf({2, 4, kMemory}, 73, "memory");
    const AttentionMask tgt_mask = target_mask({3, 3}, 3), memory_mask = AttentionMask::key_padding({4, 0}, 4);
    const Variable y = layer(x, memory, tgt_mask, memory_mask);
    // Batch 1 as if the cross-attention branch were not there.
    const Variable x1(x.value().narrow(0, 1, 1).clone());
    const auto self = [&](const Variable& v) { return layer.self_attn().forward(v, target_mask({3}, 3)).output; };
    Variable expected;
    if (norm_first) {
      const Variable h = x1 + self(layer.norm1()(x1));
      expected = h + layer.ff()(layer.norm3()(h));
    } else {
      const Variable h = layer.norm2()(layer.norm1()(x1 + self(x1)));
      expected = layer.norm3()(h + layer.ff()(h));
    }
    BOOST_TEST(max_abs_diff(y.value().narrow(0, 1, 1), expected.value()) < 1e-12);
    y.backward(randn({2, 3, 8}, 74));
    BOOST_TEST(all_finite(x.grad()));
    BOOST_TEST(max_abs_diff(memory.grad().select(0, 1), zeros({4, kMemory}, DType::f64)) == 0.0);
    BOOST_TEST(finite_parameter_grads(layer) == static_cast<int>(layer.parameters().size()));
  }
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_layer_and_the_shapes) {
  TransformerDecoderLayer layer(small_decoder(false));
  const Variable x(zeros({2, 4, 8})), memory(zeros({2, 5, kMemory}));
  AG_CHECK_THROWS_WITH(layer(x, Variable(zeros({2, 5, 8}))), std::invalid_argument,
                       "TransformerDecoderLayer(post-norm)", "memory=(2, 5, 8)", "d_memory=6", "tgt=(2, 4, 8)");
  AG_CHECK_THROWS_WITH(layer(Variable(zeros({2, 4, 6})), memory), std::invalid_argument, "TransformerDecoderLayer",
                       "tgt=(2, 4, 6)", "d_model=8");
  AG_CHECK_THROWS_WITH(layer(x, Variable(zeros({3, 5, kMemory}))), std::invalid_argument, "TransformerDecoderLayer",
                       "same B", "(2, 4, 8)", "(3, 5, 6)");
  AG_CHECK_THROWS_WITH(layer(x, Variable(zeros({5, kMemory}))), std::invalid_argument, "TransformerDecoderLayer",
                       "memory=(5, 6)");
  // A target mask for another length, one for another batch size, a memory mask over the target.
  AG_CHECK_THROWS_WITH(layer(x, memory, target_mask({3, 3}, 3)), std::invalid_argument,
                       "TransformerDecoderLayer(post-norm) tgt_mask", "(2, 1, 3, 3)", "(2, 2, 4, 4)");
  AG_CHECK_THROWS_WITH(layer(x, memory, AttentionMask::key_padding({4, 4, 4}, 4)), std::invalid_argument, "tgt_mask",
                       "(3, 1, 1, 4)", "(2, 2, 4, 4)");
  AG_CHECK_THROWS_WITH(layer(x, memory, target_mask({4, 2}, 4), AttentionMask::key_padding({4, 2}, 4)),
                       std::invalid_argument, "TransformerDecoderLayer(post-norm) memory_mask", "(2, 1, 1, 4)",
                       "(2, 2, 4, 5)");
  AG_CHECK_THROWS_WITH(layer(x, memory, {}, AttentionMask::causal(4)), std::invalid_argument, "memory_mask",
                       "(1, 1, 4, 4)", "(2, 2, 4, 5)");
  AG_CHECK_THROWS_WITH(TransformerDecoderLayer({.block = small_block(false), .d_memory = -2}), std::invalid_argument,
                       "TransformerDecoderLayer", "d_memory", "-2");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(transformer_decoder)

BOOST_AUTO_TEST_CASE(stacks_layers_under_pytorch_names_and_adds_a_final_norm_for_pre_norm) {
  for (const bool norm_first : {false, true}) {
    manual_seed(75);
    TransformerDecoder dec({.n_layers = 2, .layer = small_decoder(norm_first)});
    BOOST_TEST(dec.size() == 2u);
    BOOST_TEST(dec.options().layer.d_memory == kMemory);
    BOOST_TEST(dec.named_parameters().front().first == "layers.0.self_attn.w_q.weight");
    if (norm_first) BOOST_TEST(dec.named_parameters().back().first == "norm.bias");
    else AG_CHECK_THROWS_WITH(dec.norm(), std::logic_error, "norm_first");
    dec.eval();
    dec.to(DType::f64);
    const Variable x(randn({2, 4, 8}, 76)), memory(randn({2, 5, kMemory}, 77));
    const AttentionMask tgt_mask = target_mask({4, 1}, 4), memory_mask = AttentionMask::key_padding({5, 1}, 5);
    Variable expected = x;
    for (size_t i = 0; i < dec.size(); ++i) expected = dec.layer(i)(expected, memory, tgt_mask, memory_mask);
    if (norm_first) expected = dec.norm()(expected);
    BOOST_TEST(max_abs_diff(dec(x, memory, tgt_mask, memory_mask).value(), expected.value()) < 1e-12);
  }
  AG_CHECK_THROWS_WITH(TransformerDecoder({.n_layers = 0, .layer = small_decoder(true)}), std::invalid_argument,
                       "TransformerDecoder", "n_layers");
}

// nn.Transformer's stacks end with a norm after post-norm layers too: FinalNorm::always.
BOOST_AUTO_TEST_CASE(final_norm_is_chosen_independently_of_norm_placement) {
  manual_seed(90);
  TransformerDecoder always({.n_layers = 1, .layer = small_decoder(false, 0.0), .final_norm = FinalNorm::always});
  TransformerDecoder never({.n_layers = 1, .layer = small_decoder(true, 0.0), .final_norm = FinalNorm::never});
  TransformerEncoder encoder({.n_layers = 1, .block = small_block(false, 0.0), .final_norm = FinalNorm::always});
  BOOST_TEST(always.has_norm());
  BOOST_TEST(!never.has_norm());
  BOOST_TEST(encoder.has_norm());
  BOOST_TEST(always.named_parameters().back().first == "norm.bias");
  BOOST_TEST(encoder.named_parameters().back().first == "norm.bias");
  AG_CHECK_THROWS_WITH(never.norm(), std::logic_error, "TransformerDecoder::norm", "FinalNorm::always");
  always.to(DType::f64);
  const Variable x(randn({2, 3, 8}, 91)), memory(randn({2, 4, kMemory}, 92));
  const Tensor expected = always.norm()(always.layer(0)(x, memory, AttentionMask::causal(3))).value();
  BOOST_TEST(max_abs_diff(always(x, memory, AttentionMask::causal(3)).value(), expected) < 1e-12);
}

BOOST_AUTO_TEST_CASE(gradcheck_pre_norm_train_and_post_norm_eval) {
  for (const bool norm_first : {true, false}) {
    manual_seed(78);
    TransformerDecoder dec({.n_layers = 2, .layer = small_decoder(norm_first, 0.1)});
    dec.train(norm_first);
    const AttentionMask tgt_mask = target_mask({3, 1}, 3), memory_mask = AttentionMask::key_padding({1, 4}, 4);
    const Variable x = randn_leaf({2, 3, 8}, 79, "tgt"), memory = randn_leaf({2, 4, kMemory}, 80, "memory");
    std::vector<Variable> zero_ok;
    for (size_t i = 0; i < dec.size(); ++i) {
      zero_ok.push_back(dec.layer(i).self_attn().w_k().bias());
      zero_ok.push_back(dec.layer(i).multihead_attn().w_k().bias());
    }
    check_module_gradients(
        dec, [&](const std::vector<Variable>& in) { return dec(in[0], in[1], tgt_mask, memory_mask); }, {x, memory},
        zero_ok);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(decoder_padding_is_inert)

// The same real sequences, once padded to the batch's longest (T = 4, S = 5) and once with three
// more padded positions on each side holding noise: the outputs at real positions, every
// parameter's gradient and the inputs' gradients at real positions agree within 1e-12, and the
// padded positions receive no gradient. The loss sees real positions only (the upstream
// gradient is zero at padded ones), as a loss with ignore_index does. Dropout is set but off
// (eval): in training its masks depend on the tensor's size.
BOOST_AUTO_TEST_CASE(extra_padding_changes_no_output_and_no_gradient) {
  const std::vector<int64_t> tgt_lengths = {4, 1, 3}, memory_lengths = {1, 5, 2};
  const int64_t B = 3, T = 4, S = 5, extra = 3;
  for (const bool norm_first : {false, true}) {
    for (const int64_t n_layers : {int64_t{0}, int64_t{2}}) {  // 0: a single TransformerDecoderLayer
      BOOST_TEST_CONTEXT("norm_first=" << norm_first << " n_layers=" << n_layers) {
        manual_seed(81);
        std::unique_ptr<Module> owner;
        std::function<Variable(const Variable&, const Variable&, const AttentionMask&, const AttentionMask&)> run;
        if (n_layers == 0) {
          auto layer = std::make_unique<TransformerDecoderLayer>(small_decoder(norm_first, 0.1));
          run = [m = layer.get()](const Variable& x, const Variable& mem, const AttentionMask& t,
                                  const AttentionMask& s) { return (*m)(x, mem, t, s); };
          owner = std::move(layer);
        } else {
          auto dec = std::make_unique<TransformerDecoder>(
              TransformerDecoderOptions{.n_layers = n_layers, .layer = small_decoder(norm_first, 0.1)});
          run = [m = dec.get()](const Variable& x, const Variable& mem, const AttentionMask& t,
                                const AttentionMask& s) { return (*m)(x, mem, t, s); };
          owner = std::move(dec);
        }
        owner->eval();
        owner->to(DType::f64);
        const Tensor x = randn({B, T, 8}, 82), memory = randn({B, S, kMemory}, 83);
        const Tensor upstream = randn({B, T, 8}, 84);

        struct Run {
          Tensor output, tgt_grad, memory_grad;
          std::vector<Tensor> param_grads;
        };
        const auto forward_backward = [&](int64_t T_run, int64_t S_run, uint64_t noise) {
          owner->zero_grad();
          const Variable tgt(T_run == T ? x : padded(x, T_run, noise), true);
          const Variable mem(S_run == S ? memory : padded(memory, S_run, noise + 1), true);
          const Variable y = run(tgt, mem, target_mask(tgt_lengths, T_run),
                                 AttentionMask::key_padding(memory_lengths, S_run));
          const Tensor g = kernels::mul(padded(upstream, T_run, noise + 2), real_positions(tgt_lengths, T_run));
          y.backward(g);
          Run r{y.value(), tgt.grad(), mem.grad(), {}};
          for (const Variable& p : owner->parameters()) r.param_grads.push_back(p.grad().clone());
          return r;
        };
        const Run tight = forward_backward(T, S, 85), loose = forward_backward(T + extra, S + extra, 86);

        const Tensor real = real_positions(tgt_lengths, T);
        BOOST_TEST(max_abs_diff(kernels::mul(loose.output.narrow(1, 0, T), real), kernels::mul(tight.output, real)) <
                   1e-12);
        BOOST_TEST(max_abs_diff(loose.tgt_grad.narrow(1, 0, T), tight.tgt_grad) < 1e-12);
        BOOST_TEST(max_abs_diff(loose.memory_grad.narrow(1, 0, S), tight.memory_grad) < 1e-12);
        // Padded positions (in both runs) get nothing.
        const Tensor no_tgt = zeros({B, extra, 8}, DType::f64), no_memory = zeros({B, extra, kMemory}, DType::f64);
        BOOST_TEST(max_abs_diff(loose.tgt_grad.narrow(1, T, extra), no_tgt) == 0.0);
        BOOST_TEST(max_abs_diff(loose.memory_grad.narrow(1, S, extra), no_memory) == 0.0);
        BOOST_TEST(max_abs_diff(kernels::mul(tight.tgt_grad, kernels::affine(real, -1.0, 1.0)),
                                zeros({B, T, 8}, DType::f64)) == 0.0);
        const Tensor no_memory_after_first = zeros({S - 1, kMemory}, DType::f64);  // batch 0 has length 1
        BOOST_TEST(max_abs_diff(tight.memory_grad.select(0, 0).narrow(0, 1, S - 1), no_memory_after_first) == 0.0);
        BOOST_REQUIRE(tight.param_grads.size() == loose.param_grads.size());
        const NamedVariables params = owner->named_parameters();
        for (size_t i = 0; i < tight.param_grads.size(); ++i) {
          BOOST_TEST(max_abs_diff(loose.param_grads[i], tight.param_grads[i]) < 1e-12, params[i].first);
        }
        // The check can fail: padding that the masks do not hide changes the outputs.
        const Variable y_unmasked = run(Variable(padded(x, T + extra, 87)), Variable(padded(memory, S + extra, 88)),
                                        AttentionMask::causal(T + extra), {});
        BOOST_TEST(max_abs_diff(kernels::mul(y_unmasked.value().narrow(1, 0, T), real),
                                kernels::mul(tight.output, real)) > 1e-3);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
