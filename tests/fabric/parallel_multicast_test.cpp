#include "fabric/parallel_multicast.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/collectives.hpp"
#include "fabric/line_reductions.hpp"
#include "support/test_spec.hpp"
#include "support/timed_checks.hpp"

namespace wafersim::fabric {
namespace {

using testing::Draws;
using testing::expect_same;
using testing::GemvShape;
using testing::random_traffic;
using testing::row_line;

// A GEMV's lines' input: ready times out of order, some behind the
// tests' traffic's time (~750 cycles when the GEMV starts), some ahead of
// it, with explanations; and 4-20 bytes a line.
void lines_input(Draws& next, int lines, std::vector<Timed>& ready, std::vector<Bytes>& bytes) {
  for (int i = 0; i < lines; ++i) {
    Timed t{Cycles{400 + next(800)}, {}};
    t.path.compute = Cycles{next(50)};
    t.path.queueing = Cycles{next(7)};
    ready.push_back(t);
    bytes.push_back(Bytes{4 * (1 + next(5))});
  }
}

// ParallelLineMulticast, walked in tiles of `tile_lines` x `tile_hops` in an
// order of its own with each band of rows reduced once every line has
// reached it (by LineReductions), leaves the model exactly as one
// multicast_line after another and then the rows' reduce_line calls do: the
// same arrivals, the same reduced sums, the same link records (busy
// intervals, floors, byte counters) and ramp records (probed by the traffic
// after), over records crowded by traffic before and after, for every
// direction and reduction scheme. This is what Executor::gemv's
// whole-region speed rests on.
TEST(ParallelLineMulticast, TiledWithRowReductionsIsExactlyLineByLine) {
  const WaferSpec spec = testing::small_spec(40, 36);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  const std::vector<GemvShape> shapes = {
      {Direction::south, Direction::east, Coord{3, 2}, 30, 33},   // a plain matrix
      {Direction::east, Direction::south, Coord{2, 1}, 35, 31},   // a transposed one
      {Direction::north, Direction::east, Coord{5, 33}, 29, 30},  // an upward one
      {Direction::west, Direction::north, Coord{38, 34}, 36, 20},
  };
  const std::vector<ReductionScheme> schemes = {ReductionScheme::chain, ReductionScheme::tree,
                                                ReductionScheme::two_level, ReductionScheme::k_tree,
                                                ReductionScheme::ring};
  int case_number = 0;
  for (const GemvShape& g : shapes)
    for (const ReductionScheme scheme : schemes)
      for (const int tile_lines : {1, 4, 64})
        for (const int tile_hops : {1, 5, 64}) {
          const std::string where =
              "case " + std::to_string(case_number) + " (" + reduction_name(scheme) + ", tile " +
              std::to_string(tile_lines) + "x" + std::to_string(tile_hops) + ")";
          const auto seed = static_cast<std::uint64_t>(++case_number);
          FlowModel a{mesh, spec}, b{mesh, spec};
          std::vector<Timed> seen_a, seen_b;
          random_traffic(mesh, a, seed, 0, 3000, seen_a, {4, false});
          random_traffic(mesh, b, seed, 0, 3000, seen_b, {4, false});
          Draws next{seed * 977};
          std::vector<Timed> ready;
          std::vector<Bytes> bytes;
          lines_input(next, g.lines, ready, bytes);
          const Bytes row_bytes{4 * (1 + next(4))};
          // A: line after line, then the rows' reductions.
          std::vector<std::vector<Timed>> arr_a(static_cast<std::size_t>(g.lines));
          for (int i = 0; i < g.lines; ++i) {
            const Coord s = Mesh::step(Coord{0, 0}, g.across);
            multicast_line(mesh, a,
                           Line{Coord{g.first.x + s.x * i, g.first.y + s.y * i}, g.along, g.length},
                           bytes[static_cast<std::size_t>(i)], ready[static_cast<std::size_t>(i)],
                           arr_a[static_cast<std::size_t>(i)]);
          }
          std::vector<Timed> sums_a;
          std::vector<Timed> row(static_cast<std::size_t>(g.lines));
          for (int k = 0; k < g.length; ++k) {
            for (int i = 0; i < g.lines; ++i)
              row[static_cast<std::size_t>(i)] =
                  arr_a[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
            sums_a.push_back(reduce_line(mesh, a, scheme, row_line(g, k), row_bytes, row));
          }
          // B: all at once, in tiles, each band of rows reduced once complete.
          ParallelLineMulticast lines(mesh, b, g.first, g.along, g.length, g.across, bytes, ready);
          LineReductions rows(mesh, b, scheme, 0, g.across, g.lines);
          std::vector<Timed> band(static_cast<std::size_t>(tile_hops) *
                                  static_cast<std::size_t>(g.lines));
          std::vector<Timed> sums_b;
          for (int k0 = 0; k0 < g.length; k0 += tile_hops) {
            const int h = std::min(tile_hops, g.length - k0);
            // Tiles from the last lines to the first: any order is allowed.
            for (int q0 = (g.lines - 1) / tile_lines * tile_lines; q0 >= 0; q0 -= tile_lines) {
              const int n = std::min(tile_lines, g.lines - q0);
              for (int k = k0; k < k0 + h; ++k)
                lines.next_hop(q0, n,
                               std::span<Timed>(band).subspan(
                                   static_cast<std::size_t>(k - k0) * g.lines + q0, n));
            }
            for (int k = k0; k < k0 + h; ++k) {
              for (int i = 0; i < g.lines; ++i)
                expect_same(band[static_cast<std::size_t>(k - k0) * g.lines + i],
                            arr_a[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)],
                            where + " line " + std::to_string(i) + " core " + std::to_string(k));
              sums_b.push_back(
                  rows.reduce(row_line(g, k).first, row_bytes,
                              std::span<const Timed>(band).subspan(
                                  static_cast<std::size_t>(k - k0) * g.lines, g.lines)));
            }
          }
          EXPECT_THROW(lines.next_hop(0, 1, std::span<Timed>(band).first(1)), std::logic_error);
          ASSERT_EQ(sums_a.size(), sums_b.size());
          for (std::size_t k = 0; k < sums_a.size(); ++k)
            expect_same(sums_b[k], sums_a[k], where + " row sum " + std::to_string(k));
          // The traffic after sees the same records (links and ramps).
          random_traffic(mesh, a, seed + 1000, 900, 3000, seen_a, {4, false});
          random_traffic(mesh, b, seed + 1000, 900, 3000, seen_b, {4, false});
          ASSERT_EQ(seen_a.size(), seen_b.size()) << where;
          for (std::size_t m = 0; m < seen_a.size(); ++m)
            expect_same(seen_b[m], seen_a[m], where + " traffic " + std::to_string(m));
          testing::expect_same_records(mesh, a, b, where);
          if (::testing::Test::HasFailure()) return;
        }
}

// What Executor::gemv's timing helper rests on: with the model concurrent,
// the multicast's hops held in per-thread counts and the reductions' counts
// held, two threads moving disjoint halves of the lines on while a third
// reduces each band of rows as soon as both have reached it leave the model
// exactly as one thread doing it all in order does: the same arrivals,
// sums, link and ramp records, byte counters, total and latest end, and
// the same answers to the traffic after. The records are crowded by
// traffic first, wide records included, so the shared table of wide
// records is used from both sides. (Built with -fsanitize=thread, this test
// also checks that no memory is shared unguarded.)
TEST(ParallelLineMulticast, ThreadsOnDisjointRecordsLeaveTheSameModel) {
  const WaferSpec spec = testing::small_spec(40, 36);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  const std::vector<GemvShape> shapes = {
      {Direction::south, Direction::east, Coord{3, 2}, 30, 33},
      {Direction::east, Direction::south, Coord{2, 1}, 35, 31},
  };
  int case_number = 0;
  for (const GemvShape& g : shapes)
    for (const ReductionScheme scheme :
         {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level})
      for (const int band_rows : {1, 4}) {
        const std::string where = "case " + std::to_string(++case_number) + " (" +
                                  reduction_name(scheme) + ", bands of " +
                                  std::to_string(band_rows) + ")";
        const auto seed = static_cast<std::uint64_t>(case_number) * 31;
        FlowModel a{mesh, spec}, b{mesh, spec};
        std::vector<Timed> seen_a, seen_b;
        random_traffic(mesh, a, seed, 0, 4000, seen_a, {5, true});
        random_traffic(mesh, b, seed, 0, 4000, seen_b, {5, true});
        Draws next{seed * 977};
        std::vector<Timed> ready;
        std::vector<Bytes> bytes;
        lines_input(next, g.lines, ready, bytes);
        const Bytes row_bytes{4 * (1 + next(4))};
        const std::size_t band_size = static_cast<std::size_t>(band_rows) * g.lines;
        const int bands = (g.length + band_rows - 1) / band_rows;
        // Band k0's rows, lines [q0, q1), into `band`.
        auto time = [&](ParallelLineMulticast& lines, int k0, int q0, int q1,
                        std::vector<Timed>& band, ParallelLineMulticast::Counts& counts) {
          for (int k = k0; k < std::min(g.length, k0 + band_rows); ++k)
            lines.next_hop(
                q0, q1 - q0,
                std::span<Timed>(band).subspan(static_cast<std::size_t>(k - k0) * g.lines + q0,
                                               static_cast<std::size_t>(q1 - q0)),
                counts);
        };
        auto reduce = [&](LineReductions& rows, int k0, const std::vector<Timed>& band,
                          std::vector<Timed>& sums) {
          for (int k = k0; k < std::min(g.length, k0 + band_rows); ++k)
            sums.push_back(rows.reduce(row_line(g, k).first, row_bytes,
                                       std::span<const Timed>(band).subspan(
                                           static_cast<std::size_t>(k - k0) * g.lines, g.lines)));
        };
        // A: one thread, band after band.
        std::vector<Timed> sums_a;
        {
          ParallelLineMulticast lines(mesh, a, g.first, g.along, g.length, g.across, bytes, ready);
          LineReductions rows(mesh, a, scheme, 0, g.across, g.lines);
          std::vector<Timed> band(band_size);
          ParallelLineMulticast::Counts counts;
          for (int k0 = 0; k0 < g.length; k0 += band_rows) {
            time(lines, k0, 0, g.lines, band, counts);
            lines.publish(counts);
            reduce(rows, k0, band, sums_a);
          }
        }
        // B: two threads time the lines' halves of every band (each into
        // its own copy of the band), this one reduces each band once both
        // are done with it.
        std::vector<Timed> sums_b;
        {
          ParallelLineMulticast lines(mesh, b, g.first, g.along, g.length, g.across, bytes, ready);
          LineReductions rows(mesh, b, scheme, 0, g.across, g.lines);
          b.set_concurrent(true);
          rows.hold_counts(true);
          const int split = g.lines / 2;
          std::vector<std::vector<Timed>> bands_done(static_cast<std::size_t>(bands),
                                                     std::vector<Timed>(band_size));
          std::atomic<int> left_done{0}, right_done{0};
          ParallelLineMulticast::Counts left_counts, right_counts;
          auto side = [&](int q0, int q1, std::atomic<int>& done,
                          ParallelLineMulticast::Counts& counts) {
            for (int band = 0; band < bands; ++band) {
              time(lines, band * band_rows, q0, q1, bands_done[static_cast<std::size_t>(band)],
                   counts);
              done.store(band + 1, std::memory_order_release);
            }
          };
          std::thread left(side, 0, split, std::ref(left_done), std::ref(left_counts));
          std::thread right(side, split, g.lines, std::ref(right_done), std::ref(right_counts));
          for (int band = 0; band < bands; ++band) {
            while (left_done.load(std::memory_order_acquire) <= band ||
                   right_done.load(std::memory_order_acquire) <= band)
              std::this_thread::yield();
            reduce(rows, band * band_rows, bands_done[static_cast<std::size_t>(band)], sums_b);
          }
          left.join();
          right.join();
          b.set_concurrent(false);
          lines.publish(left_counts);
          lines.publish(right_counts);
          rows.hold_counts(false);
          rows.publish_counts();
        }
        ASSERT_EQ(sums_a.size(), sums_b.size()) << where;
        for (std::size_t k = 0; k < sums_a.size(); ++k)
          expect_same(sums_b[k], sums_a[k], where + " row sum " + std::to_string(k));
        EXPECT_EQ(b.model_now(), a.model_now()) << where;
        random_traffic(mesh, a, seed + 1000, 900, 3000, seen_a, {4, false});
        random_traffic(mesh, b, seed + 1000, 900, 3000, seen_b, {4, false});
        ASSERT_EQ(seen_a.size(), seen_b.size()) << where;
        for (std::size_t m = 0; m < seen_a.size(); ++m)
          expect_same(seen_b[m], seen_a[m], where + " traffic " + std::to_string(m));
        testing::expect_same_records(mesh, a, b, where);
        EXPECT_GT(b.wide_records().peak(), 0u) << where;  // the wide table was in use
        if (::testing::Test::HasFailure()) return;
      }
}

// Under the exclusive rule the lines are sent one by one, and next_hop hands
// their arrivals out in any order.
TEST(ParallelLineMulticast, ExclusiveSharingSendsLineByLine) {
  const WaferSpec spec = testing::small_spec(12, 10);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel a{mesh, spec}, b{mesh, spec};
  a.set_sharing(LinkSharing::exclusive);
  b.set_sharing(LinkSharing::exclusive);
  std::vector<Timed> ready{Timed{Cycles{5}, {}}, Timed{Cycles{2}, {}}, Timed{Cycles{9}, {}}};
  std::vector<Bytes> bytes{Bytes{8}, Bytes{4}, Bytes{12}};
  std::vector<std::vector<Timed>> arr(3);
  for (int i = 0; i < 3; ++i)
    multicast_line(mesh, a, Line{Coord{1 + i, 0}, Direction::south, 10},
                   bytes[static_cast<std::size_t>(i)], ready[static_cast<std::size_t>(i)],
                   arr[static_cast<std::size_t>(i)]);
  ParallelLineMulticast lines(mesh, b, Coord{1, 0}, Direction::south, 10, Direction::east, bytes,
                              ready);
  Timed out[3];
  for (int k = 0; k < 10; ++k) {
    lines.next_hop(2, 1, std::span<Timed>(out + 2, 1));
    lines.next_hop(0, 2, std::span<Timed>(out, 2));
    for (std::size_t i = 0; i < 3; ++i)
      expect_same(out[i], arr[i][static_cast<std::size_t>(k)], "core " + std::to_string(k));
  }
  EXPECT_THROW(lines.next_hop(0, 1, std::span<Timed>(out, 1)), std::logic_error);
}

TEST(ParallelLineMulticast, RejectsLinesThatOverlapOrLeaveTheMesh) {
  const WaferSpec spec = testing::small_spec(8, 8);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel flow{mesh, spec};
  std::vector<Timed> ready(3);
  std::vector<Bytes> bytes(3, Bytes{4});
  EXPECT_THROW(ParallelLineMulticast(mesh, flow, Coord{0, 0}, Direction::south, 4, Direction::north,
                                     bytes, ready),
               std::invalid_argument);
  EXPECT_THROW(ParallelLineMulticast(mesh, flow, Coord{6, 0}, Direction::south, 4, Direction::east,
                                     bytes, ready),
               std::out_of_range);
  EXPECT_THROW(ParallelLineMulticast(mesh, flow, Coord{0, 5}, Direction::south, 4, Direction::east,
                                     bytes, ready),
               std::out_of_range);
}

}  // namespace
}  // namespace wafersim::fabric
