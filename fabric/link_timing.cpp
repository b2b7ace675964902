#include "fabric/link_timing.hpp"

#include <stdexcept>

namespace wafersim::fabric {

FlowModel::FlowModel(const Mesh& mesh, const WaferSpec& spec)
    : hop_latency_(spec.hop_latency),
      link_bytes_per_cycle_(spec.link_bytes_per_cycle),
      reduce_hop_overhead_(spec.reduce_hop_overhead),
      free_at_(mesh.link_count(), 0),
      bytes_(mesh.link_count(), 0),
      busy_(mesh.link_count(), 0) {}

Timed FlowModel::send(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                      std::vector<Timed>* arrivals) {
  return traverse(links, bytes, ready, {}, Cycles{0}, arrivals);
}

Timed FlowModel::reduce_chain(std::span<const LinkId> links, Bytes bytes, std::span<const Timed> node_ready) {
  if (node_ready.size() != links.size() + 1) throw std::invalid_argument("reduce_chain: one ready time per node");
  const Timed done = traverse(links, bytes, node_ready[0], node_ready, reduce_hop_overhead_, nullptr);
  // The last node adds its own contribution as the stream arrives, like every
  // node before it.
  return later(done.plus(Resource::hops, reduce_hop_overhead_), node_ready.back());
}

Timed FlowModel::traverse(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                          std::span<const Timed> node_ready, Cycles per_hop_extra, std::vector<Timed>* arrivals) {
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
    const std::uint32_t l = links[k].value;
    head = head.not_before(Cycles{free_at_[l]}, Resource::contention);
    free_at_[l] = (head.at + ser).value;
    bytes_[l] += bytes.value;
    busy_[l] += ser.value;
    tail_arrival = head.plus(Resource::hops, hop_latency_).plus(Resource::serialization, ser);
    if (arrivals) arrivals->push_back(tail_arrival);
  }
  return tail_arrival;
}

}  // namespace wafersim::fabric
