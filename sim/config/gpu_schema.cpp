// A GPU system (models::gpu::ClusterSpec): a preset in <preset dir>/gpus/, an
// entry of compare_with, inline or over a preset. docs/scenario-schema.md,
// "GPU baselines".
#include <cstdint>

#include "sim/config/quantity.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

using models::gpu::ClusterSpec;
using namespace yaml;

constexpr Need R = Need::required;
constexpr Need O = Need::optional;

// Valid ranges (docs/scenario-schema.md, "Valid ranges"): from far below
// any GPU to far above any announced one (B200: 2.25 PFLOPS BF16, 8 TB/s).
constexpr double kMinFlops = 1e9;                   // 1 GFLOPS
constexpr double kMaxFlops = 1e21;                  // 1000 EFLOPS
constexpr Bytes kMinMemory{1'000'000};              // 1 MB
constexpr Bytes kMaxMemory{1'000'000'000'000'000};  // 1 PB
constexpr double kMinRate = 1e3;                    // 8 kbit/s, in bytes per second
constexpr double kMaxRate = 1e15;                   // 8 Pbit/s

// A fraction or ratio written as a plain number (0.8), checked by validate().
double read_ratio(const Value& v) {
  return read_real(v, "0.8");
}

std::string bytes(double b) {
  return format_size(Bytes{static_cast<std::uint64_t>(b)});
}

constexpr Key<ClusterSpec> kCluster[] = {
    {"name", R, "string", "must equal the file name",
     [](auto& v, auto& c, auto&) { c.name = read_string(v); },
     [](auto& c) { return yaml_string(c.name); }},
    {"description", O, "string", "optional",
     [](auto& v, auto& c, auto&) { c.description = read_string(v); },
     [](auto& c) { return yaml_string(one_line(c.description)); },
     [](auto& c) { return !c.description.empty(); }},
    {"gpu.name", R, "string", "the GPU",
     [](auto& v, auto& c, auto&) { c.gpu.name = read_string(v); },
     [](auto& c) { return yaml_string(c.gpu.name); }},
    {"gpu.tf32", O, "FLOP rate", "dense tensor-core peak; absent = not supported",
     [](auto& v, auto& c, auto&) {
       c.gpu.tf32_flops = read_quantity_in(v, parse_flop_rate, "494.7 TFLOPS", kMinFlops, kMaxFlops,
                                           format_flop_rate);
     },
     [](auto& c) { return format_flop_rate(c.gpu.tf32_flops); },
     [](auto& c) { return c.gpu.tf32_flops > 0.0; }},
    {"gpu.bf16", R, "FLOP rate", "dense tensor-core peak",
     [](auto& v, auto& c, auto&) {
       c.gpu.bf16_flops = read_quantity_in(v, parse_flop_rate, "989.4 TFLOPS", kMinFlops, kMaxFlops,
                                           format_flop_rate);
     },
     [](auto& c) { return format_flop_rate(c.gpu.bf16_flops); }},
    {"gpu.fp8", O, "FLOP rate", "dense tensor-core peak; absent = not supported",
     [](auto& v, auto& c, auto&) {
       c.gpu.fp8_flops = read_quantity_in(v, parse_flop_rate, "1978.9 TFLOPS", kMinFlops, kMaxFlops,
                                          format_flop_rate);
     },
     [](auto& c) { return format_flop_rate(c.gpu.fp8_flops); },
     [](auto& c) { return c.gpu.fp8_flops > 0.0; }},
    {"gpu.fp4", O, "FLOP rate", "dense tensor-core peak; absent = not supported",
     [](auto& v, auto& c, auto&) {
       c.gpu.fp4_flops =
           read_quantity_in(v, parse_flop_rate, "9 PFLOPS", kMinFlops, kMaxFlops, format_flop_rate);
     },
     [](auto& c) { return format_flop_rate(c.gpu.fp4_flops); },
     [](auto& c) { return c.gpu.fp4_flops > 0.0; }},
    {"gpu.hbm_capacity", R, "size", "per GPU",
     [](auto& v, auto& c, auto&) {
       c.gpu.hbm_bytes = static_cast<double>(
           read_quantity_in(v, parse_size, "80 GB", kMinMemory, kMaxMemory, format_size).value);
     },
     [](auto& c) { return bytes(c.gpu.hbm_bytes); }},
    {"gpu.hbm_bandwidth", R, "data rate", "per GPU, peak",
     [](auto& v, auto& c, auto&) {
       c.gpu.hbm_bandwidth =
           read_quantity_in(v, parse_data_rate, "3.35 TB/s", kMinRate, kMaxRate, format_data_rate);
     },
     [](auto& c) { return format_data_rate(c.gpu.hbm_bandwidth); }},
    {"gpu.l2", O, "size", "optional, informational",
     [](auto& v, auto& c, auto&) {
       c.gpu.l2_bytes = static_cast<double>(
           read_quantity_in(v, parse_size, "50 MB", Bytes{1}, kMaxMemory, format_size).value);
     },
     [](auto& c) { return bytes(c.gpu.l2_bytes); }, [](auto& c) { return c.gpu.l2_bytes > 0.0; }},
    {"gpu.power", O, "power", "optional, informational",
     [](auto& v, auto& c, auto&) {
       c.gpu.power_w = read_quantity_in(v, parse_power, "700 W", 1.0, 1e9, format_power);
     },
     [](auto& c) { return format_power(c.gpu.power_w); },
     [](auto& c) { return c.gpu.power_w > 0.0; }},
    {"scale_up.gpus", R, "count", "GPUs in one NVLink / Infinity Fabric domain (a node)",
     [](auto& v, auto& c, auto&) { c.gpus_per_node = read_count_in(v, 1, 1024, "8"); },
     [](auto& c) { return fmt::format("{}", c.gpus_per_node); }},
    {"scale_up.bandwidth", R, "data rate", "per GPU, one direction",
     [](auto& v, auto& c, auto&) {
       c.scaleup_bandwidth =
           read_quantity_in(v, parse_data_rate, "450 GB/s", kMinRate, kMaxRate, format_data_rate);
     },
     [](auto& c) { return format_data_rate(c.scaleup_bandwidth); }},
    {"scale_out.max_nodes", R, "count", "nodes one pipeline may span",
     [](auto& v, auto& c, auto&) { c.max_nodes = read_count_in(v, 1, 4096, "4"); },
     [](auto& c) { return fmt::format("{}", c.max_nodes); }},
    {"scale_out.bandwidth", R, "data rate", "per GPU NIC",
     [](auto& v, auto& c, auto&) {
       c.scaleout_bandwidth =
           read_quantity_in(v, parse_data_rate, "400 Gbit/s", kMinRate, kMaxRate, format_data_rate);
     },
     [](auto& c) { return format_data_rate(c.scaleout_bandwidth); }},
    {"scale_out.latency", R, "time", "one message across the switch",
     [](auto& v, auto& c, auto&) {
       c.scaleout_latency_s =
           read_quantity_in(v, parse_duration, "5 us", 0.0, 1.0, format_duration);
     },
     [](auto& c) { return format_duration(c.scaleout_latency_s); }},
    {"power", R, "power", "the whole node (rack for NVL72) at full load",
     [](auto& v, auto& c, auto&) {
       c.node_power_w = read_quantity_in(v, parse_power, "10.2 kW", 1.0, 1e9, format_power);
     },
     [](auto& c) { return format_power(c.node_power_w); }},
    {"model.memory_efficiency", R, "ratio in (0, 1]", "share of peak HBM bandwidth reached",
     [](auto& v, auto& c, auto&) { c.params.memory_efficiency = read_ratio(v); },
     [](auto& c) { return yaml_real(c.params.memory_efficiency); }},
    {"model.compute_efficiency", R, "ratio in (0, 1]", "share of the dense FLOP rate reached",
     [](auto& v, auto& c, auto&) { c.params.compute_efficiency = read_ratio(v); },
     [](auto& c) { return yaml_real(c.params.compute_efficiency); }},
    {"model.allreduce_alpha", R, "time", "latency of one ring all-reduce step",
     [](auto& v, auto& c, auto&) {
       c.params.allreduce_alpha_s =
           read_quantity_in(v, parse_duration, "5 us", 0.0, 1.0, format_duration);
     },
     [](auto& c) { return format_duration(c.params.allreduce_alpha_s); }},
    {"model.per_layer_overhead", R, "time", "fixed cost per layer per step",
     [](auto& v, auto& c, auto&) {
       c.params.per_layer_overhead_s =
           read_quantity_in(v, parse_duration, "10 us", 0.0, 1.0, format_duration);
     },
     [](auto& c) { return format_duration(c.params.per_layer_overhead_s); }},
    {"model.memory_reserve", R, "ratio in [0, 1)", "HBM kept free for activations and workspace",
     [](auto& v, auto& c, auto&) { c.params.memory_reserve = read_ratio(v); },
     [](auto& c) { return yaml_real(c.params.memory_reserve); }},
    // The serving framework: a named preset (models/gpu/serving_framework.cpp,
    // each figure sourced there), its figures overridable below it. Absent:
    // "none", no host time. The name is read first and sets both figures.
    {"framework.name", O, "vllm, sglang, tensorrt-llm or none",
     "the serving framework whose host time per iteration the model adds; sets both figures",
     [](auto& v, auto& c, auto&) {
       const std::string name = read_choice(v, "serving framework", models::gpu::framework_names());
       c.framework = *models::gpu::framework_preset(name);
     },
     [](auto& c) { return yaml_string(c.framework.name); },
     [](auto& c) { return !c.framework.is_none(); }},
    {"framework.per_iteration", O, "time",
     "host time per engine iteration (overrides the preset's)",
     [](auto& v, auto& c, auto&) {
       c.framework.per_iteration_s =
           read_quantity_in(v, parse_duration, "0.5 ms", 0.0, 1.0, format_duration);
     },
     [](auto& c) { return format_duration(c.framework.per_iteration_s); },
     [](auto& c) { return !c.framework.is_none(); }},
    {"framework.per_sequence", O, "time",
     "host time per sequence of the batch per iteration (overrides the preset's)",
     [](auto& v, auto& c, auto&) {
       c.framework.per_sequence_s =
           read_quantity_in(v, parse_duration, "5 us", 0.0, 1.0, format_duration);
     },
     [](auto& c) { return format_duration(c.framework.per_sequence_s); },
     [](auto& c) { return !c.framework.is_none(); }},
};

}  // namespace

std::span<const Key<ClusterSpec>> gpu_keys() {
  return kCluster;
}

}  // namespace wafersim::sim::schema
