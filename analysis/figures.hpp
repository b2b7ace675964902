// The scalar figures of a run, each declared once: its name, unit and
// description, and how it is read from a RunResult and its Metrics (and, for
// a figure the RunResult holds, put back into one). The HDF5 writer and
// reader, the JSON writer and compare take them from here; the lists at the
// end say which output carries which figure, in that output's order.
// Layout of the outputs: docs/results-format.md.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <variant>

#include "analysis/metrics.hpp"
#include "analysis/run_result.hpp"
#include "fabric/units.hpp"

namespace wafersim::analysis {

// How a figure is stored: a count (HDF5 u64, JSON unsigned), a real number
// (HDF5 f64, JSON double) or a flag (HDF5 u8 0/1, JSON true/false).
enum class FigureType : std::uint8_t { count, real, flag };

// A figure's value; the alternative is its FigureType's, in that order.
using FigureValue = std::variant<std::uint64_t, double, bool>;

// The value as compare sees it.
inline double as_double(const FigureValue& v) {
  return std::visit([](auto x) { return static_cast<double>(x); }, v);
}

struct Figure {
  std::string_view name;         // the JSON key, compare's name, HDF5 /summary/<name>
  std::string_view unit;         // HDF5 `units`, compare's unit
  std::string_view description;  // HDF5 `description`
  FigureType type = FigureType::count;
  FigureValue (*value)(const RunResult&, const Metrics&) = nullptr;
  // A figure the RunResult holds: how read_hdf5 puts it back. Null for one
  // compute_metrics derives (the metrics of the read result give it back).
  void (*restore)(RunResult&, const FigureValue&) = nullptr;
  bool higher_is_better = false;  // compare: a larger value is an improvement
  // Files written before the figure existed lack it; read_hdf5 then leaves
  // the RunResult's default.
  bool absent_in_older_files = false;
  // Where an output names it otherwise (set before the figures were declared
  // here, kept so that existing files and scripts read on).
  std::string_view hdf5_name = {};
  std::string_view compare_unit = {};

  std::string_view hdf5_dataset() const { return hdf5_name.empty() ? name : hdf5_name; }
  std::string_view compared_unit() const { return compare_unit.empty() ? unit : compare_unit; }
};

namespace figure_access {

inline FigureValue to_value(std::uint64_t v) {
  return v;
}
inline FigureValue to_value(int v) {
  return static_cast<std::uint64_t>(v);
}
inline FigureValue to_value(double v) {
  return v;
}
inline FigureValue to_value(bool v) {
  return v;
}
template <class Tag>
FigureValue to_value(Quantity<Tag> q) {
  return q.value;
}

inline void assign(std::uint64_t& field, const FigureValue& v) {
  field = std::get<std::uint64_t>(v);
}
inline void assign(int& field, const FigureValue& v) {
  field = static_cast<int>(std::get<std::uint64_t>(v));
}
inline void assign(double& field, const FigureValue& v) {
  field = std::get<double>(v);
}
template <class Tag>
void assign(Quantity<Tag>& field, const FigureValue& v) {
  field = Quantity<Tag>{std::get<std::uint64_t>(v)};
}

// A field of the RunResult: read and put back.
template <auto Field>
FigureValue stored(const RunResult& r, const Metrics&) {
  return to_value(r.*Field);
}
template <auto Field>
void restore(RunResult& r, const FigureValue& v) {
  assign(r.*Field, v);
}
// A field of the Metrics: derived, never read back.
template <auto Field>
FigureValue derived(const RunResult&, const Metrics& m) {
  return to_value(m.*Field);
}

}  // namespace figure_access

// Every figure, in the order of the HDF5 /summary group where it has one.
namespace figure {

using figure_access::derived;
using figure_access::restore;
using figure_access::stored;
using enum FigureType;

// Hardware.
inline constexpr Figure clock_hz{.name = "clock_hz",
                                 .unit = "Hz",
                                 .description = "core clock frequency",
                                 .type = real,
                                 .value = stored<&RunResult::clock_hz>,
                                 .restore = restore<&RunResult::clock_hz>};
inline constexpr Figure link_bytes_per_cycle{
    .name = "link_bytes_per_cycle",
    .unit = "bytes/cycle",
    .description = "bandwidth of one mesh link in one direction",
    .type = count,
    .value = stored<&RunResult::link_bytes_per_cycle>,
    .restore = restore<&RunResult::link_bytes_per_cycle>};

// Fit.
inline constexpr Figure cores_total{.name = "cores_total",
                                    .unit = "cores",
                                    .description = "cores in the mesh",
                                    .type = count,
                                    .value = derived<&Metrics::cores_total>};
inline constexpr Figure cores_used{.name = "cores_used",
                                   .unit = "cores",
                                   .description = "cores the placement uses",
                                   .type = count,
                                   .value = stored<&RunResult::cores_used>,
                                   .restore = restore<&RunResult::cores_used>};
inline constexpr Figure cores_with_sram{
    .name = "cores_with_sram",
    .unit = "cores",
    .description = "cores holding at least one byte (the denominator of core_utilisation)",
    .type = count,
    .value = derived<&Metrics::cores_with_sram>};
inline constexpr Figure dead_cores{
    .name = "dead_cores",
    .unit = "cores",
    .description = "dead cores, summed over wafers (of the physical array when it has spares)",
    .type = count,
    .value = stored<&RunResult::dead_cores>,
    .restore = restore<&RunResult::dead_cores>,
    .absent_in_older_files = true};
inline constexpr Figure repaired_links{
    .name = "repaired_links",
    .unit = "links",
    .description = "logical links (one per direction) that detour around a repaired core",
    .type = count,
    .value = stored<&RunResult::repaired_links>,
    .restore = restore<&RunResult::repaired_links>,
    .absent_in_older_files = true};
inline constexpr Figure repair_extra_hops{
    .name = "repair_extra_hops",
    .unit = "hops",
    .description = "extra physical hops of the repaired links, summed",
    .type = count,
    .value = stored<&RunResult::repair_extra_hops>,
    .restore = restore<&RunResult::repair_extra_hops>,
    .absent_in_older_files = true};
inline constexpr Figure max_route_colors{
    .name = "max_route_colors",
    .unit = "colors",
    .description =
        "the most colors (virtual channels) one router needs for the placed "
        "collectives' routes",
    .type = count,
    .value = stored<&RunResult::max_route_colors>,
    .restore = restore<&RunResult::max_route_colors>,
    .absent_in_older_files = true};
inline constexpr Figure sram_bytes_used{.name = "sram_bytes_used",
                                        .unit = "bytes",
                                        .description = "SRAM allocated over all cores",
                                        .type = count,
                                        .value = stored<&RunResult::sram_bytes_used>,
                                        .restore = restore<&RunResult::sram_bytes_used>};
inline constexpr Figure sram_bytes_capacity{.name = "sram_bytes_capacity",
                                            .unit = "bytes",
                                            .description = "SRAM of the whole mesh",
                                            .type = count,
                                            .value = stored<&RunResult::sram_bytes_capacity>,
                                            .restore = restore<&RunResult::sram_bytes_capacity>};
inline constexpr Figure sram_bytes_per_core_capacity{
    .name = "sram_bytes_per_core_capacity",
    .unit = "bytes",
    .description = "SRAM of one core",
    .type = count,
    .value = derived<&Metrics::sram_bytes_per_core_capacity>};
inline constexpr Figure sram_bytes_max_per_core{.name = "sram_bytes_max_per_core",
                                                .unit = "bytes",
                                                .description = "SRAM allocated on the fullest core",
                                                .type = count,
                                                .value = derived<&Metrics::max_core_sram_bytes>};
inline constexpr Figure parameter_count{.name = "parameter_count",
                                        .unit = "parameters",
                                        .description = "model parameters placed on the wafer",
                                        .type = count,
                                        .value = stored<&RunResult::parameter_count>,
                                        .restore = restore<&RunResult::parameter_count>};

// Timeline.
inline constexpr Figure total_cycles{.name = "total_cycles",
                                     .unit = "cycles",
                                     .description = "end of the simulation",
                                     .type = count,
                                     .value = stored<&RunResult::total_cycles>,
                                     .restore = restore<&RunResult::total_cycles>};
inline constexpr Figure ttft_cycles{.name = "ttft_cycles",
                                    .unit = "cycles",
                                    .description = "request arrival to first generated token",
                                    .type = count,
                                    .value = stored<&RunResult::ttft_cycles>,
                                    .restore = restore<&RunResult::ttft_cycles>};
inline constexpr Figure prefill_cycles{
    .name = "prefill_cycles",
    .unit = "cycles",
    .description =
        "mean over users: prompt on the wafer to the first token's logits (TTFT without the I/O)",
    .type = count,
    .value = stored<&RunResult::prefill_cycles>,
    .restore = restore<&RunResult::prefill_cycles>,
    .absent_in_older_files = true};
inline constexpr Figure cycles_per_token{
    .name = "cycles_per_token",
    .unit = "cycles/token",
    .description = "mean over generated tokens after the first",
    .type = count,
    .value = stored<&RunResult::decode_cycles_per_token>,
    .restore = restore<&RunResult::decode_cycles_per_token>,
    .hdf5_name = "decode_cycles_per_token",
    .compare_unit = "cycles"};

// Performance.
inline constexpr Figure decode_tokens_per_s_per_user{
    .name = "decode_tokens_per_s_per_user",
    .unit = "tokens/s",
    .description = "clock_hz / decode_cycles_per_token; 0 if nothing decoded",
    .type = real,
    .value = derived<&Metrics::decode_tokens_per_s_per_user>,
    .higher_is_better = true};
inline constexpr Figure users{.name = "users",
                              .unit = "sequences",
                              .description = "sequences decoded at once",
                              .type = count,
                              .value = stored<&RunResult::users>,
                              .restore = restore<&RunResult::users>};
inline constexpr Figure aggregate_tokens_per_s{
    .name = "aggregate_tokens_per_s",
    .unit = "tokens/s",
    .description = "sum over users of clock_hz / that user's mean decode step",
    .type = real,
    .value = derived<&Metrics::aggregate_tokens_per_s>,
    .higher_is_better = true};
inline constexpr Figure max_context_tokens{
    .name = "max_context_tokens",
    .unit = "tokens",
    .description = "longest context per user the placement could hold",
    .type = count,
    .value = stored<&RunResult::max_context_tokens>,
    .restore = restore<&RunResult::max_context_tokens>};
inline constexpr Figure inter_token_latency_s{.name = "inter_token_latency_s",
                                              .unit = "s",
                                              .description = "decode_cycles_per_token / clock_hz",
                                              .type = real,
                                              .value = derived<&Metrics::inter_token_latency_s>};
inline constexpr Figure ttft_s{.name = "ttft_s",
                               .unit = "s",
                               .description = "time to first token: ttft_cycles / clock_hz",
                               .type = real,
                               .value = derived<&Metrics::ttft_s>};
inline constexpr Figure prefill_s{.name = "prefill_s",
                                  .unit = "s",
                                  .description = "prefill_cycles / clock_hz",
                                  .type = real,
                                  .value = derived<&Metrics::prefill_s>};
inline constexpr Figure total_time_s{.name = "total_time_s",
                                     .unit = "s",
                                     .description = "total_cycles / clock_hz",
                                     .type = real,
                                     .value = derived<&Metrics::total_time_s>};

// Utilisation and traffic.
inline constexpr Figure core_utilisation{
    .name = "core_utilisation",
    .unit = "fraction",
    .description = "busy cycles of the cores holding SRAM / (those cores * total_cycles)",
    .type = real,
    .value = derived<&Metrics::core_utilisation>};
inline constexpr Figure sram_utilisation{.name = "sram_utilisation",
                                         .unit = "fraction",
                                         .description = "sram_bytes_used / sram_bytes_capacity",
                                         .type = real,
                                         .value = derived<&Metrics::sram_utilisation>};
inline constexpr Figure total_link_bytes{.name = "total_link_bytes",
                                         .unit = "bytes",
                                         .description = "bytes carried by all mesh links",
                                         .type = count,
                                         .value = derived<&Metrics::total_link_bytes>};
// The busiest link's figures; HDF5 gives both datasets the link's position
// as attributes, the JSON nests them in its `busiest_link` object.
inline constexpr Figure busiest_link_bytes{
    .name = "busiest_link_bytes",
    .unit = "bytes",
    .description =
        "bytes carried by the busiest link (x, y, direction attributes; x = y = -1 if none)",
    .type = count,
    .value = [](const RunResult&, const Metrics& m) -> FigureValue {
      return m.busiest_link ? figure_access::to_value(m.busiest_link->bytes)
                            : FigureValue{std::uint64_t{0}};
    }};
inline constexpr Figure busiest_link_load{
    .name = "busiest_link_load",
    .unit = "fraction",
    .description = "busiest link bytes / (total_cycles * link_bytes_per_cycle), at most 1",
    .type = real,
    .value = [](const RunResult&, const Metrics& m) -> FigureValue {
      return m.busiest_link ? m.busiest_link->load : 0.0;
    }};
// Compare's: mesh traffic per token processed, and the SRAM left on the fullest core.
inline constexpr Figure hop_bytes_per_token{
    .name = "hop_bytes_per_token",
    .unit = "bytes",
    .description = "bytes carried by all mesh links per token record (bytes x hops per token)",
    .type = real,
    .value = derived<&Metrics::hop_bytes_per_token>};
inline constexpr Figure sram_headroom_bytes{
    .name = "sram_headroom_bytes",
    .unit = "bytes",
    .description = "SRAM of one core less that allocated on the fullest core",
    .type = real,
    .value = derived<&Metrics::sram_headroom_bytes>,
    .higher_is_better = true};

// Functional runs only.
inline constexpr Figure max_logit_abs_error{
    .name = "max_logit_abs_error",
    .unit = "logit",
    .description =
        "largest |functional - reference| logit over the steps whose earlier tokens "
        "are the reference's",
    .type = real,
    .value = stored<&RunResult::max_logit_abs_error>,
    .restore = restore<&RunResult::max_logit_abs_error>};
inline constexpr Figure tokens_match_reference{
    .name = "tokens_match_reference",
    .unit = "boolean",
    .description = "1 if the generated tokens equal the reference's",
    .type = flag,
    .value = derived<&Metrics::tokens_match_reference>};

}  // namespace figure

// Every figure once (the tests check each is in at least one output below).
inline constexpr std::array kAllFigures = {
    &figure::clock_hz,
    &figure::link_bytes_per_cycle,
    &figure::cores_total,
    &figure::cores_used,
    &figure::cores_with_sram,
    &figure::dead_cores,
    &figure::repaired_links,
    &figure::repair_extra_hops,
    &figure::max_route_colors,
    &figure::sram_bytes_used,
    &figure::sram_bytes_capacity,
    &figure::sram_bytes_per_core_capacity,
    &figure::sram_bytes_max_per_core,
    &figure::parameter_count,
    &figure::total_cycles,
    &figure::ttft_cycles,
    &figure::prefill_cycles,
    &figure::cycles_per_token,
    &figure::decode_tokens_per_s_per_user,
    &figure::users,
    &figure::aggregate_tokens_per_s,
    &figure::max_context_tokens,
    &figure::inter_token_latency_s,
    &figure::ttft_s,
    &figure::prefill_s,
    &figure::total_time_s,
    &figure::core_utilisation,
    &figure::sram_utilisation,
    &figure::total_link_bytes,
    &figure::busiest_link_bytes,
    &figure::busiest_link_load,
    &figure::hop_bytes_per_token,
    &figure::sram_headroom_bytes,
    &figure::max_logit_abs_error,
    &figure::tokens_match_reference,
};

// HDF5: the scalar datasets of /summary, in the order they are written.
inline constexpr std::array kHdf5Summary = {
    &figure::clock_hz,
    &figure::link_bytes_per_cycle,
    &figure::cores_total,
    &figure::cores_used,
    &figure::cores_with_sram,
    &figure::dead_cores,
    &figure::repaired_links,
    &figure::repair_extra_hops,
    &figure::max_route_colors,
    &figure::sram_bytes_used,
    &figure::sram_bytes_capacity,
    &figure::sram_bytes_per_core_capacity,
    &figure::sram_bytes_max_per_core,
    &figure::parameter_count,
    &figure::total_cycles,
    &figure::ttft_cycles,
    &figure::prefill_cycles,
    &figure::cycles_per_token,
    &figure::decode_tokens_per_s_per_user,
    &figure::users,
    &figure::aggregate_tokens_per_s,
    &figure::max_context_tokens,
    &figure::inter_token_latency_s,
    &figure::ttft_s,
    &figure::total_time_s,
    &figure::core_utilisation,
    &figure::sram_utilisation,
    &figure::total_link_bytes,
    &figure::busiest_link_bytes,
    &figure::busiest_link_load,
};
// ...then, in functional runs only.
inline constexpr std::array kHdf5FunctionalSummary = {
    &figure::max_logit_abs_error,
    &figure::tokens_match_reference,
};

// JSON: the keys after the identification and the mesh, in order, up to the
// `busiest_link` object...
inline constexpr std::array kJsonFigures = {
    &figure::clock_hz,
    &figure::link_bytes_per_cycle,
    &figure::cores_used,
    &figure::cores_total,
    &figure::sram_bytes_used,
    &figure::sram_bytes_capacity,
    &figure::sram_bytes_per_core_capacity,
    &figure::sram_bytes_max_per_core,
    &figure::parameter_count,
    &figure::decode_tokens_per_s_per_user,
    &figure::users,
    &figure::aggregate_tokens_per_s,
    &figure::max_context_tokens,
    &figure::inter_token_latency_s,
    &figure::ttft_s,
    &figure::prefill_s,
    &figure::total_time_s,
    &figure::cycles_per_token,
    &figure::ttft_cycles,
    &figure::prefill_cycles,
    &figure::total_cycles,
    &figure::core_utilisation,
    &figure::cores_with_sram,
    &figure::sram_utilisation,
    &figure::dead_cores,
    &figure::repaired_links,
    &figure::repair_extra_hops,
    &figure::max_route_colors,
};
// ...the keys right after it...
inline constexpr std::array kJsonLinkFigures = {
    &figure::total_link_bytes,
};
// ...and, in functional runs only, after the generated and reference tokens.
inline constexpr std::array kJsonFunctionalFigures = {
    &figure::tokens_match_reference,
    &figure::max_logit_abs_error,
};

// compare: the headline figures, in the order they are shown.
inline constexpr std::array kComparedFigures = {
    &figure::decode_tokens_per_s_per_user,
    &figure::aggregate_tokens_per_s,
    &figure::ttft_s,
    &figure::inter_token_latency_s,
    &figure::cycles_per_token,
    &figure::hop_bytes_per_token,
    &figure::busiest_link_bytes,
    &figure::busiest_link_load,
    &figure::sram_headroom_bytes,
    &figure::cores_used,
};

}  // namespace wafersim::analysis
