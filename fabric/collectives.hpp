// Communication primitives built on the flow-level link model: multicast
// along a line of cores and to a rectangle, reduction along a line (chain,
// tree or two-level), and all-reduce along a line and over a rectangle. Costs come
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
// two_level: WaferLLM's MeshGEMV reduction (He et al., OSDI 2025): the line
// is cut in groups of two_level_group(n) ~ sqrt(n) cores; every group
// chain-reduces into its first core (all groups at once), then the group
// roots chain into core 0, each root adding the incoming partial to its own.
enum class ReductionScheme { chain, tree, two_level };

// Cores per group of a two-level reduction over n cores: round(sqrt(n)), at least 1.
int two_level_group(int n);

// One combine of a reduction: partial[into] += partial[from].
struct CombineStep {
  int into = 0;
  int from = 0;
};

// The combine order of reducing n partials into index 0. Chain: the stream
// starts at the far end (n-1 into n-2, ..., 1 into 0). Tree: pairwise,
// stride 1, 2, 4, ... toward index 0. Two-level: every group's chain (group
// by group, far end first), then the roots from the last group's inward.
std::vector<CombineStep> reduction_order(ReductionScheme scheme, int n);

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
                  Bytes bytes, std::span<const Timed> ready);

// All-reduce along a line: reduce_line into line.at(0), then multicast the
// sum back along the line. `arrivals[i]` is when core i has the sum
// (core 0: when the reduction completes there).
void all_reduce_line(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Line& line,
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals);

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
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals);

}  // namespace wafersim::fabric
