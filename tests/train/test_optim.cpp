// Optimizers: 10 steps on a fixed problem against values recorded from PyTorch 1.13 (two with a
// parameter group that weight decay leaves alone: the options' no_decay), skipping of
// parameters without gradients, zero_grad, state export/import and option validation.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <functional>
#include <iomanip>
#include <memory>

#include "attograd/train/optim.h"
#include "attograd/train/schedule.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

// The problem of reference_optim.py: loss = mean((x W + b - y)^2); `unused` never gets a grad.
const std::vector<double> kX = {0.5, -1.0, 2.0, 1.5, 0.25, -0.5, -2.0, 1.0, 0.75, 0.1, -0.3, 1.2};
const std::vector<double> kY = {1.0, -0.5, 0.0, 2.0, -1.5, 0.5, 0.7, 0.3};
const std::vector<double> kW0 = {0.2, -0.4, 0.6, 0.1, -0.3, 0.8};
const std::vector<double> kB0 = {0.05, -0.1};
const std::vector<double> kUnused0 = {1.0, -2.0};

struct Problem {
  Variable x, y, w, b, unused;
  explicit Problem(DType dtype = DType::f64)
      : x(from_vector(kX, {4, 3}, dtype)),
        y(from_vector(kY, {4, 2}, dtype)),
        w(from_vector(kW0, {3, 2}, dtype), true, "w"),
        b(from_vector(kB0, {2}, dtype), true, "b"),
        unused(from_vector(kUnused0, {2}, dtype), true, "unused") {}
  NamedVariables params() const { return {{"w", w}, {"b", b}, {"unused", unused}}; }
  Variable loss() const {
    const Variable d = matmul(x, w) + b - y;
    return mean(d * d);
  }
};

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(NamedVariables)>;

struct Reference {
  const char* name;
  MakeOptimizer make;
  double clip;  // 0: no clipping
  std::vector<double> losses, weight, bias;
};

std::ostream& operator<<(std::ostream& os, const Reference& r) { return os << r.name; }

// Recorded by tests/train/reference_optim.py with torch 1.13 in float64 (losses before each of
// the 10 steps; weight and bias after the last).
const std::vector<Reference> kReferences = {
    {"sgd_plain", [](NamedVariables p) { return std::make_unique<SGD>(std::move(p), SGDOptions{.lr = 0.1}); }, 0,
     {2.7144062499999997, 2.021891254487427, 1.553316134749596, 1.2280125159994606, 0.9956584234587649,
      0.824646093409058, 0.6949545214918271, 0.5937697284348376, 0.5127849620121042, 0.44653060403842},
     {0.5581114523555113, 0.2852270155760887, 0.018805432326038873, 0.46166270984136054, 0.2585490862811383,
      0.0529267877548233},
     {-0.0014035955369718865, 0.17680172753321383}},
    {"sgd_momentum_dampening_wd",
     [](NamedVariables p) {
       return std::make_unique<SGD>(std::move(p),
                                    SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
     },
     0,
     {2.7144062499999997, 2.3496545409197083, 1.803676810301486, 1.2445798730282802, 0.8068126126535866,
      0.5542420020444541, 0.47527906586056146, 0.5051540994700723, 0.5617859529662745, 0.5796199725119427},
     {0.8412804097355495, 0.8418321934649773, -0.4840675564122772, 0.7928705501514002, 0.6930268145617012,
      -0.5335495438159212},
     {-0.10862564850441704, 0.5053872192517828}},
    {"sgd_nesterov_wd",
     [](NamedVariables p) {
       return std::make_unique<SGD>(std::move(p),
                                    SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
     },
     0,
     {2.7144062499999997, 2.051212706567803, 1.3926288453672182, 0.8849657722666253, 0.5733584194176562,
      0.42448817405951217, 0.3693084036741532, 0.3423937117277893, 0.30450635821297517, 0.24630004770109262},
     {0.7209189471332166, 0.728512957966044, -0.45974970198698545, 0.8884050507823078, 0.601387287938752,
      -0.4279170028182497},
     {-0.2618352785597906, 0.7060206255992459}},
    {"sgd_momentum_clipped",
     [](NamedVariables p) { return std::make_unique<SGD>(std::move(p), SGDOptions{.lr = 0.1, .momentum = 0.9}); }, 0.5,
     {2.7144062499999997, 2.578672825900445, 2.3332730212360513, 2.0113729322009957, 1.6498618893536015,
      1.286476742998954, 0.9569916384272994, 0.6916215529843017, 0.5088139112346706, 0.40532839553454847},
     {0.7210624672134142, 0.5542932201937321, -0.18592034432757515, 0.5499849593011769, 0.4757198605933254,
      -0.23169263173618215},
     {0.03198433979655372, 0.20468367567161014}},
    {"adam_wd",
     [](NamedVariables p) {
       return std::make_unique<Adam>(std::move(p),
                                     AdamOptions{.lr = 0.05, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01});
     },
     0,
     {2.7144062499999997, 2.4017656119245414, 2.1149401223313085, 1.856346981179438, 1.6247025717947277,
      1.4170260642883268, 1.2300513795668981, 1.0616310291257895, 0.9105719995233874, 0.7759760498348103},
     {0.6478456847144701, 0.08831571310731594, 0.12098999396484061, 0.588269738050769, 0.16598790874155128,
      0.3136097016553386},
     {0.16318660256448356, 0.2573216080345737}},
    {"adamw",
     [](NamedVariables p) {
       return std::make_unique<AdamW>(std::move(p),
                                      AdamWOptions{.lr = 0.05, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.1});
     },
     0,
     {2.7144062499999997, 2.3900998225022, 2.0946542803901207, 1.8299587952803078, 1.5942754002456199,
      1.3842494043301634, 1.1963140969040067, 1.0280273698565077, 0.8779221362005799, 0.7448763758566195},
     {0.6285862397875428, 0.09523997668158452, 0.10398928969038798, 0.5720109496922099, 0.16726487960767283,
      0.2875150204572763},
     {0.1553253629220846, 0.2606585294772658}},
    {"adamw_betas_bias_not_decayed",
     [](NamedVariables p) {
       return std::make_unique<AdamW>(std::move(p), AdamWOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-8,
                                                                 .weight_decay = 0.5, .no_decay = {"b", "unused"}});
     },
     0,
     {2.7144062499999997, 2.343934813143391, 2.0165699551394125, 1.7317265472035697, 1.4849774880695974,
      1.2703210235000897, 1.0823914011836204, 0.9176906488471334, 0.7738868288695027, 0.649055190266113},
     {0.5466791197230348, 0.11363166988185167, 0.049397657134036564, 0.5082621687087162, 0.16298029403835002,
      0.2005939561289722},
     {0.09448668548382441, 0.2820136231319334}},
    {"sgd_momentum_bias_not_decayed",
     [](NamedVariables p) {
       return std::make_unique<SGD>(
           std::move(p), SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.5, .no_decay = {"b", "unused"}});
     },
     0,
     {2.7144062499999997, 2.293387173875763, 1.6585894538879753, 1.0576071540226974, 0.6614910524312583,
      0.5073579514466768, 0.5153822095808043, 0.5568696982977016, 0.5304321594258221, 0.40794705381463137},
     {0.549704362550231, 0.6610728726114897, -0.6647825449138688, 0.5904960719782781, 0.5131993478388951,
      -0.577027099304015},
     {-0.15965588920811236, 0.6975371742924501}},
};

// Runs `steps` iterations of zero_grad / backward / (clip) / step; returns the losses.
std::vector<double> train(const Problem& problem, Optimizer& opt, int steps, double clip = 0) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    const Variable loss = problem.loss();
    loss.backward();
    if (clip > 0) clip_grad_norm(problem.params(), clip);
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])),
               what << "[" << i << "]: got " << std::setprecision(17) << got[i] << ", PyTorch " << want[i]);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizers)

// Float64 on both sides: only the order of floating-point operations differs, so the values
// agree to ~1e-15; 1e-11 catches any deviation in the update rule (eps placement alone moves
// the result by ~1e-7 here).
BOOST_DATA_TEST_CASE(ten_steps_match_pytorch, bdata::make(kReferences), ref) {
  Problem problem;
  std::unique_ptr<Optimizer> opt = ref.make(problem.params());
  const std::vector<double> losses = train(problem, *opt, 10, ref.clip);
  check_close(losses, ref.losses, 1e-11, std::string(ref.name) + " loss");
  check_close(problem.w.value().to_vector(), ref.weight, 1e-11, std::string(ref.name) + " weight");
  check_close(problem.b.value().to_vector(), ref.bias, 1e-11, std::string(ref.name) + " bias");
  // `unused` never had a gradient: untouched, and no state was created for it.
  BOOST_TEST(problem.unused.value().to_vector() == kUnused0);
  for (const auto& [name, state] : opt->state()) BOOST_TEST(name != "unused");
  BOOST_TEST(opt->state().size() == 2u);
}

BOOST_AUTO_TEST_CASE(float32_training_follows_the_float64_reference) {
  Problem problem(DType::f32);
  Adam opt(problem.params(), AdamOptions{.lr = 0.05, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01});
  const std::vector<double> losses = train(problem, opt, 10);
  check_close(losses, kReferences[4].losses, 1e-5, "f32 adam loss");
  check_close(problem.w.value().to_vector(), kReferences[4].weight, 1e-5, "f32 adam weight");
  BOOST_TEST(problem.w.dtype() == DType::f32);
  BOOST_TEST(opt.state()[0].second.exp_avg.dtype() == DType::f32);
}

BOOST_AUTO_TEST_CASE(parameter_without_grad_keeps_value_and_state) {
  Problem problem;
  SGD opt(problem.params(), SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.5});
  train(problem, opt, 2);
  // Give `unused` a gradient once: now it is updated (and decayed) and gets state.
  problem.unused.set_grad(from_vector(std::vector<double>{1.0, 1.0}, {2}, DType::f64));
  problem.w.zero_grad();
  problem.b.zero_grad();
  const std::vector<double> w_before = problem.w.value().to_vector();
  opt.step();
  BOOST_TEST(problem.w.value().to_vector() == w_before);  // no grad: skipped despite weight decay
  // unused: d = g + 0.5 p = (1.5, 0); first momentum step: buf = d; p -= 0.1 d.
  check_close(problem.unused.value().to_vector(), {1.0 - 0.15, -2.0}, 1e-15, "unused");
  const OptimizerState state = opt.state();
  BOOST_REQUIRE(state.size() == 3u);
  BOOST_TEST(state[0].second.step == 2);
  BOOST_TEST(state[2].first == "unused");
  BOOST_TEST(state[2].second.step == 1);
}

BOOST_AUTO_TEST_CASE(zero_grad_drops_or_zeroes) {
  Problem problem;
  SGD opt(problem.params(), SGDOptions{.lr = 0.1});
  problem.loss().backward();
  BOOST_TEST(problem.w.grad().defined());
  opt.zero_grad(false);
  BOOST_REQUIRE(problem.w.grad().defined());
  BOOST_TEST(problem.w.grad().to_vector() == std::vector<double>(6, 0.0));
  BOOST_TEST(!problem.unused.grad().defined());
  opt.zero_grad();
  BOOST_TEST(!problem.w.grad().defined());
  BOOST_TEST(!problem.b.grad().defined());
}

BOOST_AUTO_TEST_CASE(zeroed_grads_still_decay_like_pytorch) {
  // With zero_grad(false) a zero gradient is a gradient: AdamW still decays the weights.
  Problem problem;
  AdamW opt(problem.params(), AdamWOptions{.lr = 0.1, .weight_decay = 0.5});
  problem.loss().backward();
  opt.zero_grad(false);
  opt.step();
  // m = v = 0, so only the decay p *= 1 - 0.1 * 0.5 acts.
  check_close(problem.w.value().to_vector(), {0.2 * 0.95, -0.4 * 0.95, 0.6 * 0.95, 0.1 * 0.95, -0.3 * 0.95, 0.8 * 0.95},
              1e-15, "w");
}

BOOST_AUTO_TEST_CASE(set_lr_changes_the_next_step) {
  Problem a, b;
  SGD opt_a(a.params(), SGDOptions{.lr = 0.1});
  SGD opt_b(b.params(), SGDOptions{.lr = 0.3});
  opt_a.set_lr(0.3);
  BOOST_TEST(opt_a.lr() == 0.3);
  train(a, opt_a, 3);
  train(b, opt_b, 3);
  BOOST_TEST(a.w.value().to_vector() == b.w.value().to_vector());
  AG_CHECK_THROWS_WITH(opt_a.set_lr(-1.0), std::invalid_argument, "SGD", "learning rate");
}

BOOST_AUTO_TEST_CASE(state_export_and_import_continue_the_run_exactly) {
  for (int kind = 0; kind < 3; ++kind) {
    const MakeOptimizer make = kind == 0   ? kReferences[2].make
                               : kind == 1 ? kReferences[4].make
                                           : kReferences[5].make;
    Problem straight, resumed;
    std::unique_ptr<Optimizer> opt = make(straight.params());
    train(straight, *opt, 5);
    const OptimizerState saved = opt->state();
    train(straight, *opt, 5);

    // The second run restarts from the saved values after 5 steps.
    std::unique_ptr<Optimizer> first = make(resumed.params());
    train(resumed, *first, 5);
    Problem fresh;
    fresh.w.mutable_value().copy_(resumed.w.value());
    fresh.b.mutable_value().copy_(resumed.b.value());
    std::unique_ptr<Optimizer> second = make(fresh.params());
    second->load_state(saved);
    train(fresh, *second, 5);
    BOOST_TEST(fresh.w.value().to_vector() == straight.w.value().to_vector(), "optimizer " << opt->name());
    BOOST_TEST(fresh.b.value().to_vector() == straight.b.value().to_vector(), "optimizer " << opt->name());
  }
}

BOOST_AUTO_TEST_CASE(exported_state_is_a_snapshot) {
  Problem problem;
  Adam opt(problem.params(), AdamOptions{.lr = 0.1});
  train(problem, opt, 1);
  const OptimizerState snapshot = opt.state();
  const std::vector<double> m = snapshot[0].second.exp_avg.to_vector();
  train(problem, opt, 1);
  BOOST_TEST(snapshot[0].second.exp_avg.to_vector() == m);
  BOOST_TEST(snapshot[0].second.step == 1);
  BOOST_TEST(opt.state()[0].second.step == 2);
}

BOOST_AUTO_TEST_CASE(load_state_rejects_bad_state_and_changes_nothing) {
  Problem problem;
  Adam opt(problem.params(), AdamOptions{.lr = 0.1});
  train(problem, opt, 2);
  const OptimizerState good = opt.state();

  OptimizerState unknown = good;
  unknown[0].first = "nope";
  AG_CHECK_THROWS_WITH(opt.load_state(unknown), std::invalid_argument, "Adam::load_state", "unknown parameter 'nope'");

  OptimizerState wrong_shape = good;
  wrong_shape[1].second.exp_avg = zeros({3}, DType::f64);
  AG_CHECK_THROWS_WITH(opt.load_state(wrong_shape), std::invalid_argument, "'b'", "exp_avg", "(3,)", "(2,)");

  OptimizerState wrong_dtype = good;
  wrong_dtype[1].second.exp_avg_sq = zeros({2}, DType::f32);
  AG_CHECK_THROWS_WITH(opt.load_state(wrong_dtype), std::invalid_argument, "'b'", "exp_avg_sq", "f32");

  OptimizerState missing = good;
  missing[0].second.exp_avg_sq = Tensor();
  AG_CHECK_THROWS_WITH(opt.load_state(missing), std::invalid_argument, "'w'", "missing exp_avg_sq");

  OptimizerState foreign = good;
  foreign[0].second.momentum_buffer = zeros({3, 2}, DType::f64);
  AG_CHECK_THROWS_WITH(opt.load_state(foreign), std::invalid_argument, "'w'", "unexpected momentum_buffer");

  OptimizerState no_step = good;
  no_step[0].second.step = 0;
  AG_CHECK_THROWS_WITH(opt.load_state(no_step), std::invalid_argument, "'w'", "step 0");

  OptimizerState twice = good;
  twice.push_back(good[0]);
  AG_CHECK_THROWS_WITH(opt.load_state(twice), std::invalid_argument, "'w'", "twice");

  // After all the failures the state is still the one from training.
  const OptimizerState after = opt.state();
  BOOST_REQUIRE(after.size() == good.size());
  for (size_t i = 0; i < after.size(); ++i) {
    BOOST_TEST(after[i].second.step == good[i].second.step);
    BOOST_TEST(after[i].second.exp_avg.to_vector() == good[i].second.exp_avg.to_vector());
  }
}

BOOST_AUTO_TEST_CASE(load_state_with_fewer_parameters_resets_the_others) {
  Problem problem;
  SGD opt(problem.params(), SGDOptions{.lr = 0.1, .momentum = 0.9});
  train(problem, opt, 2);
  OptimizerState only_w = opt.state();
  only_w.resize(1);
  opt.load_state(only_w);
  BOOST_TEST(opt.state().size() == 1u);
  BOOST_TEST(opt.state()[0].first == "w");
}

BOOST_AUTO_TEST_CASE(constructor_validates_parameters_and_options) {
  Problem p;
  AG_CHECK_THROWS_WITH(SGD({}, SGDOptions{}), std::invalid_argument, "SGD", "empty parameter list");
  AG_CHECK_THROWS_WITH(SGD(NamedVariables{{"w", p.w}, {"w", p.b}}, SGDOptions{}), std::invalid_argument, "'w'", "twice");
  AG_CHECK_THROWS_WITH(SGD(NamedVariables{{"w", p.w}, {"v", p.w}}, SGDOptions{}), std::invalid_argument, "'v'",
                       "same variable");
  AG_CHECK_THROWS_WITH(SGD(NamedVariables{{"x", p.x}}, SGDOptions{}), std::invalid_argument, "'x'", "requires grad");
  AG_CHECK_THROWS_WITH(SGD(NamedVariables{{"sum", p.w * 2.0}}, SGDOptions{}), std::invalid_argument, "'sum'", "mul");
  Variable view(from_vector(kW0, {3, 2}, DType::f64).t(), true);
  AG_CHECK_THROWS_WITH(SGD(NamedVariables{{"t", view}}, SGDOptions{}), std::invalid_argument, "'t'", "non-contiguous");
  AG_CHECK_THROWS_WITH(SGD(p.params(), SGDOptions{.lr = -0.1}), std::invalid_argument, "SGD", "learning rate");
  AG_CHECK_THROWS_WITH(SGD(p.params(), SGDOptions{.momentum = -0.5}), std::invalid_argument, "momentum");
  AG_CHECK_THROWS_WITH(SGD(p.params(), SGDOptions{.nesterov = true}), std::invalid_argument, "Nesterov");
  AG_CHECK_THROWS_WITH(SGD(p.params(), SGDOptions{.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                       std::invalid_argument, "dampening");
  AG_CHECK_THROWS_WITH(Adam(p.params(), AdamOptions{.beta1 = 1.0}), std::invalid_argument, "Adam", "beta1");
  AG_CHECK_THROWS_WITH(Adam(p.params(), AdamOptions{.beta2 = -0.1}), std::invalid_argument, "beta2");
  AG_CHECK_THROWS_WITH(AdamW(p.params(), AdamWOptions{.eps = -1.0}), std::invalid_argument, "AdamW", "eps");
  AG_CHECK_THROWS_WITH(AdamW(p.params(), AdamWOptions{.weight_decay = -1.0}), std::invalid_argument, "weight_decay");
  AG_CHECK_THROWS_WITH(AdamW(p.params(), AdamWOptions{.no_decay = {"b", "bias"}}), std::invalid_argument, "AdamW",
                       "'bias'", "not one of the parameters");
}

BOOST_AUTO_TEST_CASE(names_and_slots) {
  Problem p;
  BOOST_TEST(std::string(SGD(p.params(), SGDOptions{}).name()) == "SGD");
  BOOST_TEST(SGD(p.params(), SGDOptions{}).state_slots().empty());
  BOOST_TEST(SGD(p.params(), SGDOptions{.momentum = 0.5}).state_slots() == std::vector<std::string>{"momentum_buffer"});
  BOOST_TEST(std::string(Adam(p.params(), AdamOptions{}).name()) == "Adam");
  BOOST_TEST(std::string(AdamW(p.params(), AdamWOptions{}).name()) == "AdamW");
  BOOST_TEST(AdamW(p.params(), AdamWOptions{}).options().weight_decay == 0.01);  // PyTorch's AdamW default
  BOOST_TEST((Adam(p.params(), AdamOptions{}).state_slots() == std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
