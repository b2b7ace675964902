#include "models/gpu/gpu_spec.hpp"

#include <cmath>

namespace wafersim::models::gpu {

double GpuSpec::peak_flops(int bits) const {
  // Narrowest supported format at least as wide as the weights.
  if (bits <= 4 && fp4_flops > 0.0) return fp4_flops;
  if (bits <= 8 && fp8_flops > 0.0) return fp8_flops;
  if (bits <= 16 && bf16_flops > 0.0) return bf16_flops;
  return tf32_flops > 0.0 ? tf32_flops : bf16_flops;
}

namespace {

void require_positive(double v, const char* field, const char* what) {
  if (!(v > 0.0) || !std::isfinite(v))
    throw GpuSpecError(field, std::string(what) + " must be positive");
}

void require_fraction(double v, const char* field, const char* what) {
  if (!(v > 0.0 && v <= 1.0)) throw GpuSpecError(field, std::string(what) + " must be in (0, 1]");
}

}  // namespace

void ClusterSpec::validate() const {
  require_positive(gpu.bf16_flops, "gpu.bf16", "the dense BF16 rate");
  if (gpu.tf32_flops < 0.0 || gpu.fp8_flops < 0.0 || gpu.fp4_flops < 0.0)
    throw GpuSpecError("gpu", "peak rates cannot be negative");
  require_positive(gpu.hbm_bytes, "gpu.hbm_capacity", "HBM capacity");
  require_positive(gpu.hbm_bandwidth, "gpu.hbm_bandwidth", "HBM bandwidth");
  if (gpus_per_node < 1 || gpus_per_node > 1024)
    throw GpuSpecError("scale_up.gpus", "the scale-up domain must hold 1 to 1024 GPUs");
  if (gpus_per_node > 1)
    require_positive(scaleup_bandwidth, "scale_up.bandwidth", "scale-up bandwidth");
  if (max_nodes < 1 || max_nodes > 4096)
    throw GpuSpecError("scale_out.max_nodes", "max_nodes must be between 1 and 4096");
  if (max_nodes > 1)
    require_positive(scaleout_bandwidth, "scale_out.bandwidth", "scale-out bandwidth");
  require_positive(node_power_w, "power", "system power");
  require_fraction(params.memory_efficiency, "model.memory_efficiency", "memory_efficiency");
  require_fraction(params.compute_efficiency, "model.compute_efficiency", "compute_efficiency");
  if (!(params.memory_reserve >= 0.0 && params.memory_reserve < 1.0))
    throw GpuSpecError("model.memory_reserve", "memory_reserve must be in [0, 1)");
  if (params.allreduce_alpha_s < 0.0 || params.per_layer_overhead_s < 0.0 ||
      scaleout_latency_s < 0.0)
    throw GpuSpecError("model", "latencies cannot be negative");
  if (!(framework.per_iteration_s >= 0.0) || !std::isfinite(framework.per_iteration_s))
    throw GpuSpecError("framework.per_iteration", "the per-iteration overhead cannot be negative");
  if (!(framework.per_sequence_s >= 0.0) || !std::isfinite(framework.per_sequence_s))
    throw GpuSpecError("framework.per_sequence", "the per-sequence overhead cannot be negative");
}

}  // namespace wafersim::models::gpu
