// A serving study's results for people and programs: the terminal table,
// one JSON object, per-request CSV and an HDF5 file (docs/results-format.md,
// "Serving results"). Reads analysis::ServingResult only.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/serving_result.hpp"

namespace wafersim::analysis {

// What the traffic was, as the outputs describe it.
struct ServingHeader {
  std::string scenario;
  std::string model;
  std::string traffic;      // one line: kind, requests, rates, lengths
  std::string slo;          // one line, "" when none
  std::string calibration;  // one line about the wafer's step grid, "" when none
};

// The table: one row per system (and connection), then where the time goes.
void write_serving_report(std::ostream& out, const ServingHeader& header,
                          const std::vector<ServingResult>& results);

// The header's scenario, model, traffic, slo and calibration keys, added to `j`.
void add_serving_header_json(const ServingHeader& header, nlohmann::ordered_json& j);

// One system's summary and timeline, as an entry of serving_json's systems.
nlohmann::ordered_json serving_system_json(const ServingResult& result);

// {format: "wafersim-serving", header..., systems: [{summary, timeline}]}
// (per-request records only in CSV/HDF5).
nlohmann::ordered_json serving_json(const ServingHeader& header,
                                    const std::vector<ServingResult>& results);

// Every request of every system: one row each, with a `system` and a
// `connection` column. Written whole or not at all.
void write_requests_csv(const std::filesystem::path& path,
                        const std::vector<ServingResult>& results);

// /serving/<n>/{summary attributes, requests/*, sessions/*, timeline/*} and
// /scenario (the resolved YAML). Written whole or not at all.
void write_serving_hdf5(const std::filesystem::path& path, const ServingHeader& header,
                        const std::vector<ServingResult>& results,
                        const std::string& resolved_scenario_yaml);

}  // namespace wafersim::analysis
