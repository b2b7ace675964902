#include "fabric/redundancy.hpp"

#include <algorithm>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "fabric/sram.hpp"

namespace wafersim::fabric {

namespace {

// Group g's logical columns [x0, x0 + n) and its physical columns
// [p0, p0 + n + spares).
struct Segment {
  int x0, n, p0;
};
Segment segment(const Redundancy& r, int logical_width, int g) {
  const int k = r.columns_per_group;
  const int x0 = g * k;
  return Segment{x0, std::min(k, logical_width - x0), g * (k + r.spare_columns)};
}
int groups(const Redundancy& r, int logical_width) {
  return (logical_width + r.columns_per_group - 1) / r.columns_per_group;
}

}  // namespace

DefectMap physical_defects(const WaferSpec& spec) {
  return DefectMap(spec.physical_width(), spec.mesh_height, spec.defect_probability(),
                   spec.defect_seed, spec.listed_defects(), spec.defect_clustering,
                   spec.defect_cluster_size);
}

std::string RepairFailure::describe() const {
  std::string s = "defects beyond the spares: row " + std::to_string(row) + ", spare group " +
                  std::to_string(group) + " (logical columns " + std::to_string(logical_x0) + "-" +
                  std::to_string(logical_x1 - 1) + ", physical columns " +
                  std::to_string(physical_x0) + "-" + std::to_string(physical_x1 - 1) + ") has " +
                  std::to_string(dead) + " dead cores for " + std::to_string(spares) +
                  (spares == 1 ? " spare" : " spares");
  if (segments_failed > 1)
    s += "; " + std::to_string(segments_failed - 1) + " more row segments are beyond their spares";
  return s + " (lower defects.rate, or add spares: redundancy.spare_columns)";
}

std::optional<RepairFailure> first_unrepairable(const Redundancy& r, int logical_width,
                                                const DefectMap& physical) {
  std::optional<RepairFailure> first;
  if (physical.dead_count() == 0) return first;
  const int gs = groups(r, logical_width);
  int failed = 0;
  for (int y = 0; y < physical.height(); ++y)
    for (int g = 0; g < gs; ++g) {
      const Segment s = segment(r, logical_width, g);
      int dead = 0;
      for (int p = s.p0; p < s.p0 + s.n + r.spare_columns; ++p) dead += physical.dead(Coord{p, y});
      if (dead <= r.spare_columns) continue;
      ++failed;
      if (!first)
        first = RepairFailure{
            y, g, s.x0, s.x0 + s.n, s.p0, s.p0 + s.n + r.spare_columns, dead, r.spare_columns, 0};
    }
  if (first) first->segments_failed = failed;
  return first;
}

void check_repairable(const Redundancy& r, int logical_width, const DefectMap& physical) {
  if (const auto f = first_unrepairable(r, logical_width, physical)) throw FitError(f->describe());
}

Repair::Repair(const WaferSpec& spec)
    : Repair(spec.redundancy, spec.mesh_width, physical_defects(spec)) {}

Repair::Repair(const Redundancy& r, int logical_width, DefectMap physical)
    : r_(r), width_(logical_width), physical_(std::move(physical)) {
  if (!r.enabled()) throw std::invalid_argument("Repair: the wafer has no spares");
  check_repairable(r, logical_width, physical_);
  const int h = physical_.height();
  px_.resize(static_cast<std::size_t>(width_) * static_cast<std::size_t>(h));
  const int gs = groups(r, logical_width);
  for (int y = 0; y < h; ++y)
    for (int g = 0; g < gs; ++g) {
      const Segment s = segment(r, logical_width, g);
      // Logical core i of the segment on its i-th healthy physical core.
      int p = s.p0;
      for (int i = 0; i < s.n; ++i, ++p) {
        while (physical_.dead(Coord{p, y})) ++p;
        px_[static_cast<std::size_t>(y) * static_cast<std::size_t>(width_) +
            static_cast<std::size_t>(s.x0 + i)] = p;
        if (p != s.p0 + i) ++displaced_;
      }
    }
  count_links();
}

int Repair::healthy_x(int logical_x) const {
  const int g = logical_x / r_.columns_per_group;
  return logical_x + g * r_.spare_columns;
}

int Repair::extra_hops_between(Coord a, Coord b) const {
  if (a.y == b.y) {
    // East/west: one extra hop per dead core bypassed between the ends.
    const int lo = std::min(physical_x(a), physical_x(b));
    const int hi = std::max(physical_x(a), physical_x(b));
    int dead = 0;
    for (int p = lo + 1; p < hi; ++p) dead += physical_.dead(Coord{p, a.y});
    return dead;
  }
  // North/south: one extra hop per column the ends are offset.
  return std::abs(physical_x(a) - physical_x(b));
}

int Repair::extra_hops(const Mesh& logical, LinkId l) const {
  const Coord a = logical.link_source(l);
  const Coord b = Mesh::step(a, logical.link_direction(l));
  if (!logical.contains(b)) return 0;
  return extra_hops_between(a, b);
}

void Repair::count_links() {
  if (displaced_ == 0 && physical_.dead_count() == 0) return;
  // Each undirected neighbour pair carries two links (one each way).
  const int h = physical_.height();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < width_; ++x) {
      const Coord c{x, y};
      if (x + 1 < width_)
        if (const int e = extra_hops_between(c, Coord{x + 1, y}); e > 0)
          repaired_links_ += 2, total_extra_hops_ += 2 * static_cast<std::uint64_t>(e);
      if (y + 1 < h)
        if (const int e = extra_hops_between(c, Coord{x, y + 1}); e > 0)
          repaired_links_ += 2, total_extra_hops_ += 2 * static_cast<std::uint64_t>(e);
    }
}

std::vector<std::uint16_t> Repair::link_extra_cycles(const Mesh& logical) const {
  std::vector<std::uint16_t> out;
  if (repaired_links_ == 0 || r_.detour_latency.value == 0) return out;
  if (logical.width() != width_ || logical.height() != physical_.height())
    throw std::invalid_argument("Repair::link_extra_cycles: mesh and repair differ in size");
  out.assign(logical.link_count(), 0);
  for (int y = 0; y < logical.height(); ++y)
    for (int x = 0; x < logical.width(); ++x)
      for (int d = 0; d < kDirections; ++d) {
        const LinkId l = logical.link(Coord{x, y}, static_cast<Direction>(d));
        const std::uint64_t c =
            static_cast<std::uint64_t>(extra_hops(logical, l)) * r_.detour_latency.value;
        out[l.value] = static_cast<std::uint16_t>(std::min<std::uint64_t>(c, 65535));
      }
  return out;
}

}  // namespace wafersim::fabric

namespace wafersim::fabric {

std::size_t Repair::BorrowedLinks::borrowing() const {
  std::size_t n = 0;
  for (std::size_t l = 0; l + 1 < first.size(); ++l) n += first[l + 1] > first[l] ? 1 : 0;
  return n;
}

Repair::BorrowedLinks Repair::borrowed_links(const Mesh& logical) const {
  BorrowedLinks out;
  if (repaired_links_ == 0) return out;
  if (logical.width() != width_ || logical.height() != physical_.height())
    throw std::invalid_argument("Repair::borrowed_links: mesh and repair differ in size");
  const auto px_row = [&](int y) {
    return std::span<const std::int32_t>(px_.data() + static_cast<std::size_t>(y) * width_,
                                         static_cast<std::size_t>(width_));
  };
  // (borrowing link, borrowed link) pairs, in each borrowing link's order;
  // only repaired north/south links make them, so the list stays short.
  std::vector<std::pair<std::uint32_t, LinkId>> pairs;
  for (int y = 0; y < logical.height(); ++y)
    for (int x = 0; x < logical.width(); ++x)
      for (const Direction d : {Direction::south, Direction::north}) {
        const Coord a{x, y};
        const Coord b = Mesh::step(a, d);
        if (!logical.contains(b)) continue;
        const int pa = physical_x(a), pb = physical_x(b);
        if (pa == pb) continue;
        // Sideways along row b.y from pa to pb: physical link q -> q +- 1.
        const std::span<const std::int32_t> row = px_row(b.y);
        const std::uint32_t self = logical.link(a, d).value;
        const int step = pb > pa ? 1 : -1;
        for (int q = pa; q != pb; q += step) {
          // The logical link whose span holds physical link q -> q + step:
          // east, i -> i + 1 with px(i) <= q < px(i + 1); west, j -> j - 1
          // with px(j - 1) < q <= px(j).
          LinkId owner{};
          if (step > 0) {
            const auto it = std::upper_bound(row.begin(), row.end(), q);
            if (it == row.begin() || it == row.end()) continue;  // nobody's
            owner =
                logical.link(Coord{static_cast<int>(it - row.begin()) - 1, b.y}, Direction::east);
          } else {
            const auto it = std::lower_bound(row.begin(), row.end(), q);
            if (it == row.begin() || it == row.end()) continue;
            owner = logical.link(Coord{static_cast<int>(it - row.begin()), b.y}, Direction::west);
          }
          if (pairs.empty() || pairs.back().first != self || !(pairs.back().second == owner))
            pairs.emplace_back(self, owner);
        }
      }
  if (pairs.empty()) return out;
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& p, const auto& q) { return p.first < q.first; });
  out.first.assign(logical.link_count() + 1, 0);
  out.links.reserve(pairs.size());
  for (const auto& p : pairs) {
    ++out.first[p.first + 1];
    out.links.push_back(p.second);
  }
  for (std::size_t l = 1; l < out.first.size(); ++l) out.first[l] += out.first[l - 1];
  return out;
}

}  // namespace wafersim::fabric
