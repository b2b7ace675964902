#include "sim/studies/sweep_axes.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace wafersim::sim {

namespace {

constexpr long long kMaxCount = 1000000;

// The count `text` spells, or -1 when it is not a whole number in 1..kMaxCount.
long long count_of(const std::string& text) {
  if (text.empty() || text.size() > 7 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  const long long n = std::stoll(text);
  return n >= 1 && n <= kMaxCount ? n : -1;
}

}  // namespace

std::size_t sweep_axis(std::string_view name) {
  for (std::size_t i = 0; i < kSweepAxes.size(); ++i)
    if (kSweepAxes[i].name == name) return i;
  throw std::logic_error(fmt::format("no sweep axis is called '{}'", name));
}

nlohmann::ordered_json axis_value_json(const SweepAxis& axis, const std::string& value) {
  if (axis.values != AxisValues::text) {
    const long long n = count_of(value);
    if (n > 0) return n;
  }
  return value;
}

std::string checked_axis_value(const SweepAxis& axis, const std::string& value) {
  if (axis.values == AxisValues::text) return value;
  if (const long long n = count_of(value); n > 0) return std::to_string(n);
  if (axis.values == AxisValues::count_or_auto && value == "auto") return value;
  throw std::invalid_argument(
      fmt::format("'{}' is not a whole number from 1 to {}{}", value, kMaxCount,
                  axis.values == AxisValues::count_or_auto ? " or auto" : ""));
}

std::vector<std::string> point_sets(const SweepPoint& point) {
  std::vector<std::string> sets;
  for (std::size_t i = 0; i < kSweepAxisCount; ++i)
    if (point.values[i])
      sets.push_back(fmt::format("{}={}", kSweepAxes[i].scenario_key, *point.values[i]));
  return sets;
}

std::vector<std::string> sweep_axis_names() {
  std::vector<std::string> names;
  for (const SweepAxis& a : kSweepAxes) names.emplace_back(a.name);
  return names;
}

}  // namespace wafersim::sim
