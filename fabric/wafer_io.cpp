#include "fabric/wafer_io.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace wafersim::fabric {

WaferIo::WaferIo(const WaferSpec& spec, int wafers)
    : bytes_per_cycle_(spec.io_bandwidth_bytes_per_s / spec.clock_hz),
      latency_(static_cast<std::uint64_t>(std::ceil(spec.io_latency_s * spec.clock_hz))),
      egress_free_(static_cast<std::size_t>(wafers), 0),
      ingress_free_(static_cast<std::size_t>(wafers), 0),
      egress_bytes_(static_cast<std::size_t>(wafers), 0),
      ingress_bytes_(static_cast<std::size_t>(wafers), 0) {
  if (wafers < 1) throw std::invalid_argument("a system has at least one wafer");
}

Cycles WaferIo::occupancy(Bytes bytes) const {
  return Cycles{
      static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes.value) / bytes_per_cycle_))};
}

Timed WaferIo::transfer(int from, int to, Bytes bytes, const Timed& ready) {
  const auto f = static_cast<std::size_t>(from), t = static_cast<std::size_t>(to);
  const Cycles busy = occupancy(bytes);
  // The message enters the egress port when both ports can take it
  // (cut-through: the ingress streams while the egress sends).
  Timed start = ready.not_before(Cycles{std::max(egress_free_[f], ingress_free_[t])}, Resource::io);
  egress_free_[f] = ingress_free_[t] = (start.at + busy).value;
  egress_bytes_[f] += bytes.value;
  ingress_bytes_[t] += bytes.value;
  return start.plus(Resource::io, latency_ + busy);
}

}  // namespace wafersim::fabric
