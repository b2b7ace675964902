#include "analysis/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace wafersim::analysis {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string chart_colour(int index) {
  static constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                             "#56B4E9", "#D55E00", "#F0E442", "#000000"};
  constexpr int n = static_cast<int>(std::size(kPalette));
  return kPalette[((index % n) + n) % n];
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) hi = lo + 1.0;
  const double raw = (hi - lo) / std::max(1, count);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * mag >= raw) {
      step = f * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string tick_label(double v) {
  const double a = std::abs(v);
  if (a >= 1e12) return fmt::format("{:.4g}T", v / 1e12);
  if (a >= 1e9) return fmt::format("{:.4g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.4g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.4g}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

namespace {

struct Frame {
  double left = 64, right = 16, top = 28, bottom = 44;
  double w = 0, h = 0;  // plot area
};

std::string open_svg(int width, int height, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n<title>{}</title>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"17\" font-size=\"13\" font-weight=\"bold\" "
      "text-anchor=\"middle\">{}</text>\n",
      width, height, width, height, xml_escape(title), width / 2, xml_escape(title));
}

// Axes, grid lines and tick labels; returns the svg text.
std::string axes(const Frame& f, const std::vector<double>& xt, const std::vector<std::string>& xl,
                 const std::vector<double>& xpos, const std::vector<double>& yt,
                 const std::vector<double>& ypos, const std::string& x_label,
                 const std::string& y_label) {
  std::string s;
  for (std::size_t i = 0; i < yt.size(); ++i) {
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", f.left,
        ypos[i], f.left + f.w, ypos[i]);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", f.left - 4,
                     ypos[i] + 4, xml_escape(tick_label(yt[i])));
  }
  for (std::size_t i = 0; i < xt.size(); ++i) {
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\"/>\n",
        xpos[i], f.top + f.h, xpos[i], f.top + f.h + 4);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", xpos[i],
                     f.top + f.h + 16, xml_escape(xl[i]));
  }
  s += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#333\"/>\n",
      f.left, f.top, f.w, f.h);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                   f.left + f.w / 2, f.top + f.h + 34, xml_escape(x_label));
  s += fmt::format(
      "<text transform=\"translate(14,{:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      f.top + f.h / 2, xml_escape(y_label));
  return s;
}

std::string legend(const std::vector<std::string>& names, double x, double y) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double yy = y + static_cast<double>(i) * 15;
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        x, yy, chart_colour(static_cast<int>(i)), x + 14, yy + 9, xml_escape(names[i]));
  }
  return s;
}

double legend_width(const std::vector<std::string>& names) {
  std::size_t longest = 0;
  for (const auto& n : names) longest = std::max(longest, n.size());
  return names.size() > 1 ? 24.0 + 6.2 * static_cast<double>(longest) : 0.0;
}

template <class Series>
std::vector<std::string> series_names(const std::vector<Series>& series) {
  std::vector<std::string> names;
  for (const auto& s : series) names.push_back(s.name);
  return names;
}

// The plot area of a chart of `width` x `height` with a legend of `names` on
// the right.
Frame framed(int width, int height, const std::vector<std::string>& names) {
  Frame f;
  f.right += legend_width(names);
  f.w = width - f.left - f.right;
  f.h = height - f.top - f.bottom;
  return f;
}

// Ticks of a log10 axis whose data span [lo, hi] (logarithms): decades, and 2
// and 5 times them over up to three decades; the ends within a decade.
std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> t;
  const bool fine = hi - lo <= 3.0;
  for (double e = std::floor(lo); e <= hi + 1e-9; e += 1.0)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, e), lv = std::log10(v);
      if ((m != 1.0 && !fine) || lv < lo - 1e-9 || lv > hi + 1e-9) continue;
      t.push_back(v);
    }
  if (t.empty())
    for (double e : {lo, hi}) t.push_back(std::pow(10.0, e));
  return t;
}

}  // namespace

std::string xy_chart_svg(const XyChart& c) {
  const std::vector<std::string> names = series_names(c.series);
  const Frame f = framed(c.width, c.height, names);
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  const auto xv = [&](double x) { return c.x_log ? std::log10(std::max(x, 1e-300)) : x; };
  const auto yv = [&](double y) { return c.y_log ? std::log10(std::max(y, 1e-300)) : y; };
  // A point is drawn when it is finite and, on a log axis, positive.
  const auto drawn = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && !(c.x_log && x <= 0) && !(c.y_log && y <= 0);
  };
  for (const auto& s : c.series)
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!drawn(s.x[i], s.y[i])) continue;
      x0 = std::min(x0, xv(s.x[i])), x1 = std::max(x1, xv(s.x[i]));
      y0 = std::min(y0, yv(s.y[i])), y1 = std::max(y1, yv(s.y[i]));
    }
  std::string svg = open_svg(c.width, c.height, c.title);
  if (!std::isfinite(x0)) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no data</text>\n</svg>\n",
                       c.width / 2, c.height / 2);
    return svg;
  }
  if (c.y_from_zero && !c.y_log) y0 = std::min(0.0, y0);
  const double y_data0 = y0, y_data1 = y1;
  if (x1 <= x0) x0 -= 0.5, x1 += 0.5;
  const double x_data0 = x0, x_data1 = x1;
  {  // room for the markers at the ends
    const double pad = (x1 - x0) * 0.03;
    x0 -= pad, x1 += pad;
  }
  if (y1 <= y0) y1 = y0 + (y0 == 0 ? 1.0 : std::abs(y0) * 0.1);
  y1 += (y1 - y0) * 0.05;
  const auto px = [&](double x) { return f.left + (xv(x) - x0) / (x1 - x0) * f.w; };
  const auto py = [&](double y) { return f.top + f.h - (yv(y) - y0) / (y1 - y0) * f.h; };
  std::vector<double> xt, xpos, yt = c.y_log ? log_ticks(y_data0, y_data1) : nice_ticks(y0, y1, 5),
                                ypos;
  std::vector<std::string> xl;
  if (c.x_log) {
    for (double v : log_ticks(x_data0, x_data1)) {
      xt.push_back(v);
      xl.push_back(tick_label(v));
      xpos.push_back(px(v));
    }
  } else {
    for (double t : nice_ticks(x0, x1, 6)) {
      xt.push_back(t);
      xl.push_back(tick_label(t));
      xpos.push_back(px(t));
    }
  }
  yt.erase(std::remove_if(yt.begin(), yt.end(),
                          [&](double t) { return (c.y_log && t <= 0) || yv(t) < y0 || yv(t) > y1; }),
           yt.end());
  for (double t : yt) ypos.push_back(py(t));
  svg += axes(f, xt, xl, xpos, yt, ypos, c.x_label, c.y_label);
  for (std::size_t k = 0; k < c.series.size(); ++k) {
    const XySeries& s = c.series[k];
    const std::string colour = chart_colour(static_cast<int>(k));
    std::string pts;
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!drawn(s.x[i], s.y[i])) continue;
      pts += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y[i]));
    }
    if (s.lines && !pts.empty())
      svg += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", pts,
          colour);
    if (s.markers) {
      svg += fmt::format("<g fill=\"{}\">", colour);
      for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
        if (!drawn(s.x[i], s.y[i])) continue;
        svg +=
            fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\"/>", px(s.x[i]), py(s.y[i]));
      }
      svg += "</g>\n";
    }
  }
  if (names.size() > 1) svg += legend(names, f.left + f.w + 10, f.top + 4);
  svg += "</svg>\n";
  return svg;
}

std::string bar_chart_svg(const BarChart& c) {
  const std::vector<std::string> names = series_names(c.series);
  const Frame f = framed(c.width, c.height, names);
  double y1 = 0.0;
  for (const auto& s : c.series)
    for (double v : s.values)
      if (std::isfinite(v)) y1 = std::max(y1, v);
  if (y1 <= 0) y1 = 1.0;
  y1 *= 1.08;
  const auto py = [&](double y) { return f.top + f.h - y / y1 * f.h; };
  const std::size_t n = c.categories.size();
  const double group = f.w / std::max<std::size_t>(1, n);
  const double bar = group * 0.8 / std::max<std::size_t>(1, c.series.size());
  std::vector<double> xt, xpos, yt = nice_ticks(0.0, y1, 5), ypos;
  yt.erase(std::remove_if(yt.begin(), yt.end(), [&](double t) { return t > y1; }), yt.end());
  for (double t : yt) ypos.push_back(py(t));
  for (std::size_t i = 0; i < n; ++i) {
    xt.push_back(static_cast<double>(i));
    xpos.push_back(f.left + group * (static_cast<double>(i) + 0.5));
  }
  std::string svg = open_svg(c.width, c.height, c.title);
  svg += axes(f, xt, c.categories, xpos, yt, ypos, "", c.y_label);
  for (std::size_t k = 0; k < c.series.size(); ++k)
    for (std::size_t i = 0; i < std::min(n, c.series[k].values.size()); ++i) {
      const double v = c.series[k].values[i];
      if (!std::isfinite(v) || v <= 0) continue;
      const double x =
          f.left + group * static_cast<double>(i) + group * 0.1 + bar * static_cast<double>(k);
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}: {}</title></rect>\n",
          x, py(v), bar - 1, f.top + f.h - py(v), chart_colour(static_cast<int>(k)),
          xml_escape(c.series[k].name + ", " + c.categories[i]), fmt::format("{:.4g}", v));
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"9\">{}</text>\n",
          x + bar / 2, py(v) - 3, xml_escape(tick_label(v)));
    }
  if (names.size() > 1) svg += legend(names, f.left + f.w + 10, f.top + 4);
  svg += "</svg>\n";
  return svg;
}

std::string stacked_bar_svg(const StackedBar& b) {
  const double left = 16, right = 16, bar_h = 36, top = 28;
  const double w = b.width - left - right;
  double total = 0;
  for (const auto& s : b.segments) total += std::max(0.0, s.value);
  const int height = static_cast<int>(top + bar_h + 24 + 16 * b.segments.size() + 8);
  std::string svg = open_svg(b.width, height, b.title);
  double x = left;
  for (std::size_t i = 0; i < b.segments.size(); ++i) {
    const StackSegment& s = b.segments[i];
    const double share = total > 0 ? std::max(0.0, s.value) / total : 0.0;
    const double sw = share * w;
    const std::string colour = chart_colour(static_cast<int>(i));
    if (sw > 0) {
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}: {:.4g} {} ({:.1f}%)</title></rect>\n",
          x, top, sw, bar_h, colour, xml_escape(s.name), s.value, xml_escape(b.unit), share * 100);
      if (sw > 34)
        svg += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"white\" "
            "font-weight=\"bold\">{:.0f}%</text>\n",
            x + sw / 2, top + bar_h / 2 + 4, share * 100);
    }
    x += sw;
    const double ly = top + bar_h + 14 + 16 * static_cast<double>(i);
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}: {} {} ({:.1f}%)</text>\n",
        left, ly, colour, left + 14, ly + 9, xml_escape(s.name), xml_escape(tick_label(s.value)),
        xml_escape(b.unit), share * 100);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace wafersim::analysis
