// The analytical GPU-cluster model against hand computation: a decode step in
// the memory-bound and in the compute-bound regime, the ring all-reduce, the
// automatic TP/PP choice, the KV-cache limit on users, speculative decoding and
// the serving overhead.
#include "models/gpu/cluster_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "models/gpu/serving.hpp"
#include "models/gpu/serving_framework.hpp"

namespace wafersim::models::gpu {
namespace {

// A small dense model whose sums are easy to do by hand: tied embeddings, so
// every parameter is streamed each step.
ModelConfig small_model() {
  ModelConfig m;
  m.name = "small";
  m.hidden_size = 1024;
  m.intermediate_size = 4096;
  m.num_layers = 4;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.vocab_size = 1000;
  m.max_position = 4096;
  m.tie_embeddings = true;
  return m;
}

// One GPU per node, round numbers.
ClusterSpec one_gpu() {
  ClusterSpec c;
  c.name = "test-gpu";
  c.gpu.name = "T";
  c.gpu.bf16_flops = 100e12;
  c.gpu.hbm_bytes = 100e9;
  c.gpu.hbm_bandwidth = 1e12;
  c.gpus_per_node = 1;
  c.max_nodes = 1;
  c.node_power_w = 1000.0;
  c.params.memory_efficiency = 0.5;
  c.params.compute_efficiency = 0.5;
  c.params.allreduce_alpha_s = 0.0;
  c.params.per_layer_overhead_s = 1e-6;
  c.params.memory_reserve = 0.0;
  return c;
}

InferenceWorkload workload(int users) {
  InferenceWorkload w;
  w.prompt_tokens = 10;
  w.generate_tokens = 10;
  w.users = users;
  w.weight_bits = 16;
  return w;
}

TEST(RingAllReduce, IsTwoNMinusOneAlphasPlusTwoNMinusOneOverNOfTheBytes) {
  // 8 GPUs, 1 MB at 1 GB/s, alpha 1 us: 14 us + 14/8 ms.
  EXPECT_DOUBLE_EQ(ring_allreduce_s(8, 1e6, 1e9, 1e-6), 14e-6 + 14.0 / 8.0 * 1e-3);
  EXPECT_DOUBLE_EQ(ring_allreduce_s(2, 1e6, 1e9, 0.0), 1e-3);
  EXPECT_EQ(ring_allreduce_s(1, 1e6, 1e9, 1e-6), 0.0);
}

TEST(DecodeStep, MemoryBoundStepIsBytesOverEffectiveBandwidthPlusOverhead) {
  const ModelConfig m = small_model();
  const auto e = estimate_split(one_gpu(), m, workload(1), 1, 1);
  ASSERT_TRUE(e.has_value());
  const double params = static_cast<double>(m.parameter_count());
  // Mean context 10 + 10/2 = 15 tokens; KV per token 2 x 4 layers x 8 heads x 128 x 2 B.
  const double kv = 15.0 * 2 * 4 * 8 * 128 * 2;
  const double memory = (params * 2.0 + kv) / (1e12 * 0.5);
  // 2 FLOPs per weight + attention 4 x 15 x 1024 x 4 layers, at 50 TFLOP/s.
  const double compute = (2.0 * params + 4.0 * 15 * 1024 * 4) / 50e12;
  EXPECT_DOUBLE_EQ(e->step.memory_s, memory);
  EXPECT_DOUBLE_EQ(e->step.compute_s, compute);
  EXPECT_DOUBLE_EQ(e->step.overhead_s, 4e-6);
  EXPECT_EQ(e->step.allreduce_s, 0.0);
  EXPECT_DOUBLE_EQ(e->step.total_s, memory + 4e-6);
  EXPECT_DOUBLE_EQ(e->decode_tokens_per_s_per_user, 1.0 / (memory + 4e-6));
  EXPECT_EQ(e->bottleneck, "HBM bandwidth");
  EXPECT_DOUBLE_EQ(e->power_w, 1000.0);
}

TEST(DecodeStep, ComputeBoundStepIsFlopsOverEffectivePeakPlusOverhead) {
  ClusterSpec c = one_gpu();
  c.gpu.bf16_flops = 1e12;  // slow tensor cores
  const ModelConfig m = small_model();
  const auto e = estimate_split(c, m, workload(64), 1, 1);
  ASSERT_TRUE(e.has_value());
  const double params = static_cast<double>(m.parameter_count());
  const double compute = 64.0 * (2.0 * params + 4.0 * 15 * 1024 * 4) / 0.5e12;
  const double memory = (params * 2.0 + 64.0 * 15.0 * 2 * 4 * 8 * 128 * 2) / 0.5e12;
  EXPECT_GT(compute, memory);
  EXPECT_DOUBLE_EQ(e->step.total_s, compute + 4e-6);
  EXPECT_EQ(e->bottleneck, "GPU compute");
  // Every one of the 64 users gets a token per step.
  EXPECT_DOUBLE_EQ(e->aggregate_tokens_per_s, 64.0 / (compute + 4e-6));
}

TEST(DecodeStep, TensorParallelAddsTwoRingAllReducesPerLayer) {
  ClusterSpec c = one_gpu();
  c.gpus_per_node = 8;
  c.scaleup_bandwidth = 100e9;
  c.params.allreduce_alpha_s = 2e-6;
  const ModelConfig m = small_model();
  const auto e1 = estimate_split(c, m, workload(1), 1, 1);
  const auto e8 = estimate_split(c, m, workload(1), 8, 1);
  ASSERT_TRUE(e1 && e8);
  // One token's activations: 1024 x 2 bytes, 2 all-reduces x 4 layers.
  EXPECT_DOUBLE_EQ(e8->step.allreduce_s, 8.0 * ring_allreduce_s(8, 2048.0, 100e9, 2e-6));
  EXPECT_NEAR(e8->step.memory_s, e1->step.memory_s / 8.0, 1e-15);
  EXPECT_EQ(e8->replicas, 1);
  EXPECT_EQ(e1->replicas, 8);  // a one-GPU model runs eight copies on the node
}

// The serving framework's host time is added once per step (per iteration of
// the whole batch, not per pipeline stage or layer) and once to the prefill.
TEST(DecodeStep, FrameworkHostTimeIsAddedOncePerStep) {
  ClusterSpec c = one_gpu();
  const ModelConfig m = small_model();
  const auto bare = estimate_split(c, m, workload(16), 1, 1);
  c.framework = ServingFramework{"custom", 300e-6, 2e-6};
  const auto with = estimate_split(c, m, workload(16), 1, 1);
  ASSERT_TRUE(bare && with);
  EXPECT_DOUBLE_EQ(with->step.framework_s, 300e-6 + 16 * 2e-6);
  EXPECT_DOUBLE_EQ(with->step.total_s, bare->step.total_s + 332e-6);
  EXPECT_DOUBLE_EQ(with->ttft_s, bare->ttft_s + 302e-6);
  EXPECT_EQ(bare->step.framework_s, 0.0);
  // A host time larger than the GPU's work is what limits the step.
  c.framework.per_iteration_s = 1.0;
  EXPECT_EQ(estimate_split(c, m, workload(1), 1, 1)->bottleneck, "framework overhead");
}

TEST(ServingFrameworks, NamedPresetsCarryTheirFigures) {
  EXPECT_EQ(framework_names().front(), "none");
  for (const std::string& name : framework_names()) {
    const std::optional<ServingFramework> f = framework_preset(name);
    ASSERT_TRUE(f.has_value()) << name;
    EXPECT_EQ(f->name, name);
    EXPECT_GE(f->per_iteration_s, 0.0);
    EXPECT_LT(f->per_iteration_s, 5e-3) << name;  // host time is well below a decode step
  }
  EXPECT_TRUE(framework_preset("none")->is_none());
  EXPECT_GT(framework_preset("vllm")->per_iteration_s, 0.0);
  EXPECT_GT(framework_preset("sglang")->per_iteration_s, 0.0);
  EXPECT_FALSE(framework_preset("vLLM").has_value());  // names are exact
  ClusterSpec c = one_gpu();
  c.framework.per_sequence_s = -1e-6;
  EXPECT_THROW(c.validate(), GpuSpecError);
}

TEST(ParallelismChoice, PicksTheLowestLatencySplitUnlessFixed) {
  // No split is more than the slack faster than the chosen one; fewer GPUs win within it.
  ClusterSpec c = one_gpu();
  c.gpus_per_node = 8;
  c.max_nodes = 2;
  c.scaleup_bandwidth = 100e9;
  c.scaleout_bandwidth = 50e9;
  c.scaleout_latency_s = 5e-6;
  c.params.allreduce_alpha_s = 1e-6;
  const ModelConfig m = small_model();
  const GpuEstimate best = estimate(c, m, workload(4));
  EXPECT_TRUE(best.parallelism_auto);
  for (int tp = 1; tp <= 8; tp *= 2) {
    for (int pp = 1; pp <= 4; ++pp) {
      const auto e = estimate_split(c, m, workload(4), tp, pp);
      if (!e) continue;
      EXPECT_LE(e->decode_tokens_per_s_per_user,
                best.decode_tokens_per_s_per_user * (1.0 + kSplitLatencySlack))
          << "tp " << tp << " pp " << pp << " is faster than the chosen " << best.tp << "x"
          << best.pp;
    }
  }
  // With costly all-reduces, no tensor parallelism.
  c.params.allreduce_alpha_s = 1e-3;
  EXPECT_EQ(estimate(c, m, workload(4)).tp, 1);
  // Fixed by the scenario: taken as given.
  InferenceWorkload fixed = workload(4);
  fixed.tp = 2;
  fixed.pp = 2;
  const GpuEstimate f = estimate(c, m, fixed);
  EXPECT_EQ(f.tp, 2);
  EXPECT_EQ(f.pp, 2);
  EXPECT_FALSE(f.parallelism_auto);
  EXPECT_EQ(f.micro_batches, 2);  // four users in two micro-batches over two stages
}

TEST(KvCapacity, LimitsTheUsersOneReplicaServes) {
  ClusterSpec c = one_gpu();
  const ModelConfig m = small_model();
  const double weights = static_cast<double>(m.parameter_count()) * 2.0;
  const double kv_user = 20.0 * kv_bytes_per_token(m, 16);  // prompt + generated = 20 tokens
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, 16), 2.0 * 4 * 8 * 128 * 2);
  c.gpu.hbm_bytes = weights + 5.5 * kv_user;  // room for five users
  const GpuEstimate e = estimate(c, m, workload(9));
  EXPECT_EQ(e.max_users_per_replica, 5);
  EXPECT_EQ(e.users_per_replica, 5);
  EXPECT_TRUE(e.kv_limited);
  EXPECT_DOUBLE_EQ(e.aggregate_tokens_per_s, 5.0 * e.decode_tokens_per_s_per_user);
  // Not even one user: no split fits.
  c.gpu.hbm_bytes = weights + 0.5 * kv_user;
  EXPECT_THROW(estimate(c, m, workload(1)), GpuFitError);
}

TEST(SpeculativeDecoding, ExpectedTokensPerStepFollowsTheGeometricSum) {
  EXPECT_DOUBLE_EQ(expected_tokens_per_step(0.7, 4), (1.0 - std::pow(0.7, 5)) / 0.3);
  EXPECT_NEAR(expected_tokens_per_step(0.7, 4), 2.77310, 1e-5);
  EXPECT_DOUBLE_EQ(expected_tokens_per_step(1.0, 4), 5.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_step(0.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_step(0.5, 1), 1.5);
}

TEST(SpeculativeDecoding, RateIsExpectedTokensOverDraftStepsPlusVerification) {
  const ModelConfig m = small_model();
  ModelConfig draft = small_model();
  draft.name = "draft";
  draft.num_layers = 1;
  InferenceWorkload w = workload(1);
  w.speculative = SpeculativeDecoding{draft, 3, 0.8};
  const auto e = estimate_split(one_gpu(), m, w, 1, 1);
  ASSERT_TRUE(e.has_value());
  // Verification: 4 tokens through the target in one step (weights read once).
  const double params = static_cast<double>(m.parameter_count());
  const double kv = 15.0 * 2 * 4 * 8 * 128 * 2;
  const double verify_memory = (params * 2.0 + kv) / 0.5e12;
  const double verify_compute = 4.0 * (2.0 * params + 4.0 * 15 * 1024 * 4) / 50e12;
  EXPECT_DOUBLE_EQ(e->step.total_s, std::max(verify_memory, verify_compute) + 4e-6);
  const double tokens = expected_tokens_per_step(0.8, 3);
  EXPECT_DOUBLE_EQ(e->expected_tokens_per_step, tokens);
  EXPECT_DOUBLE_EQ(e->decode_tokens_per_s_per_user,
                   tokens / (3.0 * e->draft_step_s + e->step.total_s));
  EXPECT_GT(e->draft_step_s, 0.0);
  EXPECT_LT(e->draft_step_s, e->step.total_s);
}

TEST(Prefill, TtftIsTheWholePromptThroughEveryStage) {
  ClusterSpec c = one_gpu();
  c.gpu.bf16_flops = 1e12;
  const ModelConfig m = small_model();
  const auto e = estimate_split(c, m, workload(1), 1, 1);
  ASSERT_TRUE(e.has_value());
  // 10 prompt tokens: 2 x params x 10 + attention over a mean context of 5.
  const double params = static_cast<double>(m.parameter_count());
  const double compute = 10.0 * (2.0 * params + 4.0 * 5 * 1024 * 4) / 0.5e12;
  EXPECT_DOUBLE_EQ(e->ttft_s, compute + 4e-6);
}

TEST(Serving, AddsRoundTripSetUpAndPerTokenOverhead) {
  const ServingOverhead o{0.050, 0.001, 0.200};
  const UserSeen fresh = user_seen(1000.0, 0.010, o, false);
  EXPECT_DOUBLE_EQ(fresh.ttft_s, 0.010 + 0.200 + 0.050);
  EXPECT_DOUBLE_EQ(fresh.decode_tokens_per_s_per_user, 1.0 / (0.001 + 0.001));
  // Persistent: round trip -80%, per token -30%, set-up (the TTFT part) -50%.
  const UserSeen kept = user_seen(1000.0, 0.010, o, true);
  EXPECT_DOUBLE_EQ(kept.ttft_s, 0.010 + 0.100 + 0.010);
  EXPECT_DOUBLE_EQ(kept.decode_tokens_per_s_per_user, 1.0 / (0.001 + 0.0007));
}

TEST(ClusterSpecValidation, RejectsImpossibleClusters) {
  ClusterSpec c = one_gpu();
  EXPECT_NO_THROW(c.validate());
  c.params.memory_efficiency = 1.5;
  try {
    c.validate();
    FAIL() << "no error";
  } catch (const GpuSpecError& e) {
    EXPECT_EQ(e.field(), "model.memory_efficiency");
  }
  c = one_gpu();
  c.gpu.hbm_bandwidth = 0.0;
  EXPECT_THROW(c.validate(), GpuSpecError);
}

// A serving iteration of b decode sequences is the decode step estimate_split
// times for b users at the same context (one formula, two callers).
TEST(ReplicaTiming, DecodeIterationEqualsEstimateSplitStep) {
  ClusterSpec cluster = one_gpu();
  cluster.gpus_per_node = 4;
  cluster.scaleup_bandwidth = 100e9;
  cluster.params.allreduce_alpha_s = 1e-6;
  cluster.framework = ServingFramework{"custom", 200e-6, 3e-6};  // added by both callers alike
  const ModelConfig model = small_model();
  for (const int pp : {1, 2}) {
    for (const int users : {1, 3, 16}) {
      InferenceWorkload w;
      w.prompt_tokens = 1000;
      w.generate_tokens = 200;  // mean context 1100
      w.users = users;
      const auto e = estimate_split(cluster, model, w, 2, pp);
      ASSERT_TRUE(e.has_value());
      ReplicaTiming r(cluster, model, 16, 2, pp);
      Iteration it;
      it.decode_sequences = e->users_per_replica;
      it.decode_context = 1100.0 * e->users_per_replica;
      // estimate_split rounds each micro-batch up to whole users; compare where it divides.
      if (e->users_per_replica % e->micro_batches != 0) continue;
      EXPECT_NEAR(r.iteration_s(it), e->step.total_s, 1e-12 * e->step.total_s)
          << "pp " << pp << " users " << users;
    }
  }
}

// Prefill of n tokens is one pass with n tokens: it costs far more than a decode step,
// about n times its compute, and a chunk attends to what was cached before it.
TEST(ReplicaTiming, PrefillChunkCostsGrowWithCachedContext) {
  const ClusterSpec cluster = one_gpu();
  const ModelConfig model = small_model();
  ReplicaTiming r(cluster, model, 16, 1, 1);
  Iteration fresh;
  fresh.prefill_sequences = 1;
  fresh.prefill_tokens = 2048;
  fresh.prefill_context = 2048;
  fresh.prefill_attention_pairs = 2048.0 * 1024.0;
  Iteration cached = fresh;
  cached.prefill_context = 8192 + 2048;
  cached.prefill_attention_pairs = 2048.0 * (8192.0 + 1024.0);
  EXPECT_GT(r.iteration_s(cached), r.iteration_s(fresh));
  Iteration one;
  one.decode_sequences = 1;
  one.decode_context = 2048;
  EXPECT_GT(r.iteration_s(fresh), 10.0 * r.iteration_s(one));
  // 100 GB, no reserve, less the bf16 weights, over 2 x 4 layers x 8 heads x 128 x 2 B a token.
  const double weights = static_cast<double>(model.parameter_count()) * 2.0;
  EXPECT_DOUBLE_EQ(r.kv_capacity_tokens(), std::floor((100e9 - weights) / 16384.0));
  EXPECT_THROW(ReplicaTiming(cluster, model, 16, 2, 1), GpuFitError);  // one GPU per node
}

}  // namespace
}  // namespace wafersim::models::gpu
