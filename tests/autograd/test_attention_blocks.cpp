// Attention skips the keys a mask hides: a block of 32 query rows computes its scores, and
// multiplies its weights, only up to the last key any of its rows keeps; dV and dK, which run
// along the queries, start each block of 32 keys at the first row that reaches it. Here every
// shape of mask that changes those blocks is held to the composed twin (matmul, masked_fill,
// softmax, matmul: nothing skipped) in float64, forward and backward, on both kernel paths:
// causal, causal with more keys than queries (a decoder's cache), key padding that leaves
// whole key blocks unreached, rows whose reach goes up and down, a block of rows that keeps
// nothing, and a mask that hides nothing. The block bookkeeping itself is checked by hand.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "attograd/autograd/composed.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/prefix_gemm.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

using kernels::AttentionPath;
using Blocks = PrefixBlocks;
constexpr int64_t kBlock = kPrefixBlock;

struct MaskCase {
  std::string name;
  int64_t Tq, Tk;
  std::function<bool(int64_t b, int64_t i, int64_t j)> keeps;
  AttentionMask structure = {};  // the same mask by name, when it has one (none: see keep_of)
  bool named = false;
};
std::ostream& operator<<(std::ostream& os, const MaskCase& c) { return os << c.name; }

const std::vector<MaskCase> kMasks = {
    {"causal, 3 blocks", 75, 75, [](int64_t, int64_t i, int64_t j) { return j <= i; }, AttentionMask::causal(75),
     true},
    {"causal with 35 cached keys", 40, 75, [](int64_t, int64_t i, int64_t j) { return j <= i + 35; },
     AttentionMask::causal(40, 35), true},
    {"key padding to 20 and 70 keys", 70, 75, [](int64_t b, int64_t, int64_t j) { return j < (b == 0 ? 20 : 70); },
     AttentionMask::key_padding({20, 70}, 75), true},
    {"causal and key padding to 0 and 50 keys", 70, 70,
     [](int64_t b, int64_t i, int64_t j) { return j <= i && j < (b == 0 ? 0 : 50); },
     AttentionMask::causal(70) & AttentionMask::key_padding({0, 50}, 70), true},
    {"reach going up and down, row 5 empty", 70, 70,
     [](int64_t b, int64_t i, int64_t j) { return i != 5 && j <= (i * 37 + b * 11) % 70; }},
    {"rows 32..63 keep nothing", 70, 70, [](int64_t, int64_t i, int64_t j) { return (i < 32 || i > 63) && j <= i; }},
    {"sliding window of 10 keys", 70, 70, [](int64_t, int64_t i, int64_t j) { return j <= i && j > i - 10; }},
    {"everything kept", 45, 70, [](int64_t, int64_t, int64_t) { return true; }, AttentionMask(), true},
};

constexpr int64_t kB = 2, kH = 2, kD = 8;

Tensor keep_of(const MaskCase& c) {
  Tensor keep = zeros({kB, 1, c.Tq, c.Tk}, DType::f64);
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t i = 0; i < c.Tq; ++i) {
      for (int64_t j = 0; j < c.Tk; ++j) keep.set({b, 0, i, j}, c.keeps(b, i, j) ? 1.0 : 0.0);
    }
  }
  return keep;
}

struct Result {
  Tensor out, weights, dq, dk, dv, dbias;
};

// The fused kernels on a forced path, the weights recomputed in the backward as the op does.
Result fused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& keep, const Tensor& bias,
             const Tensor& g, AttentionPath path) {
  const kernels::DropoutMask none{};
  const kernels::AttentionForward f = kernels::attention_forward(q, k, v, keep, bias, 0.3, none, path);
  const kernels::AttentionGrads d = kernels::attention_backward(g, q, k, v, keep, bias, f.row_max, f.row_sum, 0.3,
                                                                none, true, true, true, true, path);
  return {f.output, f.weights, d.dq, d.dk, d.dv, kernels::sum_to(d.dscores, bias.shape())};
}

Result composed_twin(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep, const Tensor& bias,
                     const Tensor& g) {
  const Variable vq(q, true), vk(k, true), vv(v, true), vb(bias, true);
  AttentionOptions o;
  o.scale = 0.3;
  const Variable out = composed::scaled_dot_product_attention(vq, vk, vv, AttentionMask::keep(keep), vb, o);
  out.backward(g);
  // The weights, from the same composition without the value product.
  Variable scores = matmul(Variable(q), transpose(Variable(k), -2, -1)) * 0.3 + Variable(bias);
  scores = masked_fill(scores, kernels::affine(keep, -1.0, 1.0), -std::numeric_limits<double>::infinity());
  return {out.value(), ag::softmax(scores, -1).value(), vq.grad(), vk.grad(), vv.grad(), vb.grad()};
}

BOOST_AUTO_TEST_SUITE(attention_mask_blocks)

BOOST_DATA_TEST_CASE(skipping_hidden_keys_matches_the_composed_twin, bdata::make(kMasks), c) {
  Generator gen(31);
  const Tensor q = normal({kB, kH, c.Tq, kD}, 0.0, 1.0, gen, DType::f64);
  const Tensor k = normal({kB, kH, c.Tk, kD}, 0.0, 1.0, gen, DType::f64);
  const Tensor v = normal({kB, kH, c.Tk, kD}, 0.0, 1.0, gen, DType::f64);
  const Tensor g = normal({kB, kH, c.Tq, kD}, 0.0, 1.0, gen, DType::f64);
  const Tensor bias = normal({1, kH, c.Tq, c.Tk}, 0.0, 1.0, gen, DType::f64);
  const Tensor keep = keep_of(c);
  const Result want = composed_twin(q, k, v, keep, bias, g);
  for (AttentionPath path : {AttentionPath::direct, AttentionPath::blas, AttentionPath::automatic}) {
    BOOST_TEST_CONTEXT("path " << static_cast<int>(path)) {
      const Result got = fused(q, k, v, AttentionMask::keep(keep), bias, g, path);
      BOOST_TEST(max_abs_diff(got.out, want.out) <= 1e-12);
      BOOST_TEST(max_abs_diff(got.weights, want.weights) <= 1e-12);
      BOOST_TEST(max_abs_diff(got.dq, want.dq) <= 1e-12);
      BOOST_TEST(max_abs_diff(got.dk, want.dk) <= 1e-12);
      BOOST_TEST(max_abs_diff(got.dv, want.dv) <= 1e-12);
      BOOST_TEST(max_abs_diff(got.dbias, want.dbias) <= 1e-12);
      if (c.named) {  // the mask by name reads no dense tensor, and gives the pattern's very bits
        const Result by_name = fused(q, k, v, c.structure, bias, g, path);
        for (const auto& [a, b] : {std::pair{by_name.out, got.out}, {by_name.weights, got.weights},
                                   {by_name.dq, got.dq}, {by_name.dk, got.dk}, {by_name.dv, got.dv},
                                   {by_name.dbias, got.dbias}}) {
          BOOST_TEST(max_abs_diff(a, b) == 0.0);
        }
      }
    }
  }
}

// The op's own gradients, checked numerically on one mask of each kind of block.
BOOST_AUTO_TEST_CASE(gradcheck_across_blocks) {
  for (const MaskCase& c : {kMasks[1], kMasks[4], kMasks[5]}) {
    BOOST_TEST_CONTEXT(c.name) {
      const Variable q = randn_leaf({1, 1, c.Tq, 3}, 41), k = randn_leaf({1, 1, c.Tk, 3}, 42);
      const Variable v = randn_leaf({1, 1, c.Tk, 2}, 43);
      const AttentionMask keep = AttentionMask::keep(keep_of(c).narrow(0, 1, 1));
      const auto attend = [&](const std::vector<Variable>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], keep).output;
      };
      check_gradients(attend, {q, k, v});
    }
  }
}

// The same for masks by name across blocks: causal after cached keys, causal & key lengths.
BOOST_AUTO_TEST_CASE(gradcheck_named_masks_across_blocks) {
  for (const MaskCase& c : {kMasks[1], kMasks[3]}) {
    BOOST_TEST_CONTEXT(c.name) {
      const Variable q = randn_leaf({kB, 1, c.Tq, 2}, 44), k = randn_leaf({kB, 1, c.Tk, 2}, 45);
      const Variable v = randn_leaf({kB, 1, c.Tk, 2}, 46);
      const auto attend = [&](const std::vector<Variable>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], c.structure).output;
      };
      check_gradients(attend, {q, k, v});
    }
  }
}

BOOST_AUTO_TEST_CASE(blocks_stop_at_the_last_reached_key) {
  // 70 rows in blocks of 32: rows 0..31 reach up to 40 keys, 32..63 none, 64..69 up to 10.
  std::vector<int64_t> reach(70, 0);
  for (int64_t i = 0; i < 32; ++i) reach[static_cast<size_t>(i)] = i == 7 ? 40 : i % 5;
  for (int64_t i = 64; i < 70; ++i) reach[static_cast<size_t>(i)] = 10;
  const Blocks blocks(reach, 100);
  BOOST_REQUIRE(kBlock == 32);
  BOOST_TEST(blocks.row_blocks() == 3);
  BOOST_TEST(blocks.col_blocks() == 4);
  BOOST_TEST((blocks.extent == std::vector<int64_t>{40, 0, 10}));
  // Keys 0..31 are first reached by row 1, keys 32..63 by row 7, keys 64.. by no row.
  BOOST_TEST((blocks.first_row == std::vector<int64_t>{1, 7, 70, 70}));
  const Blocks::Rows last = blocks.rows(2);
  BOOST_TEST(last.first == 64);
  BOOST_TEST(last.count == 6);
  BOOST_TEST(last.reach == 10);
  const Blocks::Cols tail = blocks.cols(3);
  BOOST_TEST(tail.first == 96);
  BOOST_TEST(tail.count == 4);
  BOOST_TEST(tail.from == 70);
}

BOOST_AUTO_TEST_CASE(causal_blocks_do_about_half_the_products) {
  std::vector<int64_t> reach(256);
  for (int64_t i = 0; i < 256; ++i) reach[static_cast<size_t>(i)] = i + 1;
  const Blocks blocks(reach, 256);
  int64_t scores = 0, along_queries = 0;
  for (int64_t r = 0; r < blocks.row_blocks(); ++r) scores += blocks.rows(r).count * blocks.rows(r).reach;
  for (int64_t c = 0; c < blocks.col_blocks(); ++c) along_queries += blocks.cols(c).count * (256 - blocks.cols(c).from);
  // 32 * (32 + 64 + ... + 256) of the 256 * 256 scores: 36 / 64.
  BOOST_TEST(scores == 36864);
  BOOST_TEST(along_queries == 36864);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
