// Cycle-level wavelet (flit) router model, for calibrating the flow level on
// small meshes (up to about 64x64). Every router has 5 ports (E, W, S, N and
// the core ramp); every input port has one FIFO per color (virtual channel) of
// `buffer_depth` wavelets; a link carries at most one wavelet per cycle per
// direction; credit-based backpressure; dimension-ordered (X then Y) routing;
// a line multicast is forwarded and delivered to the core in the same cycle,
// as the hardware does (Cerebras SDK: a router can send a wavelet to several
// outputs at once). A wavelet is link_bytes_per_cycle bytes (32 bits).
//
// Pipeline convention (makes an uncontended transfer agree exactly with the
// flow level's hops * hop_latency + ser):
//  - a message ready at cycle t puts wavelet i into its source router's ramp
//    buffer at cycle t+i at the earliest (the ramp carries one per cycle), and
//    the router may switch it onto a link in that same cycle;
//  - a wavelet switched onto a link in cycle c is in the next router's input
//    buffer, switchable, at cycle c + hop_latency;
//  - a wavelet switched onto the core ramp in cycle c has arrived at c + 1.
// So the tail of a B-byte message over h hops arrives at
// t + h * hop_latency + ceil(B / link_bytes_per_cycle).
//
// Switch allocation: each cycle a router grants each output port at most one
// wavelet and each input port at most one (a multicast wavelet takes two
// outputs at once), in round-robin order over (input port, color); the first
// winner of a cycle goes to the back of the order for the next. Within a
// color a packet holds an output from its head to its tail (wormhole), so
// messages on one color never interleave on a link; different colors
// interleave wavelet by wavelet. Credits return to the upstream router one
// cycle after a wavelet leaves the buffer. The core always accepts wavelets.
//
// State is flat arrays indexed by router, port and color (structure of
// arrays); no object per router.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/mesh.hpp"
#include "fabric/traffic.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

struct WaveletConfig {
  // Wavelets per input FIFO (per port and color). Assumption: no public
  // figure; 4 covers the 2-cycle credit round trip at hop latency 1.
  int buffer_depth = 4;
  // Stop after this many cycles even if messages are still undelivered.
  std::uint64_t max_cycles = 10'000'000;
};

// Counters of one run, for physics checks and throughput.
struct WaveletStats {
  std::uint64_t cycles = 0;         // cycles simulated
  std::uint64_t router_cycles = 0;  // cycles * routers
  std::uint64_t wavelets_injected = 0;
  std::uint64_t wavelets_ejected = 0;  // a multicast wavelet counts once per receiver
  std::uint64_t link_traversals = 0;
  // Physics violations; both stay 0 unless the model is broken.
  std::uint64_t link_overuse = 0;     // a link used twice in one cycle
  std::uint64_t buffer_overflow = 0;  // a wavelet arrived at a full FIFO
  int max_buffer_occupancy = 0;
  std::vector<std::uint64_t> link_wavelets;      // per LinkId: wavelets carried
  std::vector<std::uint32_t> ejected_per_cycle;  // wavelets delivered to cores, per cycle
  bool complete = false;                         // every message arrived
};

// Runs `traffic` on a cycle-level model of `mesh` with the router parameters
// of `spec` (hop_latency, link_bytes_per_cycle, virtual_channels).
TrafficResult run_wavelet(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic,
                          const WaveletConfig& config = {}, WaveletStats* stats = nullptr);

}  // namespace wafersim::fabric
