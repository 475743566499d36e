// The JSON-lines metrics log (written, flushed, read back, trimmed on resume) and the SVG plot
// made from it (checked for well-formed structure, curves, axes and legend).
#include <cmath>
#include <regex>

#include "attograd/train/report/metrics_log.h"
#include "attograd/train/report/plot.h"
#include "train_support.h"

namespace ag::testing {
namespace {

MetricsRow row_at(int64_t step, double loss) {
  MetricsRow r;
  r.step = step;
  r.train_loss = loss * 1.1;
  r.eval_loss = loss;
  r.token_acc = 1 - loss / 4;
  r.seq_acc = std::max(0.0, 1 - loss);
  r.lr = 1e-3;
  r.tokens_per_s = 5e4;
  r.elapsed_s = 0.5 * static_cast<double>(step);
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// A small XML well-formedness check: every tag closes in order, attributes are quoted, and
// there is exactly one root element <svg>. Returns an empty string when fine.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  size_t pos = 0;
  bool seen_root = false;
  while ((pos = xml.find('<', pos)) != std::string::npos) {
    const size_t end = xml.find('>', pos);
    if (end == std::string::npos) return "unclosed '<' at " + std::to_string(pos);
    const std::string tag = xml.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.starts_with("?")) continue;  // the XML declaration
    if (count(tag, "\"") % 2 != 0) return "odd number of quotes in <" + tag + ">";
    if (tag.starts_with("/")) {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : open.back());
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    if (open.empty()) {
      if (seen_root) return "a second root element <" + name + ">";
      if (name != "svg") return "root element is <" + name + ">";
      seen_root = true;
    }
    if (!tag.ends_with("/")) open.push_back(name);
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (!seen_root) return "no <svg> element";
  // Text must not contain raw '&' that is not an entity.
  if (std::regex_search(xml, std::regex("&(?!amp;|lt;|gt;|quot;|apos;)"))) return "unescaped '&'";
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metrics_log)

BOOST_AUTO_TEST_CASE(rows_are_json_lines_with_null_for_missing) {
  MetricsRow r;
  r.step = 7;
  r.train_loss = 0.5;
  r.lr = 0.25;
  BOOST_TEST(metrics_row_json(r) ==
             R"({"step":7,"train_loss":0.5,"eval_loss":null,"eval_bits_per_byte":null,"token_acc":null,"seq_acc":null,)"
             R"("lr":0.25,)"
             R"("grad_norm":null,"tokens_per_s":null,"elapsed_s":null})");
  const MetricsRow back = parse_metrics_row(metrics_row_json(r));
  BOOST_TEST(back.step == 7);
  BOOST_TEST(back.train_loss == 0.5);
  BOOST_TEST(std::isnan(back.eval_loss));
  BOOST_TEST(std::isnan(back.eval_bits_per_byte));
  BOOST_TEST(back.lr == 0.25);
  r.eval_bits_per_byte = 1.5;  // a language model's held-out loss in bits per byte
  BOOST_TEST(metrics_row_json(r).find(R"("eval_bits_per_byte":1.5,)") != std::string::npos);
  BOOST_TEST(parse_metrics_row(metrics_row_json(r)).eval_bits_per_byte == 1.5);
}

BOOST_AUTO_TEST_CASE(each_row_is_on_disk_as_soon_as_it_is_appended) {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  MetricsLog log(path);
  log.append(row_at(10, 2.0));
  // Read while the log is still open: the row was flushed.
  BOOST_TEST(count(slurp(path), "\n") == 1u);
  log.append(row_at(20, 1.0));
  const std::vector<MetricsRow> rows = read_metrics_log(path);
  BOOST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[1].step == 20);
  BOOST_TEST(rows[1].eval_loss == 1.0);
  BOOST_TEST(rows[1].seq_acc == 0.0);
  BOOST_TEST(log.rows().size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_new_log_replaces_an_old_file) {
  TempDir dir;
  const std::string path = dir.file("m.jsonl");
  spit(path, "old contents\n");
  MetricsLog log(path);
  log.append(row_at(1, 1.0));
  BOOST_TEST(read_metrics_log(path).size() == 1u);
}

BOOST_AUTO_TEST_CASE(resume_keeps_rows_up_to_the_checkpoint) {
  TempDir dir;
  const std::string path = dir.file("m.jsonl");
  {
    MetricsLog log(path);
    for (int64_t s : {100, 200, 300, 400}) log.append(row_at(s, 1.0 / static_cast<double>(s)));
  }
  // The run is resumed from a checkpoint at step 250: rows 300 and 400 will be written again.
  MetricsLog resumed = MetricsLog::resume(path, 250);
  BOOST_TEST(resumed.rows().size() == 2u);
  resumed.append(row_at(300, 0.5));
  const std::vector<MetricsRow> rows = read_metrics_log(path);
  BOOST_REQUIRE(rows.size() == 3u);
  BOOST_TEST(rows[0].step == 100);
  BOOST_TEST(rows[1].step == 200);
  BOOST_TEST(rows[2].step == 300);
  BOOST_TEST(rows[2].eval_loss == 0.5);
  // Resuming with no log yet starts one.
  MetricsLog fresh = MetricsLog::resume(dir.file("new.jsonl"), 50);
  BOOST_TEST(fresh.rows().empty());
  fresh.append(row_at(60, 1.0));
  BOOST_TEST(read_metrics_log(dir.file("new.jsonl")).size() == 1u);
}

BOOST_AUTO_TEST_CASE(bad_lines_and_paths_are_named) {
  TempDir dir;
  const std::string path = dir.file("bad.jsonl");
  spit(path, metrics_row_json(row_at(1, 1.0)) + "\n\n{\"loss\":1}\n");
  AG_CHECK_THROWS_WITH(read_metrics_log(path), std::runtime_error, path, "line 3", "step");
  spit(path, "{\"step\":1,\"lr\":\"fast\"}\n");
  AG_CHECK_THROWS_WITH(read_metrics_log(path), std::runtime_error, "line 1", "\"lr\"", "a string");
  spit(path, "{\"step\":1,\n");
  AG_CHECK_THROWS_WITH(read_metrics_log(path), std::runtime_error, "line 1", "json");
  AG_CHECK_THROWS_WITH(MetricsLog("/nonexistent-dir/m.jsonl"), std::runtime_error, "/nonexistent-dir/m.jsonl",
                       "cannot open");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(metrics_plot)

BOOST_AUTO_TEST_CASE(svg_is_well_formed_with_curves_axes_and_legend) {
  std::vector<MetricsRow> rows;
  for (int64_t s = 0; s <= 1000; s += 50) rows.push_back(row_at(s, 2.5 * std::exp(-static_cast<double>(s) / 150.0)));
  const std::string svg = metrics_plot_svg(rows, {.title = "reverse <len 16> & vocab 16"});
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(svg.starts_with("<?xml"));
  BOOST_TEST(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  BOOST_TEST(svg.find("reverse &lt;len 16&gt; &amp; vocab 16") != std::string::npos);  // escaped title
  // Four curves, each a polyline through every row.
  BOOST_TEST(count(svg, "<polyline") == 4u);
  const std::regex points("points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), points); it != std::sregex_iterator(); ++it) {
    BOOST_TEST(count((*it)[1].str(), ",") == rows.size());
  }
  // Legends and axis labels.
  for (const char* label : {"train loss", "held-out loss", "token accuracy", "sequence accuracy", ">step<",
                            "held-out accuracy", "100%", ">0%<", ">1000<"}) {
    BOOST_TEST(svg.find(label) != std::string::npos, "missing " << label);
  }
  // Loss falls from 2.5 to ~3e-3: a log axis with decade ticks.
  BOOST_TEST(svg.find("loss (log scale)") != std::string::npos);
  BOOST_TEST(svg.find(">0.001<") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(points_map_into_their_panel) {
  // Two rows: the first point sits on the left edge of the plot area, the last on the right.
  std::vector<MetricsRow> rows = {row_at(0, 1.0), row_at(100, 0.5)};
  const std::string svg = metrics_plot_svg(rows, {.width = 900, .height = 700});
  const std::regex first_point("points=\"([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+)\"");
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(svg, m, first_point));
  BOOST_TEST(std::stod(m[1].str()) == 80.0);        // left margin
  BOOST_TEST(std::stod(m[3].str()) == 900.0 - 20);  // right margin
  BOOST_TEST(std::stod(m[2].str()) < std::stod(m[4].str()));  // train loss falls: its y grows downwards
  BOOST_TEST(svg.find("loss (log scale)") == std::string::npos);  // a factor 2: linear
}

BOOST_AUTO_TEST_CASE(a_language_model_gets_bits_per_byte_and_the_learning_rate_on_fitted_axes) {
  // A language model's rows: losses from 4.2 to 2.1 nats, bits per byte, a decaying learning
  // rate, and no accuracy: no empty accuracy panel, and no loss axis from 0.
  std::vector<MetricsRow> rows;
  for (int64_t s = 0; s <= 1000; s += 100) {
    MetricsRow r = row_at(s, 4.0 - 0.002 * static_cast<double>(s));
    r.token_acc = r.seq_acc = MetricsRow::kMissing;
    r.eval_bits_per_byte = r.eval_loss / std::log(2.0) / 1.3;
    r.lr = 3e-3 * (1 - 0.9 * static_cast<double>(s) / 1000);
    rows.push_back(r);
  }
  const std::string svg = metrics_plot_svg(rows);
  BOOST_TEST(xml_problem(svg) == "");
  for (const char* label : {"loss, nats per token", "held-out bits per byte", "learning rate", ">0.003<"}) {
    BOOST_TEST(svg.find(label) != std::string::npos, "missing " << label);
  }
  BOOST_TEST(svg.find("held-out accuracy") == std::string::npos);
  BOOST_TEST(count(svg, "<polyline") == 4u);  // train and held-out loss, bits per byte, learning rate
  BOOST_TEST(count(svg, "class=\"panel\"") == 3u);
  // The loss axis's ticks span the losses (2.0 to 4.5), not 0 to 4.5.
  const std::regex ticks("text-anchor=\"end\">([0-9.]+)</text>");  // the y ticks
  const size_t loss_panel_end = svg.find("class=\"panel\"", svg.find("class=\"panel\"") + 1);
  const std::string loss_panel = svg.substr(0, loss_panel_end);
  double lowest = 1e9;
  for (auto it = std::sregex_iterator(loss_panel.begin(), loss_panel.end(), ticks); it != std::sregex_iterator(); ++it) {
    lowest = std::min(lowest, std::stod((*it)[1].str()));
  }
  BOOST_TEST(lowest >= 1.5, "the loss axis starts at " << lowest);
  // A task keeps its accuracy panel and no learning rate.
  const std::string task = metrics_plot_svg({row_at(0, 1.0), row_at(100, 0.5)});
  BOOST_TEST(task.find("held-out accuracy") != std::string::npos);
  BOOST_TEST(task.find("learning rate") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(missing_values_leave_gaps) {
  std::vector<MetricsRow> rows = {row_at(0, 1.0), row_at(10, 0.9), row_at(20, 0.8), row_at(30, 0.7)};
  rows[2].train_loss = NAN;
  const std::string svg = metrics_plot_svg(rows);
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(count(svg, "<polyline") == 5u);  // train loss split in two runs
}

BOOST_AUTO_TEST_CASE(empty_log_gives_empty_panels) {
  const std::string svg = metrics_plot_svg({});
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(count(svg, "no data") == 2u);
  BOOST_TEST(count(svg, "<polyline") == 0u);
  AG_CHECK_THROWS_WITH(metrics_plot_svg({}, {.width = 100}), std::invalid_argument, "100x700");
}

BOOST_AUTO_TEST_CASE(plot_file_is_written_atomically) {
  TempDir dir;
  const std::string path = dir.file("run.svg");
  write_metrics_plot(path, {row_at(0, 1.0), row_at(5, 0.2)});
  BOOST_TEST(slurp(path) == metrics_plot_svg({row_at(0, 1.0), row_at(5, 0.2)}));
  BOOST_TEST(dir.entries() == std::vector<std::string>{"run.svg"});
  AG_CHECK_THROWS_WITH(write_metrics_plot("/nonexistent-dir/run.svg", {}), std::runtime_error, "/nonexistent-dir/run.svg");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
