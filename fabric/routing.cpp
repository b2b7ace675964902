#include "fabric/routing.hpp"

#include <algorithm>
#include <string>

namespace wafersim::fabric {

namespace {

std::string where(Coord c) {
  return "(" + std::to_string(c.x) + ", " + std::to_string(c.y) + ")";
}

}  // namespace

DetourRouter::DetourRouter(const Mesh& mesh, const DefectMap& defects)
    : mesh_(mesh), defects_(defects) {
  if (defects.width() != mesh.width() || defects.height() != mesh.height())
    throw std::invalid_argument("DetourRouter: defect map and mesh differ in size");
}

bool DetourRouter::clear(Coord src, Coord dst, bool x_first) const {
  if (defects_.dead(src) || defects_.dead(dst)) return false;
  const Coord turn = x_first ? Coord{dst.x, src.y} : Coord{src.x, dst.y};
  auto run_clear = [&](Coord a, Coord b) {
    const int sx = b.x > a.x ? 1 : (b.x < a.x ? -1 : 0);
    const int sy = b.y > a.y ? 1 : (b.y < a.y ? -1 : 0);
    for (Coord c = a; !(c == b); c = Coord{c.x + sx, c.y + sy})
      if (defects_.dead(c)) return false;
    return true;
  };
  return run_clear(src, turn) && run_clear(turn, dst);
}

void DetourRouter::yx_route(Coord src, Coord dst, std::vector<LinkId>& out) const {
  const int dy = dst.y - src.y;
  mesh_.straight_route(src, dy >= 0 ? Direction::south : Direction::north, std::abs(dy), out);
  const Coord turn{src.x, dst.y};
  const int dx = dst.x - src.x;
  mesh_.straight_route(turn, dx >= 0 ? Direction::east : Direction::west, std::abs(dx), out);
}

void DetourRouter::route(Coord src, Coord dst, std::vector<LinkId>& out) {
  if (!mesh_.contains(src) || !mesh_.contains(dst))
    throw std::out_of_range("route endpoint outside the mesh");
  if (defects_.dead_count() == 0) return mesh_.xy_route(src, dst, out);
  if (defects_.dead(src) || defects_.dead(dst))
    throw RouteError("no route from " + where(src) + " to " + where(dst) + ": core " +
                     where(defects_.dead(src) ? src : dst) + " is dead");
  if (clear(src, dst, true)) return mesh_.xy_route(src, dst, out);
  if (clear(src, dst, false)) return yx_route(src, dst, out);
  search(src, dst, out);
}

void DetourRouter::search(Coord src, Coord dst, std::vector<LinkId>& out) {
  const std::uint64_t key =
      (static_cast<std::uint64_t>(mesh_.id(src).value) << 32) | mesh_.id(dst).value;
  if (const auto it = searched_.find(key); it != searched_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  if (seen_.empty()) {
    seen_.assign(mesh_.core_count(), 0);
    came_.assign(mesh_.core_count(), 0);
  }
  if (++epoch_ == 0) {  // wrapped: forget every earlier search
    std::fill(seen_.begin(), seen_.end(), 0);
    epoch_ = 1;
  }
  queue_.clear();
  const std::uint32_t s = mesh_.id(src).value, t = mesh_.id(dst).value;
  seen_[s] = epoch_;
  queue_.push_back(s);
  for (std::size_t head = 0; head < queue_.size() && seen_[t] != epoch_; ++head) {
    const Coord c = mesh_.coord(CoreId{queue_[head]});
    for (int d = 0; d < kDirections; ++d) {
      const Coord n = Mesh::step(c, static_cast<Direction>(d));
      if (!mesh_.contains(n) || defects_.dead(n)) continue;
      const std::uint32_t id = mesh_.id(n).value;
      if (seen_[id] == epoch_) continue;
      seen_[id] = epoch_;
      came_[id] = static_cast<std::uint8_t>(d);
      queue_.push_back(id);
    }
  }
  if (seen_[t] != epoch_)
    throw RouteError("no route from " + where(src) + " to " + where(dst) +
                     ": dead cores cut it off");
  // Walk back from dst, then append the links in travel order.
  const std::size_t first = out.size();
  for (Coord c = dst; !(c == src);) {
    const auto d = static_cast<Direction>(came_[mesh_.id(c).value]);
    const Coord prev = Mesh::step(c, opposite(d));
    out.push_back(mesh_.link(prev, d));
    c = prev;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  searched_.emplace(key, std::vector<LinkId>(out.begin() + static_cast<std::ptrdiff_t>(first),
                                             out.end()));
}

}  // namespace wafersim::fabric
