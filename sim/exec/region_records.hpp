// The fabric's side of replaying work instead of simulating it
// (sim/exec/layer_replay.hpp, sim/exec/pipeline_replay.hpp): one wafer's
// records in a region fingerprinted as the messages still to come see them,
// what a stretch of work added to its byte and busy counters, and its busy
// records moved in time. Each in kParts parts of the link and ramp records
// (FlowModel::add_state_part's cut) and one of the cores, on a team's
// threads; the results are the same for any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric/state_hash.hpp"
#include "models/work_team.hpp"

namespace wafersim::sim {

class RegionRecords {
 public:
  static constexpr int kParts = 8;

  explicit RegionRecords(int threads) : team_(threads) {}
  // For other work in the same parts (LayerReplay's region copies).
  models::WorkTeam& team() { return team_; }

  // Adds to `state` the fingerprint of `f`'s state (FlowModel::
  // add_state_header, then every link, ramp and core record of `region` busy
  // after `cutoff`, relative to `origin`; line records written out first).
  // With `keep`, the records it found busy are the scan's, for hold_scan().
  void fingerprint(fabric::Fabric& f, std::uint64_t origin, std::uint64_t cutoff,
                   const fabric::Rect& region, bool keep, fabric::StateHash& state);
  // The last fingerprint's busy records become those shift_held() moves.
  void hold_scan() { scan_.swap(held_); }
  // Moves the held records and cores `by` cycles later (the model's clock
  // is the caller's: FlowModel::shift_clock).
  void shift_held(fabric::Fabric& f, std::uint64_t by);

  // What a stretch of work added to the links' byte counters (a list per
  // part) and the cores' busy cycles (those it added to).
  struct Counts {
    std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>> link_bytes;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> core_busy;
    void clear();  // keeps the lists' memory
  };
  // The counters of `region` now, to count from.
  void count_from(fabric::Fabric& f, const fabric::Rect& region);
  // What `region`'s counters gained since count_from (line records written
  // out first).
  void counts_since(fabric::Fabric& f, const fabric::Rect& region, Counts& out);
  // Adds `times` times `c` to f's counters.
  static void add(fabric::Fabric& f, const Counts& c, std::uint64_t times);

 private:
  struct alignas(64) Part {  // a cache line each: threads fill them side by side
    fabric::StateHash hash;
    std::vector<std::uint32_t> live;
  };
  // Per part: its fingerprint and the records (or cores) it found busy, of
  // the last fingerprint (scan_) and of the state shift_held() moves.
  std::array<Part, kParts + 1> scan_, held_;
  fabric::FlowModel::ByteCounts bytes_before_;
  std::vector<std::uint64_t> busy_before_;
  models::WorkTeam team_;
};

}  // namespace wafersim::sim
