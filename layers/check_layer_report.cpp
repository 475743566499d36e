// The printable form of a check_layer report: one row per check, with its details.
#include <algorithm>
#include <iomanip>
#include <sstream>

#include "attograd/layers/check_layer.h"

namespace ag {

namespace {

std::string sci(double v) {
  std::ostringstream os;
  os << std::setprecision(2) << std::scientific << v;
  return os.str();
}

int count_rows(const std::vector<LayerCheckRow>& rows, LayerCheckStatus status) {
  return static_cast<int>(std::ranges::count_if(rows, [&](const LayerCheckRow& r) { return r.status == status; }));
}

const char* status_name(LayerCheckStatus status) {
  switch (status) {
    case LayerCheckStatus::passed: return "pass";
    case LayerCheckStatus::failed: return "FAIL";
    case LayerCheckStatus::skipped: return "skip";
  }
  return "?";
}

}  // namespace

int LayerCheckReport::passed() const { return count_rows(rows, LayerCheckStatus::passed); }
int LayerCheckReport::failed() const { return count_rows(rows, LayerCheckStatus::failed); }

std::string LayerCheckReport::table() const {
  std::ostringstream os;
  os << "check_layer " << layer << ": " << (ok ? "passed" : "FAILED") << ", " << passed() << "/" << checked()
     << " checks passed (max abs error " << sci(max_abs_error) << ", max rel error " << sci(max_rel_error) << ")\n";
  size_t width = 5;
  for (const LayerCheckRow& r : rows) width = std::max(width, r.check.size());
  const int w = static_cast<int>(width);
  os << "  " << std::left << std::setw(w) << "check" << "  result  detail\n";
  for (const LayerCheckRow& r : rows) {
    os << "  " << std::left << std::setw(w) << r.check << "  " << std::setw(6) << status_name(r.status) << "  "
       << r.detail << "\n";
    std::istringstream lines(r.report);
    for (std::string line; std::getline(lines, line);) os << "      " << line << "\n";
  }
  return os.str();
}

}  // namespace ag
