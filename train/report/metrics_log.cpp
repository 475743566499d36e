#include "attograd/train/report/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// The fields after "step", in file order.
struct Field {
  const char* key;
  double MetricsRow::*member;
};
constexpr Field kFields[] = {
    {"train_loss", &MetricsRow::train_loss}, {"eval_loss", &MetricsRow::eval_loss},
    {"eval_bits_per_byte", &MetricsRow::eval_bits_per_byte},
    {"token_acc", &MetricsRow::token_acc},   {"seq_acc", &MetricsRow::seq_acc},
    {"lr", &MetricsRow::lr},                 {"grad_norm", &MetricsRow::grad_norm},
    {"tokens_per_s", &MetricsRow::tokens_per_s}, {"elapsed_s", &MetricsRow::elapsed_s},
};
// Written only when measured (runs that do not ask for them keep their lines as they were).
constexpr Field kOptionalFields[] = {
    {"sliding_nats_per_token", &MetricsRow::sliding_nats_per_token},
    {"sliding_perplexity", &MetricsRow::sliding_perplexity},
    {"sliding_bits_per_byte", &MetricsRow::sliding_bits_per_byte},
};

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::FILE* open_or_throw(const std::string& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) {
    const int err = errno;
    throw std::runtime_error("metrics log '" + path + "': cannot open for writing: " + std::strerror(err));
  }
  return f;
}

}  // namespace

std::string metrics_row_json(const MetricsRow& row) {
  OrderedJson j = {{"step", row.step}};
  for (const Field& f : kFields) j[f.key] = row.*f.member;  // NaN is written as null
  for (const Field& f : kOptionalFields) {
    if (!std::isnan(row.*f.member)) j[f.key] = row.*f.member;
  }
  return j.dump();
}

MetricsRow parse_metrics_row(const std::string& line) {
  Json j;
  try {
    j = parse_json(line);
  } catch (const JsonError& e) {
    throw std::invalid_argument(e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("a row must be a JSON object");
  const auto step = j.find("step");
  const std::optional<int64_t> step_value = step == j.end() ? std::nullopt : json_int64(*step);
  if (!step_value) throw std::invalid_argument("a row needs an integer \"step\"");
  MetricsRow row;
  row.step = *step_value;
  for (const Field& f : kOptionalFields) {
    const auto v = j.find(f.key);
    if (v != j.end() && v->is_number()) row.*f.member = v->get<double>();
  }
  for (const Field& f : kFields) {
    const auto v = j.find(f.key);
    if (v == j.end() || v->is_null()) continue;  // missing: stays NaN
    if (!v->is_number()) throw std::invalid_argument(std::string("\"") + f.key + "\" is " + json_type_name(*v));
    row.*f.member = v->get<double>();
  }
  return row;
}

std::vector<MetricsRow> read_metrics_log(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<MetricsRow> rows;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      rows.push_back(parse_metrics_row(line));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("metrics log '" + path + "': line " + std::to_string(number) + ": " + e.what());
    }
  }
  return rows;
}

MetricsLog::MetricsLog(const std::string& path) : path_(path), file_(open_or_throw(path, "w")) {}

MetricsLog::MetricsLog(std::string path, std::vector<MetricsRow> kept)
    : path_(std::move(path)), rows_(std::move(kept)) {
  // Rewrite the kept rows atomically first: a crash now leaves either the old log or the
  // trimmed one, never a half-trimmed file.
  std::string text;
  for (const MetricsRow& r : rows_) text += metrics_row_json(r) + "\n";
  write_file_atomically(path_, text);
  file_.reset(open_or_throw(path_, "a"));
}

MetricsLog MetricsLog::resume(const std::string& path, int64_t resume_step) {
  std::vector<MetricsRow> kept;
  if (file_exists(path)) {
    for (const MetricsRow& r : read_metrics_log(path)) {
      if (r.step <= resume_step) kept.push_back(r);
    }
  }
  return MetricsLog(path, std::move(kept));
}

void MetricsLog::append(const MetricsRow& row) {
  if (!file_) throw std::logic_error("metrics log '" + path_ + "': append on a moved-from log");
  const std::string line = metrics_row_json(row) + "\n";
  if (std::fputs(line.c_str(), file_.get()) < 0 || std::fflush(file_.get()) != 0) {
    const int err = errno;
    throw std::runtime_error("metrics log '" + path_ + "': writing a row failed: " + std::strerror(err));
  }
  rows_.push_back(row);
}

std::optional<MetricsLog> open_metrics_log(const std::string& path, bool resumed, int64_t step) {
  if (path.empty()) return std::nullopt;
  return resumed ? MetricsLog::resume(path, step) : MetricsLog(path);
}

}  // namespace ag
