// recompute (autograd/recompute.h): a region run without its graph and again during backward.
// Its gradients must be the plain run's very bits (with dropout inside, an input whose gradient
// is partly gathered outside the region, and gradients that already hold a value), it must
// pass the f64 gradient check, keep less memory alive than the plain graph, and call a leaf's
// grad-ready hook once.
#include <functional>
#include <string>
#include <vector>

#include "support.h"

namespace ag::testing {
namespace {

// Bit-for-bit equality of two tensors of one shape and dtype.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  // f32 and f64 values are exact in double: equal doubles are equal bits (no NaN here).
  return a.to_vector() == b.to_vector();
}

// A region with the parts of a block: a linear map, a GELU, dropout, a layer norm, a second
// linear map. x: (N, 6) -> (N, 6).
struct Region {
  Variable w1, b1, w2, gamma, beta;
  explicit Region(DType dtype) {
    Generator gen(5);
    w1 = Variable(normal({16, 6}, 0.0, 0.4, gen, dtype), true, "w1");
    b1 = Variable(normal({16}, 0.0, 0.4, gen, dtype), true, "b1");
    w2 = Variable(normal({6, 16}, 0.0, 0.4, gen, dtype), true, "w2");
    gamma = Variable(normal({16}, 1.0, 0.1, gen, dtype), true, "gamma");
    beta = Variable(normal({16}, 0.0, 0.1, gen, dtype), true, "beta");
  }
  std::vector<Variable> leaves() const { return {w1, b1, w2, gamma, beta}; }
  Variable operator()(const Variable& x) const {
    Variable h = gelu(linear(x, w1, b1));
    h = dropout(h, 0.3, /*training=*/true, default_generator());
    h = layer_norm(h, gamma, beta, 1, 1e-5);
    return linear(h, w2);
  }
};

// loss = sum(c * (x + r(x))) with x = 2 a, and r applied `regions` times in a row; with
// `recomputed` each application of r goes through recompute. x's gradient comes partly from
// the residual path (outside every region) and partly from inside the first region.
Variable loss_of(const Region& r, const Variable& a, const Tensor& c, int regions, bool recomputed) {
  Variable x = mul(a, 2.0);
  Variable h = x;
  for (int i = 0; i < regions; ++i) {
    if (recomputed) {
      h = recompute("region", [&r](const std::vector<Variable>& in) { return r(in[0]); }, {h}, r.leaves());
    } else {
      h = r(h);
    }
  }
  return sum(mul(add(x, h), Variable(c)));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recompute_region)

BOOST_AUTO_TEST_CASE(gradients_are_the_plain_runs_bits) {
  // f32, so that any change in the order of additions would show in the last bits. Two passes
  // each, so that the second adds into gradients that already hold a value.
  Generator gen(11);
  const Tensor a0 = normal({5, 6}, 0.0, 1.0, gen, DType::f32);
  const Tensor c = normal({5, 6}, 0.0, 1.0, gen, DType::f32);
  for (const int regions : {1, 3}) {
    BOOST_TEST_CONTEXT("regions=" << regions) {
      Region plain(DType::f32), again(DType::f32);
      Variable a_plain(a0.clone(), true, "a"), a_again(a0.clone(), true, "a");
      for (int pass = 0; pass < 2; ++pass) {
        default_generator().manual_seed(3);
        default_generator().set_step(static_cast<uint64_t>(pass));
        Variable lp = loss_of(plain, a_plain, c, regions, false);
        default_generator().manual_seed(3);
        default_generator().set_step(static_cast<uint64_t>(pass));
        Variable la = loss_of(again, a_again, c, regions, true);
        BOOST_TEST(same_bits(lp.value(), la.value()));
        lp.backward();
        la.backward();
      }
      BOOST_TEST(same_bits(a_plain.grad(), a_again.grad()));
      const std::vector<Variable> p = plain.leaves(), q = again.leaves();
      for (size_t i = 0; i < p.size(); ++i) {
        BOOST_TEST(same_bits(p[i].grad(), q[i].grad()), p[i].name() << " differs");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_second_run_replays_the_first_runs_dropout) {
  // Backward happens after other random ops have moved the generator on: the region must still
  // draw its own masks again, and leave the generator where it was.
  Region r(DType::f64), plain(DType::f64);
  Generator gen(2);
  const Tensor x0 = normal({4, 6}, 0.0, 1.0, gen, DType::f64);
  Variable x(x0, true, "x"), xp(x0.clone(), true, "x");
  default_generator().manual_seed(9);
  Variable y = recompute("region", [&r](const std::vector<Variable>& in) { return r(in[0]); }, {x}, r.leaves());
  (void)dropout(Variable(ones({100}, DType::f64)), 0.5, true, default_generator());  // moves the generator
  const GeneratorState before = default_generator().state();
  sum(y).backward();
  BOOST_TEST((default_generator().state() == before));
  default_generator().manual_seed(9);
  sum(plain(xp)).backward();
  BOOST_TEST(max_abs_diff(x.grad(), xp.grad()) == 0.0);
  BOOST_TEST(max_abs_diff(r.w1.grad(), plain.w1.grad()) == 0.0);
}

BOOST_AUTO_TEST_CASE(gradcheck_inputs_and_parameters_through_regions) {
  Region r(DType::f64);
  Variable a = randn_leaf({3, 6}, 4, "a");
  GradcheckOptions o;
  o.params = r.leaves();
  Generator gen(6);
  const Tensor c = normal({3, 6}, 0.0, 1.0, gen, DType::f64);
  check_gradients([&](const std::vector<Variable>& in) { return loss_of(r, in[0], c, 2, true); }, {a}, o);
}

BOOST_AUTO_TEST_CASE(two_inputs_one_read_by_every_region) {
  // As the encoder's output in every decoder layer: m's gradient gathers over the regions.
  Generator gen(8);
  const Tensor x0 = normal({4, 6}, 0.0, 1.0, gen, DType::f32), m0 = normal({4, 6}, 0.0, 1.0, gen, DType::f32);
  Variable wp(normal({6, 6}, 0.0, 0.5, gen, DType::f32), true, "w");
  Variable wq(wp.value().clone(), true, "w");
  // m is read twice in each layer, so its gradient gets several additions per layer, whose
  // order against the other layers' shows in f32.
  auto layer = [](const Variable& h, const Variable& m, const Variable& w) {
    return add(tanh(add(linear(h, w), m)), linear(m, w));
  };
  auto run = [&](const Variable& w, bool recomputed, Tensor& gx, Tensor& gm) {
    Variable xs(x0.clone(), true), ms(m0.clone(), true);
    Variable x = mul(xs, 1.5), m = mul(ms, 0.5);  // op results, as a model's activations are
    Variable h = x;
    for (int i = 0; i < 3; ++i) {
      if (recomputed) {
        h = recompute("layer", [&](const std::vector<Variable>& in) { return layer(in[0], in[1], w); }, {h, m}, {w});
      } else {
        h = layer(h, m, w);
      }
    }
    sum(mul(h, h)).backward();
    gx = xs.grad();
    gm = ms.grad();
  };
  Tensor gx1, gm1, gx2, gm2;
  run(wp, false, gx1, gm1);
  run(wq, true, gx2, gm2);
  BOOST_TEST(same_bits(gx1, gx2));
  BOOST_TEST(same_bits(gm1, gm2));
  BOOST_TEST(same_bits(wp.grad(), wq.grad()));
}

BOOST_AUTO_TEST_CASE(only_the_inputs_stay_alive_between_forward_and_backward) {
  // Eight regions over (256, 64) activations with a 4x wider middle: the plain graph keeps
  // every region's intermediates, the recomputed one only each region's input.
  Generator gen(1);
  Variable w1(normal({256, 64}, 0.0, 0.1, gen, DType::f32), true), w2(normal({64, 256}, 0.0, 0.1, gen, DType::f32), true);
  auto region = [&](const Variable& x) { return linear(relu(linear(x, w1)), w2); };
  auto live_after_forward = [&](bool recomputed) {
    release_cached_memory();
    Variable a(normal({256, 64}, 0.0, 1.0, gen, DType::f32), true);
    const std::size_t before = memory_stats().live;
    Variable h = mul(a, 1.0);
    for (int i = 0; i < 8; ++i) {
      h = recomputed ? recompute("r", [&](const std::vector<Variable>& in) { return region(in[0]); }, {h}, {w1, w2})
                     : region(h);
    }
    Variable loss = sum(h);
    const std::size_t held = memory_stats().live - before;
    loss.backward();
    return held;
  };
  const std::size_t plain = live_after_forward(false), recomputed = live_after_forward(true);
  const std::size_t activation = 256 * 64 * sizeof(float);
  BOOST_TEST_MESSAGE("held after forward: plain " << plain << " bytes, recomputed " << recomputed);
  // Plain: per region the input linear1 saved and the wide relu output (4 activations) that
  // relu and linear2 both saved.
  BOOST_TEST(plain >= 8 * 5 * activation);
  // Recomputed: each region's input and output (9 activations) and little else.
  BOOST_TEST(recomputed <= 10 * activation);
}

BOOST_AUTO_TEST_CASE(a_leafs_hook_runs_once_with_its_final_gradient) {
  Region r(DType::f64);
  Variable a = randn_leaf({3, 6}, 4, "a");
  int calls = 0;
  Tensor seen;
  r.w1.set_grad_ready_hook([&](const Variable& v) {
    ++calls;
    seen = v.grad().clone();
  });
  Generator gen(3);
  loss_of(r, a, normal({3, 6}, 0.0, 1.0, gen, DType::f64), 3, true).backward();
  BOOST_TEST(calls == 1);
  BOOST_TEST(max_abs_diff(seen, r.w1.grad()) == 0.0);
}

BOOST_AUTO_TEST_CASE(without_grad_it_is_the_region_itself) {
  Region r(DType::f64);
  Variable a = randn_leaf({3, 6}, 4, "a");
  NoGradGuard no_grad;
  Variable y = recompute("region", [&r](const std::vector<Variable>& in) { return r(in[0]); }, {a}, r.leaves());
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(y.grad_fn() == nullptr);
}

BOOST_AUTO_TEST_CASE(bad_regions_are_named) {
  Variable a = randn_leaf({2, 2}, 1, "a");
  AG_CHECK_THROWS_WITH(recompute("block 3", RecomputeFn(), {a}, {}), std::invalid_argument, "recompute (block 3)",
                       "empty");
  AG_CHECK_THROWS_WITH(recompute("block 3", [](const std::vector<Variable>& in) { return in[0]; }, {Variable()}, {}),
                       std::invalid_argument, "recompute (block 3)", "input 0");
  // A region whose second run differs from its first is refused in backward.
  int runs = 0;
  Variable y = recompute(
      "shifty", [&runs](const std::vector<Variable>& in) { return ++runs == 1 ? in[0] : sum(in[0]); }, {a}, {});
  AG_CHECK_THROWS_WITH(sum(y).backward(), std::logic_error, "recompute (shifty)", "(2, 2)");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
