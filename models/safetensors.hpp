// Weights from Hugging Face safetensors checkpoints: one file or several
// shards listed by model.safetensors.index.json, memory-mapped, bf16 / fp16 /
// fp32 tensors, every name, shape and dtype checked against the ModelConfig.
//
// Format (github.com/huggingface/safetensors): an 8-byte little-endian
// unsigned header length N, N bytes of JSON
//   {"NAME": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end]},
//    "__metadata__": {...}}
// then the tensor bytes, offsets relative to the first byte after the header,
// row-major, little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/weights.hpp"

namespace wafersim::models {

// A checkpoint that cannot be used. Names the file and, where one is at
// fault, the tensor.
class WeightsError : public std::runtime_error {
 public:
  WeightsError(std::string file, std::string tensor, const std::string& what);
  const std::string& file() const { return file_; }
  const std::string& tensor() const { return tensor_; }

 private:
  std::string file_;
  std::string tensor_;
};

// One safetensors file, memory-mapped read-only for its lifetime. The
// constructor checks the header: its length against the file size, the JSON,
// each entry's dtype (a safetensors dtype name), shape and offsets (inside
// the data area, end - begin = elements x element size). WeightsError
// otherwise.
class SafetensorsFile {
 public:
  struct Tensor {
    std::string dtype;                // "BF16", "F16", "F32", ...
    std::vector<std::int64_t> shape;  // row-major
    const unsigned char* data = nullptr;
    std::size_t bytes = 0;
  };

  explicit SafetensorsFile(const std::filesystem::path& file);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // The whole file as mapped.
  const void* bytes() const { return map_; }
  std::size_t size() const { return size_; }
  // Drops the process's pages of [data, data + bytes) (the whole pages
  // inside it; a later read faults them back in from the page cache), so a
  // file read once does not stay resident beside what was made from it.
  void release(const void* data, std::size_t bytes) const;
  // The tensor's values widened to fp32 (bf16, fp16 and fp32 only: any other
  // dtype is a WeightsError naming the tensor).
  std::vector<float> read_fp32(const std::string& name) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, Tensor> tensors_;
};

// How load_safetensors holds and makes what it reads.
struct LoadOptions {
  HostStorage storage = HostStorage::fp32;  // HostStorage::compact: no fp32 copy of any matrix
  int threads = 1;                          // host threads (same bits for any count)
  bool digest = true;                       // SHA-256 of every file into Weights::origin
  // progress(done, total) over the files hashed and the matrices made, one
  // call at a time, from any of the threads.
  std::function<void(int, int)> progress;
};

// The file the tensors of a checkpoint are read from: `path` itself when it is
// a file (a .safetensors or a model.safetensors.index.json); for a folder its
// model.safetensors.index.json, else its model.safetensors; nullopt for a
// folder holding neither.
std::optional<std::filesystem::path> checkpoint_weights_file(const std::filesystem::path& path);

// Loads a checkpoint for `config`. `path` is a .safetensors file, a
// model.safetensors.index.json, or a folder holding model.safetensors or
// model.safetensors.index.json (the index wins). Tensors use Hugging Face
// names: for the llama family model.embed_tokens.weight,
// model.layers.N.{input_layernorm, post_attention_layernorm}.weight,
// model.layers.N.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias with
// has_qkv_bias, + o_proj.bias with attention_bias, + self_attn.{q,k}_norm.weight
// for qwen3),
// model.layers.N.mlp.{gate,up,down}_proj.weight or, for mixtral,
// model.layers.N.block_sparse_moe.gate.weight and
// ...block_sparse_moe.experts.E.{w1,w2,w3}.weight, for the other mixtures of
// experts (Qwen3-MoE) model.layers.N.mlp.gate.weight and
// ...mlp.experts.E.{gate,up,down}_proj.weight, model.norm.weight,
// lm_head.weight (absent or ignored when tied); for gpt2 (with or without a
// "transformer." prefix) wte, wpe, h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2,
// mlp.c_fc, mlp.c_proj}.{weight, bias}, ln_f, whose Conv1D weights are stored
// [in][out] and transposed here (c_attn split into q, k, v).
// Dtypes as checkpoints ship them: BF16, F16, F32, and for matrices
// F8_E4M3 with its scales (each value is code x scale in fp32): NAME_scale
// for NAME.weight as "<prefix>.weight_scale" (one scale, or one per row:
// shape [], [1], [rows] or [rows, 1], as compressed-tensors FP8 checkpoints
// store them) or "<prefix>.weight_scale_inv" (one per square block of B x B
// values, B the power of two that makes the scale shape [ceil(rows / B),
// ceil(cols / B)], as DeepSeek-V3 and Qwen3-FP8 store them; multiplied
// despite the name). Activation and KV-cache scales (input_scale, k_scale,
// v_scale) are not weights and are skipped: activations are computed in fp32.
// Each value is widened to fp32, then stored as `dtype` exactly as synthetic
// weights are (matrices row by row with quantize_row, vectors rounded to
// vector_dtype(dtype)); with HostStorage::compact each matrix is made compact
// row by row, straight from the memory-mapped file (the host never holds a
// second full copy). A missing tensor, a shape other than the config's, an
// unsupported dtype, an FP8 matrix without scales, or a tensor the config has
// no place for is a WeightsError naming the file and tensor (gpt2's attn.bias
// / attn.masked_bias buffers and rotary_emb.inv_freq are skipped).
Weights load_safetensors(const std::filesystem::path& path, const ModelConfig& config, DType dtype,
                         const LoadOptions& options = {});

// What load_safetensors checks before it reads a matrix value (every file's
// header, every tensor's name, shape and dtype, the FP8 scales, nothing
// missing or left over): the same WeightsError, in a fraction of the time.
// Returns the file the tensors would be read from.
std::string check_safetensors(const std::filesystem::path& path, const ModelConfig& config);

}  // namespace wafersim::models
