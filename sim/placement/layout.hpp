// Where an activation vector lives on the mesh: a layout is the list of
// pieces (elements [begin, end) on one core) a vector is split into. A
// matrix placement defines two: where its input enters and where its output
// lands. Shared by the placement's cost model and by lowering.
#pragma once

#include <vector>

#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// Where one piece of an activation vector lives: elements [begin, end) on core.
struct Piece {
  Coord core;
  int begin = 0;
  int end = 0;
  int wafer = 0;
  int size() const { return end - begin; }
  bool operator==(const Piece&) const = default;
};
using Layout = std::vector<Piece>;

// Layouts a matrix placement defines: its input (one piece per column, at the
// column's top core) and its output (one piece per row of cores, at the root).
Layout input_layout(const MatrixPlacement& m);
Layout output_layout(const MatrixPlacement& m);
// The SwiGLU output of an interleaved gate/up matrix lands where the pairs
// were reduced: a root holding gate/up rows [r0, r1) holds outputs [r0/2, r1/2).
Layout swiglu_output_layout(const Layout& gate_up);

}  // namespace wafersim::sim
