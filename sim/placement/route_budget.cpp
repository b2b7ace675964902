#include "sim/placement/route_budget.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "fabric/collectives.hpp"
#include "fabric/colors.hpp"
#include "fabric/sram.hpp"
#include "sim/placement/layout.hpp"

namespace wafersim::sim {

namespace {

using fabric::Direction;
using fabric::Line;
using fabric::ReductionScheme;

enum class Kind { multicast, reduce, all_reduce };

// A set of routes configured in the routers of a line: a reduction's
// (its scheme's colors without any broadcast) or one broadcast from a core
// of the line in one direction (1 color: a GEMV's input multicast, an
// all-reduce's multicast back, a k-tree's move from its root).
struct Pattern {
  int wafer = 0;
  Line line;
  bool reduction = false;
  ReductionScheme scheme = ReductionScheme::chain;
  int groups = 0;
  int from = 0;       // broadcast: the line index it starts at
  bool along = true;  // broadcast: toward the line's end (else its start)
  std::string owner;  // the first matrix that has it
  int colors = 0;

  // The cores it passes (a broadcast from its source on).
  int first_index() const { return reduction || along ? (reduction ? 0 : from) : 0; }
  int last_index() const { return reduction || along ? line.length - 1 : from; }
  std::string what() const {
    if (!reduction) return fmt::format("{}: broadcast {}", owner, colors);
    const std::string k = scheme == ReductionScheme::k_tree
                              ? fmt::format(" (K = {})", fabric::k_tree_groups(line.length, groups))
                              : std::string();
    return fmt::format("{}: {}{} over {} cores {}", owner, fabric::reduction_name(scheme), k,
                       line.length, colors);
  }
  bool passes(Coord c) const {
    for (int i = first_index(); i <= last_index(); ++i)
      if (line.at(i) == c) return true;
    return false;
  }
};

// The patterns of a placed program, each once (the same routes on the same
// line serve every collective that uses them).
class Patterns {
 public:
  void add(int wafer, const Line& line, ReductionScheme scheme, int groups, Kind kind,
           const std::string& owner) {
    const int n = line.length;
    if (n < 2) return;
    if (scheme != ReductionScheme::k_tree) groups = 0;
    if (kind == Kind::multicast) return broadcast(wafer, line, 0, true, owner);
    const bool k_tree = scheme == ReductionScheme::k_tree;
    const int root = k_tree ? fabric::k_tree_root(n, groups) : 0;
    // The reduction's own routes: collective_colors less the k-tree's move.
    const int own = fabric::collective_colors(scheme, n, groups, false) - (k_tree && root > 0);
    insert(Pattern{wafer, line, true, scheme, groups, 0, true, owner, own});
    if (k_tree) {
      // The move to the line's first core, or the broadcast both ways.
      if (root > 0) broadcast(wafer, line, root, false, owner);
      if (kind == Kind::all_reduce && root < n - 1) broadcast(wafer, line, root, true, owner);
    } else if (kind == Kind::all_reduce && scheme != ReductionScheme::ring) {
      broadcast(wafer, line, 0, true, owner);
    }
  }
  void gemv(const MatrixPlacement& m) {
    for (int qi = 0; qi < m.q(); ++qi)
      add(m.wafer, Line{m.core(0, qi), m.multicast_direction(), m.p()}, ReductionScheme::chain, 0,
          Kind::multicast, m.name);
    for (int pi = 0; pi < m.p(); ++pi)
      add(m.wafer, Line{m.root(pi), m.reduction_direction(), m.q()}, m.reduction,
          m.reduction_groups, Kind::reduce, m.name);
  }
  void attention(const AttentionPlacement& a, const std::string& owner) {
    const int L = a.segment_length, C = std::max(1, a.columns_per_head);
    for (int h = 0; h < a.num_kv_heads; ++h) {
      for (int j = 0; j < C; ++j) {
        const Line down{C > 1 ? a.block_core(h, 0, j) : a.segment_core(h, 0), Direction::south, L};
        add(a.wafer, down, ReductionScheme::chain, 0, Kind::multicast, owner);
        add(a.wafer, down, a.reduction, a.reduction_groups, Kind::reduce, owner);
      }
      if (C > 1)
        for (int i = 0; i < L; ++i)
          add(a.wafer, Line{a.block_core(h, i, 0), Direction::east, C}, a.reduction,
              a.reduction_groups, Kind::all_reduce, owner);
    }
  }
  // A layout on consecutive cores of one row or column, as a line.
  void layout_all_reduce(const Layout& l, ReductionScheme scheme, int groups,
                         const std::string& owner) {
    if (l.size() < 2) return;
    const Coord a = l.front().core, b = l.back().core;
    if (a.x != b.x && a.y != b.y) return;
    const Direction along = a.x == b.x ? (b.y > a.y ? Direction::south : Direction::north)
                                       : (b.x > a.x ? Direction::east : Direction::west);
    add(l.front().wafer, Line{a, along, static_cast<int>(l.size())}, scheme, groups,
        Kind::all_reduce, owner);
  }
  const std::vector<Pattern>& list() const { return list_; }

 private:
  void broadcast(int wafer, const Line& line, int from, bool along, const std::string& owner) {
    insert(Pattern{wafer, line, false, ReductionScheme::chain, 0, from, along, owner, 1});
  }
  void insert(Pattern p) {
    // A line is known by its cores, whichever end it is named from.
    const auto key = std::make_tuple(p.wafer, p.line.first.x, p.line.first.y,
                                     static_cast<int>(p.line.along), p.line.length, p.reduction,
                                     static_cast<int>(p.scheme), p.groups, p.from, p.along);
    if (seen_.emplace(key, list_.size()).second) list_.push_back(std::move(p));
  }
  std::map<std::tuple<int, int, int, int, int, bool, int, int, int, bool>, std::size_t> seen_;
  std::vector<Pattern> list_;
};

}  // namespace

RouteBudget check_route_colors(const Placement& placement, const fabric::WaferSpec& spec) {
  Patterns patterns;
  for (const LayerStage& st : placement.layers) {
    for (const MatrixPlacement* m : st.matrices()) patterns.gemv(*m);
    patterns.attention(st.attention, fmt::format("layer {} attention", st.layer));
    patterns.layout_all_reduce(
        output_layout(st.o), st.whole_region ? st.o.reduction : ReductionScheme::chain,
        st.whole_region ? st.o.reduction_groups : 0, fmt::format("layer {} norms", st.layer));
  }
  const HeadStage& head = placement.head;
  if (head.lm_head.p() > 0 && head.lm_head.q() > 0) patterns.gemv(head.lm_head);
  RouteBudget budget;
  budget.available = spec.virtual_channels;
  const fabric::Mesh mesh(spec.mesh_width, spec.mesh_height);
  for (int w = 0; w < std::max(1, placement.wafers); ++w) {
    fabric::RouteColors colors(mesh);
    for (const Pattern& p : patterns.list())
      if (p.wafer == w) {
        const int a = p.first_index(), b = p.last_index();
        const Line part{p.line.at(a), p.line.along, b - a + 1};
        for (int c = 0; c < p.colors; ++c) colors.add_line(part);
      }
    const int most = colors.max_routes();
    if (most > budget.max_colors) {
      budget.max_colors = most;
      budget.wafer = w;
      bool found = false;
      for (int y = 0; y < spec.mesh_height && !found; ++y)
        for (int x = 0; x < spec.mesh_width && !found; ++x)
          if (colors.routes_at({x, y}) == most) {
            budget.router = {x, y};
            found = true;
          }
    }
    if (spec.virtual_channels <= 0) continue;
    const auto over = colors.over_budget(spec.virtual_channels);
    if (over.empty()) continue;
    // The router that needs the most, first in core order.
    const auto worst = std::max_element(
        over.begin(), over.end(), [](const auto& a, const auto& b) { return a.routes < b.routes; });
    std::vector<const Pattern*> through;
    for (const Pattern& p : patterns.list())
      if (p.wafer == w && p.passes(worst->router)) through.push_back(&p);
    std::stable_sort(through.begin(), through.end(),
                     [](const Pattern* a, const Pattern* b) { return a->colors > b->colors; });
    std::string parts;
    for (std::size_t i = 0; i < through.size() && i < 6; ++i) {
      if (i > 0) parts += "; ";
      parts += through[i]->what();
    }
    if (through.size() > 6) parts += fmt::format("; and {} more", through.size() - 6);
    throw fabric::FitError(fmt::format(
        "wafer {} router ({}, {}) needs {} colors at once but {} has {} (virtual_channels): the "
        "routes through it are {}. Give the k-tree fewer colors (it needs 8 per line, 4 with "
        "reduction_groups: 1, plus its broadcasts), choose a scheme that needs fewer (chain 2 "
        "per line, two-level 4, ring 4; each broadcast 1) for some matrices (placement: "
        "matrices: {{attention: {{reduction: chain}}}}), or put the matrices that share these "
        "routers in regions of their own",
        w, worst->router.x, worst->router.y, worst->routes, spec.name, spec.virtual_channels,
        parts));
  }
  return budget;
}

}  // namespace wafersim::sim
