#include "models/gpu/cluster_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace wafersim::models::gpu {

double expected_tokens_per_step(double acceptance_rate, int draft_tokens) {
  const double a = std::clamp(acceptance_rate, 0.0, 1.0);
  const int g = std::max(0, draft_tokens);
  if (a >= 1.0) return static_cast<double>(g + 1);
  return (1.0 - std::pow(a, g + 1)) / (1.0 - a);
}

double ring_allreduce_s(int n, double bytes, double bandwidth, double alpha_s) {
  if (n <= 1) return 0.0;
  const double steps = 2.0 * (n - 1);
  return steps * alpha_s + steps / n * bytes / bandwidth;
}

double kv_bytes_per_token(const ModelConfig& model, int weight_bits) {
  const double kv_bytes = std::max(8, weight_bits) / 8.0;
  return 2.0 * model.num_layers * model.num_kv_heads * model.head_dim * kv_bytes;
}

namespace {

// Activations and partial sums travel in 16-bit (32-bit for fp32 models).
double activation_bytes(int weight_bits) {
  return weight_bits > 16 ? 4.0 : 2.0;
}

// One expert's parameters (SwiGLU: gate, up, down); 0 for a dense model.
double expert_parameters(const ModelConfig& m) {
  return m.is_moe() ? 3.0 * m.hidden_size * m.intermediate_size : 0.0;
}

// Parameters a decode step streams from HBM when `tokens` tokens go through
// it: all but the input embedding table (only the looked-up rows are read,
// unless it doubles as lm_head) and, for a mixture of experts, the experts no
// token picked: E(1 - (1 - k/E)^tokens) of E experts are touched on average
// when each token picks k uniformly.
double streamed_parameters(const ModelConfig& m, double tokens) {
  const double all = static_cast<double>(m.parameter_count());
  const double embedding = static_cast<double>(m.vocab_size) * m.hidden_size;
  double p = m.tie_embeddings ? all : all - embedding;
  if (m.is_moe()) {
    const double e = m.num_experts;
    const double touched = e * (1.0 - std::pow(1.0 - m.experts_per_token / e, tokens));
    p -= (e - touched) * expert_parameters(m) * m.num_layers;
  }
  return p;
}

// Parameters one token multiplies by: the experts it picked, not the others.
double active_parameters(const ModelConfig& m) {
  return streamed_parameters(m, 1.0);
}

// Everything one split needs to time a stage.
struct Split {
  const ClusterSpec& c;
  int tp;
  int pp;
  int bits;
  int layers_per_stage;
  int kv_shards;  // KV heads split over min(tp, kv_heads) GPUs; replicated beyond
  // One activation hop between stages: over NVLink when the whole replica sits in
  // one scale-up domain, over the NICs otherwise.
  double hop_s(double bytes) const {
    if (pp <= 1) return 0.0;
    if (tp * pp <= c.gpus_per_node) return c.params.allreduce_alpha_s + bytes / c.scaleup_bandwidth;
    return c.scaleout_latency_s + bytes / c.scaleout_bandwidth;
  }
};

struct StageTime {
  double memory_s = 0.0;
  double compute_s = 0.0;
  double allreduce_s = 0.0;
  double overhead_s = 0.0;
  double total() const { return std::max(memory_s, compute_s) + allreduce_s + overhead_s; }
};

// What one pipeline stage processes in one pass: `tokens` new tokens, the
// KV cache of `kv_positions` positions read (all sequences together), and
// `attention_pairs` query-key pairs of attention.
struct StageLoad {
  double tokens = 0.0;
  double kv_positions = 0.0;
  double attention_pairs = 0.0;
};

// A sliding window bounds what attention reads.
double windowed(const ModelConfig& m, double context) {
  return m.sliding_window > 0 ? std::min(context, static_cast<double>(m.sliding_window)) : context;
}

StageTime stage_time(const Split& s, const ModelConfig& m, const StageLoad& load) {
  const ClusterSpec& c = s.c;
  const double stage_share = static_cast<double>(s.layers_per_stage) / m.num_layers;
  const double streamed_gpu = streamed_parameters(m, load.tokens) * stage_share / s.tp;
  const double active_gpu = active_parameters(m) * stage_share / s.tp;
  const double weight_bytes = streamed_gpu * s.bits / 8.0;
  const double kv_bytes =
      load.kv_positions * kv_bytes_per_token(m, s.bits) * stage_share / s.kv_shards;
  StageTime t;
  t.memory_s = (weight_bytes + kv_bytes) / (c.gpu.hbm_bandwidth * c.params.memory_efficiency);
  // 2 FLOPs per weight per token; attention: QK^T and AV, 4 x q_dim per
  // query-key pair per layer.
  const double attention_flops =
      4.0 * load.attention_pairs * m.q_dim() * s.layers_per_stage / static_cast<double>(s.tp);
  const double flops = 2.0 * active_gpu * load.tokens + attention_flops;
  t.compute_s = flops / (c.gpu.peak_flops(s.bits) * c.params.compute_efficiency);
  const double ar_bytes = load.tokens * m.hidden_size * activation_bytes(s.bits);
  t.allreduce_s = 2.0 * s.layers_per_stage *
                  ring_allreduce_s(s.tp, ar_bytes, c.scaleup_bandwidth, c.params.allreduce_alpha_s);
  t.overhead_s = s.layers_per_stage * c.params.per_layer_overhead_s;
  return t;
}

// One pipeline stage of `m` processing `tokens_per_user` new tokens for each
// of `users` sequences whose context is `context` tokens long.
StageTime stage_time(const Split& s, const ModelConfig& m, double users, double tokens_per_user,
                     double context_in) {
  const double context = windowed(m, context_in);
  const double tokens = users * tokens_per_user;
  return stage_time(s, m, StageLoad{tokens, users * context, context * tokens});
}

void add_stages(StepBreakdown& b, const StageTime& t, int stages) {
  b.memory_s += stages * t.memory_s;
  b.compute_s += stages * t.compute_s;
  b.allreduce_s += stages * t.allreduce_s;
  b.overhead_s += stages * t.overhead_s;
  b.total_s += stages * t.total();
}

std::string bottleneck_of(const StepBreakdown& b) {
  const double core = std::max(b.memory_s, b.compute_s);
  std::string name = b.memory_s >= b.compute_s ? "HBM bandwidth" : "GPU compute";
  double best = core;
  if (b.allreduce_s > best) {
    best = b.allreduce_s;
    name = "scale-up all-reduce";
  }
  if (b.overhead_s > best) {
    best = b.overhead_s;
    name = "per-layer overhead";
  }
  if (b.pipeline_s > best) {
    best = b.pipeline_s;
    name = "pipeline hops";
  }
  if (b.framework_s > best) name = "framework overhead";
  return name;
}

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

}  // namespace

std::optional<GpuEstimate> estimate_split(const ClusterSpec& c, const ModelConfig& m,
                                          const InferenceWorkload& w, int tp, int pp) {
  if (tp < 1 || pp < 1 || tp > c.gpus_per_node || pp > m.num_layers) return std::nullopt;
  if (m.num_heads % tp != 0) return std::nullopt;
  const int gpus_per_replica = tp * pp;
  const int nodes = ceil_div(gpus_per_replica, c.gpus_per_node);
  if (nodes > c.max_nodes) return std::nullopt;
  if (nodes > 1 && gpus_per_replica % c.gpus_per_node != 0)
    return std::nullopt;  // whole nodes per stage group

  const int bits = w.weight_bits;
  const Split s{c, tp, pp, bits, ceil_div(m.num_layers, pp), std::min(tp, m.num_kv_heads)};

  // Memory: weights (and the draft's) plus KV cache must fit in usable HBM.
  const double usable = c.gpu.hbm_bytes * (1.0 - c.params.memory_reserve);
  const double stage_share = static_cast<double>(s.layers_per_stage) / m.num_layers;
  double weights_gpu = static_cast<double>(m.parameter_count()) * bits / 8.0 / gpus_per_replica;
  const double context_max = static_cast<double>(w.prompt_tokens) + w.generate_tokens;
  double kv_user_gpu = context_max * kv_bytes_per_token(m, bits) * stage_share / s.kv_shards;
  if (w.speculative) {
    // The draft runs tensor-parallel on the same GPUs, one copy per pipeline stage group.
    const ModelConfig& d = w.speculative->draft;
    weights_gpu += static_cast<double>(d.parameter_count()) * bits / 8.0 / tp;
    kv_user_gpu += context_max * kv_bytes_per_token(d, bits) / std::min(tp, d.num_kv_heads);
  }
  const double kv_room = usable - weights_gpu;
  if (kv_room < kv_user_gpu) return std::nullopt;
  const double max_users = std::floor(kv_room / kv_user_gpu);

  GpuEstimate e;
  e.system = c.name;
  e.tp = tp;
  e.pp = pp;
  e.parallelism_auto = w.tp == 0 || w.pp == 0;
  e.nodes = nodes;
  e.replicas = nodes * c.gpus_per_node / gpus_per_replica;
  e.gpus = e.replicas * gpus_per_replica;
  e.max_users_per_replica = static_cast<int>(std::min<double>(max_users, 1e9));
  const int wanted = ceil_div(std::max(1, w.users), e.replicas);
  e.users_per_replica = std::min(wanted, e.max_users_per_replica);
  e.kv_limited = wanted > e.max_users_per_replica;
  e.micro_batches = std::min(pp, e.users_per_replica);
  const double users_mb = std::ceil(static_cast<double>(e.users_per_replica) / e.micro_batches);
  // The mean context over the decode: the prompt plus half the generated tokens.
  const double context = w.prompt_tokens + 0.5 * w.generate_tokens;

  // One step: every stage in turn for the user's micro-batch, plus the hops.
  const double tokens_per_user =
      w.speculative ? static_cast<double>(w.speculative->draft_tokens) + 1.0 : 1.0;
  add_stages(e.step, stage_time(s, m, users_mb, tokens_per_user, context), pp);
  e.step.pipeline_s =
      (pp - 1) * s.hop_s(users_mb * tokens_per_user * m.hidden_size * activation_bytes(bits));
  e.step.total_s += e.step.pipeline_s;
  // The framework schedules the whole replica's batch once per step.
  e.step.framework_s = c.framework.iteration_s(e.users_per_replica);
  e.step.total_s += e.step.framework_s;

  double round_s = e.step.total_s;
  if (w.speculative) {
    const SpeculativeDecoding& sd = *w.speculative;
    const ModelConfig& d = sd.draft;
    const Split ds{c,
                   std::min(tp, d.num_heads),
                   1,
                   bits,
                   d.num_layers,
                   std::min(std::min(tp, d.num_heads), d.num_kv_heads)};
    e.draft_step_s = stage_time(ds, d, users_mb, 1.0, context).total();
    e.expected_tokens_per_step = expected_tokens_per_step(sd.acceptance_rate, sd.draft_tokens);
    round_s += sd.draft_tokens * e.draft_step_s;
  }
  e.decode_tokens_per_s_per_user = e.expected_tokens_per_step / round_s;
  // replicas x users per replica can pass INT_MAX (72 GPUs of a tiny model).
  const int concurrent = static_cast<int>(std::min<std::int64_t>(
      std::max(1, w.users), static_cast<std::int64_t>(e.replicas) * e.max_users_per_replica));
  e.aggregate_tokens_per_s = concurrent * e.decode_tokens_per_s_per_user;

  // TTFT: one request's prompt through every stage (compute-bound for long prompts).
  StepBreakdown prefill;
  add_stages(prefill, stage_time(s, m, 1.0, w.prompt_tokens, 0.5 * w.prompt_tokens), pp);
  e.ttft_s = prefill.total_s +
             (pp - 1) * s.hop_s(static_cast<double>(w.prompt_tokens) * m.hidden_size *
                                activation_bytes(bits)) +
             c.framework.iteration_s(1);

  const double generate = std::max(1, w.generate_tokens);
  e.batch_tokens_per_s =
      concurrent * generate /
      (e.users_per_replica * e.ttft_s + generate / e.decode_tokens_per_s_per_user);

  e.power_w = nodes * c.node_power_w;
  e.tokens_per_s_per_kw = e.aggregate_tokens_per_s / (e.power_w / 1000.0);
  e.bottleneck = bottleneck_of(e.step);
  return e;
}

GpuEstimate estimate(const ClusterSpec& c, const ModelConfig& m, const InferenceWorkload& w) {
  std::vector<GpuEstimate> fits;
  const int max_pp = std::min(m.num_layers, c.gpus_per_node * c.max_nodes);
  std::vector<int> tps;
  if (w.tp != 0) {
    tps.push_back(w.tp);
  } else {
    for (int tp = 1; tp <= c.gpus_per_node; tp *= 2) tps.push_back(tp);
  }
  for (int tp : tps) {
    for (int pp = 1; pp <= max_pp; ++pp) {
      if (w.pp != 0 && pp != w.pp) continue;
      if (std::optional<GpuEstimate> e = estimate_split(c, m, w, tp, pp)) fits.push_back(*e);
    }
  }
  // The lowest per-user latency; among the splits within kSplitLatencySlack of
  // it, the one with the fewest GPUs per replica (then the faster).
  std::optional<GpuEstimate> best;
  double fastest = 0.0;
  for (const GpuEstimate& e : fits) fastest = std::max(fastest, e.decode_tokens_per_s_per_user);
  for (const GpuEstimate& e : fits) {
    if (e.decode_tokens_per_s_per_user < fastest / (1.0 + kSplitLatencySlack)) continue;
    const int g = e.tp * e.pp;
    if (!best || g < best->tp * best->pp ||
        (g == best->tp * best->pp &&
         e.decode_tokens_per_s_per_user > best->decode_tokens_per_s_per_user))
      best = e;
  }
  if (!best) {
    if (w.tp != 0 || w.pp != 0)
      throw GpuFitError(c.name + ": tp " + std::to_string(w.tp) + ", pp " + std::to_string(w.pp) +
                        " cannot hold " + m.name + " (memory, heads or GPU count)");
    throw GpuFitError(c.name + ": " + m.name + " does not fit on " +
                      std::to_string(c.gpus_per_node * c.max_nodes) + " GPUs");
  }
  return *best;
}

ReplicaTiming::ReplicaTiming(const ClusterSpec& c, const ModelConfig& m, int weight_bits, int tp,
                             int pp)
    : cluster_(&c), model_(&m), bits_(weight_bits), tp_(tp), pp_(pp) {
  if (tp < 1 || pp < 1 || tp > c.gpus_per_node || pp > m.num_layers || m.num_heads % tp != 0)
    throw GpuFitError(c.name + ": tp " + std::to_string(tp) + ", pp " + std::to_string(pp) +
                      " is not a split of " + m.name + " on " + std::to_string(c.gpus_per_node) +
                      "-GPU nodes");
  const double usable = c.gpu.hbm_bytes * (1.0 - c.params.memory_reserve);
  const int layers_per_stage = ceil_div(m.num_layers, pp);
  const double stage_share = static_cast<double>(layers_per_stage) / m.num_layers;
  const double weights_gpu =
      static_cast<double>(m.parameter_count()) * weight_bits / 8.0 / (tp * pp);
  const double kv_token_gpu =
      kv_bytes_per_token(m, weight_bits) * stage_share / std::min(tp, m.num_kv_heads);
  if (usable <= weights_gpu)
    throw GpuFitError(c.name + ": tp " + std::to_string(tp) + ", pp " + std::to_string(pp) +
                      " cannot hold the weights of " + m.name);
  kv_capacity_tokens_ = std::floor((usable - weights_gpu) / kv_token_gpu);
}

double ReplicaTiming::iteration_s(const Iteration& it) const {
  const ClusterSpec& c = *cluster_;
  const ModelConfig& m = *model_;
  const Split s{c, tp_, pp_, bits_, ceil_div(m.num_layers, pp_), std::min(tp_, m.num_kv_heads)};
  const int sequences = it.decode_sequences + it.prefill_sequences;
  if (sequences == 0) return 0.0;
  const double micro = std::min(pp_, sequences);
  // Decode tokens attend to their whole (windowed) context.
  const double decode_ctx =
      it.decode_sequences > 0
          ? it.decode_sequences * windowed(m, it.decode_context / it.decode_sequences)
          : 0.0;
  StageLoad load;
  load.tokens = (it.decode_sequences + it.prefill_tokens) / micro;
  load.kv_positions = (decode_ctx + it.prefill_context) / micro;
  load.attention_pairs = (decode_ctx + it.prefill_attention_pairs) / micro;
  StepBreakdown b;
  add_stages(b, stage_time(s, m, load), pp_);
  // The micro-batches follow each other through the stages: a round (one
  // pass of every sequence) is pp stage times of one micro-batch, as in
  // estimate_split(); with fewer sequences than stages the rest are bubbles.
  const double hops = (pp_ - 1) * s.hop_s(load.tokens * m.hidden_size * activation_bytes(bits_));
  return b.total_s + hops + c.framework.iteration_s(sequences);
}

}  // namespace wafersim::models::gpu
