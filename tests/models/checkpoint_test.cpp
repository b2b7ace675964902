// Hugging Face checkpoints: config.json mapping and safetensors loading. The
// tests write their own small files (a tiny safetensors writer below),
// including corrupt ones.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/dtype.hpp"
#include "models/hf_config.hpp"
#include "models/reference.hpp"
#include "models/safetensors.hpp"
#include "models/sha256.hpp"

namespace wafersim::models {
namespace {

namespace fs = std::filesystem;

struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // row-major in `shape`
};

// Writes a safetensors file: tensors stored as `dtype` ("F32" or "BF16").
void write_safetensors(const fs::path& file, const std::vector<NamedTensor>& tensors,
                       const std::string& dtype = "F32") {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::string data;
  for (const NamedTensor& t : tensors) {
    const std::size_t begin = data.size();
    for (float v : t.values) {
      if (dtype == "BF16") {
        const std::uint16_t b = float_to_bf16_bits(v);
        data.push_back(static_cast<char>(b & 0xff));
        data.push_back(static_cast<char>(b >> 8));
      } else {
        char bytes[4];
        std::memcpy(bytes, &v, 4);
        data.append(bytes, 4);
      }
    }
    header += ",\"" + t.name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i > 0) header += ",";
      header += std::to_string(t.shape[i]);
    }
    header +=
        "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::ofstream out(file, std::ios::binary);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
}

// A tensor as raw little-endian bytes of any dtype.
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};

void write_raw_safetensors(const fs::path& file, const std::vector<RawTensor>& tensors) {
  std::string header = "{";
  std::string data;
  for (const RawTensor& t : tensors) {
    if (header.size() > 1) header += ",";
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i > 0) header += ',';
      header += std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  header += "}";
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
}

std::vector<float> flat(const Matrix& m) {
  return {m.data(), m.data() + m.size()};
}
std::vector<float> flat_transposed(const Matrix& m) {  // [rows][cols] -> [cols][rows]
  std::vector<float> v;
  for (int j = 0; j < m.cols(); ++j)
    for (int i = 0; i < m.rows(); ++i) v.push_back(m(i, j));
  return v;
}
std::int64_t i64(int v) {
  return v;
}

// The tensors a Hugging Face checkpoint of `w` holds, by HF name and layout.
std::vector<NamedTensor> hf_tensors(const Weights& w) {
  const ModelConfig& c = w.config;
  std::vector<NamedTensor> t;
  auto mat = [&](const std::string& n, const Matrix& m) {
    t.push_back({n, {i64(m.rows()), i64(m.cols())}, flat(m)});
  };
  auto vec = [&](const std::string& n, const std::vector<float>& v) {
    t.push_back({n, {i64(static_cast<int>(v.size()))}, v});
  };
  if (c.is_gpt2()) {
    const int h = c.hidden_size;
    mat("wte.weight", w.embedding);
    mat("wpe.weight", w.position_embedding);
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerWeights& L = w.layers[l];
      const std::string b = "h." + std::to_string(l) + ".";
      vec(b + "ln_1.weight", L.attn_norm);
      vec(b + "ln_1.bias", L.attn_norm_bias);
      // Conv1D [in][out] with out = [q | k | v].
      std::vector<float> qkv;
      for (int j = 0; j < h; ++j) {
        for (int i = 0; i < h; ++i) qkv.push_back(L.wq(i, j));
        for (int i = 0; i < h; ++i) qkv.push_back(L.wk(i, j));
        for (int i = 0; i < h; ++i) qkv.push_back(L.wv(i, j));
      }
      t.push_back({b + "attn.c_attn.weight", {h, 3 * h}, qkv});
      std::vector<float> qkv_bias = L.bq;
      qkv_bias.insert(qkv_bias.end(), L.bk.begin(), L.bk.end());
      qkv_bias.insert(qkv_bias.end(), L.bv.begin(), L.bv.end());
      vec(b + "attn.c_attn.bias", qkv_bias);
      t.push_back({b + "attn.c_proj.weight", {h, h}, flat_transposed(L.wo)});
      vec(b + "attn.c_proj.bias", L.bo);
      vec(b + "ln_2.weight", L.ffn_norm);
      vec(b + "ln_2.bias", L.ffn_norm_bias);
      t.push_back({b + "mlp.c_fc.weight", {h, c.intermediate_size}, flat_transposed(L.w_up)});
      vec(b + "mlp.c_fc.bias", L.b_up);
      t.push_back({b + "mlp.c_proj.weight", {c.intermediate_size, h}, flat_transposed(L.w_down)});
      vec(b + "mlp.c_proj.bias", L.b_down);
      // The causal-mask buffer old GPT-2 checkpoints carry: skipped.
      t.push_back({b + "attn.bias", {1, 1, 2, 2}, {1, 0, 1, 1}});
    }
    vec("ln_f.weight", w.final_norm);
    vec("ln_f.bias", w.final_norm_bias);
    return t;
  }
  mat("model.embed_tokens.weight", w.embedding);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string b = "model.layers." + std::to_string(l) + ".";
    vec(b + "input_layernorm.weight", L.attn_norm);
    vec(b + "post_attention_layernorm.weight", L.ffn_norm);
    mat(b + "self_attn.q_proj.weight", L.wq);
    mat(b + "self_attn.k_proj.weight", L.wk);
    mat(b + "self_attn.v_proj.weight", L.wv);
    mat(b + "self_attn.o_proj.weight", L.wo);
    if (c.has_qkv_bias()) {
      vec(b + "self_attn.q_proj.bias", L.bq);
      vec(b + "self_attn.k_proj.bias", L.bk);
      vec(b + "self_attn.v_proj.bias", L.bv);
    }
    if (c.has_qk_norm()) {
      vec(b + "self_attn.q_norm.weight", L.q_norm);
      vec(b + "self_attn.k_norm.weight", L.k_norm);
    }
    if (c.is_moe()) {
      const bool mixtral = c.architecture == Architecture::mixtral;  // else Qwen3-MoE's names
      const std::string m = b + (mixtral ? "block_sparse_moe." : "mlp.");
      mat(m + "gate.weight", L.router);
      for (int e = 0; e < c.num_experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        mat(x + (mixtral ? "w1.weight" : "gate_proj.weight"), L.experts[e].w_gate);
        mat(x + (mixtral ? "w2.weight" : "down_proj.weight"), L.experts[e].w_down);
        mat(x + (mixtral ? "w3.weight" : "up_proj.weight"), L.experts[e].w_up);
      }
    } else {
      mat(b + "mlp.gate_proj.weight", L.w_gate);
      mat(b + "mlp.up_proj.weight", L.w_up);
      mat(b + "mlp.down_proj.weight", L.w_down);
    }
  }
  vec("model.norm.weight", w.final_norm);
  if (!c.tie_embeddings) mat("lm_head.weight", w.lm_head);
  return t;
}

ModelConfig micro(Architecture a) {
  ModelConfig c;
  c.name = "micro";
  c.architecture = a;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = a == Architecture::gpt2 ? 2 : 1;
  c.head_dim = 4;
  c.vocab_size = 10;
  c.max_position = 6;
  if (a == Architecture::mixtral || a == Architecture::qwen3_moe) {
    c.num_experts = 3;
    c.experts_per_token = 2;
  }
  c.tie_embeddings = a == Architecture::gpt2;
  return c;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wafersim_checkpoint_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
  fs::path dir_;
};

TEST_F(CheckpointTest, EveryArchitectureRoundTripsThroughASafetensorsFile) {
  for (Architecture a :
       {Architecture::llama, Architecture::mistral, Architecture::qwen2, Architecture::qwen3,
        Architecture::mixtral, Architecture::qwen3_moe, Architecture::gpt2}) {
    const Weights w = Weights::synthetic(micro(a), DType::bf16, 21);
    const fs::path file = dir_ / (std::string(architecture_name(a)) + ".safetensors");
    write_safetensors(file, hf_tensors(w), "BF16");
    const Weights got = load_safetensors(file, w.config, DType::bf16);
    EXPECT_EQ(got.embedding, w.embedding) << architecture_name(a);
    EXPECT_EQ(got.layers, w.layers) << architecture_name(a);
    EXPECT_EQ(got.final_norm, w.final_norm) << architecture_name(a);
    EXPECT_EQ(got.final_norm_bias, w.final_norm_bias) << architecture_name(a);
    EXPECT_EQ(got.position_embedding, w.position_embedding) << architecture_name(a);
    EXPECT_EQ(got.lm_head, w.lm_head) << architecture_name(a);
    // And the reference decodes the same tokens from either.
    const std::vector<std::int32_t> prompt = {1, 2, 3};
    EXPECT_EQ(greedy_generate(got, prompt, 3).tokens, greedy_generate(w, prompt, 3).tokens);
  }
}

TEST_F(CheckpointTest, Fp32FileIsRoundedToTheRequestedPrecision) {
  const Weights w = Weights::synthetic(micro(Architecture::llama), DType::fp32, 22);
  write_safetensors(dir_ / "model.safetensors", hf_tensors(w), "F32");
  const Weights exact = load_safetensors(dir_, w.config, DType::fp32);  // a folder
  EXPECT_EQ(exact.layers, w.layers);
  const Weights q8 = load_safetensors(dir_, w.config, DType::int8);
  Matrix expect = w.layers[1].wq;
  for (int i = 0; i < expect.rows(); ++i) quantize_row(expect.mutable_row(i), DType::int8);
  EXPECT_EQ(q8.layers[1].wq, expect);
  EXPECT_EQ(q8.dtype, DType::int8);
}

TEST_F(CheckpointTest, ShardedCheckpointsFollowTheIndex) {
  const Weights w = Weights::synthetic(micro(Architecture::mixtral), DType::bf16, 23);
  std::vector<NamedTensor> all = hf_tensors(w), first, second;
  std::string map;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const bool one = i < all.size() / 2;
    (one ? first : second).push_back(all[i]);
    const std::string shard =
        one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    if (!map.empty()) map += ",";
    map += "\"" + all[i].name + "\":\"" + shard + "\"";
  }
  write_safetensors(dir_ / "model-00001-of-00002.safetensors", first, "BF16");
  write_safetensors(dir_ / "model-00002-of-00002.safetensors", second, "BF16");
  write_text(dir_ / "model.safetensors.index.json",
             "{\"metadata\":{\"total_size\":0},\"weight_map\":{" + map + "}}");
  const Weights got = load_safetensors(dir_, w.config, DType::bf16);
  EXPECT_EQ(got.layers, w.layers);
  EXPECT_EQ(got.lm_head, w.lm_head);
}

// The error `load` throws, for checking its file and tensor.
template <class Load>
WeightsError weights_error(Load load) {
  try {
    load();
  } catch (const WeightsError& e) {
    return e;
  }
  ADD_FAILURE() << "no WeightsError";
  return WeightsError("", "", "");
}

TEST_F(CheckpointTest, CorruptFilesGiveErrorsNamingFileAndTensor) {
  const Weights w = Weights::synthetic(micro(Architecture::llama), DType::bf16, 24);
  const fs::path good = dir_ / "good.safetensors";
  write_safetensors(good, hf_tensors(w), "BF16");
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const ModelConfig& c = w.config;

  // Truncated: the data of the last tensor is cut short.
  const fs::path cut = dir_ / "cut.safetensors";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 10);
  WeightsError e = weights_error([&] { load_safetensors(cut, c, DType::bf16); });
  EXPECT_EQ(e.file(), cut.string());
  EXPECT_EQ(e.tensor(), "lm_head.weight");  // the last one written
  EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();

  // Truncated inside the header, and shorter than the length field.
  std::ofstream(dir_ / "short.safetensors", std::ios::binary) << bytes.substr(0, 40);
  e = weights_error([&] { load_safetensors(dir_ / "short.safetensors", c, DType::bf16); });
  EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  std::ofstream(dir_ / "tiny.safetensors", std::ios::binary) << bytes.substr(0, 5);
  e = weights_error([&] { load_safetensors(dir_ / "tiny.safetensors", c, DType::bf16); });
  EXPECT_NE(std::string(e.what()).find("8-byte"), std::string::npos) << e.what();

  // A bad header: not JSON.
  std::string garbled = bytes;
  garbled[8] = '#';
  std::ofstream(dir_ / "bad.safetensors", std::ios::binary) << garbled;
  e = weights_error([&] { load_safetensors(dir_ / "bad.safetensors", c, DType::bf16); });
  EXPECT_NE(std::string(e.what()).find("bad header"), std::string::npos) << e.what();
  EXPECT_EQ(e.file(), (dir_ / "bad.safetensors").string());

  // A missing tensor.
  std::vector<NamedTensor> t = hf_tensors(w);
  t.erase(t.begin() + 3);  // model.layers.0.self_attn.q_proj.weight
  write_safetensors(dir_ / "missing.safetensors", t);
  e = weights_error([&] { load_safetensors(dir_ / "missing.safetensors", c, DType::bf16); });
  EXPECT_EQ(e.tensor(), "model.layers.0.self_attn.q_proj.weight");
  EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();

  // A mis-shaped tensor: k_proj with its dimensions swapped.
  t = hf_tensors(w);
  std::swap(t[4].shape[0], t[4].shape[1]);
  write_safetensors(dir_ / "shape.safetensors", t);
  e = weights_error([&] { load_safetensors(dir_ / "shape.safetensors", c, DType::bf16); });
  EXPECT_EQ(e.tensor(), "model.layers.0.self_attn.k_proj.weight");
  EXPECT_NE(std::string(e.what()).find("shape [8, 4] where the config needs [4, 8]"),
            std::string::npos)
      << e.what();

  // A tensor the config has no place for (a third layer).
  t = hf_tensors(w);
  t.push_back({"model.layers.2.input_layernorm.weight", {8}, std::vector<float>(8, 1.0f)});
  write_safetensors(dir_ / "extra.safetensors", t);
  e = weights_error([&] { load_safetensors(dir_ / "extra.safetensors", c, DType::bf16); });
  EXPECT_EQ(e.tensor(), "model.layers.2.input_layernorm.weight");

  // An unsupported dtype.
  SafetensorsFile f(good);
  EXPECT_EQ(f.tensors().at("model.norm.weight").dtype, "BF16");
  EXPECT_THROW(f.read_fp32("no.such.tensor"), WeightsError);
}

TEST_F(CheckpointTest, HfConfigMapsEveryArchitecture) {
  write_text(dir_ / "config.json", R"({
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-05, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
  ModelConfig m = load_hf_config(dir_);
  EXPECT_EQ(m.architecture, Architecture::mixtral);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.parameter_count(), 46'702'792'704ull);
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_EQ(m.name, dir_.filename().string());

  write_text(dir_ / "gpt2.json", R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
    "n_head": 12, "n_inner": null, "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257,
    "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"})");
  m = load_hf_config(dir_ / "gpt2.json");
  EXPECT_EQ(m.architecture, Architecture::gpt2);
  EXPECT_EQ(m.intermediate_size, 3072);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_EQ(m.parameter_count(), 124'439'808ull);

  write_text(dir_ / "llama.json", R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": false, "attention_bias": false})");
  m = load_hf_config(dir_ / "llama.json");
  EXPECT_EQ(m.architecture, Architecture::llama);
  EXPECT_EQ(m.parameter_count(), 8'030'261'248ull);
  EXPECT_EQ(m.rope_theta, 500000.0);

  write_text(dir_ / "qwen2.json", R"({"model_type": "qwen2", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 64,
    "sliding_window": 32, "use_sliding_window": false})");
  m = load_hf_config(dir_ / "qwen2.json");
  EXPECT_TRUE(m.has_qkv_bias());
  EXPECT_EQ(m.sliding_window, 0);  // use_sliding_window is false

  write_text(dir_ / "mistral.json", R"({"model_type": "mistral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 32768,
    "rope_theta": 10000.0, "rms_norm_eps": 1e-05, "sliding_window": 4096})");
  m = load_hf_config(dir_ / "mistral.json");
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.parameter_count(), 7'241'732'096ull);
}

TEST_F(CheckpointTest, HfConfigErrorsNameTheFileAndKey) {
  auto error_of = [&](const std::string& text) {
    write_text(dir_ / "config.json", text);
    try {
      load_hf_config(dir_ / "config.json");
    } catch (const HfConfigError& e) {
      EXPECT_EQ(e.file(), (dir_ / "config.json").string());
      return e;
    }
    ADD_FAILURE() << "no HfConfigError for " << text;
    return HfConfigError("", "", "");
  };
  EXPECT_EQ(error_of(R"({"model_type": "bert"})").key(), "model_type");
  EXPECT_EQ(error_of(R"({"architectures": ["T5ForConditionalGeneration"]})").key(),
            "architectures");
  EXPECT_EQ(error_of(R"({"hidden_size": 8})").key(), "model_type");
  const HfConfigError missing = error_of(R"({"model_type": "llama", "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10,
    "max_position_embeddings": 8})");
  EXPECT_EQ(missing.key(), "intermediate_size");
  EXPECT_NE(std::string(missing.what()).find("config.json"), std::string::npos);
  EXPECT_EQ(error_of(R"({"model_type": "gpt2", "n_embd": "768"})").key(), "n_embd");
  EXPECT_EQ(error_of("{ not json").key(), "");
  EXPECT_EQ(error_of(R"({"model_type": "mixtral", "hidden_size": 8, "intermediate_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
    "vocab_size": 10, "max_position_embeddings": 8, "num_local_experts": 4,
    "num_experts_per_tok": 5})")
                .key(),
            "experts_per_token");
  EXPECT_THROW(load_hf_config(dir_ / "nope"), HfConfigError);
}

// A llama config.json of Llama 3.1 8B's shape with `extra` keys added.
std::string llama31_with(const std::string& extra) {
  return R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05)" +
         extra + "}";
}

TEST_F(CheckpointTest, HfConfigReadsLlama3RopeScaling) {
  const RopeScaling llama31{RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192};
  // Llama 3.1's config.json (transformers 4).
  write_text(dir_ / "config.json", llama31_with(R"(, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"})"));
  ModelConfig m = load_hf_config(dir_);
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.rope_scaling, llama31);
  EXPECT_EQ(m.parameter_count(), 8'030'261'248ull);
  // transformers 5: rope_theta and the scaling in rope_parameters.
  write_text(dir_ / "config.json", llama31_with(R"(, "rope_parameters": {"rope_theta": 500000.0,
    "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"})"));
  m = load_hf_config(dir_);
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.rope_scaling, llama31);
  // rope_type default, in either place, or the older "type" key: no scaling.
  write_text(dir_ / "config.json",
             llama31_with(R"(, "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"})"));
  m = load_hf_config(dir_);
  EXPECT_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.rope_scaling, RopeScaling{});
  write_text(dir_ / "config.json", llama31_with(R"(, "rope_scaling": {"type": "default"})"));
  EXPECT_EQ(load_hf_config(dir_).rope_scaling, RopeScaling{});
  write_text(dir_ / "config.json", llama31_with(R"(, "rope_scaling": {"type": "llama3",
    "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4,
    "original_max_position_embeddings": 8192.0})"));
  EXPECT_EQ(load_hf_config(dir_).rope_scaling.factor, 32.0);
}

TEST_F(CheckpointTest, HfConfigDefaultsFollowEachFamily) {
  // Mixtral-8x7B without the keys whose defaults differ from Llama's:
  // MixtralConfig's rope_theta 1e6, rms_norm_eps 1e-5, num_key_value_heads 8,
  // num_local_experts 8, num_experts_per_tok 2, sliding_window None.
  write_text(dir_ / "config.json", R"({"model_type": "mixtral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "vocab_size": 32000, "max_position_embeddings": 32768})");
  ModelConfig m = load_hf_config(dir_);
  EXPECT_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.rms_norm_eps, 1e-5);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_EQ(m.parameter_count(), 46'702'792'704ull);
  // Mistral: MistralConfig's num_key_value_heads 8 and sliding_window 4096
  // when absent; null is no window (Mistral 7B v0.2 onwards).
  const std::string mistral = R"({"model_type": "mistral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "vocab_size": 32000, "max_position_embeddings": 32768)";
  write_text(dir_ / "config.json", mistral + "}");
  m = load_hf_config(dir_);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.rope_theta, 10000.0);
  EXPECT_EQ(m.rms_norm_eps, 1e-6);
  write_text(dir_ / "config.json", mistral + R"(, "sliding_window": null})");
  EXPECT_EQ(load_hf_config(dir_).sliding_window, 0);
  // Llama: num_key_value_heads defaults to num_attention_heads.
  write_text(dir_ / "config.json", R"({"model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 100, "max_position_embeddings": 64})");
  m = load_hf_config(dir_);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.rms_norm_eps, 1e-6);
}

TEST_F(CheckpointTest, HfConfigAttentionBiasBiasesTheOProjectionToo) {
  write_text(dir_ / "config.json", llama31_with(R"(, "attention_bias": true)"));
  const ModelConfig m = load_hf_config(dir_);
  EXPECT_TRUE(m.has_qkv_bias());
  EXPECT_TRUE(m.has_o_bias());
  // q (4096) + k, v (1024 each) + o (4096) per layer.
  EXPECT_EQ(m.parameter_count(), 8'030'261'248ull + 32ull * (4096 + 2 * 1024 + 4096));
  // Qwen2's q/k/v biases have no o bias; Mistral has none whatever the key says.
  write_text(dir_ / "config.json", R"({"model_type": "qwen2", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 100, "max_position_embeddings": 64, "attention_bias": true})");
  EXPECT_TRUE(load_hf_config(dir_).has_qkv_bias());
  EXPECT_FALSE(load_hf_config(dir_).has_o_bias());
  write_text(dir_ / "config.json", R"({"model_type": "mistral", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 64,
    "attention_bias": true})");
  EXPECT_FALSE(load_hf_config(dir_).has_qkv_bias());
  EXPECT_FALSE(load_hf_config(dir_).has_o_bias());
}

TEST_F(CheckpointTest, HfConfigWindowsEveryLayerOrNone) {
  auto qwen2_with = [](const std::string& extra) {
    return R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 100, "max_position_embeddings": 64, "sliding_window": 16)" +
           extra + "}";
  };
  write_text(dir_ / "config.json",
             qwen2_with(R"(, "use_sliding_window": true, "max_window_layers": 0)"));
  EXPECT_EQ(load_hf_config(dir_).sliding_window, 16);  // every layer
  write_text(dir_ / "config.json",
             qwen2_with(R"(, "use_sliding_window": true, "max_window_layers": 4)"));
  EXPECT_EQ(load_hf_config(dir_).sliding_window, 0);  // no layer
  write_text(dir_ / "config.json", qwen2_with(R"(, "use_sliding_window": true)"));
  EXPECT_EQ(load_hf_config(dir_).sliding_window, 0);  // default 28 >= 4 layers
  write_text(dir_ / "config.json", qwen2_with(R"(, "layer_types": ["sliding_attention",
    "sliding_attention", "sliding_attention", "sliding_attention"])"));
  EXPECT_EQ(load_hf_config(dir_).sliding_window, 16);
  write_text(dir_ / "config.json", qwen2_with(R"(, "use_sliding_window": true,
    "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"])"));
  EXPECT_EQ(load_hf_config(dir_).sliding_window, 0);
}

// What wafersim does not model is refused, naming the key and why.
TEST_F(CheckpointTest, HfConfigRefusesRopeWindowsAndBiasesItDoesNotModel) {
  struct Refusal {
    std::string text, key, reason;
  };
  const std::string qwen3 = R"({"model_type": "qwen3", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
    "max_position_embeddings": 64, "sliding_window": 16)";
  const std::vector<Refusal> refusals = {
      {llama31_with(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"),
       "rope_scaling.rope_type", "unsupported RoPE scaling 'yarn'; supported: default"},
      {llama31_with(R"(, "rope_scaling": {"type": "linear", "factor": 2.0})"),
       "rope_scaling.rope_type", "'linear'"},
      {llama31_with(R"(, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0})"),
       "rope_scaling.rope_type", "llama3"},
      {llama31_with(R"(, "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4})"),
       "rope_parameters.rope_type", "'longrope'"},
      {llama31_with(R"(, "rope_scaling": {"rope_type": "llama3", "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"),
       "rope_scaling.factor", "missing required key 'factor'"},
      {llama31_with(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
         "low_freq_factor": 4.0, "high_freq_factor": 1.0,
         "original_max_position_embeddings": 8192})"),
       "rope_high_freq_factor", "greater than rope_low_freq_factor"},
      {llama31_with(R"(, "rope_scaling": "llama3")"), "rope_scaling", "expected a JSON object"},
      {llama31_with(R"(, "mlp_bias": true)"), "mlp_bias", "not modelled"},
      {llama31_with(R"(, "hidden_act": "gelu")"), "hidden_act", "supported: silu"},
      {qwen3 + R"(, "use_sliding_window": true, "max_window_layers": 2})", "max_window_layers",
       "windows only layers >= max_window_layers (2 of 4)"},
      {qwen3 + R"(, "layer_types": ["full_attention", "sliding_attention",
         "sliding_attention", "sliding_attention"]})",
       "layer_types", "windows 3 of 4 layers"},
  };
  for (const Refusal& r : refusals) {
    write_text(dir_ / "config.json", r.text);
    try {
      load_hf_config(dir_);
      ADD_FAILURE() << r.text << " was accepted";
    } catch (const HfConfigError& e) {
      EXPECT_EQ(e.key(), r.key) << e.what();
      EXPECT_NE(std::string(e.what()).find(r.reason), std::string::npos) << e.what();
    }
  }
}

TEST(Sha256, KnownDigests) {
  // FIPS 180-4 examples.
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(sha256_hex(two.data(), two.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

// Matrices made compact straight from the file, on several threads, hold
// the values the plain fp32 load holds; and the files' hash is the same.
TEST_F(CheckpointTest, CompactLoadOnManyThreadsHoldsTheSameValues) {
  for (Architecture a : {Architecture::llama, Architecture::mixtral, Architecture::gpt2}) {
    const Weights w = Weights::synthetic(micro(a), DType::bf16, 31);
    const fs::path file = dir_ / (std::string(architecture_name(a)) + ".safetensors");
    write_safetensors(file, hf_tensors(w), "BF16");
    const Weights plain = load_safetensors(file, w.config, DType::bf16);
    LoadOptions options;
    options.storage = HostStorage::compact;
    options.threads = 3;
    int calls = 0, total = 0;
    options.progress = [&](int done, int all) {
      ++calls;
      total = all;
      EXPECT_LE(done, all);
    };
    const Weights compact = load_safetensors(file, w.config, DType::bf16, options);
    EXPECT_EQ(calls, total) << "one call per file hashed and matrix made";
    EXPECT_EQ(compact.layers[0].wq.storage(), DType::bf16);
    auto same = [](const Matrix& x, const Matrix& y) {
      if (x.rows() != y.rows() || x.cols() != y.cols()) return false;
      for (int i = 0; i < x.rows(); ++i)
        for (int j = 0; j < x.cols(); ++j)
          if (x(i, j) != y(i, j)) return false;
      return true;
    };
    EXPECT_TRUE(same(plain.embedding, compact.embedding)) << architecture_name(a);
    for (std::size_t l = 0; l < plain.layers.size(); ++l) {
      const LayerWeights& p = plain.layers[l];
      const LayerWeights& q = compact.layers[l];
      EXPECT_TRUE(same(p.wq, q.wq) && same(p.wk, q.wk) && same(p.wv, q.wv) && same(p.wo, q.wo))
          << architecture_name(a) << " layer " << l;
      EXPECT_TRUE(same(p.w_up, q.w_up) && same(p.w_down, q.w_down));
      for (std::size_t e = 0; e < p.experts.size(); ++e)
        EXPECT_TRUE(same(p.experts[e].w_gate, q.experts[e].w_gate));
      EXPECT_EQ(p.attn_norm, q.attn_norm);
    }
    EXPECT_EQ(plain.origin.content_hash, compact.origin.content_hash);
    ASSERT_EQ(compact.origin.files.size(), 1u);
    EXPECT_EQ(compact.origin.files[0].bytes, fs::file_size(file));
  }
}

// F8_E4M3 matrices: each value is the code's value times its scale (per
// tensor, per row, or per square block); scales are needed.
TEST_F(CheckpointTest, Fp8WeightsAreCodesTimesTheirScales) {
  ModelConfig c = micro(Architecture::llama);  // q 8 x 8, k/v 4 x 8
  const Weights w = Weights::synthetic(c, DType::fp32, 41);
  // Every byte pattern but the NaNs, in order.
  auto codes = [](int n) {
    std::string b;
    for (int i = 0; i < n; ++i) {
      int code = (i * 37) % 256;
      if ((code & 0x7f) == 0x7f) code ^= 1;
      b.push_back(static_cast<char>(code));
    }
    return b;
  };
  auto f32 = [](const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  std::vector<RawTensor> raw;
  for (const NamedTensor& t : hf_tensors(w)) {
    if (t.name == "model.layers.0.self_attn.q_proj.weight") {
      raw.push_back({t.name, "F8_E4M3", t.shape, codes(64)});
      raw.push_back({"model.layers.0.self_attn.q_proj.weight_scale",
                     "F32",
                     {8, 1},
                     f32({1, 2, 3, 4, 5, 6, 7, 0.5f})});
    } else if (t.name == "model.layers.0.self_attn.k_proj.weight") {
      raw.push_back({t.name, "F8_E4M3", t.shape, codes(32)});
      raw.push_back({"model.layers.0.self_attn.k_proj.weight_scale", "F32", {}, f32({0.25f})});
    } else if (t.name == "model.layers.0.self_attn.v_proj.weight") {
      // Blocks of 2 x 2 over [4][8]: scales [2][4].
      raw.push_back({t.name, "F8_E4M3", t.shape, codes(32)});
      raw.push_back({"model.layers.0.self_attn.v_proj.weight_scale_inv",
                     "F32",
                     {2, 4},
                     f32({1, 2, 3, 4, 5, 6, 7, 8})});
    } else {
      raw.push_back({t.name, "F32", t.shape, f32(t.values)});
    }
  }
  raw.push_back({"model.layers.0.self_attn.q_proj.input_scale", "F32", {}, f32({1.0f})});
  const fs::path file = dir_ / "fp8.safetensors";
  write_raw_safetensors(file, raw);
  const Weights got = load_safetensors(file, c, DType::fp32);
  const std::string q = codes(64), kv = codes(32);
  auto code = [](const std::string& b, int k) {
    return fp8_e4m3_bits_to_float(static_cast<std::uint8_t>(b[static_cast<std::size_t>(k)]));
  };
  const float row_scale[8] = {1, 2, 3, 4, 5, 6, 7, 0.5f};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(got.layers[0].wq(i, j), code(q, i * 8 + j) * row_scale[i]) << i << "," << j;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(got.layers[0].wk(i, j), code(kv, i * 8 + j) * 0.25f);
      EXPECT_EQ(got.layers[0].wv(i, j),
                code(kv, i * 8 + j) * static_cast<float>(1 + (i / 2) * 4 + j / 2));
    }
  EXPECT_EQ(got.layers[1].wq, w.layers[1].wq);  // the F32 tensors as they were

  // Without its scale: an error naming the tensor and the scale it needs.
  std::vector<RawTensor> unscaled;
  for (const RawTensor& t : raw)
    if (t.name != "model.layers.0.self_attn.k_proj.weight_scale") unscaled.push_back(t);
  write_raw_safetensors(file, unscaled);
  WeightsError e = weights_error([&] { load_safetensors(file, c, DType::fp32); });
  EXPECT_EQ(e.tensor(), "model.layers.0.self_attn.k_proj.weight");
  EXPECT_NE(std::string(e.what()).find("weight_scale"), std::string::npos) << e.what();

  // A scale of the wrong shape.
  std::vector<RawTensor> misshapen = raw;
  for (RawTensor& t : misshapen)
    if (t.name == "model.layers.0.self_attn.q_proj.weight_scale") {
      t.shape = {4, 2};
    }
  write_raw_safetensors(file, misshapen);
  e = weights_error([&] { load_safetensors(file, c, DType::fp32); });
  EXPECT_EQ(e.tensor(), "model.layers.0.self_attn.q_proj.weight_scale");
}

// Qwen/Qwen3-235B-A22B's config.json (huggingface.co/Qwen/Qwen3-235B-A22B),
// every key as published.
const std::string kQwen3MoeConfig = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
  "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 12288, "max_position_embeddings": 40960,
  "max_window_layers": 94, "mlp_only_layers": [], "model_type": "qwen3_moe",
  "moe_intermediate_size": 1536, "norm_topk_prob": true, "num_attention_heads": 64,
  "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 94,
  "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

// kQwen3MoeConfig with `key` set to `value` (a JSON text), or removed when
// `value` is empty.
std::string qwen3_moe_config_with(const std::string& key, const std::string& value) {
  std::string text = kQwen3MoeConfig;
  const std::string quoted = "\"" + key + "\": ";
  const std::size_t at = text.find(quoted);
  if (at == std::string::npos) ADD_FAILURE() << "no key " << key;
  std::size_t end = at + quoted.size();
  int depth = 0;
  while (depth > 0 || (text[end] != ',' && text[end] != '}')) {
    if (text[end] == '[') ++depth;
    if (text[end] == ']') --depth;
    ++end;
  }
  if (!value.empty()) return text.replace(at + quoted.size(), end - at - quoted.size(), value);
  return text.erase(at, end + 1 - at);  // the key, its value and the comma after it
}

TEST_F(CheckpointTest, HfConfigMapsQwen3Moe) {
  write_text(dir_ / "config.json", kQwen3MoeConfig);
  ModelConfig m = load_hf_config(dir_);
  EXPECT_EQ(m.architecture, Architecture::qwen3_moe);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.intermediate_size, 1536);  // moe_intermediate_size, not intermediate_size
  EXPECT_EQ(m.num_layers, 94);
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_EQ(m.max_position, 40960);
  EXPECT_EQ(m.rope_theta, 1000000.0);
  EXPECT_EQ(m.rms_norm_eps, 1e-6);
  EXPECT_FALSE(m.tie_embeddings);
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_TRUE(m.has_qk_norm());
  EXPECT_EQ(m.parameter_count(), 235'093'634'560ull);

  // The class name alone maps too, and the defaults of the keys left out
  // (decoder_sparse_step 1, mlp_only_layers []) are what wafersim models.
  write_text(dir_ / "no_type.json", qwen3_moe_config_with("model_type", ""));
  EXPECT_EQ(load_hf_config(dir_ / "no_type.json").architecture, Architecture::qwen3_moe);
  write_text(dir_ / "defaults.json", qwen3_moe_config_with("decoder_sparse_step", ""));
  EXPECT_EQ(load_hf_config(dir_ / "defaults.json").num_experts, 128);
  write_text(dir_ / "null_list.json", qwen3_moe_config_with("mlp_only_layers", "null"));
  EXPECT_EQ(load_hf_config(dir_ / "null_list.json").num_experts, 128);
  write_text(dir_ / "no_dense_width.json", qwen3_moe_config_with("intermediate_size", ""));
  EXPECT_EQ(load_hf_config(dir_ / "no_dense_width.json").intermediate_size, 1536);
}

// Each Qwen3-MoE shape wafersim does not model is refused, naming the key and
// why.
TEST_F(CheckpointTest, HfConfigRefusesQwen3MoeShapesItDoesNotModel) {
  struct Refusal {
    std::string key, value;  // value "" = the key left out
    std::string reason;      // part of the message
  };
  const std::vector<Refusal> refusals = {
      {"norm_topk_prob", "false", "must be true"},
      {"norm_topk_prob", "", "the default when the key is absent"},
      {"norm_topk_prob", "1", "expected true or false"},
      {"decoder_sparse_step", "2", "must be 1 (every layer a mixture of experts), got 2"},
      {"decoder_sparse_step", "0", "must be 1"},
      {"mlp_only_layers", "[0, 47]",
       "must be empty (every layer a mixture of experts), got [0,47]"},
      {"mlp_only_layers", "3", "expected a list"},
      {"num_experts", "", "missing required key 'num_experts'"},
      {"num_experts", "0", "at least one expert"},
      {"num_experts_per_tok", "", "missing required key 'num_experts_per_tok'"},
      {"num_experts_per_tok", "129", "must be in [1, num_experts (128)], got 129"},
      {"num_experts_per_tok", "0", "must be in [1, num_experts (128)], got 0"},
      {"moe_intermediate_size", "", "missing required key 'moe_intermediate_size'"},
  };
  for (const Refusal& r : refusals) {
    write_text(dir_ / "config.json", qwen3_moe_config_with(r.key, r.value));
    try {
      load_hf_config(dir_);
      ADD_FAILURE() << r.key << " = " << r.value << " was accepted";
    } catch (const HfConfigError& e) {
      EXPECT_EQ(e.key(), r.key) << e.what();
      EXPECT_NE(std::string(e.what()).find(r.reason), std::string::npos)
          << r.key << " = " << r.value << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace wafersim::models
