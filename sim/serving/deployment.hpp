// How a serving study deploys its hardware (deployment:) and what it promises
// its users (slo:). Plain config, read by sim/config, immutable after.
#pragma once

#include <optional>

namespace wafersim::sim::serving {

enum class Router {
  least_loaded,  // the replica with the fewest tokens left to generate and prefill
  round_robin,
};
const char* router_name(Router r);

enum class PrefillPolicy {
  prefill_first,  // an iteration prefills waiting prompts whole; decode waits (vLLM's default V0)
  chunked,        // every iteration decodes the batch and prefills up to chunk_tokens (Sarathi)
  disaggregated,  // prefill on replicas of its own; the KV cache moves to a decode replica
};
const char* prefill_policy_name(PrefillPolicy p);

// The order a wafer pipeline's stages take their messages in: a decode token
// trails the prompt blocks sent before it through every stage and leaves no
// sooner than the last of them (fifo: the engine's stages, checked against
// `run` with staggered arrivals), or passes them (decode-first: a what-if
// scheduler with priorities per stage, which the engine does not model).
enum class StageOrder {
  decode_first,
  fifo,
};
const char* stage_order_name(StageOrder o);

// The deployment of one system (the wafer, or each GPU system).
struct ReplicaDeployment {
  int replicas = 1;   // model copies (wafer pipelines, GPU splits), each serving its own batch
  int max_batch = 0;  // sequences in flight per replica; 0 = as the KV cache allows
};

struct DeploymentSpec {
  ReplicaDeployment wafer;
  ReplicaDeployment gpu{1, 256};
  // The longest context (prompt + output, tokens) one sequence may reach: the
  // wafer placement reserves a KV slice this long per batch slot. 0 = the
  // traffic's longest.
  long long max_context = 0;
  // The wafer's prompt tokens per block in its prefill calibration runs
  // (workload.prefill_block): blocks pipeline through the layers.
  int wafer_prefill_block = 64;
  StageOrder wafer_stage_order = StageOrder::fifo;
  Router router = Router::least_loaded;
  PrefillPolicy prefill = PrefillPolicy::chunked;
  int chunk_tokens = 512;    // chunked: tokens (decode + prefill) per iteration
  int prefill_replicas = 1;  // disaggregated: replicas that only prefill, beside `replicas`
  // Closed-loop sessions keep their KV cache between turns (prefix reuse);
  // a request that needs the room evicts the least recently used idle one.
  bool keep_kv_between_turns = true;
};

// Service-level objectives: TTFT at a percentile at most `ttft_s`, and the
// per-user decode speed at a percentile at least `tokens_per_s`. 0 = not set.
struct Slo {
  double ttft_s = 0.0;
  double ttft_percentile = 99.0;
  double tokens_per_s = 0.0;
  double tokens_per_s_percentile = 50.0;
  bool any() const { return ttft_s > 0.0 || tokens_per_s > 0.0; }
};

}  // namespace wafersim::sim::serving
