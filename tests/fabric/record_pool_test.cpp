// Recycled link records (FlowModel::use_record_pool, PagePool): a wafer's
// records given back once every reservation is in the past answer later
// messages exactly as the kept records do.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/link_timing.hpp"
#include "fabric/zeroed_array.hpp"
#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

TEST(PagePool, HandsOutStockFirstThenReturnsAsGivenThenNewBlocks) {
  PagePool pool;
  const std::vector<PageRange> stocked = pool.stock(1, 8192);
  ASSERT_EQ(stocked.size(), 1u);
  EXPECT_EQ(pool.blocks_made(), 1u);
  PagePool::Block a = pool.take(8192);
  EXPECT_EQ(a.pages.data(), stocked[0].data);  // the stocked block first
  EXPECT_EQ(a.tag, 0u);
  std::memset(a.pages.data(), 0xab, a.pages.bytes());
  void* const a_data = a.pages.data();
  pool.give(std::move(a.pages), 77);
  PagePool::Block b = pool.take(4096);  // no block of that size: a new one, zeroed
  EXPECT_NE(b.pages.data(), a_data);
  EXPECT_EQ(static_cast<const unsigned char*>(b.pages.data())[100], 0);
  EXPECT_EQ(pool.blocks_made(), 2u);
  PagePool::Block c = pool.take(8192);  // the given-back block, as it was given
  EXPECT_EQ(c.pages.data(), a_data);
  EXPECT_EQ(c.tag, 77u);
  EXPECT_EQ(static_cast<const unsigned char*>(c.pages.data())[100], 0xab);
  EXPECT_EQ(pool.blocks_reused(), 1u);
  EXPECT_EQ(pool.blocks_made(), 2u);
}

// A small deterministic generator for the traffic below.
struct Draws {
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  std::uint64_t next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

class RecordRecycling : public ::testing::Test {
 protected:
  WaferSpec spec = testing::small_spec(6, 6);
  Mesh mesh{spec.mesh_width, spec.mesh_height};
  std::vector<LinkId> route(Coord a, Coord b) {
    std::vector<LinkId> r;
    mesh.xy_route(a, b, r);
    return r;
  }
  Coord any(Draws& d) { return Coord{d.below(mesh.width()), d.below(mesh.height())}; }
};

// Bursts of crowded traffic (unicasts, line multicasts, chain reductions,
// streams with gaps, some far apart; out of ready order within a burst, so records fill up
// and give gaps up), on two wafers in turn, each burst starting where the
// last one's reservations end or a little before. Two recycled models share
// a pool (so a wafer takes records the other one left, unzeroed); after
// each burst each releases its records when nothing of the next burst is
// ready before their end. Every message must arrive at the same cycle, with
// the same explanation, as on models that keep their records.
TEST_F(RecordRecycling, ReleasedRecordsGiveTheSameTimesAsKeptOnes) {
  PagePool pool;
  FlowModel kept[2] = {{mesh, spec}, {mesh, spec}};
  FlowModel recycled[2] = {{mesh, spec}, {mesh, spec}};
  for (FlowModel& f : recycled) {
    f.use_record_pool(pool);
    EXPECT_FALSE(f.holds_records());
  }
  Draws d;
  std::uint64_t start = 0;
  int releases = 0;
  const auto same = [](const Timed& a, const Timed& b) {
    EXPECT_EQ(a.at, b.at);
    EXPECT_EQ(a.path.hops, b.path.hops);
    EXPECT_EQ(a.path.serialization, b.path.serialization);
    EXPECT_EQ(a.path.contention, b.path.contention);
  };
  for (int burst = 0; burst < 80; ++burst) {
    // Mostly the wafers in turn, now and then the same one twice.
    const int w = (burst + (d.below(5) == 0 ? 1 : 0)) % 2;
    FlowModel& k = kept[w];
    FlowModel& r = recycled[w];
    for (int m = 0; m < 40; ++m) {
      const Timed ready{Cycles{start + static_cast<std::uint64_t>(d.below(60))}, {}};
      const Bytes bytes{static_cast<std::uint64_t>(4 + 4 * d.below(40))};
      const Coord a = any(d);
      switch (d.below(5)) {
        case 0: {  // unicast
          const std::vector<LinkId> path = route(a, any(d));
          same(k.send(path, bytes, ready), r.send(path, bytes, ready));
          break;
        }
        case 1: {  // line multicast east from the west edge
          std::vector<LinkId> path;
          mesh.straight_route(Coord{0, a.y}, Direction::east, mesh.width() - 1, path);
          std::vector<Timed> ka, ra;
          k.send(path, bytes, ready, &ka);
          r.send(path, bytes, ready, &ra);
          ASSERT_EQ(ka.size(), ra.size());
          for (std::size_t i = 0; i < ka.size(); ++i) same(ka[i], ra[i]);
          break;
        }
        case 2: {  // chain reduction down a column
          std::vector<LinkId> path;
          mesh.straight_route(Coord{a.x, 0}, Direction::south, mesh.height() - 1, path);
          std::vector<Timed> nodes{ready};
          for (std::size_t i = 1; i <= path.size(); ++i)
            nodes.push_back(
                ready.plus(Resource::compute, Cycles{static_cast<std::uint64_t>(d.below(20))}));
          same(k.reduce_chain(path, bytes, nodes), r.reduce_chain(path, bytes, nodes));
          break;
        }
        case 3: {  // a stream of single wavelets far apart: reservations
                   // ahead of `now` that send records wide
          const std::vector<LinkId> path = route(a, any(d));
          WaveletRuns inject = WaveletRuns::from(ready.at.value, 1);
          for (std::uint64_t j = 1; j < 6; ++j)
            inject.append(ready.at.value + 8 * j + static_cast<std::uint64_t>(d.below(3)), 1);
          WaveletRuns kd, rd;
          same(k.stream(path, Bytes{24}, ready, inject, &kd),
               r.stream(path, Bytes{24}, ready, inject, &rd));
          ASSERT_EQ(kd.n, rd.n);
          for (int i = 0; i < kd.n; ++i) EXPECT_EQ(kd.start[i], rd.start[i]);
          break;
        }
        default: {  // a stream whose wavelets come in two runs
          const std::vector<LinkId> path = route(a, any(d));
          WaveletRuns inject = WaveletRuns::from(ready.at.value, 3);
          inject.append(ready.at.value + 5 + static_cast<std::uint64_t>(d.below(10)), 4);
          WaveletRuns kd, rd;
          same(k.stream(path, Bytes{28}, ready, inject, &kd),
               r.stream(path, Bytes{28}, ready, inject, &rd));
          ASSERT_EQ(kd.n, rd.n);
          for (int i = 0; i < kd.n; ++i) EXPECT_EQ(kd.start[i], rd.start[i]);
        }
      }
    }
    // The next burst starts up to 40 cycles before this one's last
    // reservation ends (no release then) or up to 20 after it.
    const std::uint64_t end = std::max(k.reserved_until().value, r.reserved_until().value);
    start = end - 40 + static_cast<std::uint64_t>(d.below(61));
    for (FlowModel& f : recycled) {
      const bool held = f.holds_records();
      const bool released = f.release_records(Cycles{start});
      EXPECT_EQ(released, held && start >= f.reserved_until().value);
      EXPECT_FALSE(f.holds_records() && released);
      releases += released ? 1 : 0;
    }
  }
  EXPECT_GE(releases, 20);
  EXPECT_GE(pool.blocks_reused(), 20u);
  // Records went wide (and back to compact form when released).
  EXPECT_GT(recycled[0].wide_records().peak() + recycled[1].wide_records().peak(), 0u);
  // One block of links and one of ramps per wafer holding records, at most.
  EXPECT_LE(pool.blocks_made(), 4u);
  // The byte counters are the models' own, kept across releases.
  for (int w = 0; w < 2; ++w)
    for (std::uint32_t l = 0; l < mesh.link_count(); ++l)
      ASSERT_EQ(kept[w].link_bytes(LinkId{l}), recycled[w].link_bytes(LinkId{l}));
}

TEST_F(RecordRecycling, ReleasesOnlyWhatIsPastAndRefusesEarlierMessages) {
  PagePool pool;
  FlowModel flow{mesh, spec};
  // Without a pool nothing is released.
  const std::vector<LinkId> r = route(Coord{0, 0}, Coord{3, 0});
  flow.send(r, Bytes{40}, Timed{Cycles{100}, {}});
  EXPECT_FALSE(flow.release_records(Cycles{1'000'000}));
  flow.use_record_pool(pool);  // reservations made: released now (all end by its end)
  EXPECT_FALSE(flow.holds_records());
  const Timed t = flow.send(r, Bytes{40}, Timed{Cycles{500}, {}});
  EXPECT_TRUE(flow.holds_records());
  // 3 hops of 1 cycle, 10 cycles of serialization: uncontended.
  EXPECT_EQ(t.at, Cycles{500 + 3 + 10});
  const Cycles end = flow.reserved_until();
  EXPECT_EQ(end, t.at);  // the last core's ramp takes the message until then
  EXPECT_FALSE(flow.release_records(Cycles{end.value - 1}));
  EXPECT_TRUE(flow.holds_records());
  EXPECT_TRUE(flow.release_records(end));
  EXPECT_FALSE(flow.holds_records());
  EXPECT_TRUE(flow.link_busy_intervals(r[0]).empty());
  // A message ready before the released reservations' end would have met
  // them: the recycling bound was wrong, and the model says so.
  EXPECT_THROW(flow.send(r, Bytes{4}, Timed{Cycles{end.value - 1}, {}}), std::logic_error);
  const Timed later = flow.send(r, Bytes{4}, Timed{end, {}});
  EXPECT_EQ(later.at, Cycles{end.value + 3 + 1});
  EXPECT_EQ(flow.link_bytes(r[0]), 84u);
}

}  // namespace
}  // namespace wafersim::fabric
