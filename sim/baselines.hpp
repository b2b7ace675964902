// The wafer beside GPU clusters (DESIGN.md, "GPU clusters"): the GPU rows come
// from models::gpu::estimate() on the scenario's model, precision and
// workload; the wafer row from the simulated run, with speculative decoding
// and serving overhead applied analytically (docs/modelling.md says how).
#pragma once

#include <optional>

#include "analysis/baselines.hpp"
#include "analysis/metrics.hpp"
#include "analysis/run_result.hpp"
#include "sim/scenario.hpp"

namespace wafersim::sim {

// The comparison for a finished run; nullopt when the scenario compares with
// no GPU system and sets neither speculative_decoding nor serving. A GPU system
// that cannot hold the model gets a row with 0 rates and bottleneck
// "does not fit: ...".
std::optional<analysis::Baselines> compare_with_gpus(const Scenario& scenario,
                                                     const analysis::RunResult& result,
                                                     const analysis::Metrics& metrics);

// The wafer's figures with speculative decoding applied to a simulated decode
// step: (gamma x draft step + verification step) per expected_tokens_per_step
// tokens, where draft step = step x draft layers / target layers and
// verification step = step + gamma x (TTFT / prompt tokens).
double wafer_speculative_tokens_per_s(double step_s, double ttft_s, int prompt_tokens,
                                      const models::ModelConfig& target,
                                      const models::gpu::SpeculativeDecoding& sd);

}  // namespace wafersim::sim
