#include "analysis/capacity_output.hpp"

#include <fmt/format.h>

namespace wafersim::analysis {

std::string capacity_load_unit(const CapacityHeader& h) {
  return h.closed_loop ? "sessions" : "requests/s";
}

void write_capacity_report(std::ostream& out, const CapacityHeader& h,
                           const std::vector<CapacityResult>& rows) {
  const bool target = h.target_rate > 0.0;
  out << fmt::format("capacity of {} ({}), SLO: {}\n", h.serving.scenario, h.serving.model,
                     h.serving.slo);
  if (!h.serving.calibration.empty()) out << fmt::format("  wafer    {}\n", h.serving.calibration);
  out << fmt::format("\n  {:<12} {:>14} {:>12} {:>10} {:>10}", "system",
                     h.closed_loop ? "sessions/repl." : "req/s/replica", "tok/s/replica",
                     "TTFT p99", "tok/s/usr");
  if (target) out << fmt::format(" {:>9} {:>7} {:>7}", "replicas", "chips", "kW");
  out << "\n";
  for (const CapacityResult& r : rows) {
    out << fmt::format("  {:<12} {:>14.3g} {:>12.0f} {:>8.0f}ms {:>10.0f}", r.system,
                       r.max_rate_per_replica, r.at_max.output_tokens_per_s,
                       r.at_max.ttft_s.p99 * 1e3, r.at_max.tokens_per_s_per_user.p50);
    if (target && r.max_rate_per_replica <= 0.0) {
      out << fmt::format(" {:>9} {:>7} {:>7}", "never", "-", "-");
    } else if (target) {
      out << fmt::format(" {:>8}{} {:>7} {:>7.1f}", r.replicas_needed, r.target_checked ? " " : "?",
                         r.chips_needed, r.power_w_needed / 1000.0);
    }
    out << "\n";
  }
  for (const CapacityResult& r : rows)
    out << fmt::format("  {}: {} ({} loads simulated)\n", r.system, r.description, r.probes.size());
  if (target)
    out << fmt::format(
        "  replicas for {:g} {}, each count checked by simulating the whole deployment at that "
        "load ('?': not met within 3 more replicas; never: one replica misses the SLO at the "
        "lowest load)\n",
        h.target_rate, capacity_load_unit(h));
}

nlohmann::ordered_json capacity_json(const CapacityHeader& h,
                                     const std::vector<CapacityResult>& rows) {
  nlohmann::ordered_json j;
  j["format"] = "wafersim-capacity";
  j["format_version"] = 1;
  add_serving_header_json(h.serving, j);
  j["load_unit"] = capacity_load_unit(h);
  j["target_rate"] = h.target_rate;
  j["systems"] = nlohmann::ordered_json::array();
  for (const CapacityResult& r : rows) {
    nlohmann::ordered_json s;
    s["system"] = r.system;
    s["description"] = r.description;
    s["max_rate_per_replica"] = r.max_rate_per_replica;
    s["replicas_needed"] = r.replicas_needed;
    s["chips_needed"] = r.chips_needed;
    s["power_w_needed"] = r.power_w_needed;
    s["target_checked"] = r.target_checked;
    nlohmann::ordered_json checks = nlohmann::ordered_json::array();
    for (const CapacityTargetCheck& c : r.target_checks)
      checks.push_back({{"replicas", c.replicas}, {"met", c.met}});
    s["target_checks"] = checks;
    nlohmann::ordered_json probes = nlohmann::ordered_json::array();
    for (const CapacityProbe& p : r.probes)
      probes.push_back({{"load", p.load},
                        {"met", p.met},
                        {"rejected", p.rejected},
                        {"slo_attainment", p.slo_attainment},
                        {"slo_ttft_s", p.slo_ttft_s},
                        {"slo_tokens_per_s", p.slo_tokens_per_s},
                        {"output_tokens_per_s", p.output_tokens_per_s}});
    s["probes"] = probes;
    s["at_max"] = serving_system_json(r.at_max);
    j["systems"].push_back(s);
  }
  return j;
}

}  // namespace wafersim::analysis
