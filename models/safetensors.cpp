#include "models/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <string_view>
#include <utility>

#include "models/dtype.hpp"

namespace wafersim::models {

namespace fs = std::filesystem;
using nlohmann::json;

WeightsError::WeightsError(std::string file, std::string tensor, const std::string& what)
    : std::runtime_error(file + ": error: " + (tensor.empty() ? std::string() : tensor + ": ") +
                         what),
      file_(std::move(file)),
      tensor_(std::move(tensor)) {}

namespace {

// Element sizes of the safetensors dtypes (the format's Dtype enum).
std::size_t element_size(const std::string& dtype) {
  static const std::map<std::string, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace

SafetensorsFile::SafetensorsFile(const fs::path& file) : path_(file.string()) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw WeightsError(path_, "", std::string("cannot open file: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw WeightsError(path_, "", std::string("cannot stat file: ") + std::strerror(err));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw WeightsError(
        path_, "",
        "truncated: " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw WeightsError(path_, "", std::string("cannot map file: ") + std::strerror(errno));
  }
  try {
    const auto* bytes = static_cast<const unsigned char*>(map_);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
    if (header_len > size_ - 8) {
      throw WeightsError(path_, "",
                         "truncated: the header says " + std::to_string(header_len) +
                             " bytes of JSON, but only " + std::to_string(size_ - 8) +
                             " bytes follow");
    }
    json header;
    try {
      header = json::parse(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len));
    } catch (const json::parse_error& e) {
      throw WeightsError(path_, "", std::string("bad header: invalid JSON: ") + e.what());
    }
    if (!header.is_object()) throw WeightsError(path_, "", "bad header: expected a JSON object");
    const unsigned char* data = bytes + 8 + header_len;
    const std::size_t data_size = size_ - 8 - static_cast<std::size_t>(header_len);
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      auto bad = [&](const std::string& what) {
        throw WeightsError(path_, name, "bad header: " + what);
      };
      if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
          !entry.contains("data_offsets")) {
        bad("each tensor needs dtype, shape and data_offsets");
      }
      Tensor t;
      if (!entry["dtype"].is_string()) bad("dtype must be a string");
      t.dtype = entry["dtype"].get<std::string>();
      const std::size_t esize = element_size(t.dtype);
      if (esize == 0) bad("unknown dtype '" + t.dtype + "'");
      const json& shape = entry["shape"];
      if (!shape.is_array()) bad("shape must be a list of whole numbers");
      std::uint64_t elements = 1;
      for (const json& d : shape) {
        if (!d.is_number_unsigned()) bad("shape must be a list of whole numbers >= 0");
        t.shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
        elements *= d.get<std::uint64_t>();
      }
      const json& off = entry["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
          !off[1].is_number_unsigned()) {
        bad("data_offsets must be [begin, end]");
      }
      const std::uint64_t begin = off[0].get<std::uint64_t>();
      const std::uint64_t end = off[1].get<std::uint64_t>();
      if (begin > end) bad("data_offsets begin > end");
      if (end > data_size) {
        throw WeightsError(path_, name,
                           "truncated: the data ends at byte " + std::to_string(end) +
                               " of the data area, which has only " + std::to_string(data_size) +
                               " bytes");
      }
      if (end - begin != elements * esize) {
        bad("data_offsets span " + std::to_string(end - begin) + " bytes, but shape " +
            shape_text(t.shape) + " of " + t.dtype + " needs " + std::to_string(elements * esize));
      }
      t.data = data + begin;
      t.bytes = static_cast<std::size_t>(end - begin);
      tensors_.emplace(name, std::move(t));
    }
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

std::vector<float> SafetensorsFile::read_fp32(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw WeightsError(path_, name, "no such tensor in this file");
  const Tensor& t = it->second;
  std::vector<float> out;
  if (t.dtype == "F32") {
    out.resize(t.bytes / 4);
    std::memcpy(out.data(), t.data, t.bytes);  // little-endian host
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    out.resize(t.bytes / 2);
    const bool bf16 = t.dtype == "BF16";
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::uint16_t bits =
          static_cast<std::uint16_t>(t.data[2 * i] | (t.data[2 * i + 1] << 8));
      out[i] = bf16 ? bf16_bits_to_float(bits) : fp16_bits_to_float(bits);
    }
  } else {
    throw WeightsError(path_, name,
                       "dtype " + t.dtype + " is not supported; expected BF16, F16 or F32");
  }
  return out;
}

namespace {

// All tensors of a checkpoint, from one or several files.
class Checkpoint {
 public:
  explicit Checkpoint(const fs::path& path) {
    std::error_code ec;
    fs::path p = path;
    if (fs::is_directory(p, ec)) {
      if (fs::exists(p / "model.safetensors.index.json", ec)) {
        p = p / "model.safetensors.index.json";
      } else if (fs::exists(p / "model.safetensors", ec)) {
        p = p / "model.safetensors";
      } else {
        throw WeightsError(path.string(), "",
                           "no model.safetensors or model.safetensors.index.json in this folder");
      }
    }
    const std::string name = p.filename().string();
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
      read_index(p);
    } else {
      files_.push_back(std::make_unique<SafetensorsFile>(p));
      for (const auto& [tensor, info] : files_.back()->tensors())
        where_[tensor] = files_.back().get();
    }
    origin_ = p.string();
  }

  const std::string& origin() const { return origin_; }
  bool has(const std::string& tensor) const { return where_.count(tensor) != 0; }

  // The tensor, checked for shape, as fp32 in the file's row-major layout.
  std::vector<float> read(const std::string& tensor, const std::vector<std::int64_t>& shape) {
    const auto it = where_.find(tensor);
    if (it == where_.end()) {
      throw WeightsError(origin_, tensor,
                         "missing tensor (expected shape " + shape_text(shape) + ")");
    }
    const SafetensorsFile& f = *it->second;
    const auto& t = f.tensors().at(tensor);
    if (t.shape != shape) {
      throw WeightsError(
          f.path(), tensor,
          "shape " + shape_text(t.shape) + " where the config needs " + shape_text(shape));
    }
    used_.insert(tensor);
    return f.read_fp32(tensor);
  }
  void skip(const std::string& tensor) { used_.insert(tensor); }

  // Every tensor must have been read or skipped.
  void check_all_used(const std::function<bool(const std::string&)>& ignorable) const {
    for (const auto& [tensor, file] : where_) {
      if (used_.count(tensor) == 0 && !ignorable(tensor)) {
        throw WeightsError(file->path(), tensor,
                           "unexpected tensor: the model config has no place for it (wrong "
                           "architecture or layer count?)");
      }
    }
  }

 private:
  void read_index(const fs::path& index) {
    const std::string shown = index.string();
    std::ifstream in(index, std::ios::binary);
    if (!in) throw WeightsError(shown, "", "cannot open file");
    json j;
    try {
      j = json::parse(in);
    } catch (const json::parse_error& e) {
      throw WeightsError(shown, "", std::string("bad index: invalid JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw WeightsError(shown, "", "bad index: expected an object with a weight_map");
    }
    std::map<std::string, SafetensorsFile*> opened;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw WeightsError(shown, tensor, "bad index: the shard must be a file name");
      const std::string shard = file.get<std::string>();
      if (opened.count(shard) == 0) {
        files_.push_back(std::make_unique<SafetensorsFile>(index.parent_path() / shard));
        opened[shard] = files_.back().get();
      }
      SafetensorsFile* f = opened[shard];
      if (f->tensors().count(tensor) == 0) {
        throw WeightsError(f->path(), tensor,
                           "the index places this tensor here, but it is not in the file");
      }
      where_[tensor] = f;
    }
    // Tensors in shards that the index does not list are unexpected too.
    for (const auto& [shard, f] : opened) {
      for (const auto& [tensor, info] : f->tensors()) {
        if (where_.count(tensor) == 0) where_[tensor] = f;
      }
    }
  }

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, SafetensorsFile*> where_;
  std::set<std::string> used_;
  std::string origin_;
};

using Shape = std::vector<std::int64_t>;

Matrix to_matrix(const std::vector<float>& v, int rows, int cols) {
  Matrix m(rows, cols);
  std::memcpy(m.data(), v.data(), v.size() * sizeof(float));
  return m;
}

// A Conv1D weight [in][out] as our [out][in], taking output columns
// [col0, col0 + rows).
Matrix transposed(const std::vector<float>& v, int in, int out, int col0, int rows) {
  Matrix m(rows, in);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < in; ++j)
      m(i, j) = v[static_cast<std::size_t>(j) * static_cast<std::size_t>(out) +
                  static_cast<std::size_t>(col0 + i)];
  return m;
}

void store(Matrix& m, DType dtype) {
  for (int i = 0; i < m.rows(); ++i) quantize_row(m.mutable_row(i), dtype);
}
void store(std::vector<float>& v, DType dtype) {
  for (float& x : v) x = round_to_dtype(x, vector_dtype(dtype));
}

void load_gpt2(Checkpoint& ck, const ModelConfig& c, Weights& w) {
  const std::string p = ck.has("transformer.wte.weight") ? "transformer." : "";
  const int h = c.hidden_size, inter = c.intermediate_size;
  w.embedding = to_matrix(ck.read(p + "wte.weight", {c.vocab_size, h}), c.vocab_size, h);
  w.position_embedding =
      to_matrix(ck.read(p + "wpe.weight", {c.max_position, h}), c.max_position, h);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    const std::string b = p + "h." + std::to_string(l) + ".";
    L.attn_norm = ck.read(b + "ln_1.weight", {h});
    L.attn_norm_bias = ck.read(b + "ln_1.bias", {h});
    const std::vector<float> qkv = ck.read(b + "attn.c_attn.weight", {h, 3 * h});
    L.wq = transposed(qkv, h, 3 * h, 0, h);
    L.wk = transposed(qkv, h, 3 * h, h, h);
    L.wv = transposed(qkv, h, 3 * h, 2 * h, h);
    const std::vector<float> qkv_bias = ck.read(b + "attn.c_attn.bias", {3 * h});
    L.bq.assign(qkv_bias.begin(), qkv_bias.begin() + h);
    L.bk.assign(qkv_bias.begin() + h, qkv_bias.begin() + 2 * h);
    L.bv.assign(qkv_bias.begin() + 2 * h, qkv_bias.end());
    L.wo = transposed(ck.read(b + "attn.c_proj.weight", {h, h}), h, h, 0, h);
    L.bo = ck.read(b + "attn.c_proj.bias", {h});
    L.ffn_norm = ck.read(b + "ln_2.weight", {h});
    L.ffn_norm_bias = ck.read(b + "ln_2.bias", {h});
    L.w_up = transposed(ck.read(b + "mlp.c_fc.weight", {h, inter}), h, inter, 0, inter);
    L.b_up = ck.read(b + "mlp.c_fc.bias", {inter});
    L.w_down = transposed(ck.read(b + "mlp.c_proj.weight", {inter, h}), inter, h, 0, h);
    L.b_down = ck.read(b + "mlp.c_proj.bias", {h});
  }
  w.final_norm = ck.read(p + "ln_f.weight", {h});
  w.final_norm_bias = ck.read(p + "ln_f.bias", {h});
  if (ck.has("lm_head.weight")) ck.skip("lm_head.weight");  // tied to wte
}

void load_llama_family(Checkpoint& ck, const ModelConfig& c, Weights& w) {
  const int h = c.hidden_size, inter = c.intermediate_size, q = c.q_dim(), kv = c.kv_dim();
  auto matrix = [&](const std::string& name, int rows, int cols) {
    return to_matrix(ck.read(name, {rows, cols}), rows, cols);
  };
  w.embedding = matrix("model.embed_tokens.weight", c.vocab_size, h);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    const std::string b = "model.layers." + std::to_string(l) + ".";
    L.attn_norm = ck.read(b + "input_layernorm.weight", {h});
    L.ffn_norm = ck.read(b + "post_attention_layernorm.weight", {h});
    L.wq = matrix(b + "self_attn.q_proj.weight", q, h);
    L.wk = matrix(b + "self_attn.k_proj.weight", kv, h);
    L.wv = matrix(b + "self_attn.v_proj.weight", kv, h);
    L.wo = matrix(b + "self_attn.o_proj.weight", h, q);
    if (c.has_qkv_bias()) {
      L.bq = ck.read(b + "self_attn.q_proj.bias", {q});
      L.bk = ck.read(b + "self_attn.k_proj.bias", {kv});
      L.bv = ck.read(b + "self_attn.v_proj.bias", {kv});
    }
    if (c.has_qk_norm()) {
      L.q_norm = ck.read(b + "self_attn.q_norm.weight", {c.head_dim});
      L.k_norm = ck.read(b + "self_attn.k_norm.weight", {c.head_dim});
    }
    if (c.is_moe()) {
      const std::string m = b + "block_sparse_moe.";
      L.router = matrix(m + "gate.weight", c.num_experts, h);
      L.experts.resize(static_cast<std::size_t>(c.num_experts));
      for (int e = 0; e < c.num_experts; ++e) {
        ExpertWeights& E = L.experts[static_cast<std::size_t>(e)];
        const std::string x = m + "experts." + std::to_string(e) + ".";
        E.w_gate = matrix(x + "w1.weight", inter, h);
        E.w_down = matrix(x + "w2.weight", h, inter);
        E.w_up = matrix(x + "w3.weight", inter, h);
      }
    } else {
      L.w_gate = matrix(b + "mlp.gate_proj.weight", inter, h);
      L.w_up = matrix(b + "mlp.up_proj.weight", inter, h);
      L.w_down = matrix(b + "mlp.down_proj.weight", h, inter);
    }
  }
  w.final_norm = ck.read("model.norm.weight", {h});
  if (c.tie_embeddings) {
    if (ck.has("lm_head.weight")) ck.skip("lm_head.weight");
  } else {
    w.lm_head = matrix("lm_head.weight", c.vocab_size, h);
  }
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Weights load_safetensors(const fs::path& path, const ModelConfig& config, DType dtype) {
  config.validate();
  Checkpoint ck(path);
  Weights w;
  w.config = config;
  w.dtype = dtype;
  w.layers.resize(static_cast<std::size_t>(config.num_layers));
  if (config.is_gpt2()) {
    load_gpt2(ck, config, w);
  } else {
    load_llama_family(ck, config, w);
  }
  ck.check_all_used([&](const std::string& t) {
    return ends_with(t, "rotary_emb.inv_freq") ||
           (config.is_gpt2() && (ends_with(t, ".attn.bias") || ends_with(t, ".attn.masked_bias")));
  });

  store(w.embedding, dtype);
  store(w.position_embedding, dtype);
  store(w.final_norm, dtype);
  store(w.final_norm_bias, dtype);
  for (LayerWeights& L : w.layers) {
    for (Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router}) {
      store(*m, dtype);
    }
    for (ExpertWeights& E : L.experts) {
      store(E.w_gate, dtype);
      store(E.w_up, dtype);
      store(E.w_down, dtype);
    }
    for (std::vector<float>* v :
         {&L.attn_norm, &L.ffn_norm, &L.bq, &L.bk, &L.bv, &L.bo, &L.b_up, &L.b_down,
          &L.attn_norm_bias, &L.ffn_norm_bias, &L.q_norm, &L.k_norm}) {
      store(*v, dtype);
    }
  }
  if (config.tie_embeddings) {
    w.lm_head = Matrix();  // embedding is the lm_head (Weights::lm_head_matrix)
  } else {
    store(w.lm_head, dtype);
  }
  return w;
}

}  // namespace wafersim::models
