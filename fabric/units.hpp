// Strong types for quantities with units: cycles, bytes, core ids and mesh
// coordinates. A bare integer that might be either is a bug waiting to happen.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace wafersim {

// A count of something with a unit. Addition and comparison only within the
// same unit; scaling by a plain number is allowed.
template <class Tag>
struct Quantity {
  std::uint64_t value = 0;

  constexpr Quantity() = default;
  constexpr explicit Quantity(std::uint64_t v) : value(v) {}

  constexpr auto operator<=>(const Quantity&) const = default;
  constexpr Quantity& operator+=(Quantity o) {
    value += o.value;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value -= o.value;
    return *this;
  }
  friend constexpr Quantity operator+(Quantity a, Quantity b) {
    return Quantity{a.value + b.value};
  }
  friend constexpr Quantity operator-(Quantity a, Quantity b) {
    return Quantity{a.value - b.value};
  }
  friend constexpr Quantity operator*(Quantity a, std::uint64_t k) { return Quantity{a.value * k}; }
  friend constexpr Quantity operator*(std::uint64_t k, Quantity a) { return Quantity{a.value * k}; }
};

struct CyclesTag {};
struct BytesTag {};
using Cycles = Quantity<CyclesTag>;
using Bytes = Quantity<BytesTag>;

constexpr Cycles max(Cycles a, Cycles b) {
  return a < b ? b : a;
}

// Ceiling division, used wherever a size is served in whole units per cycle.
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return (a + b - 1) / b;
}

// A core's position on the mesh: x grows east (columns), y grows south (rows).
struct Coord {
  std::int32_t x = 0;
  std::int32_t y = 0;
  constexpr auto operator<=>(const Coord&) const = default;
};

// Dense index of a core: y * mesh_width + x.
struct CoreId {
  std::uint32_t value = 0;
  constexpr auto operator<=>(const CoreId&) const = default;
};

}  // namespace wafersim
