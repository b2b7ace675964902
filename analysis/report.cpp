#include "analysis/report.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace wafersim::analysis {

namespace {

// Three significant digits, the precision a person compares at a glance.
std::string sig3(double v) {
  if (v >= 100.0) return fmt::format("{:.0f}", v);
  if (v >= 10.0) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string scaled(double v, std::span<const std::string_view> units, double step) {
  std::size_t i = 0;
  while (v >= step && i + 1 < units.size()) {
    v /= step;
    ++i;
  }
  return fmt::format("{} {}", i == 0 ? fmt::format("{:.0f}", v) : sig3(v), units[i]);
}

// A rate with thousands grouping and one decimal: "12,345.6".
std::string format_rate(double v) {
  if (!std::isfinite(v) || v < 0.0) return fmt::format("{}", v);
  const double rounded = std::round(v * 10.0) / 10.0;
  const auto whole = static_cast<std::uint64_t>(rounded);
  const auto tenth = static_cast<int>(std::llround((rounded - static_cast<double>(whole)) * 10.0));
  return fmt::format("{}.{}", format_grouped(whole), tenth);
}

std::string bar(double fraction, int width) {
  const int filled = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * width));
  std::string s;
  for (int i = 0; i < width; ++i) s += i < filled ? "\u2588" : "\u00b7";
  return s;
}

std::string token_list(const std::vector<std::int32_t>& ids) {
  constexpr std::size_t kShown = 24;  // enough to eyeball, short enough for one line
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size() && i < kShown; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ids[i]);
  }
  if (ids.size() > kShown) s += fmt::format(", ... +{} more", ids.size() - kShown);
  return s + "]";
}

// Text as a JSON string: quoted, control characters escaped (a line stays a
// line), invalid UTF-8 replaced.
std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// One aligned "  label   value" line.
void line(std::ostream& out, std::string_view label, std::string_view value) {
  out << fmt::format("  {:<16} {}\n", label, value);
}

std::string format_power(double kw) {
  return kw > 0.0 ? fmt::format("{} kW", sig3(kw)) : std::string("n/a");
}

// The wafer beside the GPU clusters of the scenario's compare_with.
void write_baselines(std::ostream& out, const Baselines& b) {
  out << "\nCompared with GPU clusters (same model, precision and workload; GPUs analytical)\n";
  out << fmt::format("  {:<14} {:>9} {:>10} {:>12} {:>14} {:>9} {:>9} {:>9}  {}\n", "system",
                     "chips", "TP x PP", "tok/s/user", "aggregate", "TTFT", "power", "tok/s/kW",
                     "limited by");
  auto row = [&](const SystemFigures& f, bool gpu) {
    const std::string chips =
        fmt::format("{} {}{}", f.chips, gpu ? "GPU" : "wafer", f.chips == 1 ? "" : "s");
    const std::string split =
        gpu ? fmt::format("{}x{}{}", f.tp, f.pp, f.parallelism_auto ? "" : "*") : std::string("-");
    out << fmt::format("  {:<14} {:>9} {:>10} {:>12} {:>14} {:>9} {:>9} {:>9}  {}{}\n", f.system,
                       chips, split, format_rate(f.decode_tokens_per_s_per_user),
                       format_rate(f.aggregate_tokens_per_s), format_seconds(f.ttft_s),
                       format_power(f.power_kw),
                       f.power_kw > 0.0 ? format_rate(f.tokens_per_s_per_kw) : std::string("n/a"),
                       f.bottleneck, f.kv_limited ? " (KV cache caps users)" : "");
  };
  row(b.wafer, false);
  for (const SystemFigures& g : b.gpus) row(g, true);
  bool fixed = false;
  for (const SystemFigures& g : b.gpus) fixed = fixed || !g.parallelism_auto;
  out << "  TP x PP chosen for the lowest per-user latency"
      << (fixed ? "; * fixed by the scenario" : "") << "; GPU power counts whole nodes\n";
  if (b.speculative) {
    const SpeculativeSummary& s = *b.speculative;
    out << fmt::format(
        "  speculative decoding: draft {}, {} draft tokens, acceptance {:.2f}: "
        "{:.2f} tokens per verification step expected (GPU model)\n",
        s.draft_model, s.draft_tokens, s.acceptance_rate, s.expected_tokens_per_step);
    out << fmt::format(
        "  wafer, simulated: draft on {} of its own; acceptance {:.2f} ({}), "
        "{:.2f} tokens per verification; proposal {}, verification {}\n",
        fmt::format("{} wafer{}", s.wafer_draft_wafers, s.wafer_draft_wafers == 1 ? "" : "s"),
        s.wafer_acceptance,
        s.wafer_accepted_by_comparison ? "greedy choices compared" : "drawn with the rate",
        s.wafer_tokens_per_round, format_seconds(s.wafer_draft_step_s),
        format_seconds(s.wafer_verify_s));
  }
  if (b.serving) {
    out << fmt::format(
        "\nUser-seen through the serving stack (round trip {}, {} per token, set-up {})\n",
        format_seconds(b.serving->round_trip_s), format_seconds(b.serving->per_token_overhead_s),
        format_seconds(b.serving->connection_setup_s));
    out << fmt::format("  {:<14} {:>12} {:>9} {:>16} {:>16}\n", "system", "tok/s/user", "TTFT",
                       "persistent tok/s", "persistent TTFT");
    auto e2e = [&](const SystemFigures& f) {
      if (!f.end_to_end || !f.end_to_end_persistent) return;
      out << fmt::format("  {:<14} {:>12} {:>9} {:>16} {:>16}\n", f.system,
                         format_rate(f.end_to_end->decode_tokens_per_s_per_user),
                         format_seconds(f.end_to_end->ttft_s),
                         format_rate(f.end_to_end_persistent->decode_tokens_per_s_per_user),
                         format_seconds(f.end_to_end_persistent->ttft_s));
    };
    e2e(b.wafer);
    for (const SystemFigures& g : b.gpus) e2e(g);
  }
}

}  // namespace

std::string format_grouped(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::string_view kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return scaled(static_cast<double>(bytes), kUnits, 1024.0);
}

std::string format_count(std::uint64_t n) {
  static constexpr std::string_view kUnits[] = {"", "K", "M", "B", "T"};
  if (n < 1000) return std::to_string(n);
  return scaled(static_cast<double>(n), kUnits, 1000.0);
}

std::string format_hz(double hz) {
  static constexpr std::string_view kUnits[] = {"Hz", "kHz", "MHz", "GHz"};
  if (!(hz > 0.0)) return "0 Hz";
  return hz < 1000.0 ? fmt::format("{} Hz", sig3(hz)) : scaled(hz, kUnits, 1000.0);
}

std::string format_seconds(double s) {
  if (!std::isfinite(s)) return fmt::format("{} s", s);
  if (s == 0.0) return "0 s";
  if (s < 1e-6) return fmt::format("{} ns", sig3(s * 1e9));
  if (s < 1e-3) return fmt::format("{} \u00b5s", sig3(s * 1e6));
  if (s < 1.0) return fmt::format("{} ms", sig3(s * 1e3));
  return fmt::format("{} s", sig3(s));
}

std::string format_percent(double fraction) {
  return fmt::format("{:.1f}%", fraction * 100.0);
}

// Where the weights came from, in one line.
std::string weights_line(const WeightsProvenance& w) {
  if (w.source == "checkpoint")
    return fmt::format("checkpoint {} (sha256 {}{})", w.path, w.sha256,
                       w.files.size() > 1 ? fmt::format(" over {} files", w.files.size()) : "");
  if (w.source == "synthetic") return fmt::format("synthetic, drawn from seed {}", w.seed);
  return "none (timing only)";
}

void write_report(std::ostream& out, const RunResult& r, const Metrics& m) {
  out << fmt::format("wafersim: {}{}\n", r.scenario_name,
                     r.scenario_file.empty() ? "" : fmt::format(" ({})", r.scenario_file));
  out << fmt::format("  hardware {} | model {} | precision {} | placement {} | seed {} | {}\n",
                     r.hardware_name, r.model_name, r.precision, r.placement_strategy, r.seed,
                     r.functional ? "functional" : "timing only");
  out << "  weights " << weights_line(r.weights) << "\n";
  if (r.layer_group_choice)
    for (const std::string& l : layer_group_choice_lines(*r.layer_group_choice))
      out << "  " << l << "\n";
  for (const ReductionChoice& ch : r.reduction_choices)
    for (const std::string& l : reduction_choice_lines(ch)) out << "  " << l << "\n";
  if (r.draft_weights) out << "  draft weights " << weights_line(*r.draft_weights) << "\n";

  out << "\nFit\n";
  const double core_share =
      m.cores_total > 0 ? static_cast<double>(r.cores_used) / static_cast<double>(m.cores_total)
                        : 0.0;
  line(out, "cores",
       fmt::format("{} of {} ({}), {} x {} mesh", format_grouped(r.cores_used),
                   format_grouped(m.cores_total), format_percent(core_share), r.mesh_width,
                   r.mesh_height) +
           (r.wafers > 1 ? fmt::format(" x {} wafers", r.wafers) : std::string()));
  line(out, "SRAM",
       fmt::format("{} of {} ({})", format_bytes(r.sram_bytes_used.value),
                   format_bytes(r.sram_bytes_capacity.value), format_percent(m.sram_utilisation)));
  const double core_fill = m.sram_bytes_per_core_capacity > Bytes{0}
                               ? static_cast<double>(m.max_core_sram_bytes.value) /
                                     static_cast<double>(m.sram_bytes_per_core_capacity.value)
                               : 0.0;
  line(out, "max per core",
       fmt::format("{} of {} ({})", format_bytes(m.max_core_sram_bytes.value),
                   format_bytes(m.sram_bytes_per_core_capacity.value), format_percent(core_fill)));
  line(out, "parameters", format_count(r.parameter_count));
  if (r.max_context_tokens > 0)
    line(out, "max context",
         fmt::format("{} tokens per user ({} user{})", format_grouped(r.max_context_tokens),
                     r.users, r.users == 1 ? "" : "s"));

  out << "\nPerformance\n";
  if (m.cycles_per_token > Cycles{0}) {
    line(out, "decode",
         fmt::format("{} tokens/s per user", format_rate(m.decode_tokens_per_s_per_user)));
    line(out, "inter-token", format_seconds(m.inter_token_latency_s));
    if (r.users > 1)
      line(
          out, "aggregate",
          fmt::format("{} tokens/s over {} users", format_rate(m.aggregate_tokens_per_s), r.users));
  } else {
    line(out, "decode", "no decode steps timed");
  }
  line(
      out, "TTFT",
      fmt::format("{} ({} cycles)", format_seconds(m.ttft_s), format_grouped(r.ttft_cycles.value)));
  line(out, "cycles/token", format_grouped(m.cycles_per_token.value));
  line(out, "clock", format_hz(r.clock_hz));
  line(out, "simulated",
       fmt::format("{} ({} cycles)", format_seconds(m.total_time_s),
                   format_grouped(r.total_cycles.value)));

  if (m.critical_path_tokens > 0) {
    const double mean_total = static_cast<double>(m.critical_path.total().value) /
                              static_cast<double>(m.critical_path_tokens);
    const std::uint64_t mean_latency = static_cast<std::uint64_t>(std::llround(mean_total));
    out << fmt::format(
        "\nWhere a {} token's cycles go (its critical path through the wafer, the mean over {} "
        "{} token{}{}: {} cycles)\n",
        m.critical_path_basis == "decode" ? "decode" : "prompt", m.critical_path_tokens,
        m.critical_path_basis == "decode" ? "generated" : "prompt",
        m.critical_path_tokens == 1 ? "" : "s",
        r.users > 1 ? fmt::format(" of {} users", r.users) : std::string(),
        format_grouped(mean_latency));
    if (m.critical_path_basis == "decode" && m.cycles_per_token > Cycles{0} &&
        mean_latency != m.cycles_per_token.value)
      out << fmt::format(
          "  (that is one token's latency; cycles/token above, {}, is the mean time between one "
          "user's generated tokens: the two differ by how token passes wait for or overlap one "
          "another{})\n",
          format_grouped(m.cycles_per_token.value),
          r.speculative ? ", and by the draft's proposals and verification rounds" : "");
    for (std::size_t i = 0; i < kPathCategoryCount; ++i) {
      const Resource c = kPathCategories[i];
      const double mean = static_cast<double>(cycles_in(m.critical_path, c).value) /
                          static_cast<double>(m.critical_path_tokens);
      out << fmt::format("  {:<22} {:>12} {:>6}  {}\n", resource_name(c),
                         format_grouped(static_cast<std::uint64_t>(std::llround(mean))),
                         format_percent(m.critical_path_share[i]),
                         bar(m.critical_path_share[i], 20));
    }
  }

  out << "\nUtilisation\n";
  line(out, "cores busy",
       fmt::format("{} (over {} used cores, whole run)", format_percent(m.core_utilisation),
                   format_grouped(m.cores_with_sram)));
  line(out, "SRAM", fmt::format("{} of capacity", format_percent(m.sram_utilisation)));
  if (m.busiest_link) {
    const BusiestLink& l = *m.busiest_link;
    line(out, "busiest link",
         fmt::format("{}({}, {}) {}: {}, load {}",
                     r.wafers > 1 ? fmt::format("wafer {} ", l.wafer) : std::string(), l.x, l.y,
                     direction_name(l.dir), format_bytes(l.bytes.value), format_percent(l.load)));
  } else {
    line(out, "busiest link", "no link traffic");
  }
  line(out, "all links", fmt::format("{} moved", format_bytes(m.total_link_bytes.value)));

  out << '\n';
  if (m.critical_path_tokens > 0 && m.critical_path.total() > Cycles{0}) {
    double share = 0.0;
    for (std::size_t i = 0; i < kPathCategoryCount; ++i) {
      if (resource_name(kPathCategories[i]) == m.bottleneck) share = m.critical_path_share[i];
    }
    out << fmt::format("Bottleneck: {} ({} of the {} critical path)\n", m.bottleneck,
                       format_percent(share), m.critical_path_basis);
  } else {
    out << "Bottleneck: none (no token cycles recorded)\n";
  }

  if (r.baselines) write_baselines(out, *r.baselines);

  if (r.functional) {
    out << "\nFunctional check\n";
    line(out, "prompt", token_list(r.prompt_ids));
    if (!r.prompt_text.empty()) line(out, "prompt text", quoted(r.prompt_text));
    line(out, "generated", token_list(r.tokens));
    if (!r.generated_text.empty()) line(out, "generated text", quoted(r.generated_text));
    line(out, "reference", token_list(r.reference_tokens));
    out << fmt::format("  tokens match reference: {}\n", m.tokens_match_reference ? "yes" : "no");
    line(out, "max logit error", fmt::format("{:.3g}", r.max_logit_abs_error));
  }
}

}  // namespace wafersim::analysis
