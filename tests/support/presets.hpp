// The preset models and wafers the YAML-free tests use, as C++ values: the
// placement, program and exec tests link neither yaml-cpp nor SystemC, so they
// cannot read scenarios/. tests/sim/config/support_presets_test.cpp checks each
// against its preset file, field for field, so the two cannot drift apart.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "fabric/wafer_spec.hpp"
#include "models/model_config.hpp"

namespace wafersim::testing {

inline models::ModelConfig preset_model(const std::string& name) {
  using models::Architecture;
  models::ModelConfig m;
  m.name = name;
  m.rope_theta = 10000.0;
  m.rms_norm_eps = 1.0e-5;
  if (name.rfind("tiny-", 0) == 0) {  // scenarios/models/tiny-*.yaml
    m.hidden_size = 64;
    m.num_heads = 4;
    m.num_kv_heads = 2;
    m.head_dim = 16;
    m.vocab_size = 256;
    m.max_position = 128;
    m.num_layers = 2;
    m.intermediate_size = 192;
    if (name == "tiny-llama") {
      m.architecture = Architecture::llama;
      m.num_layers = 4;
    } else if (name == "tiny-mistral") {
      m.architecture = Architecture::mistral;
      m.sliding_window = 8;
    } else if (name == "tiny-mixtral") {
      m.architecture = Architecture::mixtral;
      m.intermediate_size = 96;
      m.rope_theta = 1000000.0;
      m.num_experts = 4;
      m.experts_per_token = 2;
    } else if (name == "tiny-gpt2") {
      m.architecture = Architecture::gpt2;
      m.intermediate_size = 256;
      m.num_kv_heads = 4;
      m.tie_embeddings = true;
    } else if (name == "tiny-qwen3") {
      m.architecture = Architecture::qwen3;
      m.intermediate_size = 160;
      m.head_dim = 32;
      m.rope_theta = 1000000.0;
      m.rms_norm_eps = 1.0e-6;
      m.tie_embeddings = true;
    } else if (name == "tiny-qwen3-moe") {
      m.architecture = Architecture::qwen3_moe;
      m.intermediate_size = 32;
      m.head_dim = 32;
      m.rope_theta = 1000000.0;
      m.rms_norm_eps = 1.0e-6;
      m.num_experts = 12;
      m.experts_per_token = 4;
    } else {
      throw std::invalid_argument("no test preset model " + name);
    }
  } else if (name == "gpt2") {  // OpenAI GPT-2 small
    m.architecture = Architecture::gpt2;
    m.hidden_size = 768;
    m.intermediate_size = 3072;
    m.num_layers = 12;
    m.num_heads = 12;
    m.num_kv_heads = 12;
    m.head_dim = 64;
    m.vocab_size = 50257;
    m.max_position = 1024;
    m.tie_embeddings = true;
  } else if (name == "llama-3.1-8b") {
    m.architecture = Architecture::llama;
    m.hidden_size = 4096;
    m.intermediate_size = 14336;
    m.num_layers = 32;
    m.num_heads = 32;
    m.num_kv_heads = 8;
    m.head_dim = 128;
    m.vocab_size = 128256;
    m.max_position = 131072;
    m.rope_theta = 500000.0;
    m.rope_scaling = {models::RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192};
  } else if (name == "mixtral-8x7b") {
    m.architecture = Architecture::mixtral;
    m.hidden_size = 4096;
    m.intermediate_size = 14336;
    m.num_layers = 32;
    m.num_heads = 32;
    m.num_kv_heads = 8;
    m.head_dim = 128;
    m.vocab_size = 32000;
    m.max_position = 32768;
    m.rope_theta = 1000000.0;
    m.num_experts = 8;
    m.experts_per_token = 2;
  } else if (name == "qwen3-235b-a22b") {
    m.architecture = Architecture::qwen3_moe;
    m.hidden_size = 4096;
    m.intermediate_size = 1536;
    m.num_layers = 94;
    m.num_heads = 64;
    m.num_kv_heads = 4;
    m.head_dim = 128;
    m.vocab_size = 151936;
    m.max_position = 40960;
    m.rope_theta = 1000000.0;
    m.rms_norm_eps = 1.0e-6;
    m.num_experts = 128;
    m.experts_per_token = 8;
  } else {
    throw std::invalid_argument("no test preset model " + name);
  }
  return m;
}

// The models preset_model knows.
inline std::vector<std::string> preset_model_names() {
  return {"tiny-llama",     "tiny-mistral", "tiny-mixtral", "tiny-gpt2",    "tiny-qwen3",
          "tiny-qwen3-moe", "gpt2",         "llama-3.1-8b", "mixtral-8x7b", "qwen3-235b-a22b"};
}

// scenarios/hardware/{small,wse3}.yaml: WSE-3 cores (small: a 32 x 32 test mesh of them).
inline fabric::WaferSpec preset_hardware(const std::string& name) {
  fabric::WaferSpec s;
  s.name = name;
  if (name == "small") {
    s.mesh_width = 32;
    s.mesh_height = 32;
  } else if (name == "wse3") {
    s.mesh_width = 762;
    s.mesh_height = 1176;
    s.dies_x = 7;
    s.dies_y = 12;
    s.system_power_w = 23000.0;
    s.redundancy = fabric::Redundancy{12, 1, Cycles{1}};
    s.core_area_mm2 = 0.05;
  } else {
    throw std::invalid_argument("no test preset wafer " + name);
  }
  s.clock_hz = 1.1e9;
  s.sram_per_core = Bytes{48 * 1024};
  s.simd_lanes_16bit = 8;
  s.simd_lanes_32bit = 4;
  s.sram_read_bytes_per_cycle = Bytes{16};
  s.task_overhead = Cycles{20};
  s.hop_latency = Cycles{1};
  s.link_bytes_per_cycle = Bytes{4};
  s.virtual_channels = 24;
  s.reduce_hop_overhead = Cycles{2};
  s.io_bandwidth_bytes_per_s = 1200e9 / 8;
  s.io_latency_s = 1e-6;
  return s;
}

inline std::vector<std::string> preset_hardware_names() {
  return {"small", "wse3"};
}

}  // namespace wafersim::testing
