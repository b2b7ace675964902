// The analytical GPU-cluster model (../../docs/modelling.md, "GPU baselines").
//
// Decode step of one pipeline stage, for a micro-batch of users:
//   max(memory, compute) + 2 TP all-reduces per layer + per-layer overhead
//   memory  = (weight bytes per GPU + KV bytes read per GPU) / (HBM bandwidth x memory_efficiency)
//   compute = FLOPs per GPU / (dense peak x compute_efficiency)
//   ring all-reduce over n GPUs: 2(n-1) alpha + 2(n-1)/n x bytes / link bandwidth
// Pipeline parallelism: pp stages in sequence, one activation hop between
// stages (NVLink inside a node, the NIC across nodes); users are split into
// min(pp, users) micro-batches, so with fewer users than stages the pipeline
// has bubbles. Prefill is the same sum for the whole prompt (compute-bound)
// and gives TTFT. The KV cache that fits next to the weights limits how many
// users a replica serves at once. The serving framework's host time
// (ClusterSpec::framework) is added once per step and once per prefill:
// framework.iteration_s(sequences in the step), the same in estimate_split()
// and ReplicaTiming::iteration_s().
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/gpu/gpu_spec.hpp"
#include "models/model_config.hpp"

namespace wafersim::models::gpu {

// No tensor/pipeline split of the cluster holds the model (or the fixed one does not).
class GpuFitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Speculative decoding: a draft model proposes `draft_tokens` (gamma) tokens,
// the target verifies them in one step; each is accepted with probability
// `acceptance_rate` (alpha), independently (Leviathan et al., ICML 2023).
struct SpeculativeDecoding {
  ModelConfig draft;
  int draft_tokens = 4;          // gamma >= 1
  double acceptance_rate = 0.7;  // alpha in [0, 1]
};

// Expected tokens a verification step yields: (1 - alpha^(gamma+1)) / (1 - alpha);
// gamma + 1 when alpha = 1.
double expected_tokens_per_step(double acceptance_rate, int draft_tokens);

// Ring all-reduce of `bytes` over n GPUs: 2(n-1) alpha + 2(n-1)/n x bytes / bandwidth; 0 for n = 1.
double ring_allreduce_s(int n, double bytes, double bandwidth, double alpha_s);

struct InferenceWorkload {
  int prompt_tokens = 1;
  int generate_tokens = 1;
  int users = 1;         // sequences decoded at once over the whole system
  int weight_bits = 16;  // 32, 16, 8 or 4; the KV cache is stored at max(8, bits) bits
  int tp = 0;            // tensor-parallel GPUs; 0 = choose for lowest latency
  int pp = 0;            // pipeline stages; 0 = choose for lowest latency
  std::optional<SpeculativeDecoding> speculative;
};

// Where one decode step's time goes, summed over the pipeline stages a token crosses.
struct StepBreakdown {
  double memory_s = 0.0;     // HBM time of the stages
  double compute_s = 0.0;    // tensor-core time of the stages
  double allreduce_s = 0.0;  // TP all-reduces
  double overhead_s = 0.0;   // per-layer fixed cost
  double pipeline_s = 0.0;   // activation hops between stages
  double framework_s = 0.0;  // the serving framework's host time, once per step
  // max(memory, compute) per stage + the rest: the step latency.
  double total_s = 0.0;
};

struct GpuEstimate {
  std::string system;  // cluster name
  int tp = 1;
  int pp = 1;
  bool parallelism_auto = true;           // chosen by the model (true) or fixed by the scenario
  int nodes = 1;                          // whole nodes (NVL72: racks) the deployment occupies
  int replicas = 1;                       // model copies on those nodes (data parallel)
  int gpus = 1;                           // nodes x GPUs per node
  int users_per_replica = 1;              // concurrency one replica serves
  int max_users_per_replica = 1;          // what its KV-cache memory allows
  bool kv_limited = false;                // the workload's users did not all fit at once
  int micro_batches = 1;                  // pipeline micro-batches (min(pp, users_per_replica))
  double expected_tokens_per_step = 1.0;  // > 1 with speculative decoding
  StepBreakdown step;                     // one decode step (verification step with speculation)
  double draft_step_s = 0.0;              // one draft-model step (speculation only)
  double decode_tokens_per_s_per_user = 0.0;
  double aggregate_tokens_per_s = 0.0;  // concurrent users x per-user rate
  double ttft_s = 0.0;                  // prefill of one request's prompt
  // One batch of requests from arrival to last token, prefill included (the
  // prompts prefilled one after another, then generate_tokens decode steps):
  // concurrent x generate / (users_per_replica x ttft + generate / per-user rate).
  // What an offline benchmark (MLPerf Offline) measures; the decode-only
  // aggregate above is the steady state the wafer simulation reports.
  double batch_tokens_per_s = 0.0;
  double power_w = 0.0;  // nodes x node power
  double tokens_per_s_per_kw = 0.0;
  std::string bottleneck;  // "HBM bandwidth", "GPU compute", "scale-up all-reduce", ...
};

// One decode step for a fixed split; nullopt when the split does not fit
// (weights plus one user's KV cache above usable HBM, more nodes than the
// cluster has, tp above the scale-up domain, tp not dividing the heads).
std::optional<GpuEstimate> estimate_split(const ClusterSpec& cluster, const ModelConfig& model,
                                          const InferenceWorkload& workload, int tp, int pp);

// A split with more GPUs per replica is chosen only when it is more than this
// much faster (per-user latency): 4 nodes for 4% are not worth buying.
inline constexpr double kSplitLatencySlack = 0.05;

// The estimate for the workload's tp/pp, or, where they are 0, the split with
// the lowest per-user decode latency, preferring fewer GPUs per replica within
// kSplitLatencySlack of it. Throws GpuFitError.
GpuEstimate estimate(const ClusterSpec& cluster, const ModelConfig& model,
                     const InferenceWorkload& workload);

// Bytes of KV cache per token over all layers (keys and values).
double kv_bytes_per_token(const ModelConfig& model, int weight_bits);

// What one iteration of a serving engine runs in one forward pass
// (iteration-level scheduling, as vLLM and SGLang batch): one new token for
// each of `decode_sequences` sequences whose contexts add up to
// `decode_context`, and `prefill_tokens` prompt tokens of `prefill_sequences`
// sequences (a chunk each) attending to `prefill_context` positions in all
// (per sequence: its cached positions + its chunk, summed).
struct Iteration {
  int decode_sequences = 0;
  double decode_context = 0.0;
  int prefill_sequences = 0;
  double prefill_tokens = 0.0;
  double prefill_context = 0.0;
  // Query-key pairs of the prefill chunks' attention: per sequence,
  // chunk x (cached + chunk / 2), summed.
  double prefill_attention_pairs = 0.0;
};

// One model replica of a cluster on a fixed split, as a serving simulation
// steps it: the time of an iteration and the KV cache it can hold. With
// pipeline parallelism the iteration's sequences are split into min(pp,
// sequences) micro-batches that follow each other through the stages, as
// estimate_split() times a decode step.
class ReplicaTiming {
 public:
  // Throws GpuFitError when the split does not hold the model's weights.
  ReplicaTiming(const ClusterSpec& cluster, const ModelConfig& model, int weight_bits, int tp,
                int pp);
  double iteration_s(const Iteration& it) const;
  // KV-cache tokens (all layers) the replica's usable HBM holds beside the weights.
  double kv_capacity_tokens() const { return kv_capacity_tokens_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int gpus() const { return tp_ * pp_; }

 private:
  const ClusterSpec* cluster_;
  const ModelConfig* model_;
  int bits_;
  int tp_;
  int pp_;
  double kv_capacity_tokens_ = 0.0;
};

}  // namespace wafersim::models::gpu
