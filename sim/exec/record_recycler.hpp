// Gives the link records of idle wafers back for reuse while a run goes on
// (fabric::FlowModel::use_record_pool, fabric::PagePool). A token crossing a
// pipeline of wafers is busy on a few of them at a time; the others hold
// records whose every reservation is in the past. Those records answer any
// message still to come exactly as zeroed ones would, provided no such
// message is ready before the reservations' end; so the recycler keeps a
// lower bound on the ready time of every message still to come and releases
// a wafer's records once they all end by it.
//
// The bound: every message is issued for a token in flight (or for one the
// host makes from a token it took back), and its ready time is made of that
// token's vectors' ready times by later() and plus() (core timelines and link
// reservations only ever delay). So the earliest ready time of any vector of
// any tracked token bounds every message to come. Each token's part is taken
// when the host makes it and again each time a stage takes it (its vectors'
// ready times only grow); the host's successors of a token are made in the
// same SystemC activation that took it back, before any stage runs, and are
// never ready before it.
#pragma once

#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

#include "fabric/link_timing.hpp"
#include "sim/exec/token_message.hpp"

namespace wafersim::sim {

class RecordRecycler {
 public:
  // The flow models of every wafer of the run (target and draft), each put
  // on `pool`. Without flows (a one-wafer run) every call does nothing.
  void recycle(std::vector<fabric::FlowModel*> flows, fabric::PagePool& pool);
  bool active() const { return !flows_.empty(); }

  // The host made `m` (after its first messages) / took it back.
  void track(const TokenMessage& m);
  void untrack(const TokenMessage& m);
  // A stage took `m`, before running it: m's bound is taken again and the
  // wafers idle since before every tracked token's bound are released.
  void entered(const TokenMessage& m);

  // The earliest ready time of any of m's vectors.
  static std::uint64_t earliest_ready(const TokenMessage& m);
  // Releases so far (every wafer that gave its records back, each time).
  std::uint64_t releases() const { return releases_; }

 private:
  void release_idle();
  std::vector<fabric::FlowModel*> flows_;
  std::multiset<std::uint64_t> bounds_;
  std::unordered_map<const TokenMessage*, std::multiset<std::uint64_t>::iterator> live_;
  std::uint64_t releases_ = 0;
};

}  // namespace wafersim::sim
