// Per-core SRAM accounting. Every allocation names what it holds; an
// allocation that would overflow a core is refused with a FitError that says
// how much the core has and what is already there.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fabric/defects.hpp"
#include "fabric/mesh.hpp"

namespace wafersim::fabric {

class FitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What an allocation holds, for the per-core breakdown.
enum class SramUse : std::uint8_t { weights = 0, kv_cache = 1, activations = 2 };
inline constexpr int kSramUses = 3;
const char* sram_use_name(SramUse u);

class SramMap {
 public:
  // With `defects`, a dead core has no SRAM: any allocation there is refused.
  SramMap(const Mesh& mesh, Bytes capacity_per_core, const DefectMap* defects = nullptr);

  const Mesh& mesh() const { return mesh_; }
  Bytes capacity_per_core() const { return capacity_; }
  // What `core` can hold: capacity_per_core, or 0 on a dead core.
  Bytes capacity(CoreId core) const {
    return defects_ && defects_->dead(mesh_.coord(core)) ? Bytes{0} : capacity_;
  }
  Bytes used(CoreId core) const { return Bytes{used_[core.value]}; }
  Bytes free(CoreId core) const { return capacity(core) - used(core); }
  Bytes used_for(SramUse use) const { return Bytes{by_use_[static_cast<int>(use)]}; }
  Bytes total_used() const;
  std::size_t cores_used() const;  // cores with at least one byte allocated
  const std::vector<std::uint64_t>& all_used() const { return used_; }

  // Allocates `bytes` on `core` for `use`; throws FitError naming `what`.
  // (Inline where the core is alive and has room: placements make one
  // allocation per tile, billions for a large whole-region model.)
  void allocate(CoreId core, Bytes bytes, SramUse use, const std::string& what) {
    std::uint64_t& u = used_[core.value];
    if (!has_dead_ && u + bytes.value <= capacity_.value) {
      u += bytes.value;
      by_use_[static_cast<int>(use)] += bytes.value;
      return;
    }
    allocate_checked(core, bytes, use, what);
  }
  // The same for `n` cores in a row of the mesh from `first` (ids first,
  // first + 1, ...), core i taking bytes_of(i): one pass over their counts.
  template <class BytesOf>
  void allocate_run(CoreId first, int n, BytesOf&& bytes_of, SramUse use, const std::string& what) {
    std::uint64_t* u = used_.data() + first.value;
    const std::uint64_t cap = capacity_.value;
    std::uint64_t total = 0;
    int i = 0;
    if (!has_dead_)
      for (; i < n; ++i) {
        const std::uint64_t b = bytes_of(i);
        if (u[i] + b > cap) break;
        u[i] += b;
        total += b;
      }
    by_use_[static_cast<int>(use)] += total;
    for (; i < n; ++i)  // a dead core or one without room: the checked path (throws)
      allocate(CoreId{first.value + static_cast<std::uint32_t>(i)}, Bytes{bytes_of(i)}, use, what);
  }

 private:
  void allocate_checked(CoreId core, Bytes bytes, SramUse use, const std::string& what);

  const Mesh& mesh_;
  const DefectMap* defects_;
  bool has_dead_ = false;  // defects_ lists a dead core
  Bytes capacity_;
  std::vector<std::uint64_t> used_;
  std::uint64_t by_use_[kSramUses] = {0, 0, 0};
};

}  // namespace wafersim::fabric
