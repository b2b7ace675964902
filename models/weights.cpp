#include "models/weights.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "models/dtype.hpp"
#include "models/rng.hpp"
#include "models/work_team.hpp"

namespace wafersim::models {

namespace {

void check_dimensions(int rows, int cols) {
  if (rows < 0 || cols < 0) {
    throw std::invalid_argument("Matrix dimensions must be >= 0, got " + std::to_string(rows) +
                                " x " + std::to_string(cols));
  }
}

}  // namespace

Matrix::Matrix(int rows, int cols) : rows_(rows), cols_(cols) {
  check_dimensions(rows, cols);
  values_.assign(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), 0.0f);
}

void throw_wrong_storage(const char* what, DType storage) {
  throw std::logic_error(std::string(what) + ": not available for a matrix stored as " +
                         dtype_name(storage));
}

namespace {

// v as the 16-bit encoding of `t` (bf16 or fp16); false when v is not
// exactly representable in it.
bool encode16(DType t, float v, std::uint16_t& out) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  if (t == DType::bf16) {
    // A bf16 value is an fp32 whose low 16 bits are zero; the high 16 are
    // its encoding (any NaN payload included).
    out = static_cast<std::uint16_t>(u >> 16);
    return (u & 0xffffu) == 0;
  }
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    // A NaN: float_to_fp16_bits would make a signalling one quiet, so its
    // payload is moved by hand; it must fit in fp16's 10 mantissa bits.
    out = static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7c00u | ((u >> 13) & 0x3ffu));
    return (u & 0x1fffu) == 0;
  }
  out = float_to_fp16_bits(v);
  // Compared as bits: -0.0 must stay -0.0.
  return std::bit_cast<std::uint32_t>(fp16_bits_to_float(out)) == u;
}

// v as the 8-bit code of `t` under row scale s (quantize_row's own encoding
// of v / s); false when the code times s is not v, bit for bit.
bool encode8(DType t, float v, float s, std::uint8_t& out) {
  out = t == DType::int8 ? static_cast<std::uint8_t>(float_to_int8(v / s))
                         : float_to_fp8_e4m3_bits(v / s);
  return std::bit_cast<std::uint32_t>(decode_8bit(t, out) * s) == std::bit_cast<std::uint32_t>(v);
}

[[noreturn]] void throw_not_representable(const char* what, DType t, std::size_t i, std::size_t j,
                                          float v) {
  throw std::invalid_argument(std::string(what) + "(" + dtype_name(t) + "): element (" +
                              std::to_string(i) + ", " + std::to_string(j) + ") = " +
                              std::to_string(v) + " is not exactly representable; round it first");
}

[[noreturn]] void throw_not_a_code(const char* what, DType t, std::size_t i, std::size_t j, float v,
                                   float s) {
  throw std::invalid_argument(std::string(what) + "(" + dtype_name(t) + "): element (" +
                              std::to_string(i) + ", " + std::to_string(j) +
                              ") = " + std::to_string(v) + " is not a code times the row " +
                              "scale " + std::to_string(s) + "; quantize the row first");
}

}  // namespace

void Matrix::store_as(DType t) {
  if (t != DType::bf16 && t != DType::fp16) return;  // held as fp32 (see header)
  if (storage_ == t) return;
  if (storage_ != DType::fp32) {
    throw std::logic_error(std::string("Matrix::store_as(") + dtype_name(t) +
                           "): the matrix is already stored as " + dtype_name(storage_));
  }
  std::vector<std::uint16_t> bits(values_.size());
  const std::size_t cols = static_cast<std::size_t>(cols_);
  for (std::size_t k = 0; k < values_.size(); ++k)
    if (!encode16(t, values_[k], bits[k]))
      throw_not_representable("Matrix::store_as", t, k / cols, k % cols, values_[k]);
  bits_ = std::move(bits);
  std::vector<float>().swap(values_);  // give the fp32 memory back now
  storage_ = t;
}

void Matrix::store_quantized(DType t, std::span<const float> row_scales) {
  if (!is_8bit(t)) {
    throw std::invalid_argument(std::string("Matrix::store_quantized: ") + dtype_name(t) +
                                " is not an 8-bit format (int8, fp8_e4m3)");
  }
  require_fp32("Matrix::store_quantized");
  if (row_scales.size() != static_cast<std::size_t>(rows_)) {
    throw std::invalid_argument("Matrix::store_quantized: " + std::to_string(row_scales.size()) +
                                " row scales for " + std::to_string(rows_) + " rows");
  }
  std::vector<std::uint8_t> codes(values_.size());
  for (int i = 0; i < rows_; ++i) {
    const float s = row_scales[static_cast<std::size_t>(i)];
    for (int j = 0; j < cols_; ++j) {
      const std::size_t k = index(i, j);
      if (!encode8(t, values_[k], s, codes[k]))
        throw_not_a_code("Matrix::store_quantized", t, static_cast<std::size_t>(i),
                         static_cast<std::size_t>(j), values_[k], s);
    }
  }
  codes_ = std::move(codes);
  scales_.assign(row_scales.begin(), row_scales.end());
  std::vector<float>().swap(values_);  // give the fp32 memory back now
  storage_ = t;
}

Matrix Matrix::compact(int rows, int cols, DType t) {
  if (!is_8bit(t) && t != DType::bf16 && t != DType::fp16)
    throw std::invalid_argument(std::string("Matrix::compact: ") + dtype_name(t) +
                                " has no compact storage (bf16, fp16, int8, fp8_e4m3)");
  check_dimensions(rows, cols);
  Matrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  m.storage_ = t;
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (is_8bit(t)) {
    m.codes_.assign(n, 0);
    m.scales_.assign(static_cast<std::size_t>(rows), 1.0f);
  } else {
    m.bits_.assign(n, 0);
  }
  return m;
}

void Matrix::set_row(int i, std::span<const float> values, float scale) {
  if (i < 0 || i >= rows_ || values.size() != static_cast<std::size_t>(cols_))
    throw std::invalid_argument("Matrix::set_row: row " + std::to_string(i) + " of " +
                                std::to_string(rows_) + " with " + std::to_string(values.size()) +
                                " values for " + std::to_string(cols_) + " columns");
  const auto row = static_cast<std::size_t>(i);
  if (storage_ == DType::fp32) {
    std::copy(values.begin(), values.end(),
              values_.begin() + static_cast<std::ptrdiff_t>(index(i, 0)));
    return;
  }
  if (is_8bit(storage_)) {
    std::uint8_t* out = codes_.data() + index(i, 0);
    for (std::size_t j = 0; j < values.size(); ++j)
      if (!encode8(storage_, values[j], scale, out[j]))
        throw_not_a_code("Matrix::set_row", storage_, row, j, values[j], scale);
    scales_[row] = scale;
    return;
  }
  std::uint16_t* out = bits_.data() + index(i, 0);
  for (std::size_t j = 0; j < values.size(); ++j)
    if (!encode16(storage_, values[j], out[j]))
      throw_not_representable("Matrix::set_row", storage_, row, j, values[j]);
}

void Matrix::set_row_bits(int i, const unsigned char* little_endian) {
  if (storage_ != DType::bf16 && storage_ != DType::fp16)
    throw_wrong_storage("Matrix::set_row_bits", storage_);
  if (i < 0 || i >= rows_)
    throw std::invalid_argument("Matrix::set_row_bits: row " + std::to_string(i) + " of " +
                                std::to_string(rows_));
  std::uint16_t* out = bits_.data() + index(i, 0);
  for (int j = 0; j < cols_; ++j)
    out[j] = static_cast<std::uint16_t>(little_endian[2 * j] | (little_endian[2 * j + 1] << 8));
}

void Matrix::row_values(int i, std::span<float> out) const {
  if (out.size() != static_cast<std::size_t>(cols_)) {
    throw std::invalid_argument("Matrix::row_values: out holds " + std::to_string(out.size()) +
                                " values, the row has " + std::to_string(cols_));
  }
  if (i < 0 || i >= rows_) {
    throw std::out_of_range("Matrix::row_values: row " + std::to_string(i) + " of " +
                            std::to_string(rows_));
  }
  const std::size_t first = index(i, 0);
  for (std::size_t j = 0; j < out.size(); ++j) {
    switch (storage_) {
      case DType::bf16:
        out[j] = bf16_bits_to_float(bits_[first + j]);
        break;
      case DType::fp16:
        out[j] = fp16_bits_to_float(bits_[first + j]);
        break;
      case DType::int8:
      case DType::fp8_e4m3:
        out[j] = decode_8bit(storage_, codes_[first + j]) * scales_[static_cast<std::size_t>(i)];
        break;
      default:
        out[j] = values_[first + j];
    }
  }
}

MatrixView MatrixView::sub(int row0, int nrows, int col0, int ncols) const {
  if (row0 < 0 || nrows < 0 || col0 < 0 || ncols < 0 || row0 > rows_ - nrows ||
      col0 > cols_ - ncols) {
    throw std::out_of_range("MatrixView::sub: rows [" + std::to_string(row0) + ", +" +
                            std::to_string(nrows) + ") x cols [" + std::to_string(col0) + ", +" +
                            std::to_string(ncols) + ") must lie inside " + std::to_string(rows_) +
                            " x " + std::to_string(cols_));
  }
  const std::size_t origin =
      static_cast<std::size_t>(row0) * leading_dim_ + static_cast<std::size_t>(col0);
  MatrixView v = *this;
  v.rows_ = nrows;
  v.cols_ = ncols;
  if (storage_ == DType::fp32) {
    v.data_ = static_cast<const float*>(data_) + origin;
  } else if (is_8bit(storage_)) {
    v.data_ = static_cast<const std::uint8_t*>(data_) + origin;
    v.scales_ = scales_ + row0;
  } else {
    v.data_ = static_cast<const std::uint16_t*>(data_) + origin;
  }
  return v;
}

MatrixView Matrix::view() const {
  const std::size_t ld = static_cast<std::size_t>(cols_);
  if (storage_ == DType::fp32) return MatrixView(values_.data(), rows_, cols_, ld);
  if (is_8bit(storage_))
    return MatrixView(codes_.data(), storage_, rows_, cols_, ld, scales_.data());
  return MatrixView(bits_.data(), storage_, rows_, cols_, ld);
}

MatrixView Matrix::view(int row0, int nrows, int col0, int ncols) const {
  return view().sub(row0, nrows, col0, ncols);
}

namespace {

// Fills `values` with bound * u, u uniform in [-1, 1), rounded to `dtype`.
void fill_uniform(std::span<float> values, float bound, DType dtype, std::uint64_t seed,
                  std::uint64_t stream) {
  Xoshiro256StarStar rng(stream_seed(seed, stream));
  for (float& v : values) v = round_to_dtype(rng.uniform_pm1() * bound, dtype);
}

// bound * u in fp32 (one stream, row-major order), then each row stored as
// `dtype` (quantize_row; for the float formats exactly round_to_dtype of each
// value) and written as the matrix holds it (set_row): with
// HostStorage::compact in 16 bits (bf16, fp16) or as 8-bit codes with the
// rows' scales (int8, fp8_e4m3) from the start, so no fp32 copy of the whole
// matrix is ever made.
Matrix uniform_matrix(int rows, int cols, float bound, DType dtype, std::uint64_t seed,
                      std::uint64_t stream, HostStorage storage) {
  Matrix m = storage == HostStorage::compact && dtype != DType::fp32
                 ? Matrix::compact(rows, cols, dtype)
                 : Matrix(rows, cols);
  Xoshiro256StarStar rng(stream_seed(seed, stream));
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (int i = 0; i < rows; ++i) {
    for (float& v : row) v = rng.uniform_pm1() * bound;  // fp32: round_to_dtype is exact
    const float scale = quantize_row(row, dtype);
    m.set_row(i, row, scale);
  }
  return m;
}

Matrix random_matrix(int rows, int cols, DType dtype, std::uint64_t seed, std::uint64_t stream,
                     HostStorage storage) {
  // sqrt and division are correctly rounded, so the bound is the same everywhere.
  const float bound = static_cast<float>(std::sqrt(3.0 / cols));
  return uniform_matrix(rows, cols, bound, dtype, seed, stream, storage);
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

Weights Weights::synthetic(const ModelConfig& config, DType dtype, std::uint64_t seed,
                           HostStorage storage, int threads,
                           const std::function<void(int, int)>& progress) {
  config.validate();
  const int hidden = config.hidden_size;
  const int inter = config.intermediate_size;
  const int q = config.q_dim();
  const int kv = config.kv_dim();

  Weights w;
  w.config = config;
  w.dtype = dtype;
  w.origin.kind = WeightsOrigin::Kind::synthetic;
  w.origin.seed = seed;

  const float unit_variance = static_cast<float>(std::sqrt(3.0));
  // Every matrix is made by one of `threads` threads, each from its own
  // stream (the same bits whichever thread makes it, in whatever order);
  // the largest first.
  std::vector<std::function<void()>> jobs;
  const auto later = [&jobs, dtype, seed, storage](Matrix& into, int rows, int cols,
                                                   std::uint64_t stream) {
    jobs.push_back([&into, rows, cols, dtype, seed, stream, storage] {
      into = random_matrix(rows, cols, dtype, seed, stream, storage);
    });
  };
  const auto later_uniform = [&jobs, dtype, seed, storage](Matrix& into, int rows, int cols,
                                                           float bound, std::uint64_t stream) {
    jobs.push_back([&into, rows, cols, bound, dtype, seed, stream, storage] {
      into = uniform_matrix(rows, cols, bound, dtype, seed, stream, storage);
    });
  };
  later_uniform(w.embedding, config.vocab_size, hidden, unit_variance, kEmbeddingStream);
  if (!config.tie_embeddings)  // tied: embedding is the lm_head (lm_head_matrix())
    later(w.lm_head, config.vocab_size, hidden, kLmHeadStream);
  if (config.is_gpt2())
    later_uniform(w.position_embedding, config.max_position, hidden, unit_variance,
                  kPositionEmbeddingStream);
  w.layers.resize(static_cast<std::size_t>(config.num_layers));
  for (int l = 0; l < config.num_layers; ++l) {
    LayerWeights& layer = w.layers[static_cast<std::size_t>(l)];
    auto s = [l](TensorKind k) { return layer_stream(l, k); };
    later(layer.wq, q, hidden, s(TensorKind::wq));
    later(layer.wk, kv, hidden, s(TensorKind::wk));
    later(layer.wv, kv, hidden, s(TensorKind::wv));
    later(layer.wo, hidden, q, s(TensorKind::wo));
    if (!config.is_moe()) {
      if (!config.is_gpt2()) later(layer.w_gate, inter, hidden, s(TensorKind::w_gate));
      later(layer.w_up, inter, hidden, s(TensorKind::w_up));
      later(layer.w_down, hidden, inter, s(TensorKind::w_down));
    }
    layer.attn_norm = random_gains(hidden, dtype, seed, s(TensorKind::attn_norm));
    layer.ffn_norm = random_gains(hidden, dtype, seed, s(TensorKind::ffn_norm));

    auto x = [l](ExtraKind k, int offset = 0) { return extra_stream(l, k, offset); };
    if (config.has_qkv_bias()) {
      layer.bq = random_biases(q, dtype, seed, x(ExtraKind::bq));
      layer.bk = random_biases(kv, dtype, seed, x(ExtraKind::bk));
      layer.bv = random_biases(kv, dtype, seed, x(ExtraKind::bv));
    }
    if (config.has_o_bias()) layer.bo = random_biases(hidden, dtype, seed, x(ExtraKind::bo));
    if (config.is_gpt2()) {
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
      later(layer.router, config.num_experts, hidden, x(ExtraKind::router));
      layer.experts.resize(static_cast<std::size_t>(config.num_experts));
      for (int e = 0; e < config.num_experts; ++e) {
        ExpertWeights& ex = layer.experts[static_cast<std::size_t>(e)];
        later(ex.w_gate, inter, hidden, x(ExtraKind::expert0, 3 * e));
        later(ex.w_up, inter, hidden, x(ExtraKind::expert0, 3 * e + 1));
        later(ex.w_down, hidden, inter, x(ExtraKind::expert0, 3 * e + 2));
      }
    }
  }

  // One matrix per item of a WorkTeam; progress as each is made.
  std::mutex progress_mutex;
  int made = 0;
  WorkTeam team(threads);
  team.start(static_cast<int>(jobs.size()), [&](int item, int) {
    jobs[static_cast<std::size_t>(item)]();
    if (!progress) return;
    const std::lock_guard lock(progress_mutex);
    progress(++made, static_cast<int>(jobs.size()));
  });
  team.finish();

  w.final_norm = random_gains(hidden, dtype, seed, kFinalNormStream);
  if (config.is_gpt2())
    w.final_norm_bias = random_biases(hidden, dtype, seed, kFinalNormBiasStream);
  return w;
}

}  // namespace wafersim::models
