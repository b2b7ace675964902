#include "sim/engine/system.hpp"

#include <algorithm>
#include <optional>

#include "sim/config/placement_file.hpp"

namespace wafersim::sim {

std::unique_ptr<PlacedSystem> place_system(const Scenario& sc,
                                           const std::function<void(int, int)>& progress) {
  check_wafer_supports(sc.model);
  auto sys = std::make_unique<PlacedSystem>();
  const int bits = models::dtype_bits(sc.precision);
  PlacementRequest req;
  static_cast<PlacementChoices&>(req) = sc.placement;
  req.context_tokens =
      static_cast<int>(sc.workload.prompt_ids.size()) + sc.workload.generate_tokens;
  req.users = sc.workload.users;
  req.weight_bits = bits;
  req.progress = progress;
  if (!sc.placement.file.empty()) {
    // A placement file fixes the wafers and every rectangle; it is checked
    // on reading, and the allocator has the final word on SRAM.
    sys->placement = read_placement_file(sc.placement.file, sc.model, sc.hardware, req);
    for (int w = 0; w < sys->placement.wafers; ++w) {
      sys->wafers.push_back(std::make_unique<fabric::Fabric>(sc.hardware));
      sys->wafer_ptrs.push_back(sys->wafers.back().get());
    }
    allocate_placement(sc.model, sys->placement, sys->wafer_ptrs, req);
    sys->program = lower(sc.model, sys->placement);
    return sys;
  }
  int n = sc.wafers;
  std::optional<Placement> planned;
  if (sc.wafers_auto) {
    // Plan (no allocation) from the fewest wafers whose SRAM could hold the
    // weights upward; the first plan that fits wins, and is the placement
    // (planning is deterministic: planning it again gave the same).
    const std::uint64_t bytes =
        ceil_div(sc.model.parameter_count() * static_cast<std::uint64_t>(bits), 8);
    n = static_cast<int>(
        std::max<std::uint64_t>(1, ceil_div(bytes, sc.hardware.sram_capacity().value)));
    for (;; ++n) {
      try {
        planned = plan_placement(sc.model, sc.hardware, n, req);
        break;
      } catch (const fabric::FitError&) {
        if (n >= sc.model.num_layers) throw;  // one layer per wafer did not fit either
      }
    }
  }
  for (int w = 0; w < n; ++w) {
    sys->wafers.push_back(std::make_unique<fabric::Fabric>(sc.hardware));
    sys->wafer_ptrs.push_back(sys->wafers.back().get());
  }
  sys->placement = planned ? std::move(*planned) : plan_placement(sc.model, sc.hardware, n, req);
  allocate_placement(sc.model, sys->placement, sys->wafer_ptrs, req);
  sys->program = lower(sc.model, sys->placement);
  return sys;
}

}  // namespace wafersim::sim
