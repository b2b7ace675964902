// The wafer beside GPU clusters (DESIGN.md, "GPU clusters"): the GPU rows come
// from models::gpu::estimate() on the scenario's model, precision and
// workload; the wafer row from the simulated run (speculative decoding, when
// set, was simulated: the draft placed on its own wafers, sim/engine/engine.cpp),
// with serving overhead applied analytically (docs/modelling.md says how).
#pragma once

#include <optional>

#include "analysis/baselines.hpp"
#include "analysis/metrics.hpp"
#include "analysis/run_result.hpp"
#include "sim/config/scenario.hpp"

namespace wafersim::sim {

// The comparison for a finished run; nullopt when the scenario compares with
// no GPU system and sets neither speculative_decoding nor serving. A GPU system
// that cannot hold the model gets a row with 0 rates and bottleneck
// "does not fit: ...".
std::optional<analysis::Baselines> compare_with_gpus(const Scenario& scenario,
                                                     const analysis::RunResult& result,
                                                     const analysis::Metrics& metrics);

}  // namespace wafersim::sim
