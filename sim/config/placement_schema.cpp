// placement: the strategy and its parameters, or a placement file
// (PlacementOptions). docs/scenario-schema.md, "Placement strategies".
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace fs = std::filesystem;

namespace {

using namespace yaml;

constexpr Need O = Need::optional;

// A reduction scheme, or auto (nullopt): whole-region's scheme chosen from
// candidates timed on the fabric model (sim/engine/reduction_choice.hpp).
std::optional<ReductionScheme> read_reduction(const Value& v, StrategyKind strategy) {
  std::vector<std::string> valid = reduction_names();
  valid.emplace_back("auto");
  const std::string s = read_choice(v, "reduction scheme", valid);
  if (s != "auto") return *parse_reduction(s);
  if (strategy != StrategyKind::whole_region)
    fail(v.loc(), v.path,
         fmt::format("reduction: auto is for strategy: whole-region (its candidates are timed "
                     "through its regions), and strategy is '{}'; valid here: {}",
                     strategy_name(strategy), join_list(reduction_names())));
  return std::nullopt;
}

// reduction_groups: K of a k-tree, only where the reduction it applies to is
// one, or is auto (the K of its k-tree candidate).
int read_reduction_groups(const Value& v, ReductionScheme applies_to, bool is_auto) {
  if (applies_to != ReductionScheme::k_tree && !is_auto)
    fail(v.key_loc(), v.path,
         fmt::format("reduction_groups given but the reduction is '{}'; it is the K of "
                     "reduction: k-tree",
                     reduction_name(applies_to)));
  return read_count_in(v, 1, 4'000'000, "20");  // groups
}

// matrices: per-matrix overrides, {rows, columns, reduction} for the shaped
// matrices, {reduction} for attention and lm_head.
void read_matrices(const Value& v, PlacementOptions& placement) {
  std::vector<std::string> names;
  for (const MatrixKind kind : matrix_kinds()) names.emplace_back(matrix_kind_name(kind));
  const Mapping mm(v, names);
  for (const MatrixKind kind : matrix_kinds()) {
    if (!mm.has(matrix_kind_name(kind))) continue;
    const Mapping one(mm.get(matrix_kind_name(kind)),
                      has_shape(kind) ? std::vector<std::string>{"rows", "columns", "reduction",
                                                                 "reduction_groups"}
                                      : std::vector<std::string>{"reduction", "reduction_groups"});
    MatrixOverride ov;
    for (const char* key : {"rows", "columns"}) {
      if (!one.has(key)) continue;
      const Value& n = one.get(key);
      const int value = read_count_in(n, 1, 4'000'000, "8");  // cores
      (std::string(key) == "rows" ? ov.rows : ov.columns) = value;
    }
    bool own_auto = false;
    if (one.has("reduction")) {
      ov.reduction = read_reduction(one.get("reduction"), placement.strategy);
      own_auto = !ov.reduction.has_value();
      if (own_auto) placement.matrix_reduction_auto.push_back(kind);
    }
    if (one.has("reduction_groups"))
      ov.reduction_groups = read_reduction_groups(
          one.get("reduction_groups"), ov.reduction.value_or(placement.reduction),
          own_auto || (!one.has("reduction") && placement.reduction_auto));
    placement.matrices[kind] = ov;
  }
}

// In the order of the kinds' names (as the resolved scenario always wrote them).
std::string write_matrices(const PlacementOptions& p) {
  std::vector<std::pair<MatrixKind, MatrixOverride>> by_name(p.matrices.begin(), p.matrices.end());
  std::sort(by_name.begin(), by_name.end(), [](const auto& a, const auto& b) {
    return std::string_view(matrix_kind_name(a.first)) < matrix_kind_name(b.first);
  });
  std::string o;
  for (const auto& [id, ov] : by_name) {
    const char* kind = matrix_kind_name(id);
    std::vector<std::string> parts;
    if (ov.rows > 0) parts.push_back(fmt::format("rows: {}", ov.rows));
    if (ov.columns > 0) parts.push_back(fmt::format("columns: {}", ov.columns));
    if (ov.reduction) parts.push_back(fmt::format("reduction: {}", reduction_name(*ov.reduction)));
    const std::vector<MatrixKind>& autos = p.matrix_reduction_auto;
    if (std::find(autos.begin(), autos.end(), id) != autos.end())
      parts.emplace_back("reduction: auto");
    if (ov.reduction_groups > 0)
      parts.push_back(fmt::format("reduction_groups: {}", ov.reduction_groups));
    o += fmt::format("\n    {}: {{{}}}", kind, join_list(parts));
  }
  return o;
}

// Relative to the scenario's folder; kept absolute so that the resolved
// scenario written next to results still finds it.
void read_file(const Value& f, PlacementOptions& placement) {
  const fs::path given = read_string(f, "a placement file such as placement.yaml");
  placement.file =
      fs::absolute(given.is_absolute() ? given : fs::path(f.file).parent_path() / given)
          .lexically_normal()
          .string();
  // Checked now, so that validate finds what run would (the contents are
  // read when the placement is made: they depend on the model and wafer).
  std::error_code ec;
  const fs::file_status st = fs::status(placement.file, ec);
  if (!fs::exists(st))
    fail(f.loc(), f.path,
         fmt::format("{} does not exist; write one with `wafersim place "
                     "SCENARIO --write-placement FILE`",
                     placement.file));
  if (st.type() != fs::file_type::regular)
    fail(f.loc(), f.path,
         fmt::format("{} is {}; expected a placement file (YAML)", placement.file,
                     st.type() == fs::file_type::directory ? "a folder" : "not a regular file"));
}

bool annealing(const PlacementOptions& p) {
  return p.strategy == StrategyKind::anneal;
}
bool has_halo(const PlacementOptions& p) {
  return p.halo.columns != 0 || p.halo.rows != 0;
}

// Read by rank: strategy and block_rows, then reduction, seed, anneal and
// matrices, then halo and file.
constexpr Key<PlacementOptions> kPlacement[] = {
    {"strategy", O,
     "layer-rectangles | serpentine | short-path | sram-balanced | anneal | whole-region",
     "how layers are laid out on the mesh",
     [](auto& v, auto& p, auto&) {
       p.strategy = *parse_strategy(read_choice(v, "placement strategy", placement_strategies()));
     },
     [](auto& p) { return yaml_string(strategy_name(p.strategy)); }},
    {"reduction", O, "chain | tree | two-level | k-tree | ring | auto (default chain)",
     "how partial sums are reduced along a row of cores; auto (whole-region): the scheme "
     "whose simulated layer gives the workload's best figure",
     [](auto& v, auto& p, auto&) {
       const std::optional<ReductionScheme> r = read_reduction(v, p.strategy);
       p.reduction_auto = !r.has_value();
       p.reduction = r.value_or(ReductionScheme::chain);
     },
     [](auto& p) {
       return p.reduction_auto ? std::string("auto") : std::string(reduction_name(p.reduction));
     },
     nullptr, 1},
    {"reduction_groups", O, "count 1..4000000 (default round(sqrt n) per line of n cores)",
     "k-tree: groups K along each reduced line",
     [](auto& v, auto& p, auto&) {
       p.reduction_groups = read_reduction_groups(v, p.reduction, p.reduction_auto);
     },
     [](auto& p) { return fmt::format("{}", p.reduction_groups); },
     [](auto& p) { return p.reduction_groups > 0; }, 1},
    {"fabric_bits", O, "32 | 16 (default 32)",
     "bits of each value cores send one another (activations, partial sums, attention's "
     "queries, scores and partials): 32 (fp32, what the cores compute) or 16 (fp16/bf16, two "
     "to a 32-bit wavelet; a functional run holds activations in that format)",
     [](auto& v, auto& p, auto&) {
       p.fabric_bits = read_count(v, "16");
       if (p.fabric_bits != 32 && p.fabric_bits != 16)
         fail(v.loc(), v.path,
              fmt::format("must be 32 (fp32 values on the fabric) or 16 (fp16/bf16, two to a "
                          "32-bit wavelet), got {}",
                          p.fabric_bits));
     },
     [](auto& p) { return fmt::format("{}", p.fabric_bits); },
     [](auto& p) { return p.fabric_bits != 32; }},
    {"block_rows", O, "count 1..64 (default 2)", "serpentine, sram-balanced: rows of layer blocks",
     [](auto& v, auto& p, auto&) {
       p.block_rows = read_count(v, "2");
       if (p.block_rows < 1 || p.block_rows > 64)
         fail(v.loc(), v.path,
              "must be between 1 and 64 (rows of layer blocks, serpentine and sram-balanced)");
     },
     [](auto& p) { return fmt::format("{}", p.block_rows); }},
    {"layer_groups", O, "count 1..layers or auto (default 1)",
     "whole-region: groups of layers, each sharing one region; auto: the count whose "
     "simulated layer gives the workload's best figure",
     [](auto& v, auto& p, auto&) {
       if (p.strategy != StrategyKind::whole_region)
         fail(v.key_loc(), v.path,
              fmt::format("layer_groups given but strategy is '{}'; set strategy: whole-region",
                          strategy_name(p.strategy)));
       p.layer_groups_auto = false;
       if (v.node.IsScalar() && v.node.Scalar() == "auto") {
         p.layer_groups_auto = true;
         return;
       }
       const std::string text = v.node.IsScalar() ? v.node.Scalar() : std::string();
       if (text.empty() ||
           !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
         fail(v.loc(), v.path,
              fmt::format("expected a count of layer groups (1 to the model's layers) or auto "
                          "(the count whose simulated layer gives the workload's best figure), "
                          "got {}",
                          describe(v.node)));
       p.layer_groups = read_count(v, "1");
       if (p.layer_groups < 1 || p.layer_groups > 100000)
         fail(v.loc(), v.path,
              "must be between 1 and the model's layers (1: every layer on the whole wafer; "
              "the number of layers: one layer per region), or auto");
     },
     [](auto& p) {
       return p.layer_groups_auto ? std::string("auto") : fmt::format("{}", p.layer_groups);
     },
     [](auto& p) { return p.strategy == StrategyKind::whole_region; }, 1},
    {"seed", O, "whole number (default 1)", "anneal: seed of the search",
     [](auto& v, auto& p, auto&) { p.seed = read_unsigned(v, UINT64_MAX, "1"); },
     [](auto& p) { return fmt::format("{}", p.seed); }, annealing, 1},
    {"anneal.iterations", O, "count 1..10^8 (default 200000)", "moves per candidate grid",
     [](auto& v, auto& p, auto&) {
       p.anneal.iterations = read_count(v, "200000");
       if (p.anneal.iterations < 1 || p.anneal.iterations > 100000000)
         fail(v.loc(), v.path, "must be between 1 and 100000000 (moves per candidate grid)");
     },
     [](auto& p) { return fmt::format("{}", p.anneal.iterations); }, annealing, 1, true},
    {"anneal.initial_temperature", O, "number > 0 (default 0.1)",
     "a fraction of the mean per-layer cost of the random start",
     [](auto& v, auto& p, auto&) {
       p.anneal.initial_temperature = read_real(v, "0.1");
       if (!(p.anneal.initial_temperature > 0.0))
         fail(v.loc(), v.path,
              "must be > 0 (a fraction of the mean per-layer cost of the starting assignment)");
     },
     [](auto& p) { return fmt::format("{}", p.anneal.initial_temperature); }, annealing, 1, true},
    {"anneal.final_temperature", O, "number in (0, initial_temperature] (default 0.0001)",
     "where the cooling ends",
     [](auto& v, auto& p, auto&) {
       p.anneal.final_temperature = read_real(v, "0.0001");
       if (!(p.anneal.final_temperature > 0.0) ||
           p.anneal.final_temperature > p.anneal.initial_temperature)
         fail(v.loc(), v.path,
              fmt::format("must be > 0 and at most initial_temperature ({})",
                          p.anneal.initial_temperature));
     },
     [](auto& p) { return fmt::format("{}", p.anneal.final_temperature); }, annealing, 1, true},
    {"anneal.sram_weight", O, "number >= 0 (default 0)", "hop-bytes per byte of the fullest core",
     [](auto& v, auto& p, auto&) {
       p.anneal.sram_weight = read_real(v, "0");
       if (p.anneal.sram_weight < 0.0)
         fail(v.loc(), v.path, "must be >= 0 (hop-bytes per byte of the fullest core)");
     },
     [](auto& p) { return fmt::format("{}", p.anneal.sram_weight); }, annealing, 1, true},
    {"anneal.latency_weight", O, "finite number >= 0 (default 1000)",
     "hop-bytes per cycle of estimated token latency",
     [](auto& v, auto& p, auto&) {
       p.anneal.latency_weight = read_real(v, "1000");
       if (!(p.anneal.latency_weight >= 0.0) || !std::isfinite(p.anneal.latency_weight))
         fail(v.loc(), v.path,
              "must be a finite number >= 0 (hop-bytes per cycle of estimated token latency)");
     },
     [](auto& p) { return fmt::format("{}", p.anneal.latency_weight); }, annealing, 1, true},
    {"anneal.spare_slots", O, "number in [0, 1] (default 0)",
     "empty slots a grid may have, as a fraction of the layers",
     [](auto& v, auto& p, auto&) {
       p.anneal.spare_slots = read_real(v, "0.25");
       if (p.anneal.spare_slots < 0.0 || p.anneal.spare_slots > 1.0)
         fail(v.loc(), v.path, "must be between 0 and 1 (spare slots as a fraction of the layers)");
     },
     [](auto& p) { return fmt::format("{}", p.anneal.spare_slots); }, annealing, 1, true},
    // The anneal mapping as a whole, once its keys are read: only with strategy anneal.
    {"anneal", O, "mapping", "the annealer's parameters; only with strategy: anneal",
     [](auto& v, auto& p, auto&) {
       if (p.strategy != StrategyKind::anneal)
         fail(v.key_loc(), v.path,
              fmt::format("anneal parameters given but strategy is '{}'; set strategy: anneal",
                          strategy_name(p.strategy)));
     },
     nullptr, nullptr, 1},
    {"halo.columns", O, "count 0..4000000 (default 0)", "columns of cores kept free for I/O",
     [](auto& v, auto& p, auto&) { p.halo.columns = read_count_in(v, 0, 4'000'000, "7"); },
     [](auto& p) { return fmt::format("{}", p.halo.columns); }, has_halo, 2, true},
    {"halo.rows", O, "count 0..4000000 (default 0)", "rows of cores kept free for I/O",
     [](auto& v, auto& p, auto&) { p.halo.rows = read_count_in(v, 0, 4'000'000, "2"); },
     [](auto& p) { return fmt::format("{}", p.halo.rows); }, has_halo, 2, true},
    {"file", O, "path", "a placement file instead of a strategy (relative to the scenario)",
     [](auto& v, auto& p, auto&) { read_file(v, p); }, [](auto& p) { return yaml_string(p.file); },
     [](auto& p) { return !p.file.empty(); }, 2},
    {"reserve.users", O, "count 1..65536", "KV cache for at least this many sequences",
     [](auto& v, auto& p, auto&) {
       p.reserve_users = read_count(v, "16");
       if (p.reserve_users < 1 || p.reserve_users > 65536)
         fail(v.loc(), v.path, "must be between 1 and 65536 (sequences to reserve KV cache for)");
     },
     [](auto& p) { return fmt::format("{}", p.reserve_users); },
     [](auto& p) { return p.reserve_users > 0; }, 2, true},
    {"reserve.context_tokens", O, "count 1..2^30",
     "of at least this many positions each (prompt + output)",
     [](auto& v, auto& p, auto&) {
       p.reserve_context_tokens = read_count(v, "8192");
       if ((p.reserve_context_tokens < 1) || (p.reserve_context_tokens > (1 << 30)))
         fail(v.loc(), v.path, "must be between 1 and 1073741824 (positions per sequence)");
     },
     [](auto& p) { return fmt::format("{}", p.reserve_context_tokens); },
     [](auto& p) { return p.reserve_context_tokens > 0; }, 2, true},
    {"matrices", O, "mapping",
     "per-matrix overrides of rows, columns, reduction and reduction_groups",
     [](auto& v, auto& p, auto&) { read_matrices(v, p); }, write_matrices,
     [](auto& p) { return !p.matrices.empty(); }, 1},
};

}  // namespace

std::span<const Key<PlacementOptions>> placement_keys() {
  return kPlacement;
}

void read_placement(const Value& v, PlacementOptions& placement) {
  const Mapping m(v, top_keys(placement_keys()));
  Provenance unused;
  read_keys(m, /*complete=*/true, placement_keys(), placement, unused, ReadContext{});
}

}  // namespace wafersim::sim::schema
