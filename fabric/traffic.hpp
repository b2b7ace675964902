// A traffic description that both fabric fidelities accept: a list of
// messages (unicast, or multicast along a straight line), each with a ready
// cycle and, optionally, dependencies on other messages' arrivals. The flow
// level runs it through FlowModel::send and FlowModel::stream in ready-time
// order (run_flow); the wavelet level runs it router by router, cycle by
// cycle (fabric/wavelet.hpp).
// The same builders express the collectives of fabric/collectives.hpp, so a
// primitive can be timed at both levels from one description.
//
// Dependencies:
//  - `after`: whole-message. The message's ready cycle is the fold
//      r = ready; for each (ref, delay) in after: r = max(r, arrival(ref)) + delay
//    (a core waits for data, then computes or adds for `delay` cycles).
//  - `stream_from`: per wavelet, for a reduction chain. Wavelet i of this
//    message may leave its source `stream_delay` cycles after wavelet i of the
//    upstream message (a unicast ending at this message's source) reached the
//    source's router; at flow level the same, wavelet run by wavelet run
//    (FlowModel::stream from the cycles the upstream wavelets were delivered,
//    each stream_delay later and not before `ready`), FlowModel::reduce_chain's
//    rule; under LinkSharing::exclusive the message is one contiguous run
//    from max(ready, head arrival of the upstream message + stream_delay).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "fabric/collectives.hpp"
#include "fabric/link_timing.hpp"
#include "fabric/mesh.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

inline constexpr std::uint32_t kNoMessage = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

// The arrival of `message` at its `receiver`-th destination: 0 for a unicast;
// for a line multicast, receiver j is the core j+1 hops from the source.
struct MessageRef {
  std::uint32_t message = 0;
  std::uint32_t receiver = 0;
};

// A whole-message dependency: wait for `ref`, then spend `delay` cycles.
struct After {
  MessageRef ref;
  Cycles delay{0};
};

struct Message {
  Coord src;
  Coord dst;  // unicast destination, or the last core of a line multicast
  Bytes bytes{0};
  Cycles ready{0};
  // Deliver to every core on the straight line after `src` up to `dst`
  // (src and dst share a row or a column), forwarding and delivering in the
  // same cycle as the router does.
  bool multicast = false;
  // A multicast that also goes the other way from `src`, to the `back_hops`
  // cores behind it: one injection, the source's router fanning each wavelet
  // out to both directions (a color routed from the ramp to two ports).
  std::uint32_t back_hops = 0;
  std::uint8_t color = 0;         // virtual channel
  std::uint32_t after_first = 0;  // into Traffic::after()
  std::uint32_t after_count = 0;
  std::uint32_t stream_from = kNoMessage;
  Cycles stream_delay{0};
};

// A node's readiness for a collective: `at`, or (when `after` is set) the
// fold of `after` as for a message.
struct NodeReady {
  Cycles at{0};
  bool has_after = false;
  After after;
};

class Traffic {
 public:
  // Appends a message; `after` lists its whole-message dependencies (which
  // must refer to earlier messages). Returns its index.
  std::uint32_t add(const Message& m, std::span<const After> after = {});
  std::uint32_t unicast(Coord src, Coord dst, Bytes bytes, Cycles ready, std::uint8_t color = 0);
  // multicast_line: from line.at(0) to line.at(1 .. length-1), after
  // `after` (as add()).
  std::uint32_t multicast(const Line& line, Bytes bytes, Cycles ready, std::uint8_t color = 0,
                          std::span<const After> after = {});
  // From line.at(root) to both ends of `line` at once (fanned out by the
  // root's router): receivers 0 .. length-root-2 are line.at(root+1 ..), the
  // rest line.at(root-1), line.at(root-2), ... (a root at an end: a plain
  // multicast).
  std::uint32_t multicast_both_ways(const Line& line, int root, Bytes bytes, Cycles ready,
                                    std::uint8_t color = 0, std::span<const After> after = {});
  // reduce_line: one partial per core of `line` summed into line.at(0), with
  // `reduce_hop_overhead` cycles per add (WaferSpec::reduce_hop_overhead).
  // Returns a zero-byte marker message at line.at(0) whose arrival is when the
  // sum is complete there. `ready` has one entry per core of the line.
  // K-tree (`groups` K, 0 = default) and ring as reduce_line times them: the
  // k-tree into its root, then moved to line.at(0); the ring's reduce-scatter
  // and all-gather, done when line.at(0) has every chunk.
  std::uint32_t reduction(ReductionScheme scheme, const Line& line, Bytes bytes,
                          Cycles reduce_hop_overhead, std::span<const NodeReady> ready,
                          std::uint8_t color = 0, int groups = 0);

  // all_reduce_line, every scheme: chain, tree and two-level reduce into
  // line.at(0) and multicast the sum back along the line; the k-tree reduces
  // into its root and multicasts from there to both ends; the ring's
  // reduce-scatter and all-gather leave every chunk's sum on every core.
  // Returns, per core of the line, the arrival at which it has the sum (a
  // multicast's receiver, or a zero-byte marker at the core).
  std::vector<MessageRef> all_reduce(ReductionScheme scheme, const Line& line, Bytes bytes,
                                     Cycles reduce_hop_overhead, std::span<const NodeReady> ready,
                                     std::uint8_t color = 0, int groups = 0);

  const std::vector<Message>& messages() const { return messages_; }
  std::span<const After> after(const Message& m) const {
    return {after_.data() + m.after_first, m.after_count};
  }
  std::size_t size() const { return messages_.size(); }
  // Destinations of message m (1 for a unicast, hops for a multicast, both
  // ways for one that goes both ways).
  static std::uint32_t receivers(const Message& m) {
    return m.multicast ? static_cast<std::uint32_t>(manhattan(m.src, m.dst)) + m.back_hops : 1u;
  }
  // The direction of a multicast (from src toward dst).
  static Direction heading(const Message& m) {
    return m.dst.x > m.src.x   ? Direction::east
           : m.dst.x < m.src.x ? Direction::west
           : m.dst.y > m.src.y ? Direction::south
                               : Direction::north;
  }
  // Which receiver of multicast m the core `at` (on its line, not its
  // source) is.
  static std::uint32_t receiver_at(const Message& m, Coord at) {
    const auto hops = static_cast<std::uint32_t>(manhattan(m.src, at));
    const bool ahead = manhattan(at, m.dst) < manhattan(m.src, m.dst) || at == m.dst;
    return ahead ? hops - 1
                 : static_cast<std::uint32_t>(manhattan(m.src, m.dst)) + hops - 1;
  }
  // The highest color used plus one.
  int colors() const { return colors_; }

 private:
  // The messages of a reduction along `line`, and per core what its sum
  // waits for: into line.at(0) (reduction()), or `in_place` as the
  // all-reduce needs it (a k-tree's sum left at its root; a ring's, per core,
  // every chunk's arrival there).
  std::vector<std::vector<After>> describe_reduction(ReductionScheme scheme, const Line& line,
                                                     Bytes bytes, Cycles reduce_hop_overhead,
                                                     std::span<const NodeReady> ready,
                                                     std::uint8_t color, int groups,
                                                     bool in_place);
  // A zero-byte message from `at` to itself, arriving once `after` has.
  std::uint32_t marker(Coord at, Cycles ready, std::uint8_t color, std::span<const After> after);

  std::vector<Message> messages_;
  std::vector<After> after_;
  int colors_ = 1;
};

// A GEMV-shaped phase over a rectangle of cores (the mesh GEMV of the
// WaferLLM line of work): the top core of every column multicasts its input
// chunk down the column; every core computes for `compute` cycles once it has
// its chunk; every row reduces its partials into the row's first (west) core.
struct GemvPhase {
  Rect region;
  Bytes chunk_bytes{0};    // input vector chunk per column
  Bytes partial_bytes{0};  // partial sums per row
  Cycles start{0};
  Cycles compute{0};
  ReductionScheme scheme = ReductionScheme::chain;
  std::uint8_t multicast_color = 0;
  std::uint8_t reduce_color = 1;
};
// Appends the phase; returns the rows' completion markers (the phase is done
// when the last has arrived).
std::vector<std::uint32_t> add_gemv_phase(Traffic& traffic, const GemvPhase& phase,
                                          Cycles reduce_hop_overhead);

// When every message started and arrived. Arrivals are the cycle the whole
// message is at the receiver (the flow model's tail arrival); kNever when it
// never arrived (a wavelet run cut short).
struct TrafficResult {
  std::vector<std::uint64_t> ready;           // per message: when it could start
  std::vector<std::uint32_t> first_receiver;  // per message, into `arrival`
  std::vector<std::uint64_t> arrival;         // per (message, receiver)

  std::uint64_t arrival_at(MessageRef r) const {
    return arrival[first_receiver[r.message] + r.receiver];
  }
  // The last receiver's arrival of message m.
  std::uint64_t done(std::uint32_t m) const;
  // The latest of done(m) over `ms` (0 for none): when a primitive made of
  // several messages is complete.
  std::uint64_t done(std::span<const std::uint32_t> ms) const;
  // The latest arrival of all messages (kNever if any never arrived).
  std::uint64_t makespan() const;
};

// Checks a traffic description against a mesh and spec (endpoints inside the
// mesh, multicast on a line, dependencies on earlier messages, streams
// between unicasts that meet, colors within the router's virtual channels,
// bytes > 0 unless src == dst). Throws std::invalid_argument.
void validate_traffic(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic);

// The flow level: every message once it is ready, in ready-time order (ties:
// message order), through `flow.send` along its XY route (a multicast along
// its line). A message with src == dst arrives when ready.
TrafficResult run_flow(const Mesh& mesh, const WaferSpec& spec, FlowModel& flow,
                       const Traffic& traffic);
TrafficResult run_flow(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic);

namespace detail {
// Resolves when messages become ready as arrivals are recorded; shared by
// both levels so their dependency rules cannot drift apart.
class ReadyTracker {
 public:
  // With `stream_blocks`, a streamed message waits for its upstream message's
  // arrival (flow level); otherwise only for `after` (wavelet level, where the
  // stream is released wavelet by wavelet).
  ReadyTracker(const Traffic& traffic, TrafficResult& result, bool stream_blocks,
               Bytes link_bytes_per_cycle);
  // Messages ready from the start, in message order.
  const std::vector<std::uint32_t>& initially_ready() const { return initial_; }
  // Records an arrival; appends messages that became ready to `now_ready`.
  // `head`, when known, is when the message's first wavelet reached a unicast's
  // receiver (a stream from it starts from there); otherwise the arrival less
  // the serialization is taken.
  void arrive(MessageRef r, std::uint64_t cycle, std::vector<std::uint32_t>& now_ready,
              std::uint64_t head = kNever);
  // Message m's own readiness: its ready cycle folded with its `after` list.
  std::uint64_t own_ready(std::uint32_t m) const;

 private:
  std::uint64_t compute_ready(std::uint32_t m) const;
  std::vector<std::uint64_t> heads_;  // per message, `head` as given to arrive()
  const Traffic& traffic_;
  TrafficResult& result_;
  bool stream_blocks_;
  Bytes link_bytes_;
  std::vector<std::uint32_t> pending_;           // unresolved dependencies per message
  std::vector<std::uint32_t> dependents_first_;  // CSR by arrival slot
  std::vector<std::uint32_t> dependents_;
  std::vector<std::uint32_t> initial_;
};
}  // namespace detail

}  // namespace wafersim::fabric
