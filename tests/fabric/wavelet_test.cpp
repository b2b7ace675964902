// The cycle-level wavelet model against the flow level and against physics.
// Tolerances (issue 3): exact or within 5% on uncontended primitives, within
// 15% under contention.
#include "fabric/wavelet.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "fabric/synthetic.hpp"
#include "fabric/traffic.hpp"
#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

// The flow level's error relative to the wavelet level (the reference).
double rel_error(double flow, double wavelet) {
  return std::abs(flow - wavelet) / wavelet;
}

class Wavelet : public ::testing::Test {
 protected:
  WaferSpec spec = testing::small_spec(16, 16);
  Mesh mesh{spec.mesh_width, spec.mesh_height};
};

TEST_F(Wavelet, UncontendedTransferTakesHopsPlusSerializationExactly) {
  // Pipeline convention (wavelet.hpp): ready at t, wavelet i on the first link
  // at t+i, one hop per hop_latency, delivered the cycle after the router puts
  // it on the ramp: tail at t + hops * hop_latency + ceil(B / 4 B).
  const struct {
    Coord src, dst;
    std::uint64_t bytes, ready;
  } cases[] = {{{0, 0}, {1, 0}, 4, 0},
               {{0, 0}, {3, 0}, 64, 100},
               {{2, 3}, {9, 12}, 256, 7},
               {{15, 15}, {0, 0}, 6, 0},
               {{5, 9}, {5, 2}, 1024, 3}};
  for (int hop_latency : {1, 2}) {
    spec.hop_latency = Cycles{static_cast<std::uint64_t>(hop_latency)};
    for (const auto& c : cases) {
      Traffic t;
      t.unicast(c.src, c.dst, Bytes{c.bytes}, Cycles{c.ready});
      const std::uint64_t expected =
          c.ready + static_cast<std::uint64_t>(manhattan(c.src, c.dst) * hop_latency) +
          ceil_div(c.bytes, 4);
      EXPECT_EQ(run_flow(mesh, spec, t).done(0), expected);
      EXPECT_EQ(run_wavelet(mesh, spec, t).done(0), expected)
          << "hop latency " << hop_latency << ", " << c.bytes << " B over "
          << manhattan(c.src, c.dst) << " hops";
    }
  }
}

TEST_F(Wavelet, TwoTransfersSharingALinkSerialize) {
  // A: (0,0)->(2,0) and B: (1,0)->(3,0), 40 B (10 wavelets) each, both ready
  // at 0, same color: they share link (1,0)E. The flow level gives it to A
  // first, B's first wavelet going ahead of A's head (A: 12, B: 22; it does
  // not know that one color cannot interleave); in the router B is there
  // first (B: 12, A: 21). Either way the link carries 20 wavelets, so the
  // later one ends >= 20 + 1 cycles in.
  Traffic t;
  t.unicast({0, 0}, {2, 0}, Bytes{40}, Cycles{0});
  t.unicast({1, 0}, {3, 0}, Bytes{40}, Cycles{0});
  const TrafficResult flow = run_flow(mesh, spec, t);
  WaveletStats stats;
  const TrafficResult wave = run_wavelet(mesh, spec, t, {}, &stats);
  EXPECT_EQ(flow.done(0), 12u);
  EXPECT_EQ(flow.done(1), 22u);
  EXPECT_EQ(wave.done(1), 12u);  // B alone on its first link
  EXPECT_EQ(wave.done(0), 21u);  // A waits for B's tail, then streams
  EXPECT_EQ(stats.link_wavelets[mesh.link({1, 0}, Direction::east).value], 20u);
  EXPECT_LE(rel_error(static_cast<double>(flow.makespan()), static_cast<double>(wave.makespan())),
            0.15);
  // On different colors the two interleave wavelet by wavelet on the shared
  // link: both finish late, neither before 20 cycles of link time.
  Traffic t2;
  t2.unicast({0, 0}, {2, 0}, Bytes{40}, Cycles{0}, 0);
  t2.unicast({1, 0}, {3, 0}, Bytes{40}, Cycles{0}, 1);
  const TrafficResult vc = run_wavelet(mesh, spec, t2);
  EXPECT_GE(vc.makespan(), 21u);
  EXPECT_GT(std::min(vc.done(0), vc.done(1)), 12u);
}

TEST_F(Wavelet, LineMulticastForwardsAndDeliversInTheSameCycle) {
  for (const Line line : {Line{{3, 0}, Direction::south, 16}, Line{{15, 4}, Direction::west, 9}}) {
    Traffic t;
    t.multicast(line, Bytes{32}, Cycles{5});
    const TrafficResult flow = run_flow(mesh, spec, t);
    WaveletStats stats;
    const TrafficResult wave = run_wavelet(mesh, spec, t, {}, &stats);
    // Also the flow primitive itself.
    FlowModel fm(mesh, spec);
    std::vector<Timed> arrivals;
    multicast_line(mesh, fm, line, Bytes{32}, Timed{Cycles{5}, {}}, arrivals);
    for (int j = 1; j < line.length; ++j) {
      const MessageRef r{0, static_cast<std::uint32_t>(j - 1)};
      EXPECT_EQ(wave.arrival_at(r), 5u + static_cast<std::uint64_t>(j) + 8u) << "receiver " << j;
      EXPECT_EQ(flow.arrival_at(r), wave.arrival_at(r));
      EXPECT_EQ(arrivals[static_cast<std::size_t>(j)].at.value, wave.arrival_at(r));
    }
    // Every receiver got every wavelet; each link of the line carried each once.
    EXPECT_EQ(stats.wavelets_ejected, 8u * static_cast<std::uint64_t>(line.length - 1));
    EXPECT_EQ(stats.link_traversals, 8u * static_cast<std::uint64_t>(line.length - 1));
  }
}

TEST_F(Wavelet, ReductionsMatchTheFlowPrimitivesExactly) {
  // Chain and tree along a row, all partials ready, and with a late
  // contributor: the traffic description at both levels, and reduce_line.
  for (const auto scheme :
       {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level})
    for (const std::uint64_t bytes : {4ull, 64ull, 400ull})
      for (const bool late : {false, true}) {
        const Line line{{1, 2}, Direction::east, 12};
        std::vector<NodeReady> ready(12);
        std::vector<Timed> timed(12);
        if (late) {
          ready[5].at = Cycles{90};
          timed[5].at = Cycles{90};
        }
        Traffic t;
        const std::uint32_t done =
            t.reduction(scheme, line, Bytes{bytes}, spec.reduce_hop_overhead, ready);
        FlowModel fm(mesh, spec);
        const Timed expected = reduce_line(mesh, fm, scheme, line, Bytes{bytes}, timed);
        const std::uint64_t flow = run_flow(mesh, spec, t).done(done);
        const std::uint64_t wave = run_wavelet(mesh, spec, t).done(done);
        const std::string what = (scheme == ReductionScheme::chain  ? "chain "
                                  : scheme == ReductionScheme::tree ? "tree "
                                                                    : "two-level ") +
                                 std::to_string(bytes) + " B" + (late ? ", late" : "");
        EXPECT_EQ(wave, flow) << what;
        // With a late partial, reduce_line issues the tree's sends in step
        // order and run_flow in ready order: interleaved, the late send 5 -> 4
        // splits the stride-2 send 6 -> 4 around it in one order and not the
        // other (tree, 400 B: 497 vs 499 cycles).
        if (late)
          EXPECT_LE(rel_error(static_cast<double>(flow), static_cast<double>(expected.at.value)),
                    0.01)
              << what;
        else
          EXPECT_EQ(flow, expected.at.value) << what;
      }
}

TEST_F(Wavelet, KTreeAndRingReductionsMatchTheFlowPrimitive) {
  // The k-tree (K = 3 and the default) and the folded ring along a row, all
  // partials ready: the traffic description at the wavelet level, replayed
  // at the flow level, and reduce_line (the k-tree's roots streaming: each
  // root's message streams from the one before, as a chain's hops do).
  struct Case {
    ReductionScheme scheme;
    int groups;
  };
  for (const Case c : {Case{ReductionScheme::k_tree, 3}, Case{ReductionScheme::k_tree, 0},
                       Case{ReductionScheme::ring, 0}})
    for (const std::uint64_t bytes : {4ull, 64ull}) {
      const Line line{{1, 2}, Direction::east, 12};
      std::vector<NodeReady> ready(12);
      std::vector<Timed> timed(12);
      Traffic t;
      const std::uint32_t done =
          t.reduction(c.scheme, line, Bytes{bytes}, spec.reduce_hop_overhead, ready, 0, c.groups);
      FlowModel fm(mesh, spec);
      const Timed expected = reduce_line(mesh, fm, c.scheme, line, Bytes{bytes}, timed, c.groups);
      const std::uint64_t flow = run_flow(mesh, spec, t).done(done);
      const std::uint64_t wave = run_wavelet(mesh, spec, t).done(done);
      const std::string what =
          std::string(c.scheme == ReductionScheme::ring ? "ring " : "k-tree ") +
          std::to_string(c.groups) + ", " + std::to_string(bytes) + " B";
      // The wavelet level, its flow-level replay and reduce_line agree
      // exactly. (A 4 B k-tree once had reduce_line one cycle early: its root
      // added the two sides' single wavelets at once, where the core adds
      // one side, then the other; K = 3: 16, not 15, at the root.)
      EXPECT_EQ(wave, flow) << what;
      EXPECT_EQ(flow, expected.at.value) << what;
    }
}

TEST_F(Wavelet, KTreeAndRingAllReducesMatchTheFlowPrimitive) {
  // The k-tree's sum multicast from its root to both ends (one injection,
  // the root's router fanning it out), and the ring's all-gather: every
  // core's arrival of the sum at the wavelet level equals its flow-level
  // replay. The k-tree equals all_reduce_line too; the ring's primitive
  // issues its chunks' sends step by step and the replay in ready order, so
  // one core has its last chunk 2 cycles earlier in the primitive (64 B: 107
  // vs 109, 1.8%; 400 B: 261 vs 263), held to 2%.
  struct Case {
    ReductionScheme scheme;
    int groups;
  };
  for (const Case c : {Case{ReductionScheme::k_tree, 3}, Case{ReductionScheme::k_tree, 0},
                       Case{ReductionScheme::ring, 0}})
    for (const std::uint64_t bytes : {4ull, 64ull, 400ull}) {
      const Line line{{1, 2}, Direction::east, 12};
      std::vector<NodeReady> ready(12);
      std::vector<Timed> timed(12), expected;
      Traffic t;
      const std::vector<MessageRef> has =
          t.all_reduce(c.scheme, line, Bytes{bytes}, spec.reduce_hop_overhead, ready, 0, c.groups);
      FlowModel fm(mesh, spec);
      all_reduce_line(mesh, fm, c.scheme, line, Bytes{bytes}, timed, expected, c.groups);
      const TrafficResult flow = run_flow(mesh, spec, t);
      const TrafficResult wave = run_wavelet(mesh, spec, t);
      ASSERT_EQ(has.size(), 12u);
      for (std::size_t i = 0; i < 12; ++i) {
        const std::string what = std::string(c.scheme == ReductionScheme::ring ? "ring " : "k-tree ") +
                                 std::to_string(c.groups) + ", " + std::to_string(bytes) +
                                 " B, core " + std::to_string(i);
        EXPECT_EQ(wave.arrival_at(has[i]), flow.arrival_at(has[i])) << what;
        if (c.scheme == ReductionScheme::k_tree)
          EXPECT_EQ(flow.arrival_at(has[i]), expected[i].at.value) << what;
        else
          EXPECT_LE(rel_error(static_cast<double>(expected[i].at.value),
                              static_cast<double>(flow.arrival_at(has[i]))),
                    0.02)
              << what;
      }
    }
}

TEST_F(Wavelet, AllReduceAgreesWithTheFlowPrimitive) {
  // Reduce into the first core, multicast the sum back: the traffic
  // description at both levels and all_reduce_line. Chains agree to the
  // cycle. Trees and two-level reductions on 10 cores are within 3%: their
  // sends meet on shared links, and the primitive issues them in step order,
  // the replay in ready order (tree, 64 B: sum at 75 vs 77), and the replay
  // sends each chain hop through its receiver's ramp (two-level, 64 B: 82 at
  // flow level vs 80 at both the wavelet level and the primitive).
  for (const auto scheme :
       {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level})
    for (const std::uint64_t bytes : {4ull, 64ull, 400ull}) {
      const Line line{{2, 3}, Direction::east, 10};
      std::vector<NodeReady> ready(10);
      Traffic t;
      const std::vector<MessageRef> has =
          t.all_reduce(scheme, line, Bytes{bytes}, spec.reduce_hop_overhead, ready);
      FlowModel fm(mesh, spec);
      std::vector<Timed> timed(10), expected;
      all_reduce_line(mesh, fm, scheme, line, Bytes{bytes}, timed, expected);
      const TrafficResult flow = run_flow(mesh, spec, t);
      const TrafficResult wave = run_wavelet(mesh, spec, t);
      ASSERT_EQ(has.size(), 10u);
      for (std::uint32_t j = 1; j < 10; ++j) {
        const MessageRef r = has[j];
        const auto w = static_cast<double>(wave.arrival_at(r));
        const std::string what = std::to_string(bytes) + " B, core " + std::to_string(j);
        if (scheme == ReductionScheme::chain) {
          EXPECT_EQ(flow.arrival_at(r), wave.arrival_at(r)) << what;
          EXPECT_EQ(expected[j].at.value, wave.arrival_at(r)) << what;
        } else {
          EXPECT_LE(rel_error(static_cast<double>(flow.arrival_at(r)), w), 0.03) << what;
          EXPECT_LE(rel_error(static_cast<double>(expected[j].at.value), w), 0.03) << what;
        }
      }
    }
}

TEST_F(Wavelet, ChainReductionShape) {
  // 8 cores, all ready at 0, 64 B: the hand-timed flow result (collectives
  // test) is 37 cycles; the wavelet level streams the same wavelets.
  const Line line{{0, 0}, Direction::east, 8};
  std::vector<NodeReady> ready(8);
  Traffic t;
  const std::uint32_t done =
      t.reduction(ReductionScheme::chain, line, Bytes{64}, spec.reduce_hop_overhead, ready);
  WaveletStats stats;
  const TrafficResult wave = run_wavelet(mesh, spec, t, {}, &stats);
  EXPECT_EQ(wave.done(done), 37u);
  // Each hop of the chain is one 1-hop stream of 16 wavelets: s_k = 3k.
  for (std::uint32_t k = 0; k < 7; ++k) EXPECT_EQ(wave.done(k), 3u * k + 1u + 16u) << "hop " << k;
  EXPECT_EQ(stats.link_traversals, 7u * 16u);
}

// A GEMV-shaped phase on the flow primitives directly (what the engine does).
std::uint64_t gemv_on_primitives(const Mesh& mesh, const WaferSpec& spec, const GemvPhase& g) {
  FlowModel fm(mesh, spec);
  const Rect& r = g.region;
  std::vector<std::vector<Timed>> column(static_cast<std::size_t>(r.width));
  for (int i = 0; i < r.width; ++i)
    multicast_line(mesh, fm, Line{{r.x0 + i, r.y0}, Direction::south, r.height}, g.chunk_bytes,
                   Timed{g.start, {}}, column[static_cast<std::size_t>(i)]);
  std::uint64_t done = 0;
  std::vector<Timed> ready(static_cast<std::size_t>(r.width));
  for (int y = 0; y < r.height; ++y) {
    for (int i = 0; i < r.width; ++i)
      ready[static_cast<std::size_t>(i)] =
          column[static_cast<std::size_t>(i)][static_cast<std::size_t>(y)].plus(Resource::compute,
                                                                                g.compute);
    done = std::max(
        done, reduce_line(mesh, fm, g.scheme, Line{{r.x0, r.y0 + y}, Direction::east, r.width},
                          g.partial_bytes, ready)
                  .at.value);
  }
  return done;
}

TEST_F(Wavelet, GemvPhaseAgreesWithinTolerance) {
  for (const auto scheme : {ReductionScheme::chain, ReductionScheme::tree}) {
    GemvPhase g;
    g.region = Rect{2, 2, 8, 8};
    g.chunk_bytes = Bytes{64};
    g.partial_bytes = Bytes{32};
    g.compute = Cycles{40};
    g.scheme = scheme;
    Traffic t;
    const auto rows = add_gemv_phase(t, g, spec.reduce_hop_overhead);
    const std::uint64_t flow = run_flow(mesh, spec, t).done(rows);
    const std::uint64_t wave = run_wavelet(mesh, spec, t).done(rows);
    // The traffic description at flow level is the primitives (multicasts do
    // not share links with the row reductions' colors... they use different
    // directions, so the two agree exactly).
    EXPECT_EQ(flow, gemv_on_primitives(mesh, spec, g));
    EXPECT_LE(rel_error(static_cast<double>(flow), static_cast<double>(wave)), 0.05)
        << "flow " << flow << " wavelet " << wave;
  }
}

// Contention as a run makes it: a root column sends one piece per row to the
// next matrix's column, rows shifted by half the column, so the pieces queue
// on the destination column's links; every route on a color of its own (as
// the color budget gives them). The routers interleave the pieces wavelet by
// wavelet; so does the flow level, to the cycle. The exclusive rule, which
// makes each piece wait for a whole gap, is late.
TEST_F(Wavelet, ContendedMovesBetweenMatricesAgreeExactly) {
  for (const std::uint64_t bytes : {64ull, 256ull})
    for (const int n : {4, 8}) {
      Traffic t;
      std::vector<std::uint32_t> ends;
      for (int i = 0; i < n; ++i)
        ends.push_back(t.unicast({1, 4 + i}, {12, 4 + (i + n / 2) % n}, Bytes{bytes}, Cycles{0},
                                 static_cast<std::uint8_t>(1 + i)));
      const std::uint64_t wave = run_wavelet(mesh, spec, t).done(ends);
      const std::uint64_t flow = run_flow(mesh, spec, t).done(ends);
      FlowModel exclusive(mesh, spec);
      exclusive.set_sharing(LinkSharing::exclusive);
      const std::uint64_t late = run_flow(mesh, spec, exclusive, t).done(ends);
      const std::string what = std::to_string(n) + " pieces of " + std::to_string(bytes) + " B";
      // The pieces really contend: more than one piece's worth of time.
      EXPECT_GT(wave, 11u + 2u * ceil_div(bytes, 4)) << what;
      EXPECT_EQ(flow, wave) << what;
      EXPECT_GT(late, wave) << what;  // 1-3 cycles late here
    }
}

TEST_F(Wavelet, GemvPhaseUnderBackgroundTrafficAgreesWithinTheAim) {
  SyntheticLoad load;
  load.rate = 0.05;
  load.warmup = 0;
  load.measure = 400;
  load.drain = 0;
  load.seed = 7;
  Traffic t = synthetic_traffic(mesh, spec, load);
  GemvPhase g;
  g.region = Rect{4, 4, 8, 8};
  g.chunk_bytes = Bytes{64};
  g.partial_bytes = Bytes{32};
  g.start = Cycles{200};
  g.compute = Cycles{40};
  g.multicast_color = 1;
  g.reduce_color = 2;
  const auto rows = add_gemv_phase(t, g, spec.reduce_hop_overhead);
  auto phase = [&](const TrafficResult& res) {
    return static_cast<double>(res.done(rows) - g.start.value);
  };
  const double flow = phase(run_flow(mesh, spec, t));
  const double wave = phase(run_wavelet(mesh, spec, t));
  // Aim (issue 3): 15%. Measured: exclusive reservations +33% (141 vs 106
  // cycles): each hop of a row's chain needed a gap as long as the whole
  // message on links that background packets cut into short gaps. With the
  // pipelined interleaved rule (the default) -5.7% (100 vs 106); what is
  // left is issue order: background sent after the phase's messages waits
  // behind them, where the routers take turns (docs/validation.md).
  EXPECT_LE(rel_error(flow, wave), 0.15) << "flow " << flow << " wavelet " << wave;
  FlowModel exclusive(mesh, spec);
  exclusive.set_sharing(LinkSharing::exclusive);
  const double pessimistic = phase(run_flow(mesh, spec, exclusive, t));
  EXPECT_GE(pessimistic, wave);
  EXPECT_LE(rel_error(pessimistic, wave), 0.35) << "exclusive " << pessimistic;
}

TEST_F(Wavelet, PhysicsUnderLoad) {
  // Multi-wavelet packets on 3 colors, near saturation, run to completion.
  SyntheticLoad load;
  load.rate = 0.2;
  load.packet_wavelets = 4;
  load.colors = 3;
  load.warmup = 0;
  load.measure = 600;
  load.drain = 0;
  const Traffic t = synthetic_traffic(mesh, spec, load);
  WaveletConfig config;
  WaveletStats stats;
  const TrafficResult res = run_wavelet(mesh, spec, t, config, &stats);
  ASSERT_TRUE(stats.complete);
  EXPECT_EQ(stats.link_overuse, 0u);     // never two wavelets on a link in one cycle
  EXPECT_EQ(stats.buffer_overflow, 0u);  // credits never let a FIFO overflow
  EXPECT_LE(stats.max_buffer_occupancy, config.buffer_depth);
  // Conservation: every wavelet injected is delivered; links carry exactly
  // wavelets x hops.
  std::uint64_t wavelets = 0, traversals = 0;
  for (std::uint32_t m = 0; m < t.size(); ++m) {
    const Message& msg = t.messages()[m];
    const std::uint64_t w = ceil_div(msg.bytes.value, 4);
    const auto hops = static_cast<std::uint64_t>(manhattan(msg.src, msg.dst));
    wavelets += w;
    traversals += w * hops;
    // Latency >= hops x hop latency + serialization.
    EXPECT_GE(res.done(m), msg.ready.value + hops + w);
  }
  EXPECT_EQ(stats.wavelets_injected, wavelets);
  EXPECT_EQ(stats.wavelets_ejected, wavelets);
  EXPECT_EQ(stats.link_traversals, traversals);
  std::uint64_t per_link = 0;
  for (std::uint64_t l : stats.link_wavelets) {
    per_link += l;
    EXPECT_LE(l, stats.cycles);
  }
  EXPECT_EQ(per_link, traversals);
  std::uint64_t ejected = 0;
  for (std::uint32_t e : stats.ejected_per_cycle) {
    ejected += e;
    EXPECT_LE(e, mesh.core_count());
  }
  EXPECT_EQ(ejected, wavelets);
}

TEST_F(Wavelet, LowLoadAgreesWithFlowOnEveryPattern) {
  for (const std::string& name : pattern_names()) {
    SyntheticLoad load;
    load.pattern = *parse_pattern(name);
    // Low enough that even the hotspot's ejection ramp (0.2 x 255 x rate
    // wavelets/cycle) is far from its 1 wavelet/cycle.
    load.rate = 0.005;
    load.warmup = 200;
    load.measure = 1000;
    load.drain = 400;
    const LoadPoint flow = measure_load(mesh, spec, load, Level::flow);
    const LoadPoint wave = measure_load(mesh, spec, load, Level::wavelet);
    ASSERT_GT(wave.measured_packets, 0u) << name;
    EXPECT_FALSE(wave.saturated) << name;
    EXPECT_LE(rel_error(flow.latency_cycles, wave.latency_cycles), 0.05)
        << name << ": flow " << flow.latency_cycles << " wavelet " << wave.latency_cycles;
    EXPECT_NEAR(wave.accepted_rate, load.rate, 0.2 * load.rate) << name;
  }
}

// Issue 16: on large meshes the flow level drifted above the routers under
// light uniform traffic (64x64 at 0.02: +8%; 128x128: +22% / +43% at 0.01 /
// 0.02; 256x256 at 0.01: +61%). A packet reserves its later hops far ahead
// of `now`; a link record with 4 intervals gave up gaps that still had free
// cycles, and packets sent after waited in them. Records that need more
// intervals now go wide (docs/validation.md); the flow level is within 1%
// here (44.3 vs 44.4 cycles with the full window, `wafersim noc`).
TEST(WaveletFidelity, LargeMeshUnderLightLoadAgreesWithFlow) {
  const WaferSpec spec = testing::small_spec(64, 64);
  const Mesh mesh(64, 64);
  SyntheticLoad load;
  load.rate = 0.02;
  load.warmup = 300;  // longer than the longest route (126 hops)
  load.measure = 1000;
  load.drain = 400;
  const LoadPoint flow = measure_load(mesh, spec, load, Level::flow);
  const LoadPoint wave = measure_load(mesh, spec, load, Level::wavelet);
  ASSERT_FALSE(wave.saturated);
  ASSERT_FALSE(flow.saturated);
  EXPECT_LE(rel_error(flow.latency_cycles, wave.latency_cycles), 0.02)
      << "flow " << flow.latency_cycles << " wavelet " << wave.latency_cycles;
}

TEST(WaveletSaturation, UniformRandomStaysBelowTheBisectionBound) {
  // 8x8, XY, uniform random over the other 63 cores: the middle links carry
  // 4 x 4 x 8 / 63 = 2.03 x rate, so the bound is 4 (k^2-1)/k^3 = 0.492.
  const WaferSpec spec = testing::small_spec(8, 8);
  const Mesh mesh(8, 8);
  const double bound = uniform_random_bound(8, 8);
  EXPECT_NEAR(bound, 4.0 * 63.0 / 512.0, 1e-12);
  EXPECT_NEAR(uniform_random_bound(16, 16), 4.0 * 255.0 / 4096.0, 1e-12);
  SyntheticLoad load;
  load.rate = 0.9;  // far above saturation
  load.warmup = 500;
  load.measure = 1500;
  load.drain = 0;
  const LoadPoint p = measure_load(mesh, spec, load, Level::wavelet);
  EXPECT_LE(p.accepted_rate, bound * 1.02);
  EXPECT_GE(p.accepted_rate, bound * 0.5);
  // Below saturation the network accepts what is offered.
  load.rate = 0.2;
  load.drain = 2000;
  const LoadPoint low = measure_load(mesh, spec, load, Level::wavelet);
  EXPECT_FALSE(low.saturated);
  EXPECT_NEAR(low.accepted_rate, 0.2, 0.02);
}

TEST(WaveletDeterminism, SameSeedSameResult) {
  const WaferSpec spec = testing::small_spec(8, 8);
  const Mesh mesh(8, 8);
  SyntheticLoad load;
  load.pattern = Pattern::hotspot;
  load.rate = 0.3;
  load.colors = 2;
  load.packet_wavelets = 2;
  load.warmup = 100;
  load.measure = 300;
  load.drain = 300;
  WaveletStats a, b;
  const LoadPoint pa = measure_load(mesh, spec, load, Level::wavelet, {}, &a);
  const LoadPoint pb = measure_load(mesh, spec, load, Level::wavelet, {}, &b);
  EXPECT_EQ(pa.latency_cycles, pb.latency_cycles);
  EXPECT_EQ(pa.accepted_rate, pb.accepted_rate);
  EXPECT_EQ(a.link_wavelets, b.link_wavelets);
  load.seed = 2;
  EXPECT_NE(measure_load(mesh, spec, load, Level::wavelet).latency_cycles, pa.latency_cycles);
}

TEST(Traffic, RejectsImpossibleDescriptions) {
  const WaferSpec spec = testing::small_spec(4, 4);
  const Mesh mesh(4, 4);
  Traffic off;
  off.unicast({0, 0}, {4, 0}, Bytes{4}, Cycles{0});
  EXPECT_THROW(run_flow(mesh, spec, off), std::invalid_argument);
  Traffic diagonal;
  Message m;
  m.src = {0, 0};
  m.dst = {2, 2};
  m.bytes = Bytes{4};
  m.multicast = true;
  diagonal.add(m);
  EXPECT_THROW(run_wavelet(mesh, spec, diagonal), std::invalid_argument);
  Traffic colors;
  colors.unicast({0, 0}, {1, 0}, Bytes{4}, Cycles{0}, 30);  // the router has 24
  EXPECT_THROW(run_wavelet(mesh, spec, colors), std::invalid_argument);
  Traffic empty;
  empty.unicast({0, 0}, {1, 0}, Bytes{0}, Cycles{0});
  EXPECT_THROW(run_flow(mesh, spec, empty), std::invalid_argument);
}

}  // namespace
}  // namespace wafersim::fabric
