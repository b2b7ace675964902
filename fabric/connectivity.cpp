#include "fabric/connectivity.hpp"

#include <stdexcept>
#include <string>
#include <tuple>

#include "fabric/routing.hpp"
#include "fabric/sram.hpp"

namespace wafersim::fabric {

namespace {

std::string where(Coord c) {
  return "(" + std::to_string(c.x) + ", " + std::to_string(c.y) + ")";
}

}  // namespace

LiveComponents::LiveComponents(const DefectMap& defects)
    : width_(defects.width()),
      height_(defects.height()),
      part_(static_cast<std::size_t>(width_) * static_cast<std::size_t>(height_), -1) {
  std::vector<Coord> stack;
  for (int y = 0; y < height_; ++y)
    for (int x = 0; x < width_; ++x) {
      if (defects.dead({x, y}) || of({x, y}) >= 0) continue;
      // A flood fill of a new part from (x, y).
      const int part = count_++;
      stack.assign(1, Coord{x, y});
      part_[static_cast<std::size_t>(y) * static_cast<std::size_t>(width_) +
            static_cast<std::size_t>(x)] = part;
      while (!stack.empty()) {
        const Coord c = stack.back();
        stack.pop_back();
        for (const Coord n :
             {Coord{c.x + 1, c.y}, Coord{c.x - 1, c.y}, Coord{c.x, c.y + 1}, Coord{c.x, c.y - 1}}) {
          if (n.x < 0 || n.y < 0 || n.x >= width_ || n.y >= height_ || defects.dead(n)) continue;
          std::int32_t& p = part_[static_cast<std::size_t>(n.y) * static_cast<std::size_t>(width_) +
                                  static_cast<std::size_t>(n.x)];
          if (p >= 0) continue;
          p = part;
          stack.push_back(n);
        }
      }
    }
}

Coord LiveComponents::port(int x, Coord toward) const {
  const int part = of(toward);
  if (part >= 0)
    for (int d = 0; d < height_; ++d)
      for (const int y : {toward.y - d, toward.y + d})
        if (y >= 0 && y < height_ && of({x, y}) == part) return {x, y};
  throw RouteError("no core of column " + std::to_string(x) + " can reach " + where(toward) +
                   " around the dead cores");
}

void check_connected(const LiveComponents& parts, std::span<const std::uint8_t> used, int wafer,
                     bool west_port, bool east_port) {
  if (used.size() != static_cast<std::size_t>(parts.width()) * parts.height())
    throw std::invalid_argument("check_connected: one flag per core of the wafer");
  int part = -1;
  Coord first{};
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (used[i] == 0) continue;
    const auto w = static_cast<std::size_t>(parts.width());
    const Coord c{static_cast<int>(i % w), static_cast<int>(i / w)};
    if (part < 0) {
      part = parts.of(c);
      first = c;
    } else if (parts.of(c) != part) {
      throw FitError("wafer " + std::to_string(wafer) + ": dead cores cut core " + where(c) +
                     " off from core " + where(first) +
                     ": both hold the model's data, and no route around the dead cores joins "
                     "them; valid: a wafer whose cores holding data are joined by live cores "
                     "(fewer or other defects, or spare columns: hardware.redundancy)");
    }
  }
  if (part < 0) return;
  for (const auto& [needed, x, side, role] :
       {std::tuple{west_port, 0, "west", "take a token from the wafer before it"},
        std::tuple{east_port, parts.width() - 1, "east", "send a token to the wafer after it"}}) {
    if (!needed) continue;
    try {
      (void)parts.port(x, first);
    } catch (const RouteError&) {
      throw FitError("wafer " + std::to_string(wafer) + ": no live core of its " + side +
                     " edge (column " + std::to_string(x) +
                     ") can reach the cores holding the model's data (core " + where(first) +
                     " among them) around the dead cores, so it cannot " + role +
                     "; valid: a wafer with a live edge core joined to its data (fewer or other "
                     "defects, or spare columns: hardware.redundancy)");
    }
  }
}

}  // namespace wafersim::fabric
