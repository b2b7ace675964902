#include "sim/exec/record_recycler.hpp"

#include <algorithm>
#include <limits>

namespace wafersim::sim {

void RecordRecycler::recycle(std::vector<fabric::FlowModel*> flows, fabric::PagePool& pool) {
  flows_ = std::move(flows);
  for (fabric::FlowModel* f : flows_) f->use_record_pool(pool);
}

std::uint64_t RecordRecycler::earliest_ready(const TokenMessage& m) {
  std::uint64_t t = std::numeric_limits<std::uint64_t>::max();
  for (const Vec& v : m.slots)
    for (const Timed& r : v.ready) t = std::min(t, r.at.value);
  return t;
}

void RecordRecycler::track(const TokenMessage& m) {
  if (!active()) return;
  const auto it = bounds_.insert(earliest_ready(m));
  const auto [at, added] = live_.emplace(&m, it);
  if (!added) {
    bounds_.erase(at->second);
    at->second = it;
  }
}

void RecordRecycler::untrack(const TokenMessage& m) {
  if (!active()) return;
  const auto at = live_.find(&m);
  if (at == live_.end()) return;
  bounds_.erase(at->second);
  live_.erase(at);
}

void RecordRecycler::entered(const TokenMessage& m) {
  if (!active()) return;
  track(m);
  release_idle();
}

void RecordRecycler::release_idle() {
  if (bounds_.empty()) return;
  const Cycles bound{*bounds_.begin()};
  for (fabric::FlowModel* f : flows_)
    if (f->release_records(bound)) ++releases_;
}

}  // namespace wafersim::sim
