// The request-level discrete-event simulation of a serving deployment (as
// Vidur does for GPUs from profiled operators; here the step times come from
// a StepModel): sessions' turns arrive, a router picks a replica, each
// replica admits requests while its KV cache and batch have room and runs
// iterations of continuous batching under its prefill policy; the client
// sees every token through the serving stack. Deterministic: the same
// sessions and models give the same result, bit for bit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/serving_result.hpp"
#include "models/gpu/serving.hpp"
#include "sim/serving/deployment.hpp"
#include "sim/serving/step_model.hpp"
#include "sim/serving/traffic.hpp"

namespace wafersim::sim::serving {

// The serving stack between the client and the replicas.
struct StackOptions {
  models::gpu::ServingOverhead overhead;
  bool persistent = false;  // a persistent connection (models::gpu::PersistentConnectionFactors)
  bool present = false;     // false: no stack, the client sees the server's times
};

struct SimulationOptions {
  std::string system;       // "wafer" or the GPU system's name
  std::string description;  // for reports
  int replicas = 1;
  int max_batch = 0;  // per replica; 0 = as the KV cache allows
  double chips_per_replica = 1.0;
  double power_w_per_replica = 0.0;
  PrefillPolicy prefill = PrefillPolicy::chunked;
  int chunk_tokens = 512;
  int prefill_replicas = 1;  // disaggregated only, beside `replicas` decode replicas
  Router router = Router::least_loaded;
  bool keep_kv_between_turns = true;
  // Stages first in, first out (StageOrder::fifo): an iteration that decodes
  // ends no sooner than every prompt block sent in an earlier iteration has
  // left the pipeline (its pass plus the step model's fill latency).
  bool fifo_stages = false;
  StackOptions stack;
  Slo slo;
  int timeline_bins = 200;
  // Called now and then with (requests finished, requests in all).
  std::function<void(long long, long long)> progress;
};

// Runs the sessions through `replicas` replicas stepped by `model` (and, with
// disaggregated prefill, `prefill_replicas` more of it that only prefill).
analysis::ServingResult simulate(const std::vector<Session>& sessions, const StepModel& model,
                                 const SimulationOptions& options);

// The p-th percentile (0..100) of `values` by linear interpolation between
// closest ranks; 0 for none. Sorts `values`.
double percentile(std::vector<double>& values, double p);

}  // namespace wafersim::sim::serving
