// How long one iteration of a serving replica takes, and how much KV cache it
// holds: the interface the request-level simulation steps, and its two
// implementations — the wafer's, interpolated on a grid of cycle-level engine
// runs (calibrated by sim/studies/calibration.*), and a GPU system's, from the
// analytical cluster model (models/gpu/cluster_model.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/gpu/cluster_model.hpp"

namespace wafersim::sim::serving {

// What one iteration runs (iteration-level scheduling): one new token for
// each decoding sequence, and prompt chunks of sequences being prefilled.
using Iteration = models::gpu::Iteration;

// One prompt chunk of an iteration, in the order the iteration sends them:
// its tokens and the positions already cached before it.
struct PromptChunk {
  double tokens = 0.0;
  double cached = 0.0;
};

// The KV cache one replica holds. `slots` sequences at most, each of at most
// `slot_tokens` positions (a wafer placement reserves a fixed slice of SRAM
// per sequence), and `pool_tokens` positions over all sequences (a GPU's free
// HBM, paged). 0 = no limit of that kind.
struct KvCapacity {
  int slots = 0;
  long long slot_tokens = 0;
  long long pool_tokens = 0;
};

class StepModel {
 public:
  virtual ~StepModel() = default;
  // Seconds one iteration takes on one replica; 0 for an empty one.
  virtual double iteration_s(const Iteration& it) const = 0;
  virtual KvCapacity kv_capacity() const = 0;
  // Seconds to move `tokens` positions of KV cache out of a replica (prefill
  // on separate hardware hands each request's cache to a decode replica).
  virtual double kv_transfer_s(long long tokens) const = 0;
  // Seconds from the iteration that passed a prompt's last chunk to its first
  // token, on top of the iteration: a pipeline's fill latency (the wafer's
  // layers in a row), 0 where an iteration is one pass of the whole model.
  virtual double fill_latency_s(double /*cached_context*/) const { return 0.0; }
  // Seconds from the iteration's start until each of its prompt chunks
  // (`chunks`, in the order sent) has passed, before any fill latency: where
  // a prompt's first token comes from. The last is iteration_s(it) exactly.
  // Here every chunk passes at the iteration's end (one pass of the whole
  // model, as a GPU runs it).
  virtual std::vector<double> chunk_ends_s(const Iteration& it,
                                           const std::vector<PromptChunk>& chunks) const {
    return std::vector<double>(chunks.size(), iteration_s(it));
  }
};

// One engine run of the calibration grid: `users` sequences decoding at
// `context` positions each (workload.cached_tokens) gave `step_s` between
// tokens; or one sequence prefilling `tokens` prompt tokens after `context`
// cached positions gave `step_s` of prefill; or `users` > 1 sequences sent
// their prompts of `tokens` at once (nothing cached) and the last of them
// had its first token `step_s` after they arrived, the first (the first
// sent) `first_s` after.
struct GridPoint {
  int users = 1;
  long long context = 0;
  long long tokens = 0;  // prefill points only
  double step_s = 0.0;
  double first_s = 0.0;  // prefill points of several sequences only; 0 = not measured
};

// The wafer pipeline's step times, interpolated on the calibration grid:
// decode steps bilinearly in (users, context) over the grid's cells (linear
// beyond its last context: attention grows linearly with the context),
// prefill piecewise-linearly in tokens at no cached context (up to the
// traffic's longest prompt) plus what cached positions add, bilinear in
// tokens and context on the shorter prompts measured after both. A prompt of n tokens
// takes prefill_s(n) = fill + occupancy(n) through the layer pipeline: the
// fill latency (the grid extrapolated to 0 tokens: a block crossing every
// layer) and the pipeline's time per token after it (the grid's slope), as
// the engine streams a prompt's blocks back to back. An iteration costs its
// decode step plus the occupancy of its prompt chunks (the blocks and the
// decode tokens share the layers' regions one message at a time); a prompt's
// first token follows its last chunk's iteration by the fill latency. So a
// lone request's TTFT is the engine's prefill whatever the chunking. With k
// prompts in one iteration, each beyond the first adds its occupancy times
// the share measured with k prompts in flight (stream_share), interpolated
// in k and the prompt length on the grid of prompts sent together. Within
// the iteration the prompts pass one after another, as the engine streams
// them: the first after its occupancy times (1 + head_share(k, n)), the
// delay the others' arrival costs it, measured on the same runs; the later
// ones evenly up to the last at the iteration's end (chunk_ends_s), each
// prompt's first token then a fill latency later.
class WaferSteps final : public StepModel {
 public:
  // Throws std::invalid_argument unless the decode points form a full grid
  // (every users value at every context) and the prefill points one too.
  WaferSteps(std::vector<GridPoint> decode, std::vector<GridPoint> prefill, KvCapacity kv,
             double kv_bytes_per_token, double io_bytes_per_s);
  double iteration_s(const Iteration& it) const override;
  KvCapacity kv_capacity() const override { return kv_; }
  double kv_transfer_s(long long tokens) const override;
  double fill_latency_s(double cached_context) const override;
  std::vector<double> chunk_ends_s(const Iteration& it,
                                   const std::vector<PromptChunk>& chunks) const override;

  double decode_step_s(double users, double context) const;
  double prefill_s(double tokens, double context) const;
  // prefill_s less the fill latency: what `tokens` prompt tokens add to an iteration.
  double prefill_occupancy_s(double tokens, double context) const;
  // With `prompts` prompts of `tokens` each in flight together, what each one
  // beyond the first adds to the time until the last has passed, as a share
  // of one prompt's occupancy alone (1 without such points). Below 1 where
  // different sequences' blocks pipeline behind each other; above 1 where
  // many prompts in flight contend for the same links. A length measured up
  // to fewer prompts: the share with the most measured.
  double stream_share(double prompts, double tokens) const;
  // With `prompts` prompts of `tokens` each in flight together, how much
  // later than alone the first of them passes, as a share of one prompt's
  // occupancy alone (0 without such points): the others' blocks arriving at
  // once delay it (tiny-llama on a 64x64 mesh, 16 prompts of 96 tokens: 3.1,
  // their embedding rows' moves onto layer 0's input). Interpolated and
  // clamped as stream_share, and at most stream_share x (prompts - 1).
  double head_share(double prompts, double tokens) const;
  // The prefill of the `k`-th (0-based) of `prompts` prompts of `tokens`
  // each sent together, nothing cached: fill latency plus where it passes.
  double stream_prefill_s(double prompts, double tokens, int k) const;
  const std::vector<GridPoint>& decode_points() const { return decode_; }
  const std::vector<GridPoint>& prefill_points() const { return prefill_; }

 private:
  std::vector<GridPoint> decode_;
  std::vector<GridPoint> prefill_;
  std::vector<GridPoint> streams_;  // prefill points of several sequences
  std::vector<double> stream_users_axis_, stream_tokens_axis_;
  std::vector<double> stream_share_table_;                // [users][tokens] the share each measured
  std::vector<double> head_share_table_;                  // [users][tokens] the first's delay
  std::vector<double> users_axis_, context_axis_;         // decode grid
  std::vector<double> prefill_row_tokens_, prefill_row_;  // at the first context: every length
  std::vector<double> prefill_tokens_axis_, prefill_context_axis_;  // prefill grid
  std::vector<double> decode_table_;                                // [users][context] step seconds
  std::vector<double> prefill_table_;  // [tokens][context] seconds beyond the first context's
  KvCapacity kv_;
  double kv_bytes_per_token_;
  double io_bytes_per_s_;
};

// One replica of a GPU system on its split (models::gpu::ReplicaTiming).
class GpuSteps final : public StepModel {
 public:
  GpuSteps(models::gpu::ClusterSpec cluster, models::ModelConfig model, int weight_bits, int tp,
           int pp, int max_batch);
  double iteration_s(const Iteration& it) const override { return timing_->iteration_s(it); }
  KvCapacity kv_capacity() const override { return kv_; }
  double kv_transfer_s(long long tokens) const override;
  const models::gpu::ReplicaTiming& timing() const { return *timing_; }

 private:
  // Held here: ReplicaTiming keeps pointers to them.
  std::unique_ptr<models::gpu::ClusterSpec> cluster_;
  std::unique_ptr<models::ModelConfig> model_;
  std::unique_ptr<models::gpu::ReplicaTiming> timing_;
  KvCapacity kv_;
  double kv_bytes_per_token_;
};

}  // namespace wafersim::sim::serving
