// The strategies by kind and name: the one table that place(), scenarios
// (placement.strategy), placement files and `wafersim place --strategy` use.
// A new strategy is a file in strategies/ and a line here.
#include <array>

#include "sim/placement/strategies/strategies.hpp"
#include "sim/placement/strategy.hpp"

namespace wafersim::sim {
namespace {

struct Registered {
  StrategyKind kind;
  const char* name;
  std::unique_ptr<PlacementStrategy> (*make)();
};

constexpr std::array<Registered, 6> kStrategies = {{
    {StrategyKind::layer_rectangles, "layer-rectangles", strategies::layer_rectangles},
    {StrategyKind::serpentine, "serpentine", strategies::serpentine},
    {StrategyKind::short_path, "short-path", strategies::short_path},
    {StrategyKind::sram_balanced, "sram-balanced", strategies::sram_balanced},
    {StrategyKind::anneal, "anneal", strategies::anneal},
    {StrategyKind::whole_region, "whole-region", strategies::whole_region},
}};

const Registered& registered(StrategyKind kind) {
  for (const Registered& r : kStrategies)
    if (r.kind == kind) return r;
  throw std::invalid_argument("a placement strategy without a registry entry");
}

}  // namespace

const char* strategy_name(StrategyKind kind) {
  return registered(kind).name;
}

std::optional<StrategyKind> parse_strategy(const std::string& name) {
  for (const Registered& r : kStrategies)
    if (name == r.name) return r.kind;
  return std::nullopt;
}

std::vector<std::string> placement_strategies() {
  std::vector<std::string> names;
  for (const Registered& r : kStrategies) names.emplace_back(r.name);
  return names;
}

std::unique_ptr<PlacementStrategy> make_strategy(StrategyKind kind) {
  return registered(kind).make();
}

}  // namespace wafersim::sim
