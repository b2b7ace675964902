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

// bound * u in fp32, then each row stored as `dtype` (quantize_row). For the
// float formats that is exactly round_to_dtype of each value.
Matrix uniform_matrix(int rows, int cols, float bound, DType dtype, std::uint64_t seed,
                      std::uint64_t stream) {
  Matrix m(rows, cols);
  fill_uniform({m.data(), m.size()}, bound, DType::fp32, seed, stream);
  for (int i = 0; i < rows; ++i) quantize_row(m.mutable_row(i), dtype);
  return m;
}

Matrix random_matrix(int rows, int cols, DType dtype, std::uint64_t seed, std::uint64_t stream) {
  // sqrt and division are correctly rounded, so the bound is the same everywhere.
  const float bound = static_cast<float>(std::sqrt(3.0 / cols));
  return uniform_matrix(rows, cols, bound, dtype, seed, stream);
}

std::vector<float> random_gains(int n, DType dtype, std::uint64_t seed, std::uint64_t stream) {
  std::vector<float> g(static_cast<std::size_t>(n));
  Xoshiro256StarStar rng(stream_seed(seed, stream));
  for (float& v : g) v = round_to_dtype(1.0f + 0.1f * rng.uniform_pm1(), vector_dtype(dtype));
  return g;
}

std::vector<float> random_biases(int n, DType dtype, std::uint64_t seed, std::uint64_t stream) {
  std::vector<float> b(static_cast<std::size_t>(n));
  fill_uniform(b, 0.1f, vector_dtype(dtype), seed, stream);
  return b;
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

  const float unit_variance = static_cast<float>(std::sqrt(3.0));
  w.embedding =
      uniform_matrix(config.vocab_size, hidden, unit_variance, dtype, seed, kEmbeddingStream);

  w.layers.resize(static_cast<std::size_t>(config.num_layers));
  for (int l = 0; l < config.num_layers; ++l) {
    LayerWeights& layer = w.layers[static_cast<std::size_t>(l)];
    auto s = [l](TensorKind k) { return layer_stream(l, k); };
    layer.wq = random_matrix(q, hidden, dtype, seed, s(TensorKind::wq));
    layer.wk = random_matrix(kv, hidden, dtype, seed, s(TensorKind::wk));
    layer.wv = random_matrix(kv, hidden, dtype, seed, s(TensorKind::wv));
    layer.wo = random_matrix(hidden, q, dtype, seed, s(TensorKind::wo));
    if (!config.is_moe()) {
      if (!config.is_gpt2()) {
        layer.w_gate = random_matrix(inter, hidden, dtype, seed, s(TensorKind::w_gate));
      }
      layer.w_up = random_matrix(inter, hidden, dtype, seed, s(TensorKind::w_up));
      layer.w_down = random_matrix(hidden, inter, dtype, seed, s(TensorKind::w_down));
    }
    layer.attn_norm = random_gains(hidden, dtype, seed, s(TensorKind::attn_norm));
    layer.ffn_norm = random_gains(hidden, dtype, seed, s(TensorKind::ffn_norm));

    auto x = [l](ExtraKind k, int offset = 0) { return extra_stream(l, k, offset); };
    if (config.has_qkv_bias()) {
      layer.bq = random_biases(q, dtype, seed, x(ExtraKind::bq));
      layer.bk = random_biases(kv, dtype, seed, x(ExtraKind::bk));
      layer.bv = random_biases(kv, dtype, seed, x(ExtraKind::bv));
    }
    if (config.is_gpt2()) {
      layer.bo = random_biases(hidden, dtype, seed, x(ExtraKind::bo));
      layer.b_up = random_biases(inter, dtype, seed, x(ExtraKind::b_up));
      layer.b_down = random_biases(hidden, dtype, seed, x(ExtraKind::b_down));
      layer.attn_norm_bias = random_biases(hidden, dtype, seed, x(ExtraKind::attn_norm_bias));
      layer.ffn_norm_bias = random_biases(hidden, dtype, seed, x(ExtraKind::ffn_norm_bias));
    }
    if (config.has_qk_norm()) {
      layer.q_norm = random_gains(config.head_dim, dtype, seed, x(ExtraKind::q_norm));
      layer.k_norm = random_gains(config.head_dim, dtype, seed, x(ExtraKind::k_norm));
    }
    if (config.is_moe()) {
      layer.router = random_matrix(config.num_experts, hidden, dtype, seed, x(ExtraKind::router));
      layer.experts.resize(static_cast<std::size_t>(config.num_experts));
      for (int e = 0; e < config.num_experts; ++e) {
        ExpertWeights& ex = layer.experts[static_cast<std::size_t>(e)];
        ex.w_gate = random_matrix(inter, hidden, dtype, seed, x(ExtraKind::expert0, 3 * e));
        ex.w_up = random_matrix(inter, hidden, dtype, seed, x(ExtraKind::expert0, 3 * e + 1));
        ex.w_down = random_matrix(hidden, inter, dtype, seed, x(ExtraKind::expert0, 3 * e + 2));
      }
    }
  }

  w.final_norm = random_gains(hidden, dtype, seed, kFinalNormStream);
  if (config.is_gpt2()) {
    w.final_norm_bias = random_biases(hidden, dtype, seed, kFinalNormBiasStream);
    w.position_embedding = uniform_matrix(config.max_position, hidden, unit_variance, dtype, seed,
                                          kPositionEmbeddingStream);
  }
  if (config.tie_embeddings) {
    w.lm_head = w.embedding;  // a copy of the shared values (see header)
  } else {
    w.lm_head = random_matrix(config.vocab_size, hidden, dtype, seed, kLmHeadStream);
  }
  return w;
}

}  // namespace wafersim::models
