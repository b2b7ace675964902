// The numbers of a functional run: what each phase computes, given the
// vectors the executor (sim/exec/executor.hpp) has placed and timed. Sums
// spread over several cores are added in the order the simulated reductions
// add them (fabric::reduction_order), so the values are those the wafer
// would compute. Reads the weights; writes only its own KV cache and the
// vectors it is given. No timing here: the executor calls it beside the
// timing of the same phase.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "fabric/collectives.hpp"
#include "models/kernels.hpp"
#include "models/weights.hpp"
#include "models/work_team.hpp"
#include "sim/exec/kv_cache.hpp"
#include "sim/exec/token_message.hpp"
#include "sim/placement/placement.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

// The pieces [first, last] of a layout (sorted, contiguous) that hold
// elements [begin, end) of its vector (a head of a qkv vector, say).
std::pair<std::size_t, std::size_t> pieces_of_range(const Layout& l, int begin, int end);

// The format a core holds and sends activations in, for values of
// `value_bytes` on the fabric (Placement::value_bytes): fp32 for 4; for 2,
// the 16-bit float the weights' vectors are stored in (fp16 for fp16
// weights), else bf16 (fp32's range: fp32, fp8 and int8 weights).
models::DType held_dtype(int value_bytes, models::DType weights);

class PhaseValues {
 public:
  PhaseValues(const models::ModelConfig& model, const Placement& pl, const models::Weights& w);
  ~PhaseValues();

  // Host threads for the GEMVs: `threads` in all, the calling thread
  // included (models::WorkTeam); `guest`, when given, is called each time a
  // GEMV's bands are handed out, and one other thread may then take some of
  // them with assist(). Results do not depend on either.
  void set_threads(int threads, std::function<void()> guest = nullptr);
  bool assist();

  // The gains and (LayerNorm) biases a norm phase names.
  const std::vector<float>& gamma(Phase::Gamma g, int layer) const;
  const std::vector<float>& beta(Phase::Gamma g, int layer) const;

  // Row `token` of the embedding, row `position` of gpt2's position
  // embedding.
  void embedding_row(std::int32_t token, std::vector<float>& out) const;
  void position_row(int position, std::vector<float>& out) const;

  // Each fills `out.values`; `out` already has its layout and tokens. The
  // norms combine their per-piece statistics in `scheme`'s order.
  void rmsnorm(const Vec& x, const std::vector<float>& g, fabric::ReductionScheme scheme, Vec& out,
               int groups = 0) const;
  void layernorm(const Vec& x, const std::vector<float>& g, const std::vector<float>& b,
                 fabric::ReductionScheme scheme, Vec& out, int groups = 0) const;
  void silu_mul(const Vec& gu, Vec& out) const;
  void add(const Vec& a, const Vec& b, Vec& out) const;
  // In place.
  void bias(Vec& v, WeightRef ref, int layer) const;
  void qk_norm(Vec& qkv, int layer) const;
  // Row t at rows[t].position.
  void rope(Vec& qkv, int layer, std::span<const RowTag> rows) const;
  void gelu(Vec& v) const;

  // Appends every row's k and v to its user's cache, then attends (out:
  // q_dim values per row); row t is rows[t].
  void attention(const AttentionPlacement& a, int layer, const Vec& qkv,
                 std::span<const RowTag> rows, Vec& out);
  void truncate_kv(int user, int positions) { kv_.truncate(user, positions); }

  // The greedy token of `logits` and the logits themselves, into `m` (of a
  // decode batch: every row's).
  void argmax(const Vec& logits, TokenMessage& m) const;

  // Mixture of experts: the experts token t of a block chose from its
  // router logits; the rows of `x` of the tokens `rows` (an expert's
  // block); the weighted sum of the experts' outputs, in chosen order
  // (`outputs[e]` holds expert e's rows of the tokens `users_of[e]`).
  std::vector<models::ExpertChoice> route(const Vec& logits, int t) const;
  void select_tokens(const Vec& x, const std::vector<int>& rows, Vec& out) const;
  void combine_experts(const std::vector<std::vector<models::ExpertChoice>>& chosen,
                       const std::vector<std::vector<int>>& users_of,
                       const std::vector<Vec>& outputs, Vec& out) const;

  // What one host thread needs while it computes a row band of a GEMV.
  struct BandScratch {
    std::vector<float> partials, gate, up;
  };
  // Partial products of a row band's tiles: rows [r0, r1) of the fused
  // matrix, the tile of core column qi on input columns [c0 + cuts[qi],
  // c0 + cuts[qi + 1]) (cuts[0] = 0), into y[qi * (r1 - r0) ...]
  // (models::gemv_tiles: the same bits as each tile on its own); `expert`
  // for the expert matrices. Reads the weights only, so host threads may run
  // it at once (each with its own scratch).
  void band_product(WeightRef ref, int layer, int r0, int r1, int c0, std::span<const int> cuts,
                    std::span<const float> x, std::span<float> y, BandScratch& scratch,
                    int expert = -1) const;
  // The values of row band `pi` of a GEMV (rows [row_begin(pi),
  // row_begin(pi + 1)) of every token of the block): the tile products of
  // the band's Q cores (`cuts`: their columns from the first's, as
  // band_product takes them), added in the reduction's `order`. Writes those
  // rows of y only, and reads nothing another band writes.
  // With activations held in `held` (each chunk rounded to it as it is sent).
  static void ring_band(int Q, std::size_t n, int t, int tokens, std::vector<float>& partials,
                        std::span<float> out, models::DType held = models::DType::fp32);
  void band_values(const MatrixPlacement& m, WeightRef ref, int layer,
                   std::span<const fabric::CombineStep> order, std::span<const int> cuts, int pi,
                   const Vec& x, Vec& y, int expert, BandScratch& scratch) const;

  // The values of one GEMV, computed row band by row band on the host
  // threads while the caller times it: the constructor sizes y.values and
  // hands the bands out, finish() takes the bands left and waits for them.
  // Destroyed unfinished (the timing threw), it waits for the helpers
  // before what they read (x, y, its order and cuts) goes.
  class Gemv {
   public:
    Gemv(PhaseValues& v, const MatrixPlacement& m, WeightRef ref, int layer, const Vec& x, Vec& y,
         int expert);
    ~Gemv();
    Gemv(const Gemv&) = delete;
    Gemv& operator=(const Gemv&) = delete;
    void finish();

   private:
    models::WorkTeam* team_ = nullptr;  // null once finished
    std::vector<fabric::CombineStep> order_;
    std::vector<int> cuts_;  // the tiles' columns, from the first column's
  };

 private:
  // Per-piece partials of token t of a vector on a line of cores combined
  // in the order `scheme` adds them.
  template <class PieceSum>
  float line_sum(const Vec& x, int t, fabric::ReductionScheme scheme, int groups,
                 PieceSum&& piece_sum) const;
  void bias_row(std::span<float> all, WeightRef ref, int layer) const;
  // One block row's attention partial with its head dims split over the
  // block's columns (see phase_values.cpp).
  models::AttentionPartial split_partial(const AttentionPlacement& a, std::span<const float> q,
                                         const float* k_rows, const float* v_rows, std::size_t n,
                                         float scale) const;
  models::WorkTeam& team();
  // Activations as a core holds them (held_): every vector a phase writes,
  // and every partial a reduction sends, is rounded to it; arithmetic
  // within a phase on one core (a tile's dot products, a norm's or the
  // softmax's statistics, a reduction's adds) stays fp32.
  void hold(std::span<float> v) const;
  float sent(float v) const;

  const models::ModelConfig& model_;
  const Placement& pl_;
  const models::Weights& w_;
  KvCache kv_;
  models::DType held_;
  std::unique_ptr<models::WorkTeam> team_;
  std::vector<BandScratch> scratch_;  // one per thread of team_
};

}  // namespace wafersim::sim
