// What came out of one serving simulation (sim/serving/simulator.hpp): every
// request, the summary figures planners judge a deployment by, and the queue
// over time. Plain data, produced by the simulation, read by the report and
// the CSV/JSON/HDF5 writers (analysis/serving_output.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wafersim::analysis {

// One request (one turn of a session), in seconds from the start of the traffic.
struct RequestRecord {
  int id = 0;  // in order of arrival
  int session = 0;
  int turn = 0;
  int replica = -1;            // the replica that decoded it (-1: rejected)
  double arrival_s = 0.0;      // sent by the client
  double admitted_s = 0.0;     // left the queue: KV room and a batch slot granted
  double first_token_s = 0.0;  // server side
  double last_token_s = 0.0;   // server side
  int prompt_tokens = 0;       // the turn's whole prompt (context before it included)
  int cached_tokens = 0;       // of which reused from the session's earlier turns
  int output_tokens = 0;       // generated (= asked for)
  double ttft_s = 0.0;         // as the client sees it: queue + prefill + serving stack
  double tbt_mean_s = 0.0;     // time between tokens, as the client sees it
  double tbt_p99_s = 0.0;
  double end_to_end_s = 0.0;  // arrival to the last token at the client
  bool rejected = false;      // could never fit (longer than a KV slot)
  bool meets_slo = false;
};

// One session (an agent's task): its turns and the time they took together.
struct SessionRecord {
  int id = 0;
  int turns = 0;
  double start_s = 0.0;
  double end_s = 0.0;      // its last turn's last token at the client
  double task_s = 0.0;     // end - start: think/tool time included
  double waiting_s = 0.0;  // of which waiting on the model (TTFT + decode, all turns)
  int output_tokens = 0;
};

// A distribution's summary.
struct Percentiles {
  double mean = 0.0, p50 = 0.0, p90 = 0.0, p99 = 0.0, max = 0.0;
};

// The queue and the batch, averaged over one interval of the timeline.
struct TimelineBin {
  double start_s = 0.0;
  double waiting = 0.0;  // requests queued (time average)
  double running = 0.0;  // requests admitted, prefilling or decoding (time average)
  double busy = 0.0;     // share of replicas' time spent in iterations
};

// The serving stack a client goes through (models/gpu/serving.hpp), as applied.
struct StackApplied {
  std::string connection = "none";  // "none", "per-request" or "persistent"
  double connection_setup_s = 0.0;  // per request, after the persistent factor
  double round_trip_s = 0.0;
  double per_token_s = 0.0;
};

struct ServingResult {
  std::string system;       // "wafer" or a GPU system's name
  std::string description;  // e.g. "2 x (1 WSE-3), layer-rectangles" or "dgx-h100 tp 2 pp 1 x 4"
  int replicas = 1;
  int chips = 0;         // wafers or GPUs in all replicas
  double power_w = 0.0;  // all replicas (0 where unknown)
  std::string prefill_policy;
  StackApplied stack;
  int max_batch = 0;  // per replica
  long long kv_slot_tokens = 0;
  long long kv_pool_tokens = 0;

  std::vector<RequestRecord> requests;
  std::vector<SessionRecord> sessions;  // closed-loop traffic only
  std::vector<TimelineBin> timeline;

  // Summary over served requests.
  int served = 0;
  int rejected = 0;
  long long tokens_asked = 0;      // output tokens the served requests asked for
  long long tokens_generated = 0;  // output tokens they got (must equal tokens_asked)
  double span_s = 0.0;             // first arrival to last token
  double offered_rate = 0.0;       // requests/s arriving
  double throughput_rps = 0.0;     // requests/s completed
  double output_tokens_per_s = 0.0;
  double goodput_rps = 0.0;     // requests/s meeting the SLO
  double slo_attainment = 0.0;  // share of served requests meeting it
  bool slo_met = false;         // the SLO's percentiles hold over all requests
  // What the SLO compares, measured (0 where the SLO sets no such bound): the
  // TTFT at the SLO's percentile, and the per-user speed that the SLO's share
  // of requests reaches.
  double slo_ttft_s = 0.0;
  double slo_tokens_per_s = 0.0;
  Percentiles ttft_s, tbt_s, end_to_end_s, queue_s, tokens_per_s_per_user, task_s;
  double utilisation = 0.0;  // share of replica time spent in iterations
  double mean_batch = 0.0;   // sequences per iteration, mean over iterations
  std::uint64_t iterations = 0;
  // Little's law on the measured queue: time-average requests in the system
  // (L) against the arrival rate x mean time in it (lambda W).
  double littles_l = 0.0;
  double littles_lambda_w = 0.0;
};

// The capacity search (wafersim capacity) of one system: every load it
// simulated, the highest that met the SLO, and the replicas a target needs.
struct CapacityProbe {
  double load = 0.0;  // requests/s offered to one replica (closed loop: sessions)
  bool met = false;   // the SLO held and nothing was rejected
  int rejected = 0;
  double slo_attainment = 0.0;
  double slo_ttft_s = 0.0;        // as ServingResult::slo_ttft_s
  double slo_tokens_per_s = 0.0;  // as ServingResult::slo_tokens_per_s
  double output_tokens_per_s = 0.0;
};

struct CapacityTargetCheck {
  int replicas = 0;
  bool met = false;
};

struct CapacityResult {
  std::string system;
  std::string description;
  // requests/s (closed loop: sessions) within the SLO; 0: not even the lowest
  double max_rate_per_replica = 0.0;
  ServingResult at_max;  // the simulation at that rate
  std::vector<CapacityProbe> probes;  // in the order simulated
  double target_rate = 0.0;
  int replicas_needed = 0;  // for target_rate (0 without a target)
  int chips_needed = 0;
  double power_w_needed = 0.0;
  bool target_checked = false;  // the deployment simulated at the target met the SLO
  std::vector<CapacityTargetCheck> target_checks;  // the deployments simulated at the target
};

}  // namespace wafersim::analysis
