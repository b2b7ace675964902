// Flow-level link model. A message is one transfer along its route; each link
// keeps a short list of busy intervals (its reservations) and counters.
// Messages are reserved in the order they are sent (the engine and run_flow
// send them in ready-time order), each around the reservations already made.
//
// Uncontended, a message of B bytes ready at t over links L0..Ln-1 takes
//   ser = ceil(B / link_bytes_per_cycle)
// cycles on each link, link Lk in [t + k * (hop_latency + extra), ... + ser),
// and its tail reaches node k+1 at t + (k+1) * hop_latency + k * extra + ser
// (virtual cut-through: the head moves on while the tail still streams).
// Around other reservations it follows one of two rules (LinkSharing, below):
// the default, interleave, sends it wavelet by wavelet through the free
// cycles (pipelined: a wavelet delayed on one link delays only the wavelets
// behind it); exclusive, the rule of the first versions, kept for
// comparison, needs one gap per link its whole serialization fits in:
//   ak    = max(s(k-1) + hop_latency + extra, node_ready[k])   (head reaches Lk)
//   sk    = the earliest cycle >= ak such that [sk, sk + ser) overlaps no busy
//           interval of Lk (backfill: a gap before a reservation made earlier
//           for a message that reaches Lk later is used if the whole message
//           fits in it; waiting sk - ak is contention)
//   link Lk is busy for [sk, sk + ser)
//   arrival at node k+1 (tail) = sk + hop_latency + ser.
// Either way two messages sharing a link take ser cycles of it each.
//
// Core ramps: a core's router hands it at most one wavelet per cycle (the
// fifth port of the wavelet model). At each receiving core (the end of a
// unicast, every core of a line multicast) a message takes ser free cycles
// of that core's ejection ramp from its head's arrival on, shared wavelet by
// wavelet (LinkState::pass, whatever the links' sharing rule, with backfill
// as on a link): a core that many messages converge on receives them at one
// wavelet per cycle in all, and has a message when its last wavelet is
// through (waits are contention). Uncontended, the ramp costs nothing; a
// chain reduction's last receiver uses its ramp.
// Not modelled: the injection ramp (a core sending several messages at once
// starts them together) and the ramps of a chain reduction's intermediate
// cores (they add to the stream as it passes).
//
// `extra` is the per-hop cost
// when each node on the path adds its own contribution before forwarding
// (chain reduction); `node_ready[k]` is when node k's contribution is ready.
//
// Memory: a link's record keeps at most kLinkIntervals busy intervals
// (merged when they touch) after a floor; every cycle before the floor counts
// as busy. Cycles before `now`, the time the model has reached (the latest
// ready time of a message sent so far; FlowModel tracks it), are worth
// nothing: no message still to come is ready before them. When a new
// interval would exceed the bound and some gap has no free cycle at or after
// `now`, that gap is given up (its cycles count as busy; the gap before the
// first interval by raising the floor to that interval's end), which changes
// no answer: with messages issued in time order, as the engine and run_flow
// do, the oldest interval is folded into the floor. When every gap still has
// free cycles ahead (reservations far ahead of `now`: a message's later hops,
// one that waited behind a long message), the record moves to a wide record
// (WideRecords, a side table the FlowModel owns) that keeps every interval
// ahead of `now`, up to kWideLinkIntervals, by the same rule: beyond
// kLinkIntervals intervals, a gap with no free cycle at or after `now` is
// given up (the first interval is folded into the floor), any other kept; it
// returns to the compact record once its intervals fit there again. So a
// link answers every message ready at or after `now` as an unbounded record
// would; only a wide record that is full gives up a gap with free
// cycles (the one with the fewest at or after `now`, the earliest of equals:
// conservative, a message may wait where the exact schedule had a gap, never
// the reverse). Giving up such gaps in the compact record, as the first
// versions did, made the flow level's latency drift above the routers' on
// large meshes (docs/validation.md). Interval bounds of a compact record are
// 32-bit offsets from the floor; a reservation more than 2^32 cycles after
// the floor moves the floor up to 2^31 cycles before it (also conservative,
// and far beyond any gap in use).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric/critical_path.hpp"
#include "fabric/mesh.hpp"
#include "fabric/state_hash.hpp"
#include "fabric/wafer_spec.hpp"
#include "fabric/zeroed_array.hpp"

namespace wafersim::fabric {

// Asks the caches for the line that holds `p`: a hint, which changes no
// result. An asm statement, as GCC 12 at -O2 removed __builtin_prefetch from
// the flow model's hop loop (dead-code elimination) and emitted nothing.
inline void prefetch_line(const void* p) {
#if defined(__GNUC__) && defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Busy intervals kept in a link's own record (see above). 4 keeps a link
// record at 40 bytes (FlowModel::LinkState).
inline constexpr int kLinkIntervals = 4;
// Busy intervals a wide record keeps at most (8 bytes each). Uniform random
// traffic on a 128x128 mesh at 0.02 wavelets/node/cycle grows wide records
// to 64 at most; a full one gives up gaps as a compact record did (above).
inline constexpr int kWideLinkIntervals = 1024;

// How a message uses a link that is already reserved in places.
//  - exclusive (the rule above): the message needs one gap its whole
//    serialization fits in. It made each hop of a chain reduction under
//    background traffic wait for a gap as long as the message, and the waits
//    added up hop by hop: +94..+479% against the routers (docs/validation.md).
//  - interleave (the default): wavelet by wavelet, pipelined. The message is followed as
//    runs of consecutive wavelets (WaveletRuns). On its first link wavelet i
//    is ready at t + i; on link k each wavelet takes the first free cycle at
//    or after it left link k-1 plus hop_latency + extra (and after the one
//    before it, and not before node_ready[k]), around the reservations
//    already made; the cycles it takes are reserved. So a gap in one link's
//    schedule delays only the wavelets behind it, and the hops overlap as
//    they do in the routers (the tail pays the slowest link, not the sum of
//    every link's waits). Receiving cores take the wavelets through their
//    ejection ramps the same way. An uncontended message costs exactly what
//    the exclusive rule gives. Messages on one color cannot interleave in the
//    routers (wormhole); the flow level does not know colors, so this rule
//    shares a link between any two messages. Later messages still wait
//    behind earlier reservations (issue order is priority), where the
//    routers arbitrate round robin between colors: a long message on links
//    that traffic sent after it also uses is optimistic (docs/validation.md).
//    Costs ~1.2x the host time of exclusive on a full Llama-3.1-8B run.
enum class LinkSharing : std::uint8_t { exclusive, interleave };

// A message's wavelets on one link or ramp under LinkSharing::interleave: in
// cycles [start[i], start[i] + count[i]) for i < n, in time order, disjoint.
// At most kMax runs: one more is made room for by joining the two runs with
// the shortest gap between them, the earlier run's wavelets moved up against
// the later one (later than they went: conservative for every hop after).
struct WaveletRuns {
  static constexpr int kMax = 8;
  // Only the first n entries mean anything (left uninitialised past them:
  // the hop loop makes one of these per message).
  std::uint64_t start[kMax];
  std::uint64_t count[kMax];
  int n = 0;

  // Takes `o`'s runs (its first n entries only).
  void assign(const WaveletRuns& o) {
    n = o.n;
    for (int i = 0; i < n; ++i) start[i] = o.start[i], count[i] = o.count[i];
  }

  // `c` wavelets from `ready` on, one per cycle.
  static WaveletRuns from(std::uint64_t ready, std::uint64_t c) {
    WaveletRuns r;
    if (c > 0) r.start[0] = ready, r.count[0] = c, r.n = 1;
    return r;
  }
  // Appends [s, s + c), at or after the end of the last run.
  void append(std::uint64_t s, std::uint64_t c);
  // The cycle after the last wavelet (0 when empty).
  std::uint64_t end() const { return n == 0 ? 0 : start[n - 1] + count[n - 1]; }
  std::uint64_t wavelets() const;
  // Every wavelet `d` cycles later.
  void shift(std::uint64_t d) {
    for (int i = 0; i < n; ++i) start[i] += d;
  }
};

class FlowModel {
 public:
  FlowModel(const Mesh& mesh, const WaferSpec& spec);

  void set_sharing(LinkSharing s) {
    settle_lines();
    sharing_ = s;
  }
  LinkSharing sharing() const { return sharing_; }

  Cycles serialization(Bytes bytes) const {
    return Cycles{ceil_div(bytes.value, link_bytes_per_cycle_.value)};
  }

  // Sends `bytes` along `links` (a connected path) starting when `ready`.
  // Returns the time the whole message has arrived at the path's end. When
  // `arrivals` is given it receives the arrival time at every node of the path
  // (size links.size() + 1; element 0 is `ready`): a multicast along the path.
  Timed send(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
             std::vector<Timed>* arrivals = nullptr);

  // `bytes` along `links` when its wavelets enter the first link as `inject`
  // says (a reduction's hop that streams what its source receives, a
  // multicast branch the router replicates), under LinkSharing::interleave
  // (exclusive: as send() from inject's first wavelet). `ready` is the moment
  // the message's time is explained from (no wavelet of `inject` before it). `delivered` receives
  // the cycles the last core's ramp hands the wavelets over. With `arrivals` it is a line multicast
  // (as send()); `passing`, when given, receives for every node after the first the cycles the
  // wavelets reach its router (what a branch leaving that router can stream). Returns the time the
  // whole message has arrived at the last node.
  Timed stream(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
               const WaveletRuns& inject, WaveletRuns* delivered,
               std::vector<Timed>* arrivals = nullptr, std::vector<WaveletRuns>* passing = nullptr);

  // Chain reduction along `links`: node k (k = 0 is the first sender) adds its
  // contribution, ready at node_ready[k], to the stream and forwards it. The
  // last node's own contribution is node_ready[links.size()]. Returns when the
  // reduced message is complete at the last node.
  Timed reduce_chain(std::span<const LinkId> links, Bytes bytes, std::span<const Timed> node_ready);

  Cycles hop_latency() const { return hop_latency_; }
  Cycles reduce_hop_overhead() const { return reduce_hop_overhead_; }

  // Extra cycles each link takes on top of hop_latency (a repaired link's
  // detour, fabric/redundancy.hpp), one per LinkId; empty: none. A message's
  // head and tail cross link l hop_latency + extra[l] cycles after entering it.
  void set_link_extra_cycles(std::vector<std::uint16_t> extra);
  Cycles link_extra(LinkId l) const {
    return Cycles{link_extra_.empty() ? 0u : link_extra_[l.value]};
  }
  // The links whose physical links a repaired link's detour also uses
  // (Repair::borrowed_links): link l borrows links[first[l] .. first[l+1]);
  // both empty: none. A message crossing l takes the same cycles of each
  // link l borrows as of l itself, in order (a wavelet that finds a
  // borrowed link busy waits for it; a message crossing a borrowed link
  // waits for the detours' reservations there): the detour and the links it
  // borrows share their bandwidth. Byte counters stay per logical link.
  void set_link_borrowed(std::vector<std::uint32_t> first, std::vector<LinkId> links);
  std::span<const LinkId> link_borrowed(LinkId l) const {
    if (borrow_first_.empty()) return {};
    return std::span<const LinkId>(borrow_links_.data() + borrow_first_[l.value],
                                   borrow_first_[l.value + 1] - borrow_first_[l.value]);
  }

  // The memory of the link and ramp records (zeroed pages, see
  // fabric/zeroed_array.hpp), for a PagePrefaulter: those it holds now.
  std::vector<PageRange> record_pages() const {
    std::vector<PageRange> r;
    if (links_.held()) r.push_back(links_.pages());
    r.push_back(bytes_low_.pages());
    if (eject_.held()) r.push_back(eject_.pages());
    return r;
  }

  // Recycling the link and ramp records (the byte counters stay). With a
  // pool, this model holds records only while they may still matter:
  // release_records() gives them back to the pool when every reservation
  // ends by `all_ready_from`, a time no message still to come (to any model
  // sharing the pool) is ready before; the engine knows it from the tokens
  // in flight (sim/exec/record_recycler.hpp). The next message takes blocks from
  // the pool again, as their last owner left them, unzeroed: a record whose
  // every busy interval (and floor) ends by a message's ready time answers
  // that message, and every later one, as a fresh record does (its stale
  // gaps are worth nothing at or after `now` and are the first given up;
  // docs/modelling.md, "Recycled link records"). So results are the same as
  // without a pool. A message ready before the end of records released here
  // or taken from the pool breaks that and throws std::logic_error. A
  // pipeline of wafers that one token crosses at a time then holds a few
  // wafers' records instead of all of them.
  void use_record_pool(PagePool& pool);
  // Makes, in `pool`, `wafers` wafers' worth of record blocks for models on
  // `mesh` ahead of need; their ranges are for a PagePrefaulter.
  static std::vector<PageRange> stock_records(PagePool& pool, const Mesh& mesh, int wafers);
  bool release_records(Cycles all_ready_from);
  bool holds_records() const { return links_.held(); }
  // While kept, release_records() gives nothing back: the records are still
  // to be written (the layer replay's pending layers, which the latest
  // reservation's end does not know of yet: sim/exec/layer_replay.hpp).
  void keep_records(bool keep) { kept_ = keep; }
  // The end of the latest reservation made so far (links and ramps).
  Cycles reserved_until() const { return Cycles{max_end_}; }

  // Per-link counters.
  std::uint64_t link_bytes(LinkId l) const;
  // The end of the link's last reservation (0 if it never carried anything).
  Cycles link_reserved_until(LinkId l) const;
  // The link's busy intervals [first, second) after its floor, in time order,
  // and the floor (every cycle before it counts as busy).
  std::vector<std::pair<Cycles, Cycles>> link_busy_intervals(LinkId l) const;
  Cycles link_floor(LinkId l) const;
  // Bytes carried by all links together (each link's bytes summed: a
  // message of b bytes over h links adds b * h), counted as messages are
  // sent; read cheaply at any time (the run's --trace samples it).
  std::uint64_t carried_bytes() const { return carried_bytes_; }
  // The timing state as the messages still to come see it
  // (sim/exec/layer_replay.hpp): `cutoff` is a moment no such message is
  // ready before, nor the model's `now`; the fingerprint takes every
  // record's busy cycles after it (those before answer nothing: see the
  // header), as intervals relative to `origin`, and now - origin. Two states
  // with equal fingerprints at their own origin (and cutoffs the same
  // offset from it) answer every message the same, shifted by the
  // difference of the two. Line records are written out first (changes no
  // answer).
  // With `live`, the records it takes are appended to it (links by index,
  // then ramps after every link) for shift_records(). With `region`, only
  // the links leaving its cores and its cores' ramps are taken: what
  // messages between its cores, along XY routes, can meet.
  void add_state_after(std::uint64_t origin, std::uint64_t cutoff, StateHash& h,
                       std::vector<std::uint32_t>* live = nullptr, const Rect* region = nullptr);
  // The same state in pieces that threads can take side by side: the
  // header (now and the region; line records written out first), then the
  // records of part 0, 1, ... of `parts` (the region's records cut into
  // `parts` runs of about equal length, in add_state_after's order; const,
  // so the parts may run at once). Their fingerprints, each added to the
  // header's in part order, make one fingerprint of the state, as
  // add_state_after's does (equal states, equal fingerprints, for the same
  // `parts`); their `live` lists, joined in part order, are add_state_after's.
  void add_state_header(std::uint64_t origin, const Rect& region, StateHash& h);
  void add_state_part(std::uint64_t origin, std::uint64_t cutoff, const Rect& region, int part,
                      int parts, StateHash& h, std::vector<std::uint32_t>* live) const;
  // Moves that state `by` cycles later: the records `live` (as
  // add_state_after found them busy after `cutoff`; nothing reserved
  // since), whole, the model's `now` and the latest reservation's end.
  void shift_records(std::span<const std::uint32_t> live, std::uint64_t cutoff, std::uint64_t by);
  // The same in pieces: the model's `now` and latest end (line records
  // written out first), then the records, in any number of disjoint spans
  // (threads may take them side by side).
  void shift_clock(std::uint64_t cutoff, std::uint64_t by);
  void shift_some_records(std::span<const std::uint32_t> live, std::uint64_t by);
  std::uint64_t model_now() const { return now_; }
  struct LinkState;
  // A copy of a region's records, to be written back later, moved in time
  // (LayerReplay: a run's last layer ends where the learned layer's first
  // part did). copy_region_part copies part `part` of `parts` of the
  // region's link and ramp records (add_state_part's cut; const, so threads
  // can take the parts side by side) into `out`, a wide record's intervals
  // with it. write_region_part writes such a copy over the same records
  // `by` cycles later (a record's intervals are offsets from its floor; a
  // record never used stays so), a wide one into a block of the wide table
  // again (with other threads on the model only under set_concurrent).
  // Line records must be written out first (settle_lines()); the records
  // must be held (not given back to the pool). copy_clock / write_clock: the
  // model's `now` and its latest reservation's end; the end written back is
  // never below the one the model has (an end later than the truth only
  // keeps records from the pool longer).
  struct RegionCopy {
    std::vector<LinkState> records;
    // Each wide record's intervals: their start offsets from its floor,
    // then their end offsets; its copy in `records` names where they begin
    // and how many intervals it has.
    std::vector<std::uint32_t> wide;
  };
  void copy_region_part(const Rect& region, int part, int parts, RegionCopy& out) const;
  // How many records that part holds (its copy's `records`).
  std::size_t region_part_size(const Rect& region, int part, int parts) const;
  void write_region_part(const Rect& region, int part, int parts, const RegionCopy& copy,
                         std::uint64_t by);
  std::pair<std::uint64_t, std::uint64_t> copy_clock() const { return {now_, max_end_}; }
  void write_clock(std::pair<std::uint64_t, std::uint64_t> clock, std::uint64_t by);
  // The links' byte counters at one moment; what each link carried since
  // (links that carried nothing left out); and `times` times such counts
  // added to the counters and to carried_bytes(). Line records are written
  // out first.
  struct ByteCounts {
    std::unique_ptr<std::uint32_t[]> low;
    std::unordered_map<std::uint32_t, std::uint64_t> carries;
    std::uint64_t carried = 0;
  };
  // (Into what the caller holds: a full wafer's counters are ~15 MB.)
  // With `region`, the links leaving its cores only (the others' counts in
  // `into` are left as they were).
  void byte_counts(ByteCounts& into, const Rect* region = nullptr);
  void bytes_since(const ByteCounts& before,
                   std::vector<std::pair<std::uint32_t, std::uint64_t>>& into);
  // The same for the links leaving `region`'s cores, part `part` of `parts`
  // of them (add_state_part's cut), appended to `into`, with no writing out
  // (call settle_lines() first; const, so threads can take the parts side by
  // side).
  void add_bytes_since(const ByteCounts& before, const Rect& region, int part, int parts,
                       std::vector<std::pair<std::uint32_t, std::uint64_t>>& into) const;
  void add_bytes(std::span<const std::pair<std::uint32_t, std::uint64_t>> per_link,
                 std::uint64_t times);
  bool repaired() const { return !link_extra_.empty() || !borrow_first_.empty(); }

  // Bytes carried by every link, as [y][x][direction] (E, W, S, N).
  std::vector<std::uint64_t> link_bytes_by_core() const;
  // The same into `out` (link_count() elements).
  void write_link_bytes_by_core(std::span<std::uint64_t> out) const;

  class WideRecords;

  // One link's reservations (public for its unit tests; FlowModel keeps one
  // per link in a flat array, and the links' byte counters in one of their
  // own). 40 bytes: 3.58M links on a WSE-3 take 143 MB. The methods take the
  // model's table of wide records; without one (the compact record's unit
  // tests) a full record gives up the gap worth least whatever it is worth.
  struct LinkState {
    // The floor (every cycle before it counts as busy) in bits 0-55 and the
    // number of busy intervals in use in bits 56-63, one word so that the
    // record is 40 bytes. 2^56 cycles are two years of simulated time at
    // 1.1 GHz; reserve() throws std::overflow_error past them. A count of
    // kWide says the intervals are in a wide record, start[0] its slot.
    std::uint64_t floor_and_count = 0;
    // Busy intervals [floor + start[i], floor + end[i]) for i < count(),
    // sorted, disjoint and not touching.
    std::uint32_t start[kLinkIntervals] = {};
    std::uint32_t end[kLinkIntervals] = {};

    static constexpr int kCountShift = 56;
    static constexpr std::uint64_t kFloorMask = (std::uint64_t{1} << kCountShift) - 1;
    static constexpr int kWide = 255;
    std::uint64_t floor() const { return floor_and_count & kFloorMask; }
    int count() const { return static_cast<int>(floor_and_count >> kCountShift); }
    bool wide() const { return count() == kWide; }
    // The earliest cycle >= t at which [s, s + len) is free.
    std::uint64_t earliest_fit(std::uint64_t t, std::uint64_t len,
                               const WideRecords* wide = nullptr) const;
    // Marks [s, s + len) busy; it must be free (as earliest_fit returns).
    // `now` is the time the model has reached (no message still to come is
    // ready before it): see the header for what a full record does.
    void reserve(std::uint64_t s, std::uint64_t len, std::uint64_t now = 0,
                 WideRecords* wide = nullptr);
    // Takes the first `len` free cycles at or after t and marks them busy,
    // appending them to `out`. Returns the end of the last.
    std::uint64_t fill(std::uint64_t t, std::uint64_t len, WaveletRuns& out, std::uint64_t now = 0,
                       WideRecords* wide = nullptr);
    // Passes a message's wavelets through this link (or ramp), one per free
    // cycle, in order: wavelet i is ready `delay` cycles after its cycle in
    // `at`, and not before `not_before`. The cycles taken are reserved and,
    // when `out` is given, written to it (replacing what it held). Returns
    // the end of the last. (LinkSharing::interleave's rule; a ramp in both.)
    std::uint64_t pass(const WaveletRuns& at, std::uint64_t delay, std::uint64_t not_before,
                       WaveletRuns* out, std::uint64_t now, WideRecords* wide) {
      if (at.n == 1) {
        // Fast path (inline: once per hop): one run that finds the link free
        // all along keeps its shape.
        const std::uint64_t s = std::max(at.start[0] + delay, not_before);
        const std::uint64_t len = at.count[0];
        bool free = reserve_after_last(s, len, now);
        if (!free && earliest_fit(s, len, wide) == s) reserve(s, len, now, wide), free = true;
        if (free) {
          if (out) out->n = 1, out->start[0] = s, out->count[0] = len;
          return s + len;
        }
      }
      return pass_pieces(at, delay, not_before, out, now, wide);
    }

    // reserve() of the commonest case, inline (once per hop): [s, s + len)
    // in a compact record, at or after the end of its last interval (or, in
    // an empty record, at or after its floor), so free, and ending less than
    // 2^32 cycles after the floor. It extends the last interval (the floor),
    // appends one, or,
    // when the record is full and its first interval starts by `now`, folds
    // that one into the floor and appends, exactly as reserve() does; true
    // when done so. False, changing nothing, for every other reservation.
    bool reserve_after_last(std::uint64_t s, std::uint64_t len, std::uint64_t now) {
      const int count = this->count();
      const std::uint64_t floor = this->floor();
      if (count == kWide || len == 0) return false;
      const std::uint64_t last = floor + (count > 0 ? end[count - 1] : 0);
      const std::uint64_t e = s + len;
      if (s < last || e > kFloorMask || e - floor > std::uint64_t{0xffffffff}) return false;
      const auto eo = static_cast<std::uint32_t>(e - floor);
      if (s == last) {
        // Touches the last interval (or the floor): one longer interval.
        if (count > 0)
          end[count - 1] = eo;
        else
          set(e, 0);
        return true;
      }
      const auto so = static_cast<std::uint32_t>(s - floor);
      if (count < kLinkIntervals) {
        start[count] = so;
        end[count] = eo;
        set(floor, count + 1);
        return true;
      }
      if (floor + start[0] > now) return false;
      const std::uint32_t shift = end[0];
      for (int i = 1; i < count; ++i) start[i - 1] = start[i] - shift, end[i - 1] = end[i] - shift;
      start[count - 1] = so - shift;
      end[count - 1] = eo - shift;
      set(floor + shift, count);
      return true;
    }

   private:
    friend class WideRecords;
    friend class FlowModel;  // writes a line record's links (FlowModel::settle_line)
    // pass() when the wavelets meet reservations: run by run, through fill().
    std::uint64_t pass_pieces(const WaveletRuns& at, std::uint64_t delay, std::uint64_t not_before,
                              WaveletRuns* out, std::uint64_t now, WideRecords* wide);
    // The first `len` free cycles at or after t, as pieces (at most
    // kLinkIntervals + 1); returns how many.
    int free_pieces(std::uint64_t t, std::uint64_t len, std::uint64_t* piece_start,
                    std::uint64_t* piece_len) const;
    void set(std::uint64_t floor, int count) {
      floor_and_count = floor | static_cast<std::uint64_t>(count) << kCountShift;
    }
    void raise_floor(std::uint64_t to);
  };
  static_assert(sizeof(LinkState) == 40, "the link record's size is part of its memory budget");

  // Where a link record's intervals go while those ahead of `now` do not
  // fit in kLinkIntervals (see the header): a block of offsets from the
  // floor per such link, taken when its record would otherwise give up free
  // cycles ahead and given back when its intervals fit in the record again.
  // The record itself keeps the floor and, in place of its intervals, the
  // block's slot, size, capacity and address, so that a query reads the
  // record and the block, as it reads the record alone when compact.
  class WideRecords {
   public:
    std::uint64_t earliest_fit(const LinkState& link, std::uint64_t t, std::uint64_t len) const;
    void reserve(LinkState& link, std::uint64_t s, std::uint64_t len, std::uint64_t now);
    // The first `len` free cycles at or after t, as pieces, into `pieces`.
    void free_pieces(const LinkState& link, std::uint64_t t, std::uint64_t len,
                     std::vector<std::pair<std::uint64_t, std::uint64_t>>& pieces) const;
    // Moves a compact record's intervals ([floor + st[i], floor + en[i]) for
    // i < n, kLinkIntervals < n <= kLinkIntervals + 1) to a block.
    void adopt(LinkState& link, std::uint64_t floor, const std::uint32_t* st,
               const std::uint32_t* en, int n);
    // A wide link's busy intervals, as absolute cycles.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy(const LinkState& link) const;
    // Every link in a block goes back to a compact record with no interval
    // and its floor at the end of its last (for records recycled once all
    // their reservations are in the past: FlowModel::release_records).
    void retire_all();
    // The link's block back to the table, its record left to the caller to
    // overwrite (FlowModel::write_region_part).
    void drop(LinkState& link);
    // The link's record made wide with these n intervals ([floor + st[i],
    // floor + en[i])), in its own block if it has one, else in a free one.
    void assign(LinkState& link, std::uint64_t floor, const std::uint32_t* st,
                const std::uint32_t* en, std::uint32_t n);
    // Links in wide records now, and the most at once so far.
    std::size_t in_use() const { return slots_.size() - free_.size(); }
    std::size_t peak() const { return peak_; }
    // Gaps with free cycles at or after `now` given up by full wide records.
    std::uint64_t gaps_given_up() const { return gaps_given_up_; }
    // While shared, two threads may reserve at once, each on links the other
    // does not touch: the slot table (taken, grown and given back blocks)
    // and the counters are then changed under a lock. A link's own block is
    // its owner's alone, so queries and reservations take no lock.
    void set_shared(bool on) { shared_ = on; }
    bool shared() const { return shared_; }
    // Asks the caches for the lines a query on this wide link reads first
    // (its block's first kPrefetchIntervals intervals), so that a message's
    // later hops have them by the time it gets there. Only a hint: it reads
    // the record and changes nothing.
    static void prefetch(const LinkState& link) {
      const std::uint32_t n = std::min<std::uint32_t>(size_of(link), kPrefetchIntervals);
      if (n == 0) return;
      const std::uint32_t* en = block_of(link);
      prefetch_lines(en, n);
      prefetch_lines(en + capacity_of(link), n);
    }

   private:
    // A block of capacity c holds the intervals' end offsets in [0, c) and
    // their start offsets in [c, 2c), sorted, disjoint and not touching.
    struct Slot {
      LinkState* owner = nullptr;  // nullptr: free (its block kept for reuse)
      std::unique_ptr<std::uint32_t[]> block;
      std::uint32_t capacity = 0;
    };
    // The wide record's fields, in the record's interval words: the slot,
    // size, capacity and last end in start[0..3], the block's address in
    // end[0..1].
    static_assert(kLinkIntervals >= 4, "the wide record's fields need four interval words");
    static std::uint32_t slot_of(const LinkState& l) { return l.start[0]; }
    static std::uint32_t size_of(const LinkState& l) { return l.start[1]; }
    static std::uint32_t capacity_of(const LinkState& l) { return l.start[2]; }
    // The end of the last interval (the commonest answer needs no more).
    static std::uint32_t last_end_of(const LinkState& l) { return l.start[3]; }
    static std::uint32_t* block_of(const LinkState& l) {
      std::uint32_t* p;
      std::memcpy(&p, &l.end[0], sizeof p);
      return p;
    }
    // Intervals a prefetch covers (4 cache lines of offsets, and 4 of starts).
    static constexpr std::uint32_t kPrefetchIntervals = 64;
    static void prefetch_lines(const std::uint32_t* from, std::uint32_t n) {
      constexpr std::uintptr_t kLine = 64;
      const auto first = reinterpret_cast<std::uintptr_t>(from) & ~(kLine - 1);
      const auto last = reinterpret_cast<std::uintptr_t>(from + n - 1);
      for (std::uintptr_t a = first; a <= last; a += kLine)
        prefetch_line(reinterpret_cast<const void*>(a));
    }
    void point_at(LinkState& link, std::uint32_t slot, std::uint64_t floor, std::uint32_t size);
    // The same for the link's own block (its record has the rest: the slot
    // table is not read on a query's path).
    static void resize(LinkState& link, std::uint64_t floor, std::uint32_t size) {
      link.set(floor, LinkState::kWide);
      link.start[1] = size;
      link.start[3] = size > 0 ? block_of(link)[size - 1] : 0;
    }
    // The link's record back in compact form, its block freed.
    void release(LinkState& link);
    // Room for one more interval (up to kWideLinkIntervals + 1).
    void grow(LinkState& link);
    // Raises the floor to `to`, and on past every interval that starts by it
    // and, while more than kLinkIntervals remain, every one that starts by
    // `now`.
    void fold(LinkState& link, std::uint64_t to, std::uint64_t now);
    std::vector<Slot> slots_;
    std::vector<std::uint32_t> free_;
    std::size_t peak_ = 0;
    std::uint64_t gaps_given_up_ = 0;
    bool shared_ = false;
    std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
    // The table's lock while shared (set_shared), else none.
    std::unique_lock<std::mutex> hold() {
      return shared_ ? std::unique_lock<std::mutex>(*mutex_) : std::unique_lock<std::mutex>();
    }
    friend struct LinkState;
  };

  const WideRecords& wide_records() const { return wide_; }

  // While on, two threads may use this model at once, each on links and
  // ramps the other does not touch. One only moves a ParallelLineMulticast's
  // lines on (next_hop with counts of its own); the other may do anything
  // that writes neither those lines' links nor the ramps they have still to
  // reach, nor reads the model's carried bytes or latest end (which the
  // first's counts leave as they were). Executor::gemv times a band's
  // multicasts and tiles on the helper while this thread reduces the rows
  // of the band before (LineReductions with its counts held), and
  // attention's multicast hops run there while this thread works out the
  // rows they have reached. The two tables the threads share (the wide
  // records' blocks, the byte counters' overflows) are then locked. Off by
  // default.
  void set_concurrent(bool on) { wide_.set_shared(on); }

  // Line records (see LineRecord below): on by default; off, every multicast
  // reserves link by link as it goes (the same results, for comparison).
  void set_line_records(bool on) {
    if (!on) settle_lines();
    line_records_on_ = on;
  }
  bool line_records() const { return line_records_on_; }
  // Links whose reservations wait in a line record now (for tests).
  std::size_t links_in_line_records() const;
  // Writes every line record into its links' own records.
  void settle_lines();
  // Writes the line record, if any, of the run of links l lies on (a row or
  // column of the mesh, one direction); whether that run holds one.
  void settle_line_of(LinkId l);
  bool in_active_line(LinkId l) const;

 private:
  // Times many parallel line multicasts hop by hop with this model's records
  // (fabric/parallel_multicast.hpp), exactly as send() would one by one.
  friend class ParallelLineMulticast;
  // Times a family of parallel lines' reductions with this model's records
  // (fabric/line_reductions.hpp), exactly as reduce_line() would one by one.
  friend class LineReductions;
  // The message whose tail reached the core at the end of link `in` at
  // `tail` takes `ser` cycles of that core's ejection ramp from its head's
  // arrival on; returns when the core has all of it.
  Timed eject(LinkId in, Cycles ser, const Timed& tail);
  // The records of `region` in add_state_after's order (the links leaving
  // its cores, a run per row of the horizontal planes and per column of the
  // vertical ones; then, with `ramps`, its cores' ramps, a run per column),
  // cut into `parts` parts of about equal length: f(ramp, begin, end) for
  // each piece of a run in part `part` (indices into links_ or eject_).
  template <class F>
  void for_region_records(const Rect& region, bool ramps, int part, int parts, F&& f) const;
  // How many records for_region_records hands over in that part.
  std::size_t count_region_records(const Rect& region, bool ramps, int part, int parts) const;
  // The ramp record of the core at the end of link l. Ramp records are kept
  // column-major (x * height + y): a column multicast, the commonest
  // receiver of all, walks them in memory order.
  std::size_t ramp_slot_after(LinkId l) const;
  Timed traverse(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                 std::span<const Timed> node_ready, Cycles per_hop_extra,
                 std::vector<Timed>* arrivals);
  // LinkSharing::interleave: the message's wavelets enter the first link as
  // `inject` says and follow the rule in the header. With `arrivals` (a line
  // multicast) every core after the first takes its copy through its ramp;
  // otherwise the last core does when `eject_last`. `delivered` receives the
  // last core's wavelets as it has them.
  Timed traverse_interleaved(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                             const WaveletRuns& inject, std::span<const Timed> node_ready,
                             Cycles per_hop_extra, bool eject_last, std::vector<Timed>* arrivals,
                             WaveletRuns* delivered, std::vector<WaveletRuns>* passing = nullptr);
  // Before a message: the records in hand (from the pool when released),
  // and the message not ready before what was released.
  void hold_records(std::uint64_t ready) {
    if (ready < released_until_) message_before_release(ready);
    if (!links_.held()) take_records();
  }
  void take_records();
  // Bytes of a block of link records and of ramp records on `mesh`.
  static std::size_t link_block_bytes(const Mesh& mesh);
  static std::size_t ramp_block_bytes(const Mesh& mesh);
  [[noreturn]] void message_before_release(std::uint64_t ready) const;
  // Adds one message's bytes to link l's counter.
  // A link's counter without the total (a line record's bytes, counted in
  // the total when its messages were taken).
  void add_link_bytes(LinkId l, std::uint64_t bytes) {
    const std::uint64_t b = bytes_low_[l.value] + bytes;
    bytes_low_[l.value] = static_cast<std::uint32_t>(b);
    if ((b >> 32) != 0) add_carry(l.value, b >> 32);
  }
  void count_bytes(LinkId l, std::uint64_t bytes) {
    add_link_bytes(l, bytes);
    carried_bytes_ += bytes;
  }
  // What overflowed link l's low counter (locked while concurrent, set_concurrent: the map is
  // shared).
  void add_carry(std::uint32_t l, std::uint64_t units);

  Cycles hop_latency_;
  // Per-link extra cycles (set_link_extra_cycles); empty on a wafer without
  // repaired links, so the hop loops read nothing more.
  std::vector<std::uint16_t> link_extra_;
  std::uint64_t extra_of(LinkId l) const { return link_extra_.empty() ? 0 : link_extra_[l.value]; }
  // Borrowed links (set_link_borrowed); empty on a wafer whose detours borrow none.
  std::vector<std::uint32_t> borrow_first_;
  std::vector<LinkId> borrow_links_;
  // Interleave: the wavelets `runs` (as they crossed link l) also take their
  // cycles on each link l borrows, in order, and come out as the last of them
  // passes them; returns the end of the last reservation (0 when l borrows none).
  std::uint64_t pass_borrowed(LinkId l, WaveletRuns& runs);
  // Exclusive: the earliest cycle >= start at which [s, s + ser) is free on
  // link l and every link it borrows.
  std::uint64_t fit_with_borrowed(LinkId l, std::uint64_t start, std::uint64_t ser) const;
  Bytes link_bytes_per_cycle_;
  Cycles reduce_hop_overhead_;
  LinkSharing sharing_ = LinkSharing::interleave;
  // The latest ready time of a message sent so far (LinkState::reserve's `now`).
  std::uint64_t now_ = 0;
  bool kept_ = false;  // keep_records()
  const Mesh& mesh_;
  // Every link starts as LinkState{} (all zero bytes), straight from zeroed
  // pages (fabric/zeroed_array.hpp).
  ZeroedArray<LinkState> links_;
  // Low 32 bits of the bytes each link carried (zeroed pages, 4 bytes a
  // link), and what overflowed them, in units of 2^32, by link index. A link
  // overflows after 4 GiB (~1 s of simulated time at full rate), so the map
  // stays empty or small; it is only looked up on an overflow and when
  // counters are read.
  ZeroedArray<std::uint32_t> bytes_low_;
  std::unordered_map<std::uint32_t, std::uint64_t> carries_;
  std::unique_ptr<std::mutex> carries_mutex_ = std::make_unique<std::mutex>();
  // The sum of every link's bytes (what carried_bytes() returns).
  std::uint64_t carried_bytes_ = 0;
  // Core ejection ramps, one link record per core (zeroed pages too: 36 MB
  // per WSE-3 wafer, faulted in as cores first receive).
  ZeroedArray<LinkState> eject_;
  // Link and ramp records that need more than kLinkIntervals intervals.
  WideRecords wide_;
  // Record recycling (use_record_pool): the pool, the end of the latest
  // reservation, and the end of those released or taken stale from the pool.
  PagePool* pool_ = nullptr;
  std::uint64_t max_end_ = 0;
  std::uint64_t released_until_ = 0;

  // A line record: the reservations of line multicasts along one straight
  // run of links (one per row or column of the mesh and direction) that
  // nothing else has touched since, kept as the messages' start on the first
  // link and serialization instead of in the links' own records. Link k of
  // the run holds message j in [start[j] + k * hop_latency, ... + ser[j]):
  // a multicast is taken only where every link of the run is free from its
  // wavelets' arrival on, so each hop would have appended that interval to
  // the link's compact record (LinkState::reserve_after_last, folding its
  // oldest interval into the floor once the record is full, which the
  // conditions in take_line_message make sure of on every link). After five
  // such messages a link's record is the same whatever it held before:
  // floor at the end of the fifth-latest, the four latest as its intervals
  // (`folded`). Any other message, query or counter read of one of the run's
  // links first writes the record into that link (settle_slow): it then
  // holds exactly what the hops would have left in it, and is the record's
  // exception from then on (`written`): a later message the record takes
  // must find it free from its wavelets' arrival on (earliest_fit) and
  // reserves it at once, through LinkState::pass as its hop would. Beyond
  // kLineExceptions such links (or a quarter of the run's), a change of run on the line, a message
  // the record cannot take, or a query of every link, the whole record is written out (settle_line)
  // and the line starts afresh.
  static constexpr std::size_t kLineExceptions = 64;
  struct LineRecord {
    bool active = false;
    bool folded = false;  // the links' floors are floor0 + k * hop_latency
    std::uint32_t link0 = 0;
    std::uint32_t step = 0;  // link index step along the run (1 or ~0u)
    int links = 0;
    int kept = 0;
    std::uint64_t start[kLinkIntervals] = {};
    std::uint64_t ser[kLinkIntervals] = {};
    std::uint64_t now[kLinkIntervals] = {};  // the model's `now` each message was taken with
    std::uint64_t floor0 = 0;
    // Before the first message: the latest end (or floor) of any link's
    // record, and the lowest floor.
    std::uint64_t base_last = 0;
    std::uint64_t base_floor = 0;
    std::uint64_t bytes = 0;  // each link's bytes not yet in its counter
    // Links (by position along the run) written out one by one since the
    // record started: their own records are current.
    std::vector<int> written;
    // A run whose records keep being written out after one message, or
    // that a message cannot start a record on, is not tried again for the
    // next `skip` messages (doubling each time, up to 63): the scan a new
    // record takes would cost more than it saves. Changes no answer.
    std::uint8_t backoff = 0;
    std::uint8_t skip = 0;
  };
  // One line record per row or column of each direction's plane.
  std::vector<LineRecord> line_records_;
  int lines_active_ = 0;
  bool line_records_on_ = true;
  std::uint64_t plane_size_ = 0;  // links per plane (one per core)
  // One bit per link: kept in an active line record (and not written out).
  std::vector<std::uint64_t> line_bits_;
  bool in_line_record(std::uint32_t l) const { return (line_bits_[l >> 6] >> (l & 63)) & 1u; }
  void mark_line_link(std::uint32_t l, bool kept) {
    if (kept)
      line_bits_[l >> 6] |= std::uint64_t{1} << (l & 63);
    else
      line_bits_[l >> 6] &= ~(std::uint64_t{1} << (l & 63));
  }
  // A record that did not pay (see LineRecord::skip).
  static void back_off(LineRecord& r) {
    r.backoff = static_cast<std::uint8_t>(std::min(2 * r.backoff + 1, 63));
    r.skip = r.backoff;
  }
  // Takes a line multicast along `links` links from link0 (indices in steps
  // of `step`), its single run of wavelets entering at `ready`, with the
  // model's `now` at `now`: true when it is kept in its line record (its
  // links' reservations and byte counts are then made there, not hop by hop).
  // False when it must go link by link; the run's links then hold all that
  // was kept for them.
  bool take_line_message(std::uint32_t link0, std::uint32_t step, int links, std::uint64_t ready,
                         std::uint64_t ser, std::uint64_t bytes, std::uint64_t now);
  // The line record that link l belongs to (its plane, row or column).
  std::size_t line_slot(LinkId l) const;
  // The end of a record's latest reservation (its floor when it holds none).
  std::uint64_t record_end(const LinkState& s) const;
  // Before a link's record is read or reserved: its line record written out.
  void settle(LinkId l) {
    if (lines_active_ != 0 && in_line_record(l.value)) settle_slow(l);
  }
  void settle_slow(LinkId l);
  void settle_line(LineRecord& r);
  // Writes the record into the link at position k of its run.
  void write_line_link(const LineRecord& r, int k);
};

}  // namespace wafersim::fabric
