#include "sim/placement/request.hpp"

#include <array>

namespace wafersim::sim {
namespace {

struct NamedKind {
  MatrixKind kind;
  const char* name;
};

constexpr std::array<NamedKind, 6> kMatrixKinds = {{
    {MatrixKind::qkv, "qkv"},
    {MatrixKind::o, "o"},
    {MatrixKind::gate_up, "gate_up"},
    {MatrixKind::down, "down"},
    {MatrixKind::attention, "attention"},
    {MatrixKind::lm_head, "lm_head"},
}};

}  // namespace

const char* matrix_kind_name(MatrixKind kind) {
  for (const NamedKind& k : kMatrixKinds)
    if (k.kind == kind) return k.name;
  return "?";
}

std::vector<MatrixKind> matrix_kinds() {
  std::vector<MatrixKind> kinds;
  for (const NamedKind& k : kMatrixKinds) kinds.push_back(k.kind);
  return kinds;
}

bool has_shape(MatrixKind kind) {
  return kind != MatrixKind::attention && kind != MatrixKind::lm_head;
}

}  // namespace wafersim::sim
