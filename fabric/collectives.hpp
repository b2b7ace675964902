// Communication primitives built on the flow-level link model: multicast
// along a line of cores and to a rectangle, reduction along a line (chain,
// tree, two-level, k-tree or ring), and all-reduce along a line and over a rectangle. Costs come
// out of the per-link reservations, never a closed formula. Each reduction
// also yields the order in which partial sums are combined, so functional
// mode adds them exactly as the simulated hardware does.
#pragma once

#include <span>
#include <vector>

#include "fabric/link_timing.hpp"

namespace wafersim::fabric {

// chain: one stream from the far end to the root, each core adding on the way.
// tree: pairwise at strides 1, 2, 4, ... (log2 n levels, store and forward).
// two_level: groups of two_level_group(n) ~ sqrt(n) cores; every group
// chain-reduces into its first core (all groups at once), then the group
// roots chain into core 0, each root adding the incoming partial to its own.
// k_tree: WaferLLM's MeshGEMV reduction as its code builds it (He et al.,
// OSDI 2025; MeshInfra/WaferLLM MeshGEMV/*/src/comm_lib/comm_pe.csl,
// two_tree_allreduce_y, and layout.csl): the line is cut in K groups
// (k_tree_groups), every group reduces from both of its ends toward its
// CENTRE core (two chains, the root adding the far half's stream first),
// then the group roots reduce from both ends toward the line's k-tree root,
// the centre of the middle group (group K/2), over pass-through routes that
// cross the other groups' routers without entering their cores. All-reduce
// multicasts the sum from that root both ways; a reduce into line.at(0) moves
// it there afterwards.
// ring: the GPUs' ring all-reduce (reduce-scatter, then all-gather) on a line
// with no wrap-around link: the ring is folded onto the line (ring_sequence:
// 0, 2, 4, ... out along the line, then the odd cores back), so every ring
// edge is 1 or 2 links and every link direction carries one edge, which is
// what a ring on a mesh line can be. The message is cut into
// ring_chunks(n, bytes) chunks (at most one per core, at least one wavelet
// each); chunk c is summed around the ring from ring position c+1 to c, then
// passed on around the ring to every core.
enum class ReductionScheme { chain, tree, two_level, k_tree, ring };

// Cores per group of a two-level reduction over n cores: round(sqrt(n)), at least 1.
int two_level_group(int n);

// A scheme's name as scenarios, placement files and messages write it:
// "chain", "tree", "two-level", "k-tree", "ring".
const char* reduction_name(ReductionScheme s);

// Groups of a k-tree over n cores asked for `groups` (0: the default,
// round(sqrt(n)), which is what WaferLLM runs: 20 groups on its 420-core
// lines, Decode/WSE-2/model_config/llama8B_4k_1_420.json), at most n.
int k_tree_groups(int n, int groups);
// The cores of k-tree group i of `groups` over n: [k_tree_group_begin(i),
// k_tree_group_begin(i + 1)), near-equal sizes (WaferLLM needs K to divide
// n; any K works here). Its root is the centre: begin + size / 2.
int k_tree_group_begin(int n, int groups, int i);
// The line index the k-tree's sum lands on (the centre of group K/2).
int k_tree_root(int n, int groups);

// The folded ring over n cores of a line, as line indices in ring order:
// the even indices ascending, then the odd ones descending (5: 0 2 4 3 1).
std::vector<int> ring_sequence(int n);
// Chunks of a ring all-reduce of `bytes` over n cores: one per core, but
// never less than one 4 B wavelet each.
int ring_chunks(int n, Bytes bytes);

// One combine of a reduction: partial[into] += partial[from].
struct CombineStep {
  int into = 0;
  int from = 0;
};

// The combine order of reducing n partials, and where the sum lands
// (reduction_root). Chain: the stream starts at the far end (n-1 into n-2,
// ..., 1 into 0). Tree: pairwise, stride 1, 2, 4, ... toward index 0.
// Two-level: every group's chain (group by group, far end first), then the
// roots from the last group's inward. K-tree (`groups` K, 0 = default): per
// group, its near half's chain toward the centre, its far half's, then the
// centre adds the far half's stream and the near half's; then the roots:
// the near side's chain toward the k-tree root, the far side's, and the root
// adds the far side's and then the near side's (comm_pe.csl's order). Ring:
// the order of chunk `chunk` (ring position chunk+1 first, around the ring to
// position chunk); other schemes have one order for every chunk.
std::vector<CombineStep> reduction_order(ReductionScheme scheme, int n, int groups = 0,
                                         int chunk = 0);
int reduction_root(ReductionScheme scheme, int n, int groups = 0, int chunk = 0);

// Colors (routes configured per color in a router) one collective over a
// line of n cores needs at each of its routers, with one static route set per
// color for the whole program as WaferLLM's layout.csl configures them:
// chain 2 (receive and send alternate between two colors core by core);
// tree one per level (ceil(log2 n): a level's routes pass routers where the
// next level's start or end); two-level 2 + 2 (the groups' chains, the roots'
// pass-through chain); k-tree 4 + 4 (both directions of each level, two
// alternating colors each: WaferLLM's colors 5-8 and 13-16); ring 4 (two per
// direction). An all-reduce adds its broadcast: 1 (k-tree 2, both ways: its
// colors 9 and 10; ring 0, the all-gather reuses the ring's routes); a k-tree
// reduce into line.at(0) adds 1 for the move from its root.
int collective_colors(ReductionScheme scheme, int n, int groups, bool all_reduce);

// A straight line of n cores starting at `first` and stepping `along`.
struct Line {
  Coord first;
  Direction along = Direction::east;
  int length = 1;
  Coord at(int i) const;
};

// Multicast a message from line.at(0) to every core of the line; `arrivals`
// receives the time each core has the whole message (size line.length).
void multicast_line(const Mesh& mesh, FlowModel& flow, const Line& line, Bytes bytes,
                    const Timed& ready, std::vector<Timed>& arrivals);

// Reduce one partial per core of the line into line.at(0). `ready[i]` is
// when core i's partial is ready. Returns when the sum is complete at core 0.
Timed reduce_line(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Line& line,
                  Bytes bytes, std::span<const Timed> ready, int groups = 0);

// All-reduce along a line: reduce_line into line.at(0), then multicast the
// sum back along the line. `arrivals[i]` is when core i has the sum
// (core 0: when the reduction completes there). K-tree: reduced into its
// root, then multicast from there both ways; ring: reduce-scatter and
// all-gather, no multicast.
void all_reduce_line(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Line& line,
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals,
                     int groups = 0);

// Multicast from a rectangle's corner (x0, y0) to every core of it, as the
// routers do it with one color: the corner's router sends east along the
// top row, and every top-row router also replicates each wavelet south down
// its column as it passes (no core re-sends). Uncontended, core (x0 + i,
// y0 + j) has the message at ready + (i + j) * hop_latency + ser.
// `arrivals` is row-major: arrivals[j * width + i] for core (x0 + i, y0 + j).
void multicast_rect(const Mesh& mesh, FlowModel& flow, const Rect& rect, Bytes bytes,
                    const Timed& ready, std::vector<Timed>& arrivals);

// All-reduce over a rectangle: every row reduces into its west core
// (`scheme` along the row), the west column reduces into the corner (the
// same scheme, down the column toward the top), then the sum is multicast to
// every core (multicast_rect). `ready` and `arrivals` are row-major, as in
// multicast_rect.
void all_reduce_rect(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Rect& rect,
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals,
                     int groups = 0);

}  // namespace wafersim::fabric
