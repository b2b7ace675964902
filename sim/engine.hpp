// The run: builds the fabric, places and lowers the model, then simulates
// prefill and greedy decode in SystemC (one module per pipeline stage plus a
// host), and returns the results. One Engine::run() per process: a SystemC
// simulation cannot be restarted.
#pragma once

#include <functional>
#include <string>

#include "analysis/run_result.hpp"
#include "sim/scenario.hpp"

namespace wafersim::sim {

struct RunOptions {
  bool functional = true;  // compute real numbers and compare with the reference
  // Called with (tokens done, tokens total) as the simulation advances.
  std::function<void(int, int)> progress;
};

analysis::RunResult run_scenario(const Scenario& scenario, const RunOptions& options);

}  // namespace wafersim::sim
