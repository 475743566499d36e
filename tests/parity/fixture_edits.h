// What the parity test files share: the committed fixtures by name, a fixture's table as text,
// and private copies of a fixture with one thing changed (an element moved, a tensor removed or
// replaced), to show that the runner notices.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/train/io/safetensors.h"
#include "tools/parity/parity.h"

namespace ag::parity::testing {

inline std::string fixture_path(const std::string& name) {
  return std::string(AG_PARITY_FIXTURES) + "/" + name + ".safetensors";
}

inline SafetensorsFile load_fixture(const std::string& name) { return load_safetensors(fixture_path(name)); }

inline std::string table_of(const FixtureResult& r) {
  std::ostringstream os;
  print_result(os, r);
  return os.str();
}

// A private copy of one tensor of `file` with element `flat` moved by `delta`.
inline SafetensorsFile perturbed(const SafetensorsFile& file, const std::string& name, int64_t flat, double delta) {
  SafetensorsFile copy = file;
  for (SafetensorsEntry& e : copy.entries) {
    if (e.name != name) continue;
    std::vector<double> values = e.tensor.to_vector();
    values.at(static_cast<size_t>(flat)) += delta;
    e.tensor = from_vector(values, e.tensor.shape(), e.tensor.dtype());
    return copy;
  }
  BOOST_FAIL("no tensor " << name);
  return copy;
}

inline SafetensorsFile without(const SafetensorsFile& file, const std::string& name) {
  SafetensorsFile copy = file;
  const auto it = std::find_if(copy.entries.begin(), copy.entries.end(),
                               [&](const SafetensorsEntry& e) { return e.name == name; });
  BOOST_REQUIRE(it != copy.entries.end());
  copy.entries.erase(it);
  return copy;
}

// `file` with tensor `name` replaced by (or, when absent, extended with) `t`.
inline SafetensorsFile with_tensor(const SafetensorsFile& file, const std::string& name, const Tensor& t) {
  SafetensorsFile copy = file.contains(name) ? without(file, name) : file;
  copy.add(name, t);
  return copy;
}

inline const TensorComparison& row(const FixtureResult& r, const std::string& name) {
  for (const TensorComparison& c : r.comparisons) {
    if (c.name == name) return c;
  }
  BOOST_FAIL("no row " << name << " in\n" << table_of(r));
  return r.comparisons.front();
}

}  // namespace ag::parity::testing
