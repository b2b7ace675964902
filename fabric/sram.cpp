#include "fabric/sram.hpp"

#include <algorithm>
#include <numeric>

namespace wafersim::fabric {

const char* sram_use_name(SramUse u) {
  switch (u) {
    case SramUse::weights:
      return "weights";
    case SramUse::kv_cache:
      return "KV cache";
    case SramUse::activations:
      return "activations";
  }
  return "?";
}

SramMap::SramMap(const Mesh& mesh, Bytes capacity_per_core, const DefectMap* defects)
    : mesh_(mesh),
      defects_(defects),
      has_dead_(defects && defects->dead_count() > 0),
      capacity_(capacity_per_core),
      used_(mesh.core_count(), 0) {}

Bytes SramMap::total_used() const {
  return Bytes{std::accumulate(used_.begin(), used_.end(), std::uint64_t{0})};
}

std::size_t SramMap::cores_used() const {
  return static_cast<std::size_t>(
      std::count_if(used_.begin(), used_.end(), [](std::uint64_t b) { return b > 0; }));
}

void SramMap::allocate_checked(CoreId core, Bytes bytes, SramUse use, const std::string& what) {
  std::uint64_t& u = used_[core.value];
  if (bytes.value > 0 && has_dead_ && defects_->dead(mesh_.coord(core))) {
    const Coord c = mesh_.coord(core);
    throw FitError("core (" + std::to_string(c.x) + "," + std::to_string(c.y) + ") cannot hold " +
                   std::to_string(bytes.value) + " B of " + what +
                   ": it is dead (hardware.defects) and has no usable SRAM");
  }
  if (u + bytes.value > capacity_.value) {
    const Coord c = mesh_.coord(core);
    throw FitError("core (" + std::to_string(c.x) + "," + std::to_string(c.y) + ") cannot hold " +
                   std::to_string(bytes.value) + " B of " + what + ": it has " +
                   std::to_string(capacity_.value) + " B of SRAM and " + std::to_string(u) +
                   " B are already in use");
  }
  u += bytes.value;
  by_use_[static_cast<int>(use)] += bytes.value;
}

}  // namespace wafersim::fabric
