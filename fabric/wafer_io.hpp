// The wafers' edge I/O: each wafer has one egress and one ingress port of the
// preset's I/O bandwidth (e.g. CS-3: 12 x 100 GbE), with a fixed latency. A
// transfer from wafer a to wafer b reserves a's egress and b's ingress for
// bytes / bandwidth, so concurrent transfers through one wafer's I/O
// serialize. All cycles spent here are charged to Resource::io.
#pragma once

#include <vector>

#include "fabric/critical_path.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

class WaferIo {
 public:
  WaferIo(const WaferSpec& spec, int wafers);

  int wafers() const { return static_cast<int>(egress_free_.size()); }
  Cycles latency() const { return latency_; }
  // Cycles the port is occupied by `bytes`.
  Cycles occupancy(Bytes bytes) const;

  // `bytes` from wafer `from` to wafer `to`, ready at `ready`. Returns when
  // the last byte has arrived at `to`'s edge.
  Timed transfer(int from, int to, Bytes bytes, const Timed& ready);
  // Bytes host -> wafer (prompt ids) or wafer -> host share the same ports.
  std::uint64_t egress_bytes(int wafer) const {
    return egress_bytes_[static_cast<std::size_t>(wafer)];
  }
  std::uint64_t ingress_bytes(int wafer) const {
    return ingress_bytes_[static_cast<std::size_t>(wafer)];
  }

 private:
  double bytes_per_cycle_;
  Cycles latency_;
  std::vector<std::uint64_t> egress_free_, ingress_free_;
  std::vector<std::uint64_t> egress_bytes_, ingress_bytes_;
};

}  // namespace wafersim::fabric
