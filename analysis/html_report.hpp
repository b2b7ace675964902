// Reports a person can open and share: one self-contained HTML file each
// (inline CSS and SVG; no script, nothing fetched when viewed), for a run,
// a serving study and a sweep (docs/results-format.md, "HTML reports").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/capacity_output.hpp"
#include "analysis/metrics.hpp"
#include "analysis/placement_picture.hpp"
#include "analysis/run_result.hpp"
#include "analysis/serving_output.hpp"
#include "analysis/serving_result.hpp"

namespace wafersim::analysis {

// Headline figures, the critical-path breakdown (a stacked bar by
// resource), every token's latency over its position, the wafer beside the
// GPU systems (when compared) and the placement pictures (when given).
std::string run_report_html(const RunResult& result, const Metrics& metrics,
                            const PlacementPicture* placement);

// Per system: the summary table, TTFT and time-between-tokens CDFs, SLO
// attainment and the queue over time.
std::string serving_report_html(const ServingHeader& header,
                                const std::vector<ServingResult>& results);

// A capacity search: one replica's capacity per system (cards and a table,
// with the replicas, chips and kW a target needs), every simulated load
// against the SLO's figures, and the serving sections at each system's
// highest sustained load.
std::string capacity_report_html(const CapacityHeader& header,
                                 const std::vector<CapacityResult>& rows);

// A sweep's JSON object (format "wafersim-sweep", docs/sweeps.md): a curve
// of each headline figure over each swept parameter (one line per setting
// of the other parameters) and a table of every point. Throws
// std::invalid_argument when the object is not a sweep.
std::string sweep_report_html(const nlohmann::ordered_json& sweep);

}  // namespace wafersim::analysis
