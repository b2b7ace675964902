// The serving framework that drives a GPU replica (vLLM, SGLang,
// TensorRT-LLM): the host-side time of one engine iteration that the GPU
// does not hide (scheduling the batch, preparing its inputs, launching the
// forward pass, processing the sampled tokens). The cluster model adds it to
// every decode step and every serving iteration (cluster_model.hpp), once per
// forward pass of the whole replica. Plain data; the named presets and their
// sources are in serving_framework.cpp (docs/modelling.md, "GPU baselines").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wafersim::models::gpu {

struct ServingFramework {
  // The preset the figures start from: "none" (the bare hardware model),
  // "vllm", "sglang" or "tensorrt-llm"; a scenario may override the figures.
  std::string name = "none";
  double per_iteration_s = 0.0;  // fixed host time per engine iteration
  double per_sequence_s = 0.0;   // host time per sequence of the batch, per iteration

  // The host time of one iteration over `sequences` sequences.
  double iteration_s(int sequences) const { return per_iteration_s + per_sequence_s * sequences; }
  bool is_none() const { return name == "none" && per_iteration_s == 0.0 && per_sequence_s == 0.0; }
};

// The named presets, "none" first.
std::vector<std::string> framework_names();

// The preset called `name`; nullopt for a name that is not one.
std::optional<ServingFramework> framework_preset(std::string_view name);

}  // namespace wafersim::models::gpu
