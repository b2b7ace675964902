// Model weights held on the host as values that are exactly representable in
// the storage dtype: fp32, or (Matrix::store_as) the 16-bit bf16 / fp16
// encodings of those values, or (Matrix::store_quantized) 8-bit int8 / fp8
// codes with a scale per row, which widen back to the same fp32 values. Plus
// non-owning views of rectangles of a matrix (what one simulated core
// multiplies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/dtype.hpp"
#include "models/model_config.hpp"

namespace wafersim::models {

// Thrown when a matrix is accessed in a way its storage does not allow (a
// float pointer into 16-bit storage).
[[noreturn]] void throw_wrong_storage(const char* what, DType storage);

inline bool is_8bit(DType t) {
  return t == DType::int8 || t == DType::fp8_e4m3;
}
// An 8-bit code as the fp32 value quantize_row scales: the int8 integer, or
// the fp8 e4m3 value. The element is decode_8bit(t, code) * row scale, one
// fp32 multiply, as quantize_row computes it.
inline float decode_8bit(DType t, std::uint8_t code) {
  return t == DType::int8 ? static_cast<float>(static_cast<std::int8_t>(code))
                          : fp8_e4m3_bits_to_float(code);
}

// A non-owning rectangle of a row-major matrix: element (i, j) lives at
// element offset i * leading_dim + j from the first. Valid while the matrix it
// came from lives. storage() says how the elements are held: DType::fp32
// (data()), DType::bf16 or DType::fp16 (bits()), DType::int8 or
// DType::fp8_e4m3 (codes() and one fp32 scale per row, row_scales()[i] for
// the view's row i); operator() widens any of them to fp32 exactly
// (decode_8bit).
class MatrixView {
 public:
  MatrixView() = default;
  MatrixView(const float* data, int rows, int cols, std::size_t leading_dim)
      : data_(data), rows_(rows), cols_(cols), leading_dim_(leading_dim) {}
  // storage must be DType::bf16 or DType::fp16.
  MatrixView(const std::uint16_t* bits, DType storage, int rows, int cols, std::size_t leading_dim)
      : data_(bits), storage_(storage), rows_(rows), cols_(cols), leading_dim_(leading_dim) {}
  // storage must be DType::int8 or DType::fp8_e4m3; row_scales[i] scales row i.
  MatrixView(const std::uint8_t* codes, DType storage, int rows, int cols, std::size_t leading_dim,
             const float* row_scales)
      : data_(codes),
        scales_(row_scales),
        storage_(storage),
        rows_(rows),
        cols_(cols),
        leading_dim_(leading_dim) {}

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  std::size_t leading_dim() const { return leading_dim_; }
  DType storage() const { return storage_; }
  // fp32 storage only (std::logic_error otherwise).
  const float* data() const {
    if (storage_ != DType::fp32) throw_wrong_storage("MatrixView::data", storage_);
    return static_cast<const float*>(data_);
  }
  // bf16 / fp16 storage only (std::logic_error otherwise).
  const std::uint16_t* bits() const {
    if (storage_ != DType::bf16 && storage_ != DType::fp16)
      throw_wrong_storage("MatrixView::bits", storage_);
    return static_cast<const std::uint16_t*>(data_);
  }
  // int8 / fp8_e4m3 storage only (std::logic_error otherwise).
  const std::uint8_t* codes() const {
    if (!is_8bit(storage_)) throw_wrong_storage("MatrixView::codes", storage_);
    return static_cast<const std::uint8_t*>(data_);
  }
  const float* row_scales() const {
    if (!is_8bit(storage_)) throw_wrong_storage("MatrixView::row_scales", storage_);
    return scales_;
  }
  float operator()(int i, int j) const {
    const std::size_t k = static_cast<std::size_t>(i) * leading_dim_ + static_cast<std::size_t>(j);
    switch (storage_) {
      case DType::bf16:
        return bf16_bits_to_float(static_cast<const std::uint16_t*>(data_)[k]);
      case DType::fp16:
        return fp16_bits_to_float(static_cast<const std::uint16_t*>(data_)[k]);
      case DType::int8:
      case DType::fp8_e4m3:
        return decode_8bit(storage_, static_cast<const std::uint8_t*>(data_)[k]) * scales_[i];
      default:
        return static_cast<const float*>(data_)[k];
    }
  }
  // Rows [row0, row0 + nrows) x columns [col0, col0 + ncols) of this view
  // (std::out_of_range when they do not lie inside it).
  MatrixView sub(int row0, int nrows, int col0, int ncols) const;
  // fp32 storage only (std::logic_error otherwise).
  std::span<const float> row(int i) const {
    return {data() + static_cast<std::size_t>(i) * leading_dim_, static_cast<std::size_t>(cols_)};
  }

 private:
  const void* data_ = nullptr;
  const float* scales_ = nullptr;  // 8-bit storage: the view's row 0's scale
  DType storage_ = DType::fp32;
  int rows_ = 0;
  int cols_ = 0;
  std::size_t leading_dim_ = 0;
};

// Dense row-major matrix [rows][cols]. Rows are output features, columns
// input features: y = W x. Made as fp32 values; store_as(bf16 or fp16) then
// replaces them by their 16-bit encodings, which halves the host memory, and
// store_quantized(int8 or fp8_e4m3, row scales) by 8-bit codes and one fp32
// scale per row (a quarter). Neither changes a value a reader sees:
// operator() const, row_values and the GEMV kernels (models/kernels.hpp)
// widen them back exactly. Writing, and the float-pointer accessors, need
// fp32 storage (std::logic_error otherwise).
class Matrix {
 public:
  Matrix() = default;
  // Zero-filled, fp32. Throws std::invalid_argument for a negative dimension.
  Matrix(int rows, int cols);

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  // Number of elements.
  std::size_t size() const {
    return static_cast<std::size_t>(rows_) * static_cast<std::size_t>(cols_);
  }
  // How the elements are held: DType::fp32, DType::bf16, DType::fp16,
  // DType::int8 or DType::fp8_e4m3.
  DType storage() const { return storage_; }
  // Host bytes the elements take (4, 2 or 1 per element, plus 4 per row for
  // the 8-bit formats' scales).
  std::size_t storage_bytes() const {
    return values_.size() * sizeof(float) + bits_.size() * sizeof(std::uint16_t) + codes_.size() +
           scales_.size() * sizeof(float);
  }

  // Stores every element as `t` where that saves memory: bf16 and fp16 as
  // 16-bit encodings; fp32, fp8_e4m3 and int8 stay fp32 (the 8-bit formats
  // are held dequantized, value times an fp32 row scale, which 8 bits alone
  // cannot encode). Every element must already be exactly representable in
  // `t` (quantize_row makes it so): std::invalid_argument naming the first
  // that is not, and the matrix is left unchanged. A matrix already stored as
  // `t` is left as it is; one stored as another 16-bit type is a
  // std::logic_error.
  void store_as(DType t);

  // Stores an fp32 matrix whose rows quantize_row made int8 or fp8_e4m3 as
  // 8-bit codes plus `row_scales` (the scales quantize_row returned, one per
  // row): element (i, j) becomes the code c with decode_8bit(t, c) *
  // row_scales[i] == the value, bit for bit. An element that does not come
  // back so is a std::invalid_argument naming it (the matrix unchanged); so
  // are a wrong number of scales and a `t` that is not 8-bit. Needs fp32
  // storage (std::logic_error otherwise).
  void store_quantized(DType t, std::span<const float> row_scales);

  // A rows x cols matrix held compactly from the start (bf16, fp16: 16-bit
  // encodings; int8, fp8_e4m3: codes and row scales), every element +0 and
  // every scale 1; set_row() fills it row by row, with no fp32 copy of the
  // whole matrix. std::invalid_argument for another dtype or a negative
  // dimension.
  static Matrix compact(int rows, int cols, DType t);
  // Row i := `values`, stored as the matrix is: fp32 as given; 16-bit
  // formats exactly as store_as would (std::invalid_argument naming the
  // element when one is not representable); 8-bit formats as codes times
  // `scale` exactly as store_quantized would (quantize_row's values and
  // scale). The row is left partly written on an error.
  void set_row(int i, std::span<const float> values, float scale = 1.0f);
  // Row i := cols() 16-bit encodings, little-endian bytes as a checkpoint
  // stores them, in a matrix held as bf16 or fp16 (the same encoding): every
  // such value is representable, so this is set_row of their values without
  // the round trip through fp32. std::logic_error for other storage.
  void set_row_bits(int i, const unsigned char* little_endian);

  // fp32 storage only (std::logic_error otherwise).
  float* data() {
    require_fp32("Matrix::data");
    return values_.data();
  }
  const float* data() const {
    require_fp32("Matrix::data");
    return values_.data();
  }
  float& operator()(int i, int j) {
    require_fp32("Matrix::operator()");
    return values_[index(i, j)];
  }
  std::span<const float> row(int i) const {
    require_fp32("Matrix::row");
    return {values_.data() + index(i, 0), static_cast<std::size_t>(cols_)};
  }
  std::span<float> mutable_row(int i) {
    require_fp32("Matrix::mutable_row");
    return {values_.data() + index(i, 0), static_cast<std::size_t>(cols_)};
  }

  // Any storage: the element widened to fp32 (exact).
  float operator()(int i, int j) const {
    switch (storage_) {
      case DType::bf16:
        return bf16_bits_to_float(bits_[index(i, j)]);
      case DType::fp16:
        return fp16_bits_to_float(bits_[index(i, j)]);
      case DType::int8:
      case DType::fp8_e4m3:
        return decode_8bit(storage_, codes_[index(i, j)]) * scales_[static_cast<std::size_t>(i)];
      default:
        return values_[index(i, j)];
    }
  }
  // Any storage: writes row i widened to fp32 into out, which must hold
  // cols() values (std::invalid_argument otherwise).
  void row_values(int i, std::span<float> out) const;

  // The rectangle rows [row0, row0 + nrows) x cols [col0, col0 + ncols),
  // without copying. Throws std::out_of_range if it does not lie inside.
  MatrixView view(int row0, int nrows, int col0, int ncols) const;
  // The whole matrix.
  MatrixView view() const;

  // Same shape, same storage, same bits.
  friend bool operator==(const Matrix&, const Matrix&) = default;

 private:
  std::size_t index(int i, int j) const {
    return static_cast<std::size_t>(i) * static_cast<std::size_t>(cols_) +
           static_cast<std::size_t>(j);
  }
  void require_fp32(const char* what) const {
    if (storage_ != DType::fp32) throw_wrong_storage(what, storage_);
  }
  int rows_ = 0;
  int cols_ = 0;
  DType storage_ = DType::fp32;
  std::vector<float> values_;        // fp32 storage, else empty
  std::vector<std::uint16_t> bits_;  // bf16 / fp16 storage, else empty
  std::vector<std::uint8_t> codes_;  // int8 / fp8_e4m3 storage, else empty
  std::vector<float> scales_;        // int8 / fp8_e4m3 storage: one per row
};

// One SwiGLU expert of a mixture-of-experts MLP (Hugging Face Mixtral names:
// w1 = gate, w3 = up, w2 = down).
struct ExpertWeights {
  Matrix w_gate;  // [intermediate][hidden]
  Matrix w_up;    // [intermediate][hidden]
  Matrix w_down;  // [hidden][intermediate]

  friend bool operator==(const ExpertWeights&, const ExpertWeights&) = default;
};

// Tensors an architecture does not have are empty (size 0).
struct LayerWeights {
  Matrix wq;                     // [q_dim][hidden]
  Matrix wk;                     // [kv_dim][hidden]
  Matrix wv;                     // [kv_dim][hidden]
  Matrix wo;                     // [hidden][q_dim]
  Matrix w_gate;                 // [intermediate][hidden]; dense llama family only
  Matrix w_up;                   // [intermediate][hidden]; dense (gpt2: c_fc)
  Matrix w_down;                 // [hidden][intermediate]; dense (gpt2: mlp.c_proj)
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> ffn_norm;   // [hidden]

  // Architecture extras (ModelConfig says which are present).
  std::vector<float> bq, bk, bv;       // [q_dim], [kv_dim], [kv_dim]: has_qkv_bias()
  std::vector<float> bo;               // [hidden]: has_o_bias()
  std::vector<float> b_up, b_down;     // [intermediate], [hidden]: gpt2
  std::vector<float> attn_norm_bias;   // [hidden]: gpt2 LayerNorm
  std::vector<float> ffn_norm_bias;    // [hidden]: gpt2 LayerNorm
  std::vector<float> q_norm, k_norm;   // [head_dim]: qwen3 qk-norm gains
  Matrix router;                       // [num_experts][hidden]: MoE only
  std::vector<ExpertWeights> experts;  // [num_experts]: MoE only

  friend bool operator==(const LayerWeights&, const LayerWeights&) = default;
};

// How Weights hold their matrices on the host.
enum class HostStorage {
  fp32,     // every matrix as fp32 values (direct float access; the default)
  compact,  // bf16 / fp16 in 16 bits (store_as, half the memory), int8 / fp8_e4m3 as
            // 8-bit codes and row scales (store_quantized, a quarter)
};

// Where a set of weights came from: drawn from a seed, or read from a
// checkpoint (its path as given, the SHA-256 of each safetensors file and one
// content hash over them: the file's own SHA-256 for a single file, else the
// SHA-256 of the `sha256sum`-style manifest "<hash>  <file name>\n" of the
// shards in file-name order, which `sha256sum *.safetensors | sha256sum`
// reproduces in the folder).
struct WeightsOrigin {
  enum class Kind { synthetic, checkpoint };
  struct File {
    std::string name;    // file name inside the checkpoint folder
    std::string sha256;  // lowercase hex
    std::uint64_t bytes = 0;
  };
  Kind kind = Kind::synthetic;
  std::uint64_t seed = 0;    // synthetic
  std::string path;          // checkpoint: the file or index the tensors came from
  std::string content_hash;  // checkpoint: sha256 (hex), see above
  std::vector<File> files;   // checkpoint: every safetensors file, by name
};

// All values are exactly representable in `dtype`: they were rounded to it
// when made, so consumers see what the hardware would hold. Vectors are fp32;
// matrices are fp32 or, with HostStorage::compact, 16-bit (Matrix::store_as).
struct Weights {
  ModelConfig config;
  DType dtype = DType::bf16;
  Matrix embedding;  // [vocab][hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;       // [hidden]
  std::vector<float> final_norm_bias;  // [hidden]: gpt2 LayerNorm, else empty
  Matrix position_embedding;           // [max_position][hidden]: gpt2, else empty
  // [vocab][hidden] when the lm_head has weights of its own; empty when
  // config.tie_embeddings (the embedding table is the lm_head: no copy, so
  // the host holds that matrix once). Read it through lm_head_matrix().
  Matrix lm_head;

  WeightsOrigin origin;

  // The matrix that turns the last hidden state into logits: lm_head, or
  // embedding when tied.
  const Matrix& lm_head_matrix() const { return config.tie_embeddings ? embedding : lm_head; }

  // Deterministic synthetic weights: same (config, dtype, seed) gives the same
  // bits on every platform. Each tensor draws from its own stream, derived
  // from (seed, tensor index), so no tensor depends on another's size:
  //   embedding 0, lm_head 1, final_norm 2,
  //   layer l: 16 + 16*l + {0 wq, 1 wk, 2 wv, 3 wo, 4 w_gate, 5 w_up,
  //                         6 w_down, 7 attn_norm, 8 ffn_norm};
  // architecture extras (extra_stream()): position_embedding 3,
  // final_norm_bias 4, layer l: 2^32 + 2^20*l + ExtraKind, expert e's
  // gate/up/down at ExtraKind::expert0 + 3*e + {0, 1, 2}.
  // Entries, drawn in row-major order with u uniform in [-1, 1):
  //   matrices   u * sqrt(3 / fan_in)  (variance 1/fan_in; fan_in = cols)
  //   embedding  u * sqrt(3)           (variance 1; also position_embedding)
  //   norm gains 1 + 0.1 * u           (also q_norm, k_norm)
  //   biases     0.1 * u               (also LayerNorm biases)
  // each then rounded to `dtype`: matrices row by row with quantize_row
  // (fp8/int8 get a per-row scale), vectors to vector_dtype(dtype).
  // With HostStorage::compact each matrix is store_as(dtype) (bf16, fp16) or
  // store_quantized(dtype, its row scales) (int8, fp8_e4m3) as soon as it is
  // made (row by row: no fp32 copy of the whole matrix); the values are the
  // same either way. The matrices are made on `threads` host threads (the
  // same bits for any count); `progress(done, total)` is called
  // as they are (one call at a time, from any of those threads). Validates
  // the config (ConfigError).
  static Weights synthetic(const ModelConfig& config, DType dtype, std::uint64_t seed,
                           HostStorage storage = HostStorage::fp32, int threads = 1,
                           const std::function<void(int, int)>& progress = {});
};

// Indices of the synthetic streams (see Weights::synthetic).
enum class TensorKind {
  wq = 0,
  wk,
  wv,
  wo,
  w_gate,
  w_up,
  w_down,
  attn_norm,
  ffn_norm,
};
constexpr std::uint64_t kEmbeddingStream = 0;
constexpr std::uint64_t kLmHeadStream = 1;
constexpr std::uint64_t kFinalNormStream = 2;
constexpr std::uint64_t layer_stream(int layer, TensorKind kind) {
  return 16 + 16 * static_cast<std::uint64_t>(layer) + static_cast<std::uint64_t>(kind);
}
// Streams of the tensors only some architectures have; chosen apart from the
// llama streams above so that adding them changed no llama weight.
constexpr std::uint64_t kPositionEmbeddingStream = 3;
constexpr std::uint64_t kFinalNormBiasStream = 4;
enum class ExtraKind {
  bq = 0,
  bk,
  bv,
  bo,
  b_up,
  b_down,
  attn_norm_bias,
  ffn_norm_bias,
  q_norm,
  k_norm,
  router,
  expert0 = 64,  // expert e: expert0 + 3e + {0 gate, 1 up, 2 down}
};
constexpr std::uint64_t extra_stream(int layer, ExtraKind kind, int offset = 0) {
  return (std::uint64_t{1} << 32) + (static_cast<std::uint64_t>(layer) << 20) +
         static_cast<std::uint64_t>(kind) + static_cast<std::uint64_t>(offset);
}

}  // namespace wafersim::models
