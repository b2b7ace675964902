// A capacity search's results (wafersim capacity) for people and programs:
// the terminal table, one JSON object, and the HTML report's data
// (analysis/html_report.hpp). Reads analysis::CapacityResult only.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/serving_output.hpp"
#include "analysis/serving_result.hpp"

namespace wafersim::analysis {

// What was searched, as the outputs describe it.
struct CapacityHeader {
  ServingHeader serving;     // scenario, model, traffic, SLO and calibration lines
  bool closed_loop = false;  // the load is a number of sessions, not requests/s
  double target_rate = 0.0;  // requests/s (closed loop: sessions); 0 = none given
  // The SLO's bounds as numbers (0: no such bound), for the report's charts.
  double slo_ttft_s = 0.0;
  double slo_ttft_percentile = 99.0;
  double slo_tokens_per_s = 0.0;
  double slo_tokens_per_s_percentile = 50.0;
};

// The load's unit: "requests/s" or "sessions".
std::string capacity_load_unit(const CapacityHeader& header);

// One row per system, then each system's description and how the replicas
// were checked.
void write_capacity_report(std::ostream& out, const CapacityHeader& header,
                           const std::vector<CapacityResult>& rows);

// {format: "wafersim-capacity", header..., systems: [{..., probes, at_max}]}.
nlohmann::ordered_json capacity_json(const CapacityHeader& header,
                                     const std::vector<CapacityResult>& rows);

}  // namespace wafersim::analysis
