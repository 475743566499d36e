#include "attograd/train/report/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/outputs.h"

namespace ag {

namespace {

struct Series {
  const char* label;
  const char* color;
  double MetricsRow::*member;
  bool dashed;
};

constexpr Series kLossSeries[] = {
    {"train loss", "#1f77b4", &MetricsRow::train_loss, false},
    {"held-out loss", "#ff7f0e", &MetricsRow::eval_loss, true},
};
constexpr Series kAccuracySeries[] = {
    {"token accuracy", "#2ca02c", &MetricsRow::token_acc, false},
    {"sequence accuracy", "#d62728", &MetricsRow::seq_acc, true},
};
constexpr Series kBitsSeries[] = {
    {"held-out bits per byte", "#9467bd", &MetricsRow::eval_bits_per_byte, true},
    {"sliding-window bits per byte", "#8c564b", &MetricsRow::sliding_bits_per_byte, false},
};
constexpr Series kLrSeries[] = {
    {"learning rate", "#7f7f7f", &MetricsRow::lr, false},
};

// At most this many points get a marker; denser curves read better as plain lines.
constexpr size_t kMaxMarkers = 60;

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  bool percent = false;

  double unit(double v) const {  // position along the axis in [0, 1]
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
};

struct Box {
  double x, y, w, h;  // pixels; y grows downwards
};

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string tick_label(double v, bool percent) {
  if (percent) return fmt("%.0f%%", v * 100);
  if (v == std::floor(v) && std::abs(v) < 1e7) return fmt("%.0f", v);
  return fmt("%g", v);
}

// A step of 1, 2 or 5 times a power of ten giving about `target` intervals over `range`.
double nice_step(double range, int target) {
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

Axis linear_axis(double lo, double hi, int target) {
  Axis a;
  if (!(hi > lo)) hi = lo + (lo != 0 ? std::abs(lo) / 2 : 1);  // one value: a band around it
  const double step = nice_step(hi - lo, target);
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  // Multiples of the step, not a running sum: no drift in the labels.
  for (int i = 0;; ++i) {
    const double t = a.lo + i * step;
    if (t > a.hi + step * 1e-6) break;
    a.ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return a;
}

Axis log_axis(double lo, double hi) {
  Axis a;
  a.log = true;
  const int first = static_cast<int>(std::floor(std::log10(lo)));
  const int last = std::max(first + 1, static_cast<int>(std::ceil(std::log10(hi))));
  a.lo = std::pow(10.0, first);
  a.hi = std::pow(10.0, last);
  for (int e = first; e <= last; ++e) {
    const double decade = std::pow(10.0, e);
    a.ticks.push_back(decade);
    if (last - first <= 2 && e < last) {  // few decades: label 2x and 5x as well
      a.ticks.push_back(2 * decade);
      a.ticks.push_back(5 * decade);
    }
  }
  return a;
}

// The range of a panel's finite values; lo = +inf when it has none.
std::pair<double, double> value_range(const std::vector<MetricsRow>& rows, const Series* series, size_t n) {
  double lo = INFINITY, hi = -INFINITY;
  for (const MetricsRow& r : rows) {
    for (size_t k = 0; k < n; ++k) {
      const double v = r.*series[k].member;
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  return {lo, hi};
}

// A y axis fitted to the values (not from 0, which flattens the part of a curve people look
// at), logarithmic when positive values span more than 20x.
Axis fitted_axis(const std::vector<MetricsRow>& rows, const Series* series, size_t n) {
  const auto [lo, hi] = value_range(rows, series, n);
  if (!std::isfinite(lo)) return linear_axis(0, 1, 5);
  if (lo > 0 && hi / lo > 20) return log_axis(lo, hi);
  return linear_axis(lo, hi, 5);
}

struct Panel {
  const Series* series;
  size_t n;
  Axis y;
  std::string label;
};

void draw_panel(std::string& svg, const Box& box, const Axis& x, const Axis& y, const std::vector<MetricsRow>& rows,
                const Series* series, size_t n_series, const char* y_label, bool x_label) {
  const auto px = [&](double v) { return box.x + x.unit(v) * box.w; };
  const auto py = [&](double v) { return box.y + box.h - y.unit(v) * box.h; };
  svg += "<g class=\"panel\">\n";
  svg += "<rect x=\"" + fmt("%.1f", box.x) + "\" y=\"" + fmt("%.1f", box.y) + "\" width=\"" + fmt("%.1f", box.w) +
         "\" height=\"" + fmt("%.1f", box.h) + "\" fill=\"white\" stroke=\"#333\"/>\n";
  // Grid and tick labels.
  for (double t : y.ticks) {
    const double yy = py(t);
    svg += "<line x1=\"" + fmt("%.1f", box.x) + "\" y1=\"" + fmt("%.1f", yy) + "\" x2=\"" + fmt("%.1f", box.x + box.w) +
           "\" y2=\"" + fmt("%.1f", yy) + "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", box.x - 6) + "\" y=\"" + fmt("%.1f", yy + 4) + "\" text-anchor=\"end\">" +
           tick_label(t, y.percent) + "</text>\n";
  }
  for (double t : x.ticks) {
    const double xx = px(t);
    svg += "<line x1=\"" + fmt("%.1f", xx) + "\" y1=\"" + fmt("%.1f", box.y) + "\" x2=\"" + fmt("%.1f", xx) + "\" y2=\"" +
           fmt("%.1f", box.y + box.h) + "\" stroke=\"#eee\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", xx) + "\" y=\"" + fmt("%.1f", box.y + box.h + 16) + "\" text-anchor=\"middle\">" +
           tick_label(t, false) + "</text>\n";
  }
  svg += "<text x=\"" + fmt("%.1f", box.x - 58) + "\" y=\"" + fmt("%.1f", box.y + box.h / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 " + fmt("%.1f", box.x - 58) + " " +
         fmt("%.1f", box.y + box.h / 2) + ")\" font-size=\"14\">" + y_label + "</text>\n";
  if (x_label) {
    svg += "<text x=\"" + fmt("%.1f", box.x + box.w / 2) + "\" y=\"" + fmt("%.1f", box.y + box.h + 38) +
           "\" text-anchor=\"middle\" font-size=\"14\">step</text>\n";
  }
  // Curves: one polyline per run of finite values, so a missing value leaves a gap.
  std::vector<const Series*> shown;
  for (size_t k = 0; k < n_series; ++k) {
    const Series& s = series[k];
    std::vector<std::pair<double, double>> points;
    std::vector<std::vector<std::pair<double, double>>> runs(1);
    for (const MetricsRow& r : rows) {
      const double v = r.*s.member;
      if (std::isfinite(v) && (!y.log || v > 0)) {
        const double yy = py(std::clamp(v, y.lo, y.hi));
        runs.back().emplace_back(px(static_cast<double>(r.step)), yy);
        points.emplace_back(px(static_cast<double>(r.step)), yy);
      } else if (!runs.back().empty()) {
        runs.emplace_back();
      }
    }
    if (points.empty()) continue;
    shown.push_back(&s);
    const std::string style = std::string("fill=\"none\" stroke=\"") + s.color + "\" stroke-width=\"2\"" +
                              (s.dashed ? " stroke-dasharray=\"6 3\"" : "");
    for (const auto& run : runs) {
      if (run.empty()) continue;
      svg += "<polyline class=\"series\" " + style + " points=\"";
      for (size_t i = 0; i < run.size(); ++i) {
        if (i > 0) svg += ' ';
        svg += fmt("%.1f,", run[i].first);
        svg += fmt("%.1f", run[i].second);
      }
      svg += "\"/>\n";
    }
    if (points.size() <= kMaxMarkers) {
      for (const auto& [cx, cy] : points) {
        svg += "<circle cx=\"" + fmt("%.1f", cx) + "\" cy=\"" + fmt("%.1f", cy) + "\" r=\"2.5\" fill=\"" + s.color + "\"/>\n";
      }
    }
  }
  if (shown.empty()) {
    svg += "<text x=\"" + fmt("%.1f", box.x + box.w / 2) + "\" y=\"" + fmt("%.1f", box.y + box.h / 2) +
           "\" text-anchor=\"middle\" fill=\"#888\" font-size=\"16\">no data</text>\n";
  } else {
    // Legend in one row above the panel, right-aligned: outside the plot area, it never hides
    // a curve. Text width is estimated at 7 px per character (12 px sans-serif).
    double x_end = box.x + box.w;
    const double yy = box.y - 8;
    svg += "<g class=\"legend\">\n";
    for (size_t i = shown.size(); i-- > 0;) {
      const double text_w = 7.0 * static_cast<double>(std::string(shown[i]->label).size());
      const double lx = x_end - text_w - 36;
      svg += "<line x1=\"" + fmt("%.1f", lx) + "\" y1=\"" + fmt("%.1f", yy - 4) + "\" x2=\"" + fmt("%.1f", lx + 28) +
             "\" y2=\"" + fmt("%.1f", yy - 4) + "\" stroke=\"" + shown[i]->color + "\" stroke-width=\"2\"" +
             (shown[i]->dashed ? " stroke-dasharray=\"6 3\"" : "") + "/>\n";
      svg += "<text x=\"" + fmt("%.1f", lx + 34) + "\" y=\"" + fmt("%.1f", yy) + "\">" + shown[i]->label + "</text>\n";
      x_end = lx - 18;
    }
    svg += "</g>\n";
  }
  svg += "</g>\n";
}

}  // namespace

std::string metrics_plot_svg(const std::vector<MetricsRow>& rows, const PlotOptions& options) {
  if (options.width < 300 || options.height < 300) {
    throw std::invalid_argument("metrics_plot_svg: size " + std::to_string(options.width) + "x" +
                                std::to_string(options.height) + " is below the 300x300 minimum");
  }
  const double width = options.width, height = options.height;
  double x_lo = 0, x_hi = 0;
  for (const MetricsRow& r : rows) {
    x_lo = std::min(x_lo, static_cast<double>(r.step));
    x_hi = std::max(x_hi, static_cast<double>(r.step));
  }
  const Axis x = linear_axis(x_lo, x_hi, 8);
  // The panels the rows have data for: the loss always; a task's held-out accuracy, or for a
  // language model (bits per byte, no accuracy) its bits per byte and learning rate.
  std::vector<Panel> panels;
  const auto add = [&](const Series* series, size_t n, const std::string& label) {
    Panel p{series, n, fitted_axis(rows, series, n), label};
    if (p.y.log) p.label += " (log scale)";
    panels.push_back(std::move(p));
  };
  add(kLossSeries, std::size(kLossSeries), "loss");
  const bool accuracy = std::isfinite(value_range(rows, kAccuracySeries, std::size(kAccuracySeries)).first);
  const bool bits = std::isfinite(value_range(rows, kBitsSeries, std::size(kBitsSeries)).first);
  if (accuracy || !bits) {
    Axis y_acc = linear_axis(0, 1, 5);
    y_acc.percent = true;
    panels.push_back({kAccuracySeries, std::size(kAccuracySeries), y_acc, "held-out accuracy"});
  } else {
    panels.back().label += ", nats per token";
    add(kBitsSeries, std::size(kBitsSeries), "bits per byte");
    add(kLrSeries, std::size(kLrSeries), "learning rate");
  }

  const double left = 80, right = 20, top = 66, gap = 64, bottom = 55;
  const double n_panels = static_cast<double>(panels.size());
  const double panel_h = (height - top - gap * (n_panels - 1) - bottom) / n_panels;

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(options.width) + "\" height=\"" +
         std::to_string(options.height) + "\" viewBox=\"0 0 " + std::to_string(options.width) + " " +
         std::to_string(options.height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += std::string(kPlotMarker) + "\n";
  svg += "<title>" + xml_escape(options.title) + "</title>\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fafafa\"/>\n";
  svg += "<text x=\"" + fmt("%.1f", width / 2) + "\" y=\"30\" text-anchor=\"middle\" font-size=\"18\">" +
         xml_escape(options.title) + "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i) {
    const Box box{left, top + static_cast<double>(i) * (panel_h + gap), width - left - right, panel_h};
    draw_panel(svg, box, x, panels[i].y, rows, panels[i].series, panels[i].n, panels[i].label.c_str(),
               i + 1 == panels.size());
  }
  svg += "</svg>\n";
  return svg;
}

void write_metrics_plot(const std::string& path, const std::vector<MetricsRow>& rows, const PlotOptions& options) {
  write_file_atomically(path, metrics_plot_svg(rows, options));
}

}  // namespace ag
