// What the placement and placement-file tests place: tiny-llama with eight
// layers (so that grids and paths have room to differ), and a request for a
// strategy by name with a short anneal.
#pragma once

#include <string>

#include "sim/placement/placement.hpp"
#include "support/presets.hpp"

namespace wafersim::testing {

inline models::ModelConfig eight_layers() {
  models::ModelConfig m = preset_model("tiny-llama");
  m.num_layers = 8;
  return m;
}

inline sim::PlacementRequest request(const std::string& strategy, int context = 24) {
  sim::PlacementRequest req;
  req.strategy = *sim::parse_strategy(strategy);
  req.context_tokens = context;
  req.anneal.iterations = 20000;
  return req;
}

}  // namespace wafersim::testing
