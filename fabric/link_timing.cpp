#include "fabric/link_timing.hpp"

#include <stdexcept>

namespace wafersim::fabric {

FlowModel::FlowModel(const Mesh& mesh, const WaferSpec& spec)
    : hop_latency_(spec.hop_latency),
      link_bytes_per_cycle_(spec.link_bytes_per_cycle),
      reduce_hop_overhead_(spec.reduce_hop_overhead),
      mesh_(mesh),
      links_(mesh.link_count()) {}

std::vector<std::uint64_t> FlowModel::link_bytes_by_core() const {
  std::vector<std::uint64_t> out(mesh_.link_count(), 0);
  for (int y = 0; y < mesh_.height(); ++y)
    for (int x = 0; x < mesh_.width(); ++x)
      for (int d = 0; d < kDirections; ++d)
        out[mesh_.id(Coord{x, y}).value * kDirections + static_cast<std::uint32_t>(d)] =
            links_[mesh_.link(Coord{x, y}, static_cast<Direction>(d)).value].bytes;
  return out;
}

Timed FlowModel::send(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                      std::vector<Timed>* arrivals) {
  return traverse(links, bytes, ready, {}, Cycles{0}, arrivals);
}

Timed FlowModel::reduce_chain(std::span<const LinkId> links, Bytes bytes,
                              std::span<const Timed> node_ready) {
  if (node_ready.size() != links.size() + 1)
    throw std::invalid_argument("reduce_chain: one ready time per node");
  const Timed done =
      traverse(links, bytes, node_ready[0], node_ready, reduce_hop_overhead_, nullptr);
  // The last node adds its own contribution as the stream arrives, like every
  // node before it.
  return later(done.plus(Resource::hops, reduce_hop_overhead_), node_ready.back());
}

Timed FlowModel::traverse(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                          std::span<const Timed> node_ready, Cycles per_hop_extra,
                          std::vector<Timed>* arrivals) {
  if (arrivals) {
    arrivals->clear();
    arrivals->push_back(ready);
  }
  if (links.empty()) return ready;
  const Cycles ser = serialization(bytes);
  Timed head = ready;  // when the head may enter the next link
  Timed tail_arrival = ready;
  for (std::size_t k = 0; k < links.size(); ++k) {
    if (k > 0) {
      head = head.plus(Resource::hops, hop_latency_ + per_hop_extra);
      if (!node_ready.empty()) head = later(head, node_ready[k]);
    }
    LinkState& link = links_[links[k].value];
    head = head.not_before(Cycles{link.free_at}, Resource::contention);
    link.free_at = (head.at + ser).value;
    link.bytes += bytes.value;
    link.busy += ser.value;
    tail_arrival = head.plus(Resource::hops, hop_latency_).plus(Resource::serialization, ser);
    if (arrivals) arrivals->push_back(tail_arrival);
  }
  return tail_arrival;
}

}  // namespace wafersim::fabric
