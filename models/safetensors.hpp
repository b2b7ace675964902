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
#include <map>
#include <memory>
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
  // The tensor's values widened to fp32 (bf16, fp16 and fp32 only: any other
  // dtype is a WeightsError naming the tensor).
  std::vector<float> read_fp32(const std::string& name) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, Tensor> tensors_;
};

// Loads a checkpoint for `config`. `path` is a .safetensors file, a
// model.safetensors.index.json, or a folder holding model.safetensors or
// model.safetensors.index.json (the index wins). Tensors use Hugging Face
// names: for the llama family model.embed_tokens.weight,
// model.layers.N.{input_layernorm, post_attention_layernorm}.weight,
// model.layers.N.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias with
// has_qkv_bias, + self_attn.{q,k}_norm.weight for qwen3),
// model.layers.N.mlp.{gate,up,down}_proj.weight or, for mixtral,
// model.layers.N.block_sparse_moe.gate.weight and
// ...block_sparse_moe.experts.E.{w1,w2,w3}.weight, model.norm.weight,
// lm_head.weight (absent or ignored when tied); for gpt2 (with or without a
// "transformer." prefix) wte, wpe, h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2,
// mlp.c_fc, mlp.c_proj}.{weight, bias}, ln_f, whose Conv1D weights are stored
// [in][out] and transposed here (c_attn split into q, k, v).
// Each value is widened to fp32, then stored as `dtype` exactly as synthetic
// weights are (matrices row by row with quantize_row, vectors rounded to
// vector_dtype(dtype)). A missing tensor, a shape other than the config's, a
// dtype other than BF16/F16/F32, or a tensor the config has no place for is a
// WeightsError naming the file and tensor (gpt2's attn.bias / attn.masked_bias
// buffers and rotary_emb.inv_freq are skipped).
Weights load_safetensors(const std::filesystem::path& path, const ModelConfig& config, DType dtype);

}  // namespace wafersim::models
