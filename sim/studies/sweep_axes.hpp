// The parameters a capacity-planning sweep can vary, each declared once here:
// its name (the key in a point's `overrides`, the CSV's `override_<name>`
// column, the HDF5 dataset of the same name), the sweep's option, the
// scenario key a point sets, and how its values are written. Everything else
// (the grid, a point's run, the journal, the table, the CSV and HDF5 files,
// the command line) walks this table.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace wafersim::sim {

// How an axis's values are checked on the command line and written in JSON.
enum class AxisValues {
  text,           // a name or "N or auto" given as text: written as a string
  count,          // a whole number >= 1: written as a number
  count_or_auto,  // a whole number >= 1 or "auto": a number, or the string "auto"
};

struct SweepAxis {
  std::string_view name;          // "layer_groups"
  std::string_view option;        // the sweep's option: "--layer-groups"
  std::string_view scenario_key;  // what a point sets: "placement.layer_groups"
  AxisValues values;
  std::string_view help;     // the option's help text
  std::string_view heading;  // its column in the sweep's table
};

// In grid order: a point's index is row-major over these, the first
// outermost. New axes go at the end, so a sweep that leaves them unset keeps
// its points' indices (and an older journal still matches).
inline constexpr std::array<SweepAxis, 9> kSweepAxes = {{
    {"model", "--model", "model", AxisValues::text, "Model presets (comma-separated)", "model"},
    {"hardware", "--hardware", "hardware", AxisValues::text, "Hardware presets", "hardware"},
    {"precision", "--precision", "precision", AxisValues::text, "Precisions", "precision"},
    {"wafers", "--wafers", "wafers", AxisValues::text, "Wafer counts: N or auto", "wafers"},
    {"layer_groups", "--layer-groups", "placement.layer_groups", AxisValues::count_or_auto,
     "whole-region: groups of layers, each sharing one region: N or auto", "groups"},
    {"users", "--users", "workload.users", AxisValues::count, "Concurrent users", "users"},
    {"strategy", "--strategy", "placement.strategy", AxisValues::text,
     "Placement strategies (placement.strategy)", "strategy"},
    {"reduction", "--reduction", "placement.reduction", AxisValues::text,
     "Reduction schemes: chain, tree, two-level, k-tree, ring or auto (placement.reduction)",
     "reduction"},
    {"decode_batch", "--decode-batch", "workload.decode_batch", AxisValues::count,
     "Users per decode batch (workload.decode_batch)", "batch"},
}};
inline constexpr std::size_t kSweepAxisCount = kSweepAxes.size();

// The index of the axis called `name` in kSweepAxes; std::logic_error for
// a name the table lacks (a programming error, not input).
std::size_t sweep_axis(std::string_view name);

// The values each axis takes, by position in kSweepAxes; an empty axis keeps
// the scenario's own value.
struct SweepAxes {
  std::array<std::vector<std::string>, kSweepAxisCount> values;
  std::vector<std::string>& operator[](std::string_view name) { return values[sweep_axis(name)]; }
  const std::vector<std::string>& operator[](std::string_view name) const {
    return values[sweep_axis(name)];
  }
};

// One point of the grid: its position and the value of each axis there
// (unset = the scenario's own).
struct SweepPoint {
  int index = 0;  // position in the whole grid (row-major, the first axis outermost)
  std::array<std::optional<std::string>, kSweepAxisCount> values;
  std::optional<std::string>& operator[](std::string_view name) { return values[sweep_axis(name)]; }
  const std::optional<std::string>& operator[](std::string_view name) const {
    return values[sweep_axis(name)];
  }
};

// A value of `axis` as the sweep's JSON writes it (see AxisValues): counts as
// numbers (so journals of numeric axes keep their digest), the rest as text.
nlohmann::ordered_json axis_value_json(const SweepAxis& axis, const std::string& value);

// `value` as a point of `axis` holds it: a count in its plain decimal form
// ("016" is "16"), text as given (it is checked when the point's scenario is
// loaded). std::invalid_argument for a count that is not a whole number from
// 1 to 1,000,000 (or auto, where the axis takes it).
std::string checked_axis_value(const SweepAxis& axis, const std::string& value);

// What a point sets, as `--set` takes it: "KEY=VALUE" for each axis it
// gives, in table order.
std::vector<std::string> point_sets(const SweepPoint& point);

// The axes' names, in table order (what a sweep's JSON lists as `axes`).
std::vector<std::string> sweep_axis_names();

}  // namespace wafersim::sim
