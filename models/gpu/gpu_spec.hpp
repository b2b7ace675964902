// What a GPU cluster is: one GPU's datasheet figures, how GPUs are joined
// (scale-up domain and scale-out NICs), the system's power, and the named
// efficiency and overhead parameters of the analytical model. Plain data,
// read from scenarios/gpus/*.yaml by the scenario loader; immutable after
// validate(). Every figure in the shipped presets carries its public source.
#pragma once

#include <stdexcept>
#include <string>

#include "models/gpu/serving_framework.hpp"

namespace wafersim::models::gpu {

// A cluster description that cannot exist (no memory, efficiency above 1, ...).
// field() is the key path below the preset's root, e.g. "gpu.hbm_bandwidth".
class GpuSpecError : public std::runtime_error {
 public:
  GpuSpecError(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// One GPU. Peak rates are DENSE tensor-core rates (no 2:4 sparsity), in
// FLOP/s; 0 means the precision is not supported in hardware.
struct GpuSpec {
  std::string name;
  double tf32_flops = 0.0;  // used for fp32 weights
  double bf16_flops = 0.0;  // bf16 and fp16
  double fp8_flops = 0.0;
  double fp4_flops = 0.0;
  double hbm_bytes = 0.0;      // HBM capacity
  double hbm_bandwidth = 0.0;  // bytes/s, peak
  double l2_bytes = 0.0;       // informational
  double power_w = 0.0;        // board power (TDP/TGP), informational

  // Dense peak for weights of `bits` bits (32, 16, 8, 4); the next wider
  // supported format when the exact one is missing (fp4 on Hopper runs as fp8).
  double peak_flops(int bits) const;
};

// Named parameters of the analytical model. The shipped presets set them
// with a published source each; the defaults here are the Hopper values.
struct ModelParameters {
  // Fraction of peak HBM bandwidth a decode step reaches.
  double memory_efficiency = 0.8;
  // Fraction of dense peak FLOP/s a GEMM reaches (decode and prefill).
  double compute_efficiency = 0.6;
  // Per-step latency of one ring all-reduce hop (NCCL launch + NVLink hop), s.
  double allreduce_alpha_s = 5e-6;
  // Fixed cost per transformer layer per step (kernel launches, norms,
  // rotary, sampling amortised), s.
  double per_layer_overhead_s = 10e-6;
  // HBM kept free for activations and workspace (fraction of capacity).
  double memory_reserve = 0.1;
};

struct ClusterSpec {
  std::string name;         // preset name, e.g. "dgx-h100"
  std::string description;  // for reports
  GpuSpec gpu;
  int gpus_per_node = 8;            // scale-up (NVLink) domain size
  double scaleup_bandwidth = 0.0;   // per GPU, one direction, bytes/s
  int max_nodes = 1;                // nodes the model may span (pipeline over scale-out)
  double scaleout_bandwidth = 0.0;  // per GPU NIC, one direction, bytes/s
  double scaleout_latency_s = 0.0;  // one NIC-switch-NIC message
  double node_power_w = 0.0;        // whole node (or rack for NVL72) at full load
  ModelParameters params;
  ServingFramework framework;  // host time per iteration; "none" unless the preset names one

  // Throws GpuSpecError naming the offending field.
  void validate() const;
};

}  // namespace wafersim::models::gpu
