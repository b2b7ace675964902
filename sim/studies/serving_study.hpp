// A serving study (wafersim serve): the scenario's traffic through the wafer
// deployment (step times calibrated on the cycle-level engine) and through
// every GPU system it compares with (step times from the analytical model),
// each with and without a persistent connection when the scenario has a
// serving stack. Also the capacity search (wafersim capacity).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/serving_result.hpp"
#include "sim/config/scenario.hpp"
#include "sim/serving/traffic.hpp"
#include "sim/studies/calibration.hpp"

namespace wafersim::sim {

// What the traffic asks for, before any system serves it.
struct TrafficSummary {
  int sessions = 0;
  long long requests = 0;
  double mean_prompt_tokens = 0.0;  // whole prompt, earlier turns included
  double mean_new_prompt_tokens = 0.0;
  double mean_output_tokens = 0.0;
  long long max_context = 0;  // the longest prompt + output of any request
  long long max_prompt = 0;   // the longest prompt of any request (earlier turns included)
  double duration_s = 0.0;    // first to last open-loop arrival (0 for closed loop)
  bool closed_loop = false;
};
TrafficSummary summarise_traffic(const std::vector<serving::Session>& sessions);

struct ServingStudyOptions {
  CalibrationOptions calibration;
  // Called with (what, done, total) as the simulations advance (the
  // calibration's own progress is calibration.progress).
  std::function<void(const std::string&, long long, long long)> progress;
};

struct ServingStudy {
  TrafficSummary traffic;
  std::optional<Calibration> calibration;  // the wafer's, when the scenario has one
  // The wafer first (when there is one), then each GPU system in compare_with
  // order; with a serving stack, each system per-request then persistent.
  std::vector<analysis::ServingResult> results;
};

ServingStudy run_serving_study(const Scenario& scenario, const ServingStudyOptions& options);

// The same study on already generated sessions and calibration (the capacity
// search runs many traffics through one calibration).
std::vector<analysis::ServingResult> serve_sessions(
    const Scenario& scenario, const std::vector<serving::Session>& sessions,
    const std::optional<Calibration>& calibration, bool persistent_only,
    const std::function<void(const std::string&, long long, long long)>& progress = {});

// The capacity of one replica of each system: the highest open-loop request
// rate it serves within the SLO (bisection on the rate of the scenario's
// traffic, same lengths and seed) — or, for closed-loop sessions, the most
// sessions — and the replicas a target rate (or number of sessions) needs.
using CapacityRow = analysis::CapacityResult;

struct CapacityOptions {
  double target_rate = 0.0;  // requests/s (closed loop: sessions); 0 = no target
  double rate_low = 0.01;    // search bounds, requests/s per replica
  double rate_high = 1000.0;
  int max_sessions = 4096;  // closed loop: the search's upper bound
  int iterations = 14;      // bisection steps (on the logarithm of the rate; closed loop: halvings)
  std::function<void(const std::string&, long long, long long)> progress;
};

std::vector<CapacityRow> capacity_search(const Scenario& scenario,
                                         const std::optional<Calibration>& calibration,
                                         const CapacityOptions& options);

}  // namespace wafersim::sim
