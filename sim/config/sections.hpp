// The sections of a scenario, each a schema table (schema_table.hpp) with the
// readers around it, and the resolved-scenario emitter. Private to sim/config.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "fabric/wafer_spec.hpp"
#include "models/gpu/gpu_spec.hpp"
#include "models/gpu/serving.hpp"
#include "models/model_config.hpp"
#include "sim/config/scenario.hpp"
#include "sim/config/schema_table.hpp"

namespace wafersim::sim::schema {

// Presets and their overrides (hardware_schema.cpp, model_schema.cpp, gpu_schema.cpp).
std::span<const Key<fabric::WaferSpec>> hardware_keys();
std::span<const Key<models::ModelConfig>> model_keys();
std::span<const Key<models::gpu::ClusterSpec>> gpu_keys();

// placement: (placement_schema.cpp).
std::span<const Key<PlacementOptions>> placement_keys();
void read_placement(const Value& v, PlacementOptions& placement);

// weights: (weights_schema.cpp). The default when the key is absent, and the
// section read on top of it, for a model read from `model_checkpoint` (a
// folder; empty for a preset or inline model).
std::span<const Key<WeightsOptions>> weights_keys();
WeightsOptions default_weights(const std::string& model_checkpoint);
WeightsOptions read_weights(const Value& v, const std::string& model_checkpoint);
// The folder the checkpoint's other files (tokenizer.json) are looked for in:
// the weights' folder, else the model's; empty when there is none.
std::string checkpoint_files_folder(const WeightsOptions& w, const std::string& model_checkpoint);

// workload: and outputs: (workload_schema.cpp). `checkpoint` is the folder a
// prompt's tokenizer.json is looked for in by default ("" = none).
std::span<const Key<Workload>> workload_keys();
std::span<const Key<Outputs>> outputs_keys();
void read_workload(const Value& v, const models::ModelConfig& model, const std::string& checkpoint,
                   Workload& w);
void read_outputs(const Value& v, Outputs& outputs);

// compare_with, gpu_parallelism, speculative_decoding, serving (comparison_schema.cpp).
std::span<const Key<GpuComparison>> gpu_parallelism_keys();
std::span<const Key<SpeculativeOptions>> speculative_keys();
std::span<const Key<models::gpu::ServingOverhead>> serving_keys();
std::vector<models::gpu::ClusterSpec> read_compare_with(const Value& list,
                                                        const std::filesystem::path& preset_dir);
std::vector<models::gpu::ClusterSpec> default_gpu_systems(const std::filesystem::path& preset_dir);
void read_gpu_parallelism(const Value& v, GpuComparison& gpu);
SpeculativeOptions read_speculative(const Value& v, const std::filesystem::path& preset_dir,
                                    const models::ModelConfig& target);
models::gpu::ServingOverhead read_serving(const Value& v);
// compare_with's value: [] or a block with every system inline.
std::string write_compare_with(const std::vector<models::gpu::ClusterSpec>& systems);

// traffic: (traffic_schema.cpp): open-loop arrivals, a trace (read and
// checked now, its path made absolute) or closed-loop sessions.
std::span<const Key<serving::TrafficSpec>> traffic_keys();
serving::TrafficSpec read_traffic(const Value& v);
// deployment: and slo: (serving_schema.cpp).
std::span<const Key<serving::DeploymentSpec>> deployment_keys();
std::span<const Key<serving::Slo>> slo_keys();
serving::DeploymentSpec read_deployment(const Value& v);
serving::Slo read_slo(const Value& v);

// The top level of a scenario (scenario_schema.cpp): name, hardware, model,
// precision, wafers and the sections above.
std::span<const Key<Scenario>> scenario_keys();

// The resolved scenario, as YAML that load_scenario() reads back to an equal
// Scenario (scenario_schema.cpp).
std::string emit_resolved(const Scenario& s);

}  // namespace wafersim::sim::schema
