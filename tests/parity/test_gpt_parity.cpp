// The GPT (models/gpt/gpt.h) against its nanoGPT-style PyTorch twin (tests/parity/torch_gpt.py):
// the same weights give the same logits and gradients in f64 and f32 (the tied table's gradient
// being the sum of both uses), the golden 20-step AdamW run follows PyTorch's losses, and bad
// GPT fixtures are refused with a message naming the problem.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/models/gpt/gpt.h"
#include "attograd/train/io/safetensors.h"
#include "tools/parity/parity.h"
#include "fixture_edits.h"
#include "support.h"

using namespace ag;
using namespace ag::parity;
using namespace ag::parity::testing;

BOOST_AUTO_TEST_SUITE(gpt_parity)

BOOST_AUTO_TEST_CASE(same_weights_give_pytorchs_logits_and_gradients) {
  for (const char* name : {"gpt_f64", "gpt_f32", "gpt_nobias_f64"}) {
    BOOST_TEST_CONTEXT(name) {
      const SafetensorsFile file = load_fixture(name);
      const FixtureResult r = run_fixture(Fixture(file, name));
      BOOST_TEST(r.passed(), "\n" << table_of(r));
      BOOST_TEST(r.module == "GPT");
      // The logits, then one gradient row per attograd parameter: the tied table once, no head.
      const auto rows = [&](const std::string& prefix) {
        return std::count_if(r.comparisons.begin(), r.comparisons.end(),
                             [&](const TensorComparison& c) { return c.name.rfind(prefix, 0) == 0; });
      };
      BOOST_TEST(r.comparisons.front().name == "output");
      BOOST_TEST(r.comparisons.front().shape.rank() == 3);
      BOOST_TEST(rows("grad.param.embed.weight") == 1);
      BOOST_TEST(rows("grad.param.") == static_cast<std::ptrdiff_t>(r.comparisons.size() - 1));
      BOOST_TEST(rows("grad.param.head") == 0);
    }
  }
}

// The tied table's gradient is checked element by element: ten tolerances off on one element
// fails exactly that row, a tenth of a tolerance passes.
BOOST_AUTO_TEST_CASE(the_tied_gradient_row_bites) {
  const SafetensorsFile file = load_fixture("gpt_f64");
  const std::string tensor = "expect.grad.param.embed.weight";
  const Tolerance t = tolerance_for(DType::f64);
  const double e = file.find(tensor)->tensor.to_vector().at(3);
  const double one = t.atol + t.rtol * std::abs(e);
  const FixtureResult off = run_fixture(Fixture(perturbed(file, tensor, 3, 10 * one), "off"));
  for (const TensorComparison& c : off.comparisons) BOOST_TEST(c.passed == (c.name != "grad.param.embed.weight"), c.name);
  BOOST_TEST(run_fixture(Fixture(perturbed(file, tensor, 3, 0.1 * one), "near")).passed());
}

// Twenty AdamW steps from the twin's nanoGPT init on stored next-token batches: attograd's f32
// loss is within 1e-4 of PyTorch's at every step (f64 within 1e-10 + 1e-8 relative), and the run
// really trains.
BOOST_AUTO_TEST_CASE(golden_run_matches_pytorch_at_every_step) {
  for (const char* name : {"gpt_training_adamw_f32", "gpt_training_adamw_f64"}) {
    BOOST_TEST_CONTEXT(name) {
      const SafetensorsFile file = load_fixture(name);
      const std::vector<double> expected = file.find("expect.loss")->tensor.to_vector();
      BOOST_TEST_REQUIRE(expected.size() == 20u);
      BOOST_TEST(expected.back() < expected.front() - 0.5, "the golden run does not learn");
      const FixtureResult r = run_fixture(Fixture(file, name));
      BOOST_TEST(r.passed(), "\n" << table_of(r));
      BOOST_TEST_REQUIRE(r.comparisons.size() == 1u);
      BOOST_TEST(r.comparisons[0].name == "loss");
      BOOST_TEST(r.comparisons[0].max_abs_error <= kTrainingLossAtol);
      const bool f32 = std::string(name).find("f32") != std::string::npos;
      const FixtureResult off = run_fixture(Fixture(perturbed(file, "expect.loss", 17, f32 ? 2 * kTrainingLossAtol : 1e-6), name));
      BOOST_TEST(!off.passed());
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_gpt_fixtures_are_refused) {
  const SafetensorsFile gpt = load_fixture("gpt_f64");
  const auto refused = [](SafetensorsFile file, const std::string& key, const std::string& value,
                          std::initializer_list<std::string> parts) {
    file.metadata[key] = value;
    for (const std::string& part : parts) AG_CHECK_THROWS_WITH(run_fixture(Fixture(file, "bad")), FixtureError, part);
  };
  const std::string config = gpt.metadata.at("config");
  refused(gpt, "config", R"({"vocab":11,"block_size":8,"d_model":12,"n_head":5,"n_layers":2})",
          {"not a valid GPT", "n_head 5"});
  refused(gpt, "config", config.substr(0, config.size() - 1) + ",\"n_layer\":2}", {"n_layer"});
  refused(gpt, "config", R"({"vocab":11,"d_model":12,"n_head":3,"n_layers":2})", {"config.block_size is required"});
  refused(gpt, "mode", "train", {"dropout", "train"});  // dropout 0.1 cannot be compared in train mode
  // A table of the wrong size for the configured vocabulary.
  refused(gpt, "config", R"({"vocab":10,"block_size":8,"d_model":12,"n_head":3,"n_layers":2,"dropout":0.1})",
          {"do not fit", "embed.weight"});
}

BOOST_AUTO_TEST_SUITE_END()
