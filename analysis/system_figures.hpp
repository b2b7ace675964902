// The figures of one row of the wafer-vs-GPU comparison (a SystemFigures of
// Baselines), each declared once: its name, unit and description, and how it
// is read from a SystemFigures and put back into one. The JSON writer
// (`wafer_system`, `gpu_baselines`) and the HDF5 writer and reader
// (/wafer_system, /gpu_baselines) take them from here; the lists at the end
// say which output carries which figure, in that output's order. The
// optional end-to-end figures (`end_to_end`, `end_to_end_persistent`) are
// objects of their own, written after the row's figures.
// Layout of the outputs: docs/results-format.md.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "analysis/baselines.hpp"

namespace wafersim::analysis {

// How a row's figure is stored: text (HDF5 UTF-8 string, JSON string), a
// count (HDF5 i32, JSON integer), a real number (HDF5 f64, JSON double) or a
// flag (HDF5 u8 0/1, JSON true/false).
enum class SystemFigureType : std::uint8_t { text, count, real, flag };

// A row's figure value; the alternative is its SystemFigureType's, in order.
using SystemValue = std::variant<std::string, std::int32_t, double, bool>;

struct SystemFigure {
  std::string_view name;  // the JSON key, HDF5 /gpu_baselines/<name> and /wafer_system/<name>
  std::string_view unit;  // HDF5 `units` ("text" for text)
  std::string_view description;  // HDF5 /gpu_baselines `description`
  SystemFigureType type = SystemFigureType::real;
  SystemValue (*value)(const SystemFigures&) = nullptr;
  void (*restore)(SystemFigures&, const SystemValue&) = nullptr;  // how read_hdf5 puts it back
  // HDF5 /wafer_system `description`, where the wafer's row says otherwise.
  std::string_view wafer_description = {};
  // Unknown when the row has no power figure (power_kw 0): JSON null, HDF5 0.
  bool unknown_without_power = false;

  std::string_view wafer_described() const {
    return wafer_description.empty() ? description : wafer_description;
  }
};

namespace system_figure_access {

inline SystemValue to_value(const std::string& v) {
  return v;
}
inline SystemValue to_value(int v) {
  return static_cast<std::int32_t>(v);
}
inline SystemValue to_value(double v) {
  return v;
}
inline SystemValue to_value(bool v) {
  return v;
}

inline void assign(std::string& field, const SystemValue& v) {
  field = std::get<std::string>(v);
}
inline void assign(int& field, const SystemValue& v) {
  field = std::get<std::int32_t>(v);
}
inline void assign(double& field, const SystemValue& v) {
  field = std::get<double>(v);
}
inline void assign(bool& field, const SystemValue& v) {
  field = std::get<bool>(v);
}

template <auto Field>
SystemValue stored(const SystemFigures& s) {
  return to_value(s.*Field);
}
template <auto Field>
void restore(SystemFigures& s, const SystemValue& v) {
  assign(s.*Field, v);
}

inline SystemValue parallelism(const SystemFigures& s) {
  return std::string(s.parallelism_auto ? "auto" : "fixed");
}
inline void restore_parallelism(SystemFigures& s, const SystemValue& v) {
  s.parallelism_auto = std::get<std::string>(v) == "auto";
}

}  // namespace system_figure_access

// Every figure of a row, in the order of the JSON `gpu_baselines` entries
// (`wafers` in place of `gpus` for the wafer's row).
namespace system_figure {

using enum SystemFigureType;
using system_figure_access::restore;
using system_figure_access::stored;

inline constexpr SystemFigure system{.name = "system",
                                     .unit = "text",
                                     .description = "GPU system preset",
                                     .type = text,
                                     .value = stored<&SystemFigures::system>,
                                     .restore = restore<&SystemFigures::system>};
inline constexpr SystemFigure wafers{.name = "wafers",
                                     .unit = "wafers",
                                     .description = "wafers used",
                                     .type = count,
                                     .value = stored<&SystemFigures::chips>,
                                     .restore = restore<&SystemFigures::chips>};
inline constexpr SystemFigure gpus{.name = "gpus",
                                   .unit = "GPUs",
                                   .description = "GPUs of the nodes the deployment occupies",
                                   .type = count,
                                   .value = stored<&SystemFigures::chips>,
                                   .restore = restore<&SystemFigures::chips>};
inline constexpr SystemFigure tp{.name = "tp",
                                 .unit = "GPUs",
                                 .description = "tensor-parallel size",
                                 .type = count,
                                 .value = stored<&SystemFigures::tp>,
                                 .restore = restore<&SystemFigures::tp>};
inline constexpr SystemFigure pp{.name = "pp",
                                 .unit = "stages",
                                 .description = "pipeline-parallel stages",
                                 .type = count,
                                 .value = stored<&SystemFigures::pp>,
                                 .restore = restore<&SystemFigures::pp>};
inline constexpr SystemFigure parallelism{
    .name = "parallelism",
    .unit = "text",
    .description = "auto (lowest latency) or fixed by the scenario",
    .type = text,
    .value = system_figure_access::parallelism,
    .restore = system_figure_access::restore_parallelism};
inline constexpr SystemFigure replicas{.name = "replicas",
                                       .unit = "replicas",
                                       .description = "model copies on the occupied nodes",
                                       .type = count,
                                       .value = stored<&SystemFigures::replicas>,
                                       .restore = restore<&SystemFigures::replicas>};
inline constexpr SystemFigure kv_limited{
    .name = "kv_limited",
    .unit = "boolean",
    .description = "KV-cache memory capped the concurrent users",
    .type = flag,
    .value = stored<&SystemFigures::kv_limited>,
    .restore = restore<&SystemFigures::kv_limited>};
inline constexpr SystemFigure decode_tokens_per_s_per_user{
    .name = "decode_tokens_per_s_per_user",
    .unit = "tokens/s",
    .description = "decode rate one user sees",
    .type = real,
    .value = stored<&SystemFigures::decode_tokens_per_s_per_user>,
    .restore = restore<&SystemFigures::decode_tokens_per_s_per_user>,
    .wafer_description = "decode rate one user sees (speculative decoding applied)"};
inline constexpr SystemFigure aggregate_tokens_per_s{
    .name = "aggregate_tokens_per_s",
    .unit = "tokens/s",
    .description = "tokens/s over the workload's concurrent users",
    .type = real,
    .value = stored<&SystemFigures::aggregate_tokens_per_s>,
    .restore = restore<&SystemFigures::aggregate_tokens_per_s>,
    .wafer_description = "tokens/s over the workload's users"};
inline constexpr SystemFigure ttft_s{.name = "ttft_s",
                                     .unit = "s",
                                     .description = "time to first token (prefill of one request)",
                                     .type = real,
                                     .value = stored<&SystemFigures::ttft_s>,
                                     .restore = restore<&SystemFigures::ttft_s>,
                                     .wafer_description = "time to first token"};
inline constexpr SystemFigure power_kw{.name = "power_kw",
                                       .unit = "kW",
                                       .description = "system power of the occupied nodes",
                                       .type = real,
                                       .value = stored<&SystemFigures::power_kw>,
                                       .restore = restore<&SystemFigures::power_kw>,
                                       .wafer_description = "system power; 0 when unknown",
                                       .unknown_without_power = true};
inline constexpr SystemFigure tokens_per_s_per_kw{
    .name = "tokens_per_s_per_kw",
    .unit = "tokens/s/kW",
    .description = "aggregate tokens/s per kW",
    .type = real,
    .value = stored<&SystemFigures::tokens_per_s_per_kw>,
    .restore = restore<&SystemFigures::tokens_per_s_per_kw>,
    .wafer_description = "aggregate tokens/s per kW; 0 when power is unknown",
    .unknown_without_power = true};
inline constexpr SystemFigure bottleneck{.name = "bottleneck",
                                         .unit = "text",
                                         .description = "what limits the decode step",
                                         .type = text,
                                         .value = stored<&SystemFigures::bottleneck>,
                                         .restore = restore<&SystemFigures::bottleneck>};

}  // namespace system_figure

inline constexpr std::array kAllSystemFigures = {
    &system_figure::system,
    &system_figure::wafers,
    &system_figure::gpus,
    &system_figure::tp,
    &system_figure::pp,
    &system_figure::parallelism,
    &system_figure::replicas,
    &system_figure::kv_limited,
    &system_figure::decode_tokens_per_s_per_user,
    &system_figure::aggregate_tokens_per_s,
    &system_figure::ttft_s,
    &system_figure::power_kw,
    &system_figure::tokens_per_s_per_kw,
    &system_figure::bottleneck,
};

// JSON: the keys of `wafer_system`, in order (then the end-to-end objects)...
inline constexpr std::array kJsonWaferSystem = {
    &system_figure::system,
    &system_figure::wafers,
    &system_figure::decode_tokens_per_s_per_user,
    &system_figure::aggregate_tokens_per_s,
    &system_figure::ttft_s,
    &system_figure::power_kw,
    &system_figure::tokens_per_s_per_kw,
    &system_figure::bottleneck,
};
// ...and of each `gpu_baselines` entry.
inline constexpr std::array kJsonGpuSystem = {
    &system_figure::system,
    &system_figure::gpus,
    &system_figure::tp,
    &system_figure::pp,
    &system_figure::parallelism,
    &system_figure::replicas,
    &system_figure::kv_limited,
    &system_figure::decode_tokens_per_s_per_user,
    &system_figure::aggregate_tokens_per_s,
    &system_figure::ttft_s,
    &system_figure::power_kw,
    &system_figure::tokens_per_s_per_kw,
    &system_figure::bottleneck,
};

// HDF5: the datasets of /gpu_baselines (one entry per GPU system), in the
// order they are written.
inline constexpr std::array kHdf5GpuBaselines = {
    &system_figure::system,
    &system_figure::gpus,
    &system_figure::tp,
    &system_figure::pp,
    &system_figure::parallelism,
    &system_figure::decode_tokens_per_s_per_user,
    &system_figure::aggregate_tokens_per_s,
    &system_figure::ttft_s,
    &system_figure::power_kw,
    &system_figure::tokens_per_s_per_kw,
    &system_figure::bottleneck,
};
// ...then these, as the JSON's entries have them: written, but not read back
// (files written before they were added lack them, and read as before).
inline constexpr std::array kHdf5GpuBaselinesWrittenOnly = {
    &system_figure::replicas,
    &system_figure::kv_limited,
};
// /wafer_system: the group's (string) attributes, then its scalar datasets.
inline constexpr std::array kHdf5WaferSystemAttributes = {
    &system_figure::system,
    &system_figure::bottleneck,
};
inline constexpr std::array kHdf5WaferSystem = {
    &system_figure::wafers,
    &system_figure::decode_tokens_per_s_per_user,
    &system_figure::aggregate_tokens_per_s,
    &system_figure::ttft_s,
    &system_figure::power_kw,
    &system_figure::tokens_per_s_per_kw,
};
static_assert(std::ranges::all_of(kHdf5WaferSystemAttributes, [](const SystemFigure* f) {
  return f->type == SystemFigureType::text;
}));
static_assert(std::ranges::none_of(kHdf5WaferSystem, [](const SystemFigure* f) {
  return f->type == SystemFigureType::text;
}));

}  // namespace wafersim::analysis
