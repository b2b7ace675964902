#include "sim/placement/layout.hpp"

namespace wafersim::sim {

Layout input_layout(const MatrixPlacement& m) {
  Layout l;
  l.reserve(static_cast<std::size_t>(m.q()));
  for (int qi = 0; qi < m.q(); ++qi)
    l.push_back(Piece{m.core(0, qi), m.col_begin(qi), m.col_begin(qi + 1), m.wafer});
  return l;
}

Layout output_layout(const MatrixPlacement& m) {
  Layout l;
  l.reserve(static_cast<std::size_t>(m.p()));
  for (int pi = 0; pi < m.p(); ++pi)
    l.push_back(Piece{m.root(pi), m.row_begin(pi), m.row_begin(pi + 1), m.wafer});
  return l;
}

Layout swiglu_output_layout(const Layout& gate_up) {
  Layout h = gate_up;
  for (Piece& p : h) p.begin /= 2, p.end /= 2;
  return h;
}

}  // namespace wafersim::sim
