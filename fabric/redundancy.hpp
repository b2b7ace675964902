// Spare cores and local repair: the physical array behind the logical mesh.
//
// A wafer is built with more cores than its programs see, so that cores hit
// by manufacturing defects can be replaced nearby (Cerebras: "100x Defect
// Tolerance: How Cerebras Solved the Yield Problem", cerebras.ai blog, 2025:
// ~970,000 physical cores on the WSE-3, ~900,000 enabled, tiny cores and a
// fabric that routes around defective ones to spares). How Cerebras lays out
// its spares is not published; we model the simplest local scheme with that
// overhead (WaferSpec::Redundancy): after every group of K logical columns
// come S spare columns. In each row the K + S physical cores of a group (a
// row segment) hold its K logical cores: logical core i of the segment sits
// on the segment's i-th healthy physical core, so a segment repairs up to S
// dead cores by shifting the cores east of each one over by one. Without
// defects logical core i is on physical core i (the spares idle).
//
// Cost of a repair. A defect-free wafer is timed as the logical mesh (hop
// latency per logical hop; the idle spares' routers pass through at no
// cost). A logical link whose ends moved apart pays `detour_latency` cycles
// per extra physical hop: an east/west link for every dead core it bypasses
// between its ends, a north/south link for every column its ends are offset
// (the detour sideways through a neighbour's router).
//
// Bandwidth a detour borrows. An east/west link's physical path (its ends'
// physical columns and every router between them, dead or idle) is its own.
// A north/south link whose ends are offset goes down (or up) its source's
// physical column, its own link, then sideways along the destination row to
// its end: those sideways physical links belong to the destination row's
// east/west logical links (each physical link between the physical columns
// of logical cores i and i + 1 is logical link i -> i + 1's). So the
// repaired link shares them: borrowed_links() lists, per logical link, the
// logical links whose physical links its detour uses, and the flow model
// reserves a message's cycles on them too (FlowModel::set_link_borrowed).
// Sideways links outside every logical link's span (past a row's first or
// last logical core) belong to nobody and are not shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/defects.hpp"
#include "fabric/mesh.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

// The defects `spec` draws on its physical array (physical_width() x
// mesh_height, coordinates of that array): spec.listed_defects() plus each
// core dead with probability spec.defect_probability() from spec.defect_seed.
DefectMap physical_defects(const WaferSpec& spec);

// A row segment whose dead cores outnumber its spares.
struct RepairFailure {
  int row = 0;
  int group = 0;
  int logical_x0 = 0, logical_x1 = 0;    // logical columns [x0, x1)
  int physical_x0 = 0, physical_x1 = 0;  // physical columns [x0, x1)
  int dead = 0;
  int spares = 0;
  int segments_failed = 0;  // row segments beyond their spares, this one included
  std::string describe() const;
};

// The first row segment (rows top to bottom, groups west to east) that cannot
// be repaired, and how many cannot; nothing when every one can. Cheap: one
// pass over the map, no per-core table (the yield study calls it per wafer).
std::optional<RepairFailure> first_unrepairable(const Redundancy& r, int logical_width,
                                                const DefectMap& physical);
// Throws FitError (fabric/sram.hpp) describing first_unrepairable's answer.
void check_repairable(const Redundancy& r, int logical_width, const DefectMap& physical);

// The repaired mapping of a wafer with redundancy: where each logical core
// sits on the physical array, and what each logical link costs extra.
class Repair {
 public:
  // Throws FitError when a segment's dead cores outnumber its spares.
  explicit Repair(const WaferSpec& spec);
  Repair(const Redundancy& r, int logical_width, DefectMap physical);

  const DefectMap& physical() const { return physical_; }
  int logical_width() const { return width_; }
  int logical_height() const { return physical_.height(); }
  // The physical column of a logical core (its row is the same).
  int physical_x(Coord logical) const {
    return px_[static_cast<std::size_t>(logical.y) * static_cast<std::size_t>(width_) +
               static_cast<std::size_t>(logical.x)];
  }
  // Where a logical core sits without defects.
  int healthy_x(int logical_x) const;
  // Dead physical cores, and logical cores moved off their defect-free place.
  std::size_t dead_cores() const { return physical_.dead_count(); }
  std::size_t displaced_cores() const { return displaced_; }
  // Extra physical hops of one logical link (0 for a link off the mesh).
  int extra_hops(const Mesh& logical, LinkId l) const;
  // Logical links with extra hops, and their extra hops summed.
  std::size_t repaired_links() const { return repaired_links_; }
  std::uint64_t total_extra_hops() const { return total_extra_hops_; }
  // Extra cycles per logical link (LinkId order of `logical`): extra hops x
  // detour_latency, at most 65535; empty when no link costs extra.
  std::vector<std::uint16_t> link_extra_cycles(const Mesh& logical) const;
  // The logical links each logical link's detour borrows (see the header),
  // as compressed rows: link l borrows links[first[l] .. first[l + 1]),
  // in the order its detour crosses them. Both empty when no link borrows.
  struct BorrowedLinks {
    std::vector<std::uint32_t> first;  // link_count() + 1 entries
    std::vector<LinkId> links;
    std::size_t borrowing() const;  // links that borrow at least one
  };
  BorrowedLinks borrowed_links(const Mesh& logical) const;

 private:
  void count_links();
  int extra_hops_between(Coord a, Coord b) const;
  Redundancy r_;
  int width_;
  DefectMap physical_;
  std::vector<std::int32_t> px_;  // [y * width + x]: physical column
  std::size_t displaced_ = 0;
  std::size_t repaired_links_ = 0;
  std::uint64_t total_extra_hops_ = 0;
};

}  // namespace wafersim::fabric
