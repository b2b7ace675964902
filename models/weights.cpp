#include "models/weights.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "models/dtype.hpp"
#include "models/rng.hpp"

namespace wafersim::models {

Matrix::Matrix(int rows, int cols) : rows_(rows), cols_(cols) {
  if (rows < 0 || cols < 0) {
    throw std::invalid_argument("Matrix dimensions must be >= 0, got " + std::to_string(rows) +
                                " x " + std::to_string(cols));
  }
  values_.assign(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), 0.0f);
}

MatrixView Matrix::view(int row0, int nrows, int col0, int ncols) const {
  if (row0 < 0 || nrows < 0 || col0 < 0 || ncols < 0 || row0 > rows_ - nrows ||
      col0 > cols_ - ncols) {
    throw std::out_of_range("Matrix::view: rows [" + std::to_string(row0) + ", +" +
                            std::to_string(nrows) + ") x cols [" + std::to_string(col0) + ", +" +
                            std::to_string(ncols) + ") must lie inside " + std::to_string(rows_) +
                            " x " + std::to_string(cols_));
  }
  const float* origin = values_.data() + static_cast<std::size_t>(row0) * cols_ + col0;
  return MatrixView(origin, nrows, ncols, static_cast<std::size_t>(cols_));
}

namespace {

// Fills `values` with bound * u, u uniform in [-1, 1), rounded to `dtype`.
void fill_uniform(std::span<float> values, float bound, DType dtype, std::uint64_t seed,
                  std::uint64_t stream) {
  Xoshiro256StarStar rng(stream_seed(seed, stream));
  for (float& v : values) v = round_to_dtype(rng.uniform_pm1() * bound, dtype);
}

Matrix random_matrix(int rows, int cols, DType dtype, std::uint64_t seed, std::uint64_t stream) {
  Matrix m(rows, cols);
  // sqrt and division are correctly rounded, so the bound is the same everywhere.
  const float bound = static_cast<float>(std::sqrt(3.0 / cols));
  fill_uniform({m.data(), m.size()}, bound, dtype, seed, stream);
  return m;
}

std::vector<float> random_gains(int n, DType dtype, std::uint64_t seed, std::uint64_t stream) {
  std::vector<float> g(static_cast<std::size_t>(n));
  Xoshiro256StarStar rng(stream_seed(seed, stream));
  for (float& v : g) v = round_to_dtype(1.0f + 0.1f * rng.uniform_pm1(), dtype);
  return g;
}

}  // namespace

Weights Weights::synthetic(const ModelConfig& config, DType dtype, std::uint64_t seed) {
  config.validate();
  const int hidden = config.hidden_size;
  const int inter = config.intermediate_size;
  const int q = config.q_dim();
  const int kv = config.kv_dim();

  Weights w;
  w.config = config;
  w.dtype = dtype;

  w.embedding = Matrix(config.vocab_size, hidden);
  fill_uniform({w.embedding.data(), w.embedding.size()}, static_cast<float>(std::sqrt(3.0)), dtype,
               seed, kEmbeddingStream);

  w.layers.resize(static_cast<std::size_t>(config.num_layers));
  for (int l = 0; l < config.num_layers; ++l) {
    LayerWeights& layer = w.layers[static_cast<std::size_t>(l)];
    auto s = [l](TensorKind k) { return layer_stream(l, k); };
    layer.wq = random_matrix(q, hidden, dtype, seed, s(TensorKind::wq));
    layer.wk = random_matrix(kv, hidden, dtype, seed, s(TensorKind::wk));
    layer.wv = random_matrix(kv, hidden, dtype, seed, s(TensorKind::wv));
    layer.wo = random_matrix(hidden, q, dtype, seed, s(TensorKind::wo));
    layer.w_gate = random_matrix(inter, hidden, dtype, seed, s(TensorKind::w_gate));
    layer.w_up = random_matrix(inter, hidden, dtype, seed, s(TensorKind::w_up));
    layer.w_down = random_matrix(hidden, inter, dtype, seed, s(TensorKind::w_down));
    layer.attn_norm = random_gains(hidden, dtype, seed, s(TensorKind::attn_norm));
    layer.ffn_norm = random_gains(hidden, dtype, seed, s(TensorKind::ffn_norm));
  }

  w.final_norm = random_gains(hidden, dtype, seed, kFinalNormStream);
  if (config.tie_embeddings) {
    w.lm_head = w.embedding;  // a copy of the shared values (see header)
  } else {
    w.lm_head = random_matrix(config.vocab_size, hidden, dtype, seed, kLmHeadStream);
  }
  return w;
}

}  // namespace wafersim::models
