#include "parity.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "modules.h"

namespace ag::parity {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A row for a result attograd could not produce (no backward after a wrong output shape).
TensorComparison not_computed(const std::string& name, const Tensor& expected, Tolerance tolerance,
                              const std::string& why) {
  TensorComparison c;
  c.name = name;
  c.shape = expected.shape();
  c.max_abs_error = c.max_rel_error = kInf;
  c.tolerance = tolerance;
  c.problem = why;
  return c;
}

std::string scientific(double v) {
  if (std::isinf(v)) return "inf";
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string padded(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// The command line, on CLI11; `quiet` and `paths` receive the values.
void declare_flags(CLI::App& app, bool& quiet, std::vector<std::string>& paths) {
  std::string modules;
  for (const std::string& m : supported_modules()) modules += " " + m;
  app.description(
      "Runs PyTorch parity fixtures (docs/parity.md) through attograd and compares every output and\n"
      "gradient: float64 within atol 1e-10 + rtol 1e-8 * |expected|, float32 within 1e-5 + 1e-4 * |expected|;\n"
      "a float32 fixture with float64 references (reference.*) passes when attograd's largest error against\n"
      "them is at most 3 x PyTorch's float32 largest error + 1e-6 + 2^-23 x the largest |reference|.");
  app.footer("Exit status: 0 all tensors pass, 1 some tensor fails, 2 a malformed fixture or a bad command line.\n"
             "Supported modules:" + modules);
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION);
  app.add_flag("--quiet", quiet, "print the tables of failing fixtures only, and the summary");
  app.add_option("FILE", paths, "fixtures (.safetensors)")->required();
}

}  // namespace

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::f32: return {1e-5, 1e-4};
    case DType::f64: return {1e-10, 1e-8};
  }
  return {};
}

TensorComparison compare_tensors(const std::string& name, const Tensor& actual, const Tensor& expected,
                                 Tolerance tolerance) {
  TensorComparison c;
  c.name = name;
  c.shape = expected.shape();
  c.tolerance = tolerance;
  if (!actual.defined() || actual.shape() != expected.shape()) {
    c.max_abs_error = c.max_rel_error = kInf;
    c.problem = "attograd's result has shape " + (actual.defined() ? actual.shape().str() : std::string("(none)")) +
                ", expected " + expected.shape().str();
    return c;
  }
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  bool within = true;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(e[i])) {
      c.problem = "the expected value at flat index " + std::to_string(i) + " is not finite";
      within = false;
      c.max_abs_error = c.max_rel_error = kInf;
      continue;
    }
    const double diff = std::abs(a[i] - e[i]);  // NaN when a[i] is NaN
    if (!(diff <= tolerance.atol + tolerance.rtol * std::abs(e[i]))) within = false;
    if (std::isnan(diff)) {
      c.problem = "attograd's value at flat index " + std::to_string(i) + " is NaN";
      c.max_abs_error = c.max_rel_error = kInf;
      continue;
    }
    c.max_abs_error = std::max(c.max_abs_error, diff);
    // Expectations at the noise floor (a gradient PyTorch leaves at 1e-17 where ours is exactly
    // zero) are judged by atol alone; dividing by them would report noise as a huge ratio.
    if (std::abs(e[i]) > tolerance.atol) c.max_rel_error = std::max(c.max_rel_error, diff / std::abs(e[i]));
  }
  c.passed = within;
  return c;
}

TensorComparison compare_with_reference(const std::string& name, const Tensor& actual, const Tensor& expected,
                                        const Tensor& reference) {
  TensorComparison c = compare_tensors(name, actual, expected, tolerance_for(DType::f32));
  if (!c.problem.empty()) return c;  // a shape mismatch or a NaN fails whatever the reference says
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector(), r = reference.to_vector();
  ReferenceErrors errors;
  double largest = 0.0;
  for (size_t i = 0; i < r.size(); ++i) {
    errors.attograd = std::max(errors.attograd, std::abs(a[i] - r[i]));
    errors.pytorch = std::max(errors.pytorch, std::abs(e[i] - r[i]));
    largest = std::max(largest, std::abs(r[i]));
  }
  const double float32_rounding = std::ldexp(largest, -23);
  errors.allowed = kReferenceFactor * errors.pytorch + kReferenceFloor + float32_rounding;
  c.reference = errors;
  c.passed = errors.attograd <= errors.allowed;
  return c;
}

bool FixtureResult::passed() const {
  return !comparisons.empty() &&
         std::all_of(comparisons.begin(), comparisons.end(), [](const TensorComparison& c) { return c.passed; });
}

FixtureResult run_fixture(const Fixture& f) {
  FixtureResult r;
  r.label = f.label();
  r.module = f.module();
  r.dtype = f.dtype_text();
  r.mode = f.training() ? "train" : "eval";
  r.note = f.metadata("note");
  try {
    if (f.module() == "TrainingRun" || f.module() == "GPTTrainingRun" || f.module() == "Seq2SeqTrainingRun") {
      r.comparisons = f.module() == "TrainingRun"      ? run_training(f)
                      : f.module() == "GPTTrainingRun" ? run_gpt_training(f)
                                                       : run_seq2seq_training(f);
      f.check_all_used();
      return r;
    }
    const Tolerance tolerance = tolerance_for(f.dtype());
    // Every result is judged here: against its float64 reference when the fixture carries
    // them, else by the fixed tolerance.
    const auto compare = [&](const std::string& row, const Tensor& actual) {
      const Tensor want = f.tensor("expect." + row);
      if (!f.has_references()) return compare_tensors(row, actual, want, tolerance);
      return compare_with_reference(row, actual, want, f.reference(row, want.shape()));
    };
    ModuleRun run = run_module(f);
    const Tensor expected = f.tensor("expect.output");
    r.comparisons.push_back(compare("output", run.output.value()));
    for (const auto& [name, value] : run.extras) r.comparisons.push_back(compare(name, value));
    if (f.has("grad.output")) {
      const Tensor grad = f.tensor("grad.output");
      if (grad.shape() != expected.shape()) {
        f.fail("grad.output " + grad.shape().str() + " must have expect.output's shape " + expected.shape().str());
      }
      const bool backward = run.output.shape() == grad.shape() && run.output.requires_grad();
      if (backward) run.output.backward(grad);
      const auto check = [&](const std::string& what, const std::string& name, const Variable& v) {
        const std::string key = "expect.grad." + what + "." + name;
        if (!f.has(key)) {
          f.fail("grad.output is given but '" + key + "' is missing: state the gradient of every parameter and input");
        }
        const std::string row = "grad." + what + "." + name;
        if (!backward) {
          const Tensor want = f.tensor(key);
          if (f.has_references()) (void)f.reference(row, want.shape());  // read: the fixture is well formed
          r.comparisons.push_back(not_computed(row, want, tolerance,
                                               "no backward: the output has the wrong shape or needs no gradient"));
          return;
        }
        // A parameter the output does not depend on has no gradient yet: PyTorch's zeros.
        r.comparisons.push_back(compare(row, v.grad().defined() ? v.grad() : zeros(v.shape(), v.dtype())));
      };
      for (const auto& [name, p] : run.module->named_parameters()) check("param", name, p);
      for (const auto& [name, x] : run.inputs) check("input", name, x);
    }
  } catch (const std::invalid_argument& e) {
    // attograd refused the fixture's shapes or values (a mask that does not broadcast, an input
    // that does not fit the layer): the fixture cannot be run as written.
    f.fail(std::string("cannot run: ") + e.what());
  }
  f.check_all_used();
  return r;
}

void print_result(std::ostream& out, const FixtureResult& r) {
  out << r.label << "  " << r.module << "  " << r.dtype << "  " << r.mode << '\n';
  size_t name_width = 6, shape_width = 5;
  for (const TensorComparison& c : r.comparisons) {
    name_width = std::max(name_width, c.name.size());
    shape_width = std::max(shape_width, c.shape.str().size());
  }
  name_width += 2;
  shape_width += 2;
  // Against a float64 reference, three more columns: each framework's largest error against
  // it, and what attograd's may reach.
  const bool referenced = std::any_of(r.comparisons.begin(), r.comparisons.end(),
                                      [](const TensorComparison& c) { return c.reference.has_value(); });
  out << "  " << padded("tensor", name_width) << padded("shape", shape_width) << padded("max abs err", 13)
      << padded("max rel err", 13)
      << (referenced ? padded("ours vs f64", 13) + padded("torch vs f64", 14) + padded("allowed", 10) : "")
      << "result\n";
  size_t passed = 0;
  for (const TensorComparison& c : r.comparisons) {
    passed += c.passed ? 1 : 0;
    out << "  " << padded(c.name, name_width) << padded(c.shape.str(), shape_width)
        << padded(scientific(c.max_abs_error), 13) << padded(scientific(c.max_rel_error), 13);
    if (referenced) {
      const ReferenceErrors e = c.reference.value_or(ReferenceErrors{kInf, kInf, kInf});
      out << padded(scientific(e.attograd), 13) << padded(scientific(e.pytorch), 14) << padded(scientific(e.allowed), 10);
    }
    out << (c.passed ? "pass" : "FAIL") << (c.problem.empty() ? "" : "  (" + c.problem + ")") << '\n';
  }
  if (!r.note.empty()) out << "  note: " << r.note << '\n';
  out << "  " << (r.passed() ? "PASS" : "FAIL") << ": " << passed << " of " << r.comparisons.size()
      << " tensors within tolerance";
  if (referenced) {
    out << " (float32 against the float64 reference: ours vs f64 <= " << kReferenceFactor << " x torch vs f64 + "
        << scientific(kReferenceFloor) << " + 2^-23 x max |reference|)";
  } else if (!r.comparisons.empty()) {
    const Tolerance t = r.comparisons.front().tolerance;
    out << " (atol " << scientific(t.atol) << ", rtol " << scientific(t.rtol) << ")";
  }
  out << "\n\n";
}

int run_tool(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  bool quiet = false;
  std::vector<std::string> paths;
  CLI::App app{"", "torch_parity"};
  declare_flags(app, quiet, paths);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    out << app.version() << '\n';
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "torch_parity: " << e.what() << "\nusage: torch_parity [--quiet] FILE... (--help for more)\n";
    return 2;
  }
  int passed = 0, failed = 0, malformed = 0;
  for (const std::string& path : paths) {
    try {
      const FixtureResult r = run_fixture(Fixture::load(path));
      if (!quiet || !r.passed()) print_result(out, r);
      (r.passed() ? passed : failed) += 1;
    } catch (const FixtureError& e) {
      err << "torch_parity: malformed fixture: " << e.what() << '\n';
      ++malformed;
    } catch (const std::exception& e) {
      // The fixture was well formed but attograd failed on it: a parity failure, not a bad file.
      err << "torch_parity: '" << path << "' failed while running: " << e.what() << '\n';
      ++failed;
    }
  }
  out << "torch_parity: " << paths.size() << " fixture(s): " << passed << " passed, " << failed << " failed, "
      << malformed << " malformed\n";
  return malformed > 0 ? 2 : failed > 0 ? 1 : 0;
}

}  // namespace ag::parity
