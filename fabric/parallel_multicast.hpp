// Many line multicasts at once, as a mesh GEMV sends its input chunks: one
// multicast down each of `count` parallel lines of `length` cores. Line i
// starts i cores `across` from `first` and runs `along` (across is at right
// angles to along, so no two lines share a link or a receiving core); its
// message of bytes[i] is ready at ready[i].
//
// The result is exactly that of `count` FlowModel::send() calls with
// arrivals, one per line in line order: every arrival is theirs and every
// link record, ramp record, byte counter and the model's `now` end as they
// leave them. That holds because each record is touched by one line only,
// in that line's hop order, with the `now` the line's own send() would have
// passed it (the latest ready time of this line and every message before
// it); the model's own `now` is raised for every line when this object is
// made. What changes is the order in which records are visited: the caller
// moves any group of lines on by one hop at a time, each line in its own hop
// order, and so can walk the lines in tiles (a few lines, a few hops) whose
// records share cache lines and pages, whichever way the lines lie across
// the records' memory order (ramps and core timelines are column-major, so a
// row multicast visits them one page apart when sent line by line), and
// finish a row of cores before the later hops of any line are timed.
// Where a line's links are free from its wavelets' arrival on and nothing
// else has used them since the line multicasts before it, its links'
// reservations go to the model's line record for that run of links when
// this object is made (FlowModel::LineRecord: the same records once anything
// reads them), and its hops reserve only the receiving cores' ramps; so
// every line must be walked to its end, as Executor::gemv does.
// On a model whose detours borrow links (a repaired wafer: a detour may share
// another line's links) and under LinkSharing::exclusive every line is sent
// with send() when this object is made, and next_hop() hands out its
// arrivals.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/link_timing.hpp"

namespace wafersim::fabric {

class ParallelLineMulticast {
 public:
  // bytes.size() == ready.size() is the number of lines. `ready` must stay
  // alive while this object is used (arrivals copy their explanation from it).
  // With `own_now` (hop by hop only): lines apart, each line's `now` the
  // later of own_now and its ready time rather than the model's; the
  // model's `now` is left as it is and no line record is taken (the same
  // records either way), so a thread may make one beside another's work on
  // the same model (Executor::block_attention's rows); the caller raises
  // the model's `now` afterwards, and first writes out any line record on
  // the lines' runs (FlowModel::settle_line_of; a logic_error otherwise).
  ParallelLineMulticast(const Mesh& mesh, FlowModel& flow, Coord first, Direction along, int length,
                        Direction across, std::span<const Bytes> bytes,
                        std::span<const Timed> ready, const std::uint64_t* own_now = nullptr);

  int lines() const { return static_cast<int>(ready_.size()); }
  // Whether next_hop() times the hops (interleave, no borrowed links: it
  // then touches only its lines' links, their cores' ramps, the model's
  // byte counters and the end of its latest reservation), or hands out what
  // send() timed when this object was made.
  bool hop_by_hop() const { return hop_by_hop_; }
  // What hops add to the model's total of carried bytes and to the end of
  // its latest reservation.
  struct Counts {
    std::uint64_t carried = 0;
    std::uint64_t max_end = 0;
  };
  // next_hop() whose counts go to `counts`, not to the model, until
  // publish() adds them: two threads may then move disjoint sets of lines
  // on at once, each with its own counts (and a third reduce rows with
  // LineReductions::hold_counts), sharing no memory they write
  // (FlowModel::set_concurrent). Sums and maxima: the model ends the same.
  void next_hop(int first, int n, std::span<Timed> out, Counts& counts);
  void publish(Counts& counts);
  // Moves lines [first, first + n) on by one core each and writes to out[j]
  // when line first + j's next core has the whole message (its k-th call
  // for that line is core k; core 0's is its ready time). Throws past the
  // end of a line.
  void next_hop(int first, int n, std::span<Timed> out);

 private:
  // One line's hop-loop state (FlowModel::traverse_interleaved's, for a multicast).
  struct LineState {
    WaveletRuns runs[2];
    int on = 0;  // runs[on]: the wavelets on the current link
    int k = 0;   // the next core to reach
    std::uint64_t ser = 0;
    std::uint64_t bytes = 0;
    std::uint64_t now = 0;  // the model's `now` as this line's send() would have it
    std::uint64_t cross = 0;
    std::uint64_t from_hops = 0;
    std::uint32_t link0 = 0;  // its first link
    std::size_t ramp0 = 0;    // the ramp record of its second core
    // Its links' reservations kept in the model's line record (taken when
    // this object is made), so the hops reserve only the ramps.
    bool in_line_record = false;
  };
  void hop(LineState& s, const Timed& ready, Timed& out, Counts& counts);

  FlowModel& flow_;
  int length_;
  std::span<const Timed> ready_;
  // Along a line: the step of its link index (mod 2^32, as Mesh::straight_route)
  // and of its ramp slot.
  std::uint32_t link_step_ = 0;
  std::ptrdiff_t ramp_step_ = 0;
  bool hop_by_hop_ = true;
  std::vector<LineState> lines_;
  // Not hop by hop: every arrival, line after line, and each line's next core.
  std::vector<Timed> all_;
  std::vector<int> next_core_;
};

}  // namespace wafersim::fabric
