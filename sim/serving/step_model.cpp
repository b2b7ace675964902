#include "sim/serving/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace wafersim::sim::serving {

namespace {

// The sorted distinct values of one coordinate of the points.
template <class F>
std::vector<double> axis(const std::vector<GridPoint>& points, F coordinate) {
  std::vector<double> a;
  for (const GridPoint& p : points) a.push_back(coordinate(p));
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

// The cell of `axis` holding x: index i with axis[i] <= x <= axis[i+1] and
// the weight of axis[i+1]; beyond the ends the first or last cell, the
// weight outside [0, 1] (linear extrapolation) when `extrapolate`, else
// clamped. A one-value axis: that value, weight 0.
std::pair<std::size_t, double> locate(const std::vector<double>& a, double x, bool extrapolate) {
  if (a.size() == 1) return {0, 0.0};
  std::size_t i = 0;
  while (i + 2 < a.size() && x > a[i + 1]) ++i;
  double w = (x - a[i]) / (a[i + 1] - a[i]);
  if (!extrapolate) w = std::clamp(w, 0.0, 1.0);
  return {i, w};
}

// Bilinear interpolation of `value(ix, iy)` over the grid axes.
template <class F>
double bilinear(const std::vector<double>& ax, double x, bool extrapolate_x,
                const std::vector<double>& ay, double y, bool extrapolate_y, F value) {
  const auto [i, wx] = locate(ax, x, extrapolate_x);
  const auto [j, wy] = locate(ay, y, extrapolate_y);
  const std::size_t i1 = std::min(i + 1, ax.size() - 1);
  const std::size_t j1 = std::min(j + 1, ay.size() - 1);
  const double v00 = value(i, j), v10 = value(i1, j), v01 = value(i, j1), v11 = value(i1, j1);
  return (1 - wx) * (1 - wy) * v00 + wx * (1 - wy) * v10 + (1 - wx) * wy * v01 + wx * wy * v11;
}

// The points as a dense table [x][y]; throws unless every pair is present once.
template <class FX, class FY>
std::vector<double> table(const std::vector<GridPoint>& points, const std::vector<double>& ax,
                          FX fx, const std::vector<double>& ay, FY fy, const char* what) {
  std::vector<double> t(ax.size() * ay.size(), std::nan(""));
  for (const GridPoint& p : points) {
    const auto i =
        static_cast<std::size_t>(std::lower_bound(ax.begin(), ax.end(), fx(p)) - ax.begin());
    const auto j =
        static_cast<std::size_t>(std::lower_bound(ay.begin(), ay.end(), fy(p)) - ay.begin());
    t[i * ay.size() + j] = p.step_s;
  }
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (std::isnan(t[i]))
      throw std::invalid_argument(fmt::format(
          "the {} calibration grid misses the point ({}, {}): it needs every combination", what,
          ax[i / ay.size()], ay[i % ay.size()]));
  }
  return t;
}

}  // namespace

WaferSteps::WaferSteps(std::vector<GridPoint> decode, std::vector<GridPoint> prefill, KvCapacity kv,
                       double kv_bytes_per_token, double io_bytes_per_s)
    : decode_(std::move(decode)),
      prefill_(std::move(prefill)),
      kv_(kv),
      kv_bytes_per_token_(kv_bytes_per_token),
      io_bytes_per_s_(io_bytes_per_s) {
  // Prompts of several sequences sent together: points with users > 1 (at
  // no cached context), apart from the one-sequence grid.
  for (auto it = prefill_.begin(); it != prefill_.end();) {
    if (it->users > 1) {
      streams_.push_back(*it);
      it = prefill_.erase(it);
    } else {
      ++it;
    }
  }
  if (decode_.empty() || prefill_.empty())
    throw std::invalid_argument("a wafer step model needs decode and prefill calibration points");
  users_axis_ = axis(decode_, [](const GridPoint& p) { return double(p.users); });
  context_axis_ = axis(decode_, [](const GridPoint& p) { return double(p.context); });
  prefill_context_axis_ = axis(prefill_, [](const GridPoint& p) { return double(p.context); });
  // The first context's row (every prompt length measured), and the grid of
  // the lengths also measured after cached positions.
  std::vector<GridPoint> row, grid;
  for (const GridPoint& p : prefill_)
    (double(p.context) == prefill_context_axis_.front() ? row : grid).push_back(p);
  prefill_row_tokens_ = axis(row, [](const GridPoint& p) { return double(p.tokens); });
  prefill_row_ = table(
      row, prefill_row_tokens_, [](const GridPoint& p) { return double(p.tokens); }, {0.0},
      [](const GridPoint&) { return 0.0; }, "prefill");
  for (const GridPoint& p : row)
    for (const GridPoint& q : grid)
      if (q.tokens == p.tokens) {
        grid.push_back(p);
        break;
      }
  prefill_tokens_axis_ =
      axis(grid.empty() ? row : grid, [](const GridPoint& p) { return double(p.tokens); });
  if (grid.empty()) grid = row;
  decode_table_ = table(
      decode_, users_axis_, [](const GridPoint& p) { return double(p.users); }, context_axis_,
      [](const GridPoint& p) { return double(p.context); }, "decode");
  prefill_table_ = table(
      grid, prefill_tokens_axis_, [](const GridPoint& p) { return double(p.tokens); },
      prefill_context_axis_, [](const GridPoint& p) { return double(p.context); }, "prefill");
  // The grid as what cached positions add to the first context's prefill.
  const std::size_t ny = prefill_context_axis_.size();
  for (std::size_t i = 0; i < prefill_tokens_axis_.size(); ++i)
    for (std::size_t j = ny; j-- > 0;) prefill_table_[i * ny + j] -= prefill_table_[i * ny];
  // At each measured (u, n): u prompts of n tokens sent together have the
  // last first token at prefill(n) + occupancy(n) x r x (u - 1), r the share
  // each prompt beyond the first adds, and the first (the first sent) at
  // prefill(n) + occupancy(n) x h, h what the others' arrival delays it.
  if (!streams_.empty()) {
    stream_users_axis_ = axis(streams_, [](const GridPoint& p) { return double(p.users); });
    stream_tokens_axis_ = axis(streams_, [](const GridPoint& p) { return double(p.tokens); });
    std::vector<GridPoint> shares = streams_, heads = streams_;
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      const GridPoint& p = streams_[i];
      const double n = static_cast<double>(p.tokens);
      const double alone = prefill_s(n, 0.0);
      const double occupancy = prefill_occupancy_s(n, 0.0);
      shares[i].step_s =
          occupancy > 0.0 ? std::max(0.0, (p.step_s - alone) / (occupancy * (p.users - 1))) : 1.0;
      heads[i].step_s =
          occupancy > 0.0 && p.first_s > 0.0 ? std::max(0.0, (p.first_s - alone) / occupancy) : 0.0;
    }
    // A length measured only up to some number of prompts (the
    // calibration's token budget): beyond it, the share with the most.
    const auto extend = [&](std::vector<GridPoint>& measured) {
      for (const double n : stream_tokens_axis_) {
        double last = std::nan("");
        for (const double u : stream_users_axis_) {
          const auto at = std::find_if(measured.begin(), measured.end(), [&](const GridPoint& p) {
            return double(p.users) == u && double(p.tokens) == n;
          });
          if (at != measured.end())
            last = at->step_s;
          else if (!std::isnan(last))
            measured.push_back({static_cast<int>(u), 0, static_cast<long long>(n), last});
        }
      }
    };
    extend(shares);
    extend(heads);
    stream_share_table_ = table(
        shares, stream_users_axis_, [](const GridPoint& p) { return double(p.users); },
        stream_tokens_axis_, [](const GridPoint& p) { return double(p.tokens); }, "prompt stream");
    head_share_table_ = table(
        heads, stream_users_axis_, [](const GridPoint& p) { return double(p.users); },
        stream_tokens_axis_, [](const GridPoint& p) { return double(p.tokens); }, "prompt stream");
  }
}

double WaferSteps::decode_step_s(double users, double context) const {
  const std::size_t ny = context_axis_.size();
  // Users beyond the grid are clamped (the grid spans the batch the
  // placement holds); the context is extrapolated linearly past its ends.
  return std::max(
      0.0, bilinear(users_axis_, users, false, context_axis_, context, true,
                    [&](std::size_t i, std::size_t j) { return decode_table_[i * ny + j]; }));
}

double WaferSteps::prefill_s(double tokens, double context) const {
  // The first context's row, piecewise linear in the prompt length, plus
  // what the cached positions add, bilinear on the grid.
  const std::size_t ny = prefill_context_axis_.size();
  const double row = bilinear(prefill_row_tokens_, tokens, true, {0.0}, 0.0, false,
                              [&](std::size_t i, std::size_t) { return prefill_row_[i]; });
  const double cached =
      bilinear(prefill_tokens_axis_, tokens, true, prefill_context_axis_, context, true,
               [&](std::size_t i, std::size_t j) { return prefill_table_[i * ny + j]; });
  return std::max(0.0, row + cached);
}

double WaferSteps::fill_latency_s(double context) const {
  // The grid's first cell extrapolated to no tokens, at most its first point.
  const double at_zero = prefill_s(0.0, context);
  return std::clamp(at_zero, 0.0, prefill_s(prefill_row_tokens_.front(), context));
}

double WaferSteps::prefill_occupancy_s(double tokens, double context) const {
  return std::max(0.0, prefill_s(tokens, context) - fill_latency_s(context));
}

double WaferSteps::stream_share(double prompts, double tokens) const {
  if (streams_.empty()) return 1.0;
  // The measured shares, interpolated in the number of prompts and their
  // length, clamped beyond the grid.
  const std::size_t ny = stream_tokens_axis_.size();
  return bilinear(stream_users_axis_, prompts, false, stream_tokens_axis_, tokens, false,
                  [&](std::size_t i, std::size_t j) { return stream_share_table_[i * ny + j]; });
}

double WaferSteps::head_share(double prompts, double tokens) const {
  if (streams_.empty() || prompts <= 1.0) return 0.0;
  const std::size_t ny = stream_tokens_axis_.size();
  const double h =
      bilinear(stream_users_axis_, prompts, false, stream_tokens_axis_, tokens, false,
               [&](std::size_t i, std::size_t j) { return head_share_table_[i * ny + j]; });
  return std::clamp(h, 0.0, stream_share(prompts, tokens) * (prompts - 1.0));
}

namespace {

// Where each of n prompt chunks has passed within the prefill part
// `prefill` of an iteration (= one x (1 + r x (n - 1)), one the occupancy
// of its mean chunk): the first after its own occupancy times (1 + h), each
// later one after its own times the rest of the share, (r x (n - 1) - h) /
// (n - 1), the last at `prefill` exactly. Equal chunks: one x (1 + h + s x k).
std::vector<double> chunk_passes(double prefill, double r, double h,
                                 const std::vector<double>& occupancy) {
  const std::size_t n = occupancy.size();
  std::vector<double> out(n, prefill);
  if (n < 2) return out;
  const double later = (r * static_cast<double>(n - 1) - h) / static_cast<double>(n - 1);
  std::vector<double> w(n);
  w[0] = occupancy[0] * (1.0 + h);
  for (std::size_t k = 1; k < n; ++k) w[k] = w[k - 1] + occupancy[k] * later;
  if (w[n - 1] <= 0.0) return out;
  for (std::size_t k = 0; k + 1 < n; ++k) out[k] = prefill * (w[k] / w[n - 1]);
  return out;
}

}  // namespace

double WaferSteps::stream_prefill_s(double prompts, double tokens, int k) const {
  const int n = std::max(1, static_cast<int>(std::lround(prompts)));
  const double one = prefill_occupancy_s(tokens, 0.0);
  const double r = stream_share(n, tokens);
  const std::vector<double> passes =
      chunk_passes(one * (1.0 + r * (n - 1)), r, head_share(n, tokens),
                   std::vector<double>(static_cast<std::size_t>(n), one));
  return fill_latency_s(0.0) + passes[static_cast<std::size_t>(std::clamp(k, 0, n - 1))];
}

double WaferSteps::iteration_s(const Iteration& it) const {
  double s = 0.0;
  if (it.decode_sequences > 0)
    s += decode_step_s(it.decode_sequences, it.decode_context / it.decode_sequences);
  if (it.prefill_tokens > 0.0) {
    // The chunks' mean cached context: their attended positions less the chunk itself.
    const double cached =
        std::max(0.0, (it.prefill_context - it.prefill_tokens) / std::max(1, it.prefill_sequences));
    // Equal chunks: the first costs its occupancy, each later one the share
    // measured with as many prompts in flight.
    const int n = std::max(1, it.prefill_sequences);
    const double chunk = it.prefill_tokens / n;
    const double one = prefill_occupancy_s(chunk, cached);
    if (n > 1)
      s += one * (1.0 + stream_share(n, chunk) * (n - 1));
    else
      s += one;
  }
  return s;
}

std::vector<double> WaferSteps::chunk_ends_s(const Iteration& it,
                                             const std::vector<PromptChunk>& chunks) const {
  const double end = iteration_s(it);
  std::vector<double> out(chunks.size(), end);
  if (chunks.size() < 2) return out;
  // The decode tokens go first (the simulator sends them first); then the
  // chunks, as iteration_s times them.
  const double decode =
      it.decode_sequences > 0
          ? decode_step_s(it.decode_sequences, it.decode_context / it.decode_sequences)
          : 0.0;
  const int n = static_cast<int>(chunks.size());
  const double chunk = it.prefill_tokens / n;
  const double r = stream_share(n, chunk);
  std::vector<double> occupancy;
  for (const PromptChunk& c : chunks) occupancy.push_back(prefill_occupancy_s(c.tokens, c.cached));
  const std::vector<double> passes = chunk_passes(end - decode, r, head_share(n, chunk), occupancy);
  for (std::size_t k = 0; k + 1 < chunks.size(); ++k) out[k] = std::min(end, decode + passes[k]);
  return out;
}

double WaferSteps::kv_transfer_s(long long tokens) const {
  return io_bytes_per_s_ > 0.0 ? static_cast<double>(tokens) * kv_bytes_per_token_ / io_bytes_per_s_
                               : 0.0;
}

GpuSteps::GpuSteps(models::gpu::ClusterSpec cluster, models::ModelConfig model, int weight_bits,
                   int tp, int pp, int max_batch)
    : cluster_(std::make_unique<models::gpu::ClusterSpec>(std::move(cluster))),
      model_(std::make_unique<models::ModelConfig>(std::move(model))),
      timing_(
          std::make_unique<models::gpu::ReplicaTiming>(*cluster_, *model_, weight_bits, tp, pp)),
      kv_bytes_per_token_(models::gpu::kv_bytes_per_token(*model_, weight_bits)) {
  kv_.slots = max_batch;
  kv_.pool_tokens = static_cast<long long>(timing_->kv_capacity_tokens());
}

double GpuSteps::kv_transfer_s(long long tokens) const {
  // Across nodes, over the replica's NICs (one per GPU) in parallel.
  const double bandwidth = cluster_->scaleout_bandwidth * timing_->gpus();
  return bandwidth > 0.0 ? static_cast<double>(tokens) * kv_bytes_per_token_ / bandwidth : 0.0;
}

}  // namespace wafersim::sim::serving
