// "Compared to what?": the wafer and the GPU clusters an architect would
// otherwise buy, on the same model, precision and workload. Plain data, filled
// by sim (models::gpu::estimate for the GPUs, the simulated run for the wafer)
// and printed by the report, the JSON and the HDF5 writers.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace wafersim::analysis {

// What a user sees through a serving stack (client round trip, streaming
// overhead, connection set-up) on top of the raw hardware figures.
struct EndToEndFigures {
  double decode_tokens_per_s_per_user = 0.0;
  double ttft_s = 0.0;
};

// One system's row of the comparison.
struct SystemFigures {
  std::string system;             // "wse3" or a GPU preset name, e.g. "dgx-h100"
  int chips = 0;                  // wafers, or GPUs (all GPUs of the nodes the deployment occupies)
  int tp = 0;                     // GPU tensor-parallel size (0 for the wafer)
  int pp = 0;                     // GPU pipeline stages (0 for the wafer)
  bool parallelism_auto = false;  // GPU: tp/pp chosen by the model for lowest latency
  int replicas = 1;               // GPU: model copies on the occupied nodes
  bool kv_limited = false;        // GPU: KV-cache memory capped the concurrent users
  double decode_tokens_per_s_per_user = 0.0;
  double aggregate_tokens_per_s = 0.0;
  double ttft_s = 0.0;
  double power_kw = 0.0;             // 0 when no power figure is known
  double tokens_per_s_per_kw = 0.0;  // aggregate / power; 0 when power is unknown
  std::string bottleneck;
  std::optional<EndToEndFigures> end_to_end;             // serving overhead, new connection
  std::optional<EndToEndFigures> end_to_end_persistent;  // serving overhead, persistent connection
};

struct SpeculativeSummary {
  std::string draft_model;
  int draft_tokens = 0;                   // gamma
  double acceptance_rate = 0.0;           // alpha
  double expected_tokens_per_step = 1.0;  // (1 - alpha^(gamma+1)) / (1 - alpha): the GPU model's
  // The wafer, as simulated (draft placed on wafers of its own, proposals
  // verified in blocks): measured over the run.
  int wafer_draft_wafers = 0;
  bool wafer_accepted_by_comparison = false;  // functional: greedy choices compared
  double wafer_acceptance = 0.0;              // accepted / examined proposals
  double wafer_tokens_per_round = 0.0;        // tokens each verification yielded
  double wafer_draft_step_s = 0.0;            // mean: one proposal
  double wafer_verify_s = 0.0;                // mean: proposals leave the draft -> verified
};

struct ServingSummary {
  double round_trip_s = 0.0;
  double per_token_overhead_s = 0.0;
  double connection_setup_s = 0.0;
};

struct Baselines {
  SystemFigures wafer;
  std::vector<SystemFigures> gpus;
  std::optional<SpeculativeSummary> speculative;
  std::optional<ServingSummary> serving;
};

}  // namespace wafersim::analysis
