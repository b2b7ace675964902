// The live state of one wafer during a run: its geometry, SRAM map, link
// reservations and core timelines, built from a validated WaferSpec.
#pragma once

#include <memory>
#include <mutex>

#include "fabric/connectivity.hpp"
#include "fabric/core_cost.hpp"
#include "fabric/defects.hpp"
#include "fabric/link_timing.hpp"
#include "fabric/mesh.hpp"
#include "fabric/redundancy.hpp"
#include "fabric/routing.hpp"
#include "fabric/sram.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

class Fabric {
 public:
  explicit Fabric(const WaferSpec& spec)
      : spec_(spec),
        mesh_(spec.mesh_width, spec.mesh_height),
        defects_(spec_),
        sram_(mesh_, spec.sram_per_core, &defects_),
        flow_(mesh_, spec_),
        cores_(mesh_),
        cost_(spec_),
        router_(mesh_, defects_) {
    if (spec_.redundancy.enabled()) {
      // The logical mesh is whole (defects_ above threw otherwise); repaired
      // links take their detours' extra cycles.
      repair_ = std::make_unique<Repair>(spec_);
      flow_.set_link_extra_cycles(repair_->link_extra_cycles(mesh_));
      // ... and share the bandwidth of the links their detours borrow.
      Repair::BorrowedLinks borrowed = repair_->borrowed_links(mesh_);
      flow_.set_link_borrowed(std::move(borrowed.first), std::move(borrowed.links));
    }
  }
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const WaferSpec& spec() const { return spec_; }
  const Mesh& mesh() const { return mesh_; }
  const DefectMap& defects() const { return defects_; }
  SramMap& sram() { return sram_; }
  const SramMap& sram() const { return sram_; }
  FlowModel& flow() { return flow_; }
  const FlowModel& flow() const { return flow_; }
  CoreTimeline& cores() { return cores_; }
  const CoreTimeline& cores() const { return cores_; }
  const CoreCostModel& cost() const { return cost_; }
  // The physical array's repair (fabric/redundancy.hpp); null without spares.
  const Repair* repair() const { return repair_.get(); }
  // The links from src to dst around dead routers (XY when clear, then YX,
  // then a shortest detour), appended to `out`; fabric/routing.hpp.
  void route(Coord src, Coord dst, std::vector<LinkId>& out) { router_.route(src, dst, out); }
  // Which live cores reach one another around the dead ones
  // (fabric/connectivity.hpp), built on first use.
  const LiveComponents& parts() const {
    std::call_once(parts_once_, [this] { parts_ = std::make_unique<LiveComponents>(defects_); });
    return *parts_;
  }
  // Where a transfer from (east) or to (west) another wafer crosses this
  // wafer's edge for the core `toward`: the edge core in its row, or where
  // that one is dead or cut off, the nearest edge core that reaches it
  // (LiveComponents::port; throws RouteError when none does).
  Coord edge_port(bool east, Coord toward) const {
    const int x = east ? mesh_.width() - 1 : 0;
    if (defects_.dead_count() == 0) return {x, toward.y};
    return parts().port(x, toward);
  }

 private:
  WaferSpec spec_;
  Mesh mesh_;
  DefectMap defects_;
  SramMap sram_;
  FlowModel flow_;
  CoreTimeline cores_;
  CoreCostModel cost_;
  DetourRouter router_;
  std::unique_ptr<Repair> repair_;
  mutable std::once_flag parts_once_;
  mutable std::unique_ptr<LiveComponents> parts_;
};

}  // namespace wafersim::fabric
