// Charts drawn as inline SVG text, for the HTML reports (analysis/html_report.hpp):
// lines and points over an x axis, grouped bars and one stacked bar. Pure
// functions of their inputs: no script and nothing fetched when viewed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wafersim::analysis {

// Text made safe inside XML/HTML elements and attribute values.
std::string xml_escape(std::string_view text);

// A colour of a qualitative palette (Okabe-Ito, distinguishable with
// common colour-vision deficiencies), cycling.
std::string chart_colour(int index);

// Round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart),
// about `count` of them.
std::vector<double> nice_ticks(double lo, double hi, int count);

// A tick's label: up to 4 significant digits, SI suffix from 1e4 on.
std::string tick_label(double value);

struct XySeries {
  std::string name;
  std::vector<double> x, y;
  bool lines = true;     // join the points
  bool markers = false;  // draw each point
};

struct XyChart {
  std::string title, x_label, y_label;
  std::vector<XySeries> series;
  bool y_from_zero = true;  // the y axis starts at 0 (else at the data's minimum)
  bool x_log = false;       // log10 x axis (positive x only)
  int width = 640, height = 320;
  bool y_log = false;  // log10 y axis (positive y only)
};
std::string xy_chart_svg(const XyChart& chart);

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category
};

struct BarChart {
  std::string title, y_label;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;  // drawn side by side within each category
  int width = 640, height = 320;
};
std::string bar_chart_svg(const BarChart& chart);

struct StackSegment {
  std::string name;
  double value = 0.0;
};

// One horizontal bar split into segments, each labelled with its share.
struct StackedBar {
  std::string title, unit;  // unit of the values, e.g. "cycles per token"
  std::vector<StackSegment> segments;
  int width = 640;
};
std::string stacked_bar_svg(const StackedBar& bar);

}  // namespace wafersim::analysis
