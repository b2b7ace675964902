// The reductions of many lines of one length and direction with one combine
// plan, as a mesh GEMV reduces its tile rows: reduce(root, ...) is exactly
// reduce_line(mesh, flow, scheme, Line{root, along, length}, ...), called as
// often as there are lines, and leaves every link record, ramp record, byte
// counter and the model's `now` as reduce_line leaves them.
//
// What it saves is reduce_line's work around the hops: the combine order
// (reduction_order) and the groups are worked out once, not per line; no
// route, ready-time or partial-sum vector is built per message; and the
// chains and sends of chain, tree and two-level reductions run a hop loop
// of their own (FlowModel::traverse_interleaved's rules for a straight run,
// link indices by arithmetic) instead of the general one. The lines are
// still reduced one after another, in the caller's order: a message's
// reservations depend on the model's `now` (the latest ready time of every
// message before it, which decides the gaps a full record gives up), and
// a two-level or tree reduction's later messages are ready only when its
// earlier ones have arrived, so interleaving the lines' hops would change
// which `now` a record sees. (The lines' records need no interleaving to be
// walked in memory order: along a row or a column the link indices step by
// one.)
//
// k-tree and ring reductions, a model whose detours borrow links (a
// repaired wafer) and LinkSharing::exclusive go through reduce_line itself.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fabric/collectives.hpp"
#include "fabric/link_timing.hpp"

namespace wafersim::fabric {

// On cache lines of its own (alignas): with counts held it may run beside
// another thread's multicast hops (hold_counts), and writes its counts
// every hop.
class alignas(64) LineReductions {
 public:
  LineReductions(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, int groups,
                 Direction along, int length);

  // reduce_line over Line{root, along, length}: when the sum of the
  // partials, ready at ready[i] on core i of the line, is complete at the
  // root. Throws as reduce_line does (a line off the mesh, ready.size() !=
  // length). `at`, when given, holds each ready time's cycle (ready[i].at):
  // the hops read those, and a ready time only where its explanation is
  // taken, so a caller that keeps the cycles apart (Executor::gemv, whose
  // ready times another thread wrote) has the hops read an eighth of the
  // memory.
  Timed reduce(Coord root, Bytes bytes, std::span<const Timed> ready,
               std::span<const std::uint64_t> at = {});
  // The line the next reduce() will take, rooted at `next` (a hint for the
  // caches, which changes no result): this reduce()'s hops ask for that
  // line's records as they go, a line ahead of its own.
  void next_line(Coord next);

  // Whether reduce() runs its own hop loop (chain, tree and two-level under
  // interleave, no borrowed links), not reduce_line.
  bool own_loop() const { return own_loop_; }
  // With counts held (own_loop() only), reduce() leaves the model's total
  // of carried bytes, the end of its latest reservation and its `now` as
  // they were and keeps its own (`now` taken from the model when held),
  // until publish_counts() adds the first two and hold_counts(false) the
  // third: a thread reducing rows while another times multicasts on the
  // same model then writes no memory the other reads or writes
  // (FlowModel::set_concurrent). Sums and maxima, so the model ends as if
  // every reduction had counted at once; no message of the other thread
  // reads the model's `now` meanwhile (ParallelLineMulticast keeps each
  // line's own).
  void hold_counts(bool hold);
  void publish_counts();
  // Lines apart: each reduce() with counts held starts from the `now` they
  // were held with, raised by its own line's messages alone, not by the
  // lines reduced before it (hold_counts(false) raises the model's to the
  // latest of all). The lines then time the same in any order and on either
  // of two threads (Executor::block_attention: a block's columns shared
  // with the timing helper). Not reduce_line's rule: its `now` is every
  // earlier message's, which gives up a gap of a full record on account of
  // another line's messages.
  void keep_lines_apart(bool on) { apart_ = on; }
  // With counts held: the `now` the last reduce() left (a line apart's own),
  // and raising the latest any line reached (a broadcast of the sum back
  // along the line: Executor::block_attention's rows).
  std::uint64_t held_now() const { return now_; }
  void raise_held_now(std::uint64_t t) { top_now_ = std::max(top_now_, t); }
  // Writes out the line record, if any, on the run of links the line
  // reduces along (FlowModel's line records: exact either way), so that a
  // reduce() of it writes no line record's shared state.
  void settle_line_record(Coord root);

 private:
  // reduce() on its own hop loop.
  Timed reduce_own(Coord root, Bytes bytes, std::span<const Timed> ready, const std::uint64_t* at);
  // FlowModel::traverse_interleaved of a message along `hops` links of a
  // straight run from `start` toward the root (link indices from link0 in
  // steps of toward_step_), its wavelets injected as one run from ready,
  // taken at the end by the ramp of the core `ramp`: a unicast (node_ready
  // null) or a chain whose node k adds its partial ready at
  // node_ready[-k] (its cycle at node_at[-k]). The same calls with the same
  // arguments in the same order.
  Timed traverse(std::uint32_t link0, int hops, std::size_t ramp, std::uint64_t ser,
                 std::uint64_t bytes, const Timed& ready, const Timed* node_ready,
                 const std::uint64_t* node_at);
  // The link a message from the far end of the line rooted at `root` takes
  // first (the start of the run it reduces along).
  std::uint32_t far_link(Coord root) const {
    return mesh_.link(Line{root, along_, length_}.at(length_ - 1), opposite(along_)).value;
  }
  // FlowModel::reduce_chain of line indices from `far` into `root` (root <
  // far), node far - k's partial ready at ready[far - k] (cycle at[far - k]).
  Timed chain(const Line& line, int far, int root, Bytes bytes, std::span<const Timed> ready,
              const std::uint64_t* at);
  // FlowModel::send of a partial from line index `from` to `into` (into < from).
  Timed send(const Line& line, int from, int into, Bytes bytes, const Timed& ready);

  const Mesh& mesh_;
  FlowModel& flow_;
  ReductionScheme scheme_;
  int groups_;
  Direction along_;
  int length_;
  // Hop by hop here (chain, tree, two-level under interleave, no borrowed
  // links), or reduce_line.
  bool own_loop_ = false;
  // The next line's root (next_line), taken by the next reduce().
  std::optional<Coord> next_;
  // While a reduce() runs: link index of the next line's records less its
  // own (mod 2^32), 0 for none.
  std::uint32_t next_delta_ = 0;
  // Link index step toward the root (mod 2^32, as Mesh::straight_route).
  std::uint32_t toward_step_ = 0;
  // Tree: every combine; two-level: the roots' combines (the groups'
  // chains come first, one per group of two_level_group(length) cores).
  std::vector<CombineStep> steps_;
  int group_ = 1;
  std::vector<Timed> partial_;
  std::vector<std::uint64_t> at_;  // the ready cycles, when reduce() is given none
  // Counts not yet in the model (hold_counts): bytes over every link, and
  // the end of the latest reservation.
  bool held_ = false;
  std::uint64_t carried_ = 0;
  std::uint64_t max_end_ = 0;
  std::uint64_t now_ = 0;
  // Lines apart: the `now` held, and the latest any line raised it to.
  bool apart_ = false;
  std::uint64_t base_now_ = 0, top_now_ = 0;
  // The model's `now` (this object's own while held), and raising it.
  std::uint64_t now() const { return held_ ? now_ : flow_.now_; }
  void raise_now(std::uint64_t t) {
    if (held_)
      now_ = std::max(now_, t);
    else
      flow_.now_ = std::max(flow_.now_, t);
  }
};

}  // namespace wafersim::fabric
