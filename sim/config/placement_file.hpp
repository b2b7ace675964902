// Placement files: a placement written out as YAML (`wafersim place
// --write-placement FILE`) so that an architect can read and hand-edit it, and
// read back (`placement: {file: FILE}` or `--placement FILE`) instead of
// running a strategy. Every rectangle is checked on the way in: inside the
// mesh, no two overlapping, no dead core, shapes that suit the model, and
// enough SRAM on every core; an error names the file, line and column.
//
// Layout of the file (see docs/scenario-schema.md):
//   placement_file: 1
//   model: llama-3.1-8b            # checked against the scenario's model
//   mesh: {width: 762, height: 1176}
//   wafers: 1
//   strategy: serpentine           # what produced it (informational)
//   layers:
//     - layer: 0
//       wafer: 0
//       region: [x0, y0, width, height]           # the stage's block
//       qkv: {rect: [x0, y0, width, height], reduction: chain}
//       attention: {rect: [...], segment_length: 9, segments_per_column: 1, reduction: chain}
//       o: {...}
//       gate_up: {...}             # SwiGLU (llama family); gpt2 has `up` instead
//       down: {...}
//       # a mixture of experts (mixtral, qwen3_moe) has, instead of gate_up and down:
//       router: {...}
//       experts:                   # one per expert, in order
//         - expert: 0
//           gate_up: {...}
//           down: {...}
//     - layer: 1                   # a layer of the whole-region dataflow:
//       wafer: 0
//       region: [x0, y0, width, height]
//       dataflow: whole-region     # every matrix and the KV cache span the region
//       qkv: {reduction: two-level}
//       attention: {reduction: two-level}
//       ...                        # the same keys, each with its reduction only
//   head:
//     wafer: 0
//     region: [...]
//     lm_head: {rect: [...], reduction: chain}
//     embedding: {rect: [...], reduction: chain}  # absent when tied to lm_head
//     position_embedding: {...}                   # gpt2's learned positions only
// A matrix's rect is its P x Q tile grid (P = height rows of cores, Q = width
// columns); what each core holds follows from the model (sim/placement/placement.hpp).
// Norm gains and biases have no rectangle: they sit on their matrices' roots.
// Consecutive whole-region layers with the same region are a layer group:
// they share its cores and SRAM (sim/placement/stage_planner.hpp).
// Keys appear only where the model has the part; the version stays 1 (a
// llama-family file has exactly the keys it always had).
#pragma once

#include <filesystem>
#include <string>

#include "fabric/wafer_spec.hpp"
#include "models/model_config.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// The placement as a placement file.
std::string placement_file_yaml(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                                const Placement& placement);

// Reads and checks a placement file for `model` on wafers of `spec`, with the
// context and users of `request` (the KV slots per core follow from them).
// Throws ScenarioError (file:line:column) for anything wrong in the file,
// including a core whose bytes (counted as allocate_placement would
// allocate them) would exceed its SRAM. Also strict: no key twice, a known
// strategy name, stage regions that hold their matrices and do not overlap,
// and `wafers` (the scenario's; 0 for any, as with wafers: auto) equal to the
// file's.
Placement read_placement_file(const std::filesystem::path& file, const models::ModelConfig& model,
                              const fabric::WaferSpec& spec, const PlacementRequest& request,
                              int wafers = 0);

}  // namespace wafersim::sim
