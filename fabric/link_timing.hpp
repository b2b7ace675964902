// Flow-level link model. A message is one transfer along its route; each link
// keeps a reservation (the cycle it is next free) and counters. Timing rule,
// for a message of B bytes injected when ready at t over links L0..Ln-1:
//   ser   = ceil(B / link_bytes_per_cycle)
//   s0    = max(t, free[L0])                      (waiting here is contention)
//   sk    = max(s(k-1) + hop_latency + extra, node_ready[k], free[Lk])
//   link Lk is reserved for [sk, sk + ser)
//   arrival at node k+1 (tail) = sk + hop_latency + ser
// so an uncontended message arrives after hops * hop_latency + ser cycles
// (virtual cut-through: the head moves on while the tail still streams), and
// two messages sharing a link serialize on it. `extra` is the per-hop cost
// when each node on the path adds its own contribution before forwarding
// (chain reduction); `node_ready[k]` is when node k's contribution is ready.
#pragma once

#include <span>
#include <vector>

#include "fabric/critical_path.hpp"
#include "fabric/mesh.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

class FlowModel {
 public:
  FlowModel(const Mesh& mesh, const WaferSpec& spec);

  Cycles serialization(Bytes bytes) const {
    return Cycles{ceil_div(bytes.value, link_bytes_per_cycle_.value)};
  }

  // Sends `bytes` along `links` (a connected path) starting when `ready`.
  // Returns the time the whole message has arrived at the path's end. When
  // `arrivals` is given it receives the arrival time at every node of the path
  // (size links.size() + 1; element 0 is `ready`): a multicast along the path.
  Timed send(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
             std::vector<Timed>* arrivals = nullptr);

  // Chain reduction along `links`: node k (k = 0 is the first sender) adds its
  // contribution, ready at node_ready[k], to the stream and forwards it. The
  // last node's own contribution is node_ready[links.size()]. Returns when the
  // reduced message is complete at the last node.
  Timed reduce_chain(std::span<const LinkId> links, Bytes bytes, std::span<const Timed> node_ready);

  Cycles hop_latency() const { return hop_latency_; }
  Cycles reduce_hop_overhead() const { return reduce_hop_overhead_; }

  // Per-link counters.
  std::uint64_t link_bytes(LinkId l) const { return links_[l.value].bytes; }
  std::uint64_t link_busy_cycles(LinkId l) const { return links_[l.value].busy; }
  Cycles link_free_at(LinkId l) const { return Cycles{links_[l.value].free_at}; }
  // Bytes carried by every link, as [y][x][direction] (E, W, S, N).
  std::vector<std::uint64_t> link_bytes_by_core() const;

 private:
  Timed traverse(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                 std::span<const Timed> node_ready, Cycles per_hop_extra,
                 std::vector<Timed>* arrivals);

  Cycles hop_latency_;
  Bytes link_bytes_per_cycle_;
  Cycles reduce_hop_overhead_;
  // One record per link, so a hop touches one cache line.
  struct LinkState {
    std::uint64_t free_at = 0;  // reserved until this cycle
    std::uint64_t bytes = 0;    // bytes carried
    std::uint64_t busy = 0;     // cycles reserved
  };
  const Mesh& mesh_;
  std::vector<LinkState> links_;
};

}  // namespace wafersim::fabric
