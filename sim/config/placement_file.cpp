#include "sim/config/placement_file.hpp"

#include <algorithm>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "fabric/defects.hpp"
#include "sim/config/scenario.hpp"
#include "sim/config/strict_yaml.hpp"
#include "sim/placement/placement_cost.hpp"
#include "sim/placement/request.hpp"
#include "sim/placement/stage_planner.hpp"

namespace wafersim::sim {

namespace {

// ---- What a layer's MLP is: it decides the layer's keys ----------------------

enum class MlpKind { swiglu, gelu, experts };

MlpKind mlp_kind(const models::ModelConfig& model) {
  if (model.is_moe()) return MlpKind::experts;
  return model.is_gpt2() ? MlpKind::gelu : MlpKind::swiglu;
}

std::vector<std::string> mlp_keys(MlpKind kind) {
  switch (kind) {
    case MlpKind::swiglu:
      return {"gate_up", "down"};
    case MlpKind::gelu:
      return {"up", "down"};
    case MlpKind::experts:
      return {"router", "experts"};
  }
  return {};
}

std::string mlp_description(const models::ModelConfig& model) {
  switch (mlp_kind(model)) {
    case MlpKind::swiglu:
      return "a SwiGLU MLP: gate_up and down";
    case MlpKind::gelu:
      return "a GELU MLP: up and down";
    case MlpKind::experts:
      return fmt::format("a mixture of {} experts: router and experts", model.num_experts);
  }
  return {};
}

// ---- Writing --------------------------------------------------------------------

std::string rect_yaml(const fabric::Rect& r) {
  return fmt::format("[{}, {}, {}, {}]", r.x0, r.y0, r.width, r.height);
}

// `, reduction_groups: K` where a k-tree names its K (nothing otherwise).
std::string groups_yaml(ReductionScheme r, int groups) {
  return r == ReductionScheme::k_tree && groups > 0 ? fmt::format(", reduction_groups: {}", groups)
                                                    : std::string();
}

// A whole-region layer's matrices (and its attention) span the layer's
// region: they are written as their reductions alone.
std::string reduction_yaml(ReductionScheme r, int groups) {
  return fmt::format("{{reduction: {}{}}}", reduction_name(r), groups_yaml(r, groups));
}

std::string matrix_yaml(const MatrixPlacement& m, bool whole_region = false) {
  if (whole_region) return reduction_yaml(m.reduction, m.reduction_groups);
  return fmt::format("{{rect: {}, reduction: {}{}}}", rect_yaml(m.rect),
                     reduction_name(m.reduction), groups_yaml(m.reduction, m.reduction_groups));
}

// The two dataflows a layer may have, as the file names them.
constexpr const char* kRectangles = "rectangles";
constexpr const char* kWholeRegion = "whole-region";

std::string whole_region_comment(const Placement& pl) {
  if (std::none_of(pl.layers.begin(), pl.layers.end(),
                   [](const LayerStage& st) { return st.whole_region; }))
    return {};
  return "# dataflow: whole-region: every matrix of the layer and its KV cache span its region\n"
         "# (qkv and gate_up turned a quarter), so a matrix gives its reduction only; the\n"
         "# consecutive layers with the same region share its cores and SRAM (a layer group).\n";
}

// gpt2's biases and LayerNorm parameters have no rectangle of their own:
// lower() and the allocator keep them on matrix roots, so an architect moving
// a matrix moves them with it. (RMSNorm gains sit on o's roots likewise.)
std::string roots_comment(const models::ModelConfig& model) {
  if (!model.is_gpt2()) return {};
  return "# LayerNorm gains and biases sit on o's roots (the final one's on lm_head's first\n"
         "# roots); each of qkv, o, up and down keeps its bias on its roots (column x0).\n";
}

void write_mlp(std::string& o, const models::ModelConfig& model, const LayerStage& st) {
  const bool whole = st.whole_region;
  switch (mlp_kind(model)) {
    case MlpKind::swiglu:
      o += fmt::format("    gate_up: {}\n", matrix_yaml(st.gate_up, whole));
      break;
    case MlpKind::gelu:
      o += fmt::format("    up: {}\n", matrix_yaml(st.gate_up, whole));
      break;
    case MlpKind::experts:
      o += fmt::format("    router: {}\n    experts:\n", matrix_yaml(st.router, whole));
      for (std::size_t e = 0; e < st.experts.size(); ++e)
        o += fmt::format("      - expert: {}\n        gate_up: {}\n        down: {}\n", e,
                         matrix_yaml(st.experts[e].gate_up, whole),
                         matrix_yaml(st.experts[e].down, whole));
      return;
  }
  o += fmt::format("    down: {}\n", matrix_yaml(st.down, whole));
}

void write_layer(std::string& o, const models::ModelConfig& model, const LayerStage& st) {
  o += fmt::format("  - layer: {}\n    wafer: {}\n    region: {}\n", st.layer, st.wafer,
                   rect_yaml(st.strip));
  const bool whole = st.whole_region;
  if (whole) o += fmt::format("    dataflow: {}\n", kWholeRegion);
  if (st.upward()) o += "    stacking: bottom-up\n";
  o += fmt::format("    qkv: {}\n", matrix_yaml(st.qkv, whole));
  const AttentionPlacement& a = st.attention;
  if (st.attention_apart())
    o += fmt::format("    attention: {{region: {}, reduction: {}{}}}\n", rect_yaml(a.rect),
                     reduction_name(a.reduction), groups_yaml(a.reduction, a.reduction_groups));
  else if (whole)
    o += fmt::format("    attention: {}\n", reduction_yaml(a.reduction, a.reduction_groups));
  else
    o += fmt::format(
        "    attention: {{rect: {}, segment_length: {}, segments_per_column: {}, reduction: "
        "{}{}}}\n",
        rect_yaml(a.rect), a.segment_length, a.segments_per_column, reduction_name(a.reduction),
        groups_yaml(a.reduction, a.reduction_groups));
  o += fmt::format("    o: {}\n", matrix_yaml(st.o, whole));
  write_mlp(o, model, st);
}

void write_head(std::string& o, const HeadStage& head) {
  o += fmt::format("head:\n  wafer: {}\n  region: {}\n", head.wafer, rect_yaml(head.strip));
  o += fmt::format("  lm_head: {}\n", matrix_yaml(head.lm_head));
  if (!head.tied) o += fmt::format("  embedding: {}\n", matrix_yaml(head.embedding));
  if (head.position_embedding.p() > 0)
    o += fmt::format("  position_embedding: {}\n", matrix_yaml(head.position_embedding));
}

// ---- Reading: strict YAML (strict_yaml.hpp) in this file's own wording -------------

using yaml::Mapping;
using yaml::Value;

[[noreturn]] void fail(const Value& n, const std::string& what) {
  yaml::fail(n.node_loc(), n.path, what);
}

// The mapping's keys, checked against `keys` (unknown keys are errors with a
// did-you-mean, and `why(key)` where it has more to say). A placement file
// does not say what was given instead of a mapping. A key given twice is an
// error, as in a scenario.
Mapping mapping(const Value& n, std::vector<std::string> keys,
                std::function<std::string(const std::string&)> why = {}) {
  yaml::KeyRules rules;
  rules.strict_keys = true;
  rules.say_what_was_given = false;
  rules.unknown_key_note = std::move(why);
  return Mapping(n, std::move(keys), rules);
}

Value get(const Mapping& m, const std::string& key) {
  if (const Value* v = m.find(key)) return *v;
  fail(m.self(), fmt::format("missing key '{}'", key));
}

// The `count` elements of a list, in order, each with its path (`what`
// names the elements in the error).
std::vector<Value> list(const Value& n, std::size_t count, const std::string& what) {
  if (!n.node.IsSequence() || n.node.size() != count)
    fail(n,
         fmt::format("expected a list of {} {}{}", count, what,
                     n.node.IsSequence() ? fmt::format(", not {}", n.node.size()) : std::string()));
  std::vector<Value> items;
  for (std::size_t i = 0; i < count; ++i) items.push_back(n.item(i));
  return items;
}

// Any integer yaml-cpp reads (a sign included: a rectangle off the mesh is
// reported as such).
long long integer(const Value& n) {
  try {
    if (!n.node.IsScalar()) throw YAML::Exception(n.node.Mark(), "");
    return n.node.as<long long>();
  } catch (const YAML::Exception&) {
    fail(n, "expected an integer");
  }
}

std::string text(const Value& n) {
  if (!n.node.IsScalar()) fail(n, "expected a string");
  return n.node.Scalar();
}

fabric::Rect rect(const Value& n) {
  if (!n.node.IsSequence() || n.node.size() != 4)
    fail(n, "expected [x0, y0, width, height] (cores)");
  fabric::Rect r;
  int* f[] = {&r.x0, &r.y0, &r.width, &r.height};
  for (std::size_t i = 0; i < 4; ++i)
    *f[i] = static_cast<int>(integer(Value{n.node[i], n.file, n.path, n.node[i].Mark()}));
  return r;
}

fabric::ReductionScheme reduction(const Value& n) {
  const std::string s = text(n);
  if (const auto r = parse_reduction(s)) return *r;
  fail(n, fmt::format("unknown reduction '{}'; valid: {}{}", s, fmt::join(reduction_names(), ", "),
                      yaml::did_you_mean(s, reduction_names())));
}

// A mapping's optional `reduction_groups` (k-tree only): 0 when absent.
int reduction_groups(const Mapping& n, ReductionScheme r) {
  const Value* v = n.find("reduction_groups");
  if (v == nullptr) return 0;
  if (r != ReductionScheme::k_tree)
    fail(*v, fmt::format("reduction_groups is for reduction k-tree, not {}", reduction_name(r)));
  const long long k = integer(*v);
  if (k < 1 || k > 1'000'000) fail(*v, "must be at least 1 (groups of the k-tree)");
  return static_cast<int>(k);
}

// One rectangle of the file, remembered with where it was written for
// overlap, dead-core and SRAM errors.
struct PlacedRect {
  fabric::Rect rect;
  int wafer = 0;
  Value where;
};

// The shape a matrix must have: [out][in], output rows in groups of `granule`.
struct MatrixShape {
  std::string name;
  int out = 0, in = 0;
  int granule = 1;
};

// Reads one placement file for one model, wafer spec and request: every
// stage's rectangles, each checked as it is read (inside the mesh, a shape
// that suits its matrix), then all of them together (no overlap, no dead
// core, every core's bytes within its SRAM).
class PlacementFileReader {
 public:
  PlacementFileReader(std::string file, const models::ModelConfig& model,
                      const fabric::WaferSpec& spec, const PlacementRequest& req)
      : file_(std::move(file)), model_(model), spec_(spec), req_(req), planner_(model, spec, req) {}

  Placement read(const Value& file) {
    const Mapping top =
        mapping(file, {"placement_file", "model", "mesh", "wafers", "strategy", "layers", "head"});
    check_header(top);
    Placement pl;
    pl.strategy = strategy(get(top, "strategy"));
    pl.planner_note = fmt::format("read from {}", file_);
    pl.wafers = wafers_;
    pl.context_tokens = req_.context_tokens;
    pl.users = users();
    pl.value_bytes = req_.value_bytes();
    pl.max_context_tokens = model_.max_position;
    const std::vector<Value> layers =
        list(get(top, "layers"), static_cast<std::size_t>(model_.num_layers), "layers");
    for (int l = 0; l < model_.num_layers; ++l)
      pl.layers.push_back(layer(layers[static_cast<std::size_t>(l)], l,
                                pl.layers.empty() ? nullptr : &pl.layers.back()));
    pl.head = head(get(top, "head"));
    check_regions();
    check_cores_alive_and_unshared();
    check_sram(pl);
    pl.max_context_tokens = layout_max_context(model_, pl, req_, spec_);
    pl.estimated_hop_bytes = estimate_hop_bytes(model_, pl, spec_.mesh_width);
    return pl;
  }

 private:
  // What produced the file: one of the strategies (informational, but a
  // name no strategy has is a mistake).
  static std::string strategy(const Value& n) {
    const std::string s = text(n);
    const std::vector<std::string> valid = placement_strategies();
    if (std::find(valid.begin(), valid.end(), s) == valid.end())
      fail(n, fmt::format("unknown strategy '{}'; valid: {}{}", s, yaml::join_list(valid),
                          yaml::did_you_mean(s, valid)));
    return s;
  }

  int users() const { return std::max(1, req_.users); }
  int context() const { return std::max(1, req_.context_tokens); }

  // placement_file, model, mesh and wafers.
  void check_header(const Mapping& top) {
    const Value version = get(top, "placement_file");
    if (integer(version) != 1)
      fail(version, "unsupported placement file version (this build reads 1)");
    const Value model_name = get(top, "model");
    if (text(model_name) != model_.name)
      fail(model_name, fmt::format("the file places '{}' but the scenario's model is '{}'",
                                   text(model_name), model_.name));
    const Value mesh_value = get(top, "mesh");
    const Mapping mesh = mapping(mesh_value, {"width", "height"});
    const long long w = integer(get(mesh, "width")), h = integer(get(mesh, "height"));
    if (w != spec_.mesh_width || h != spec_.mesh_height)
      fail(mesh_value, fmt::format("the file is for a {} x {} mesh but {} is {} x {}", w, h,
                                   spec_.name, spec_.mesh_width, spec_.mesh_height));
    const Value wafers = get(top, "wafers");
    const long long n = integer(wafers);
    if (n < 1 || n > model_.num_layers)
      fail(wafers, fmt::format("must be between 1 and {} (the model's layers)", model_.num_layers));
    if (expected_wafers_ > 0 && n != expected_wafers_)
      fail(wafers, fmt::format("the file places the model on {} wafer{} but the scenario has "
                               "wafers: {}; make them agree (or set wafers: auto)",
                               n, n == 1 ? "" : "s", expected_wafers_));
    wafers_ = static_cast<int>(n);
  }

  int wafer(const Value& n) const {
    const long long w = integer(n);
    if (w < 0 || w >= wafers_)
      fail(n, fmt::format("wafer {} does not exist (wafers: {})", w, wafers_));
    return static_cast<int>(w);
  }

  fabric::Rect rect_in_mesh(const Value& n) const {
    const fabric::Rect rc = rect(n);
    if (rc.width < 1 || rc.height < 1 || rc.x0 < 0 || rc.y0 < 0 ||
        rc.x0 + rc.width > spec_.mesh_width || rc.y0 + rc.height > spec_.mesh_height)
      fail(n, fmt::format("rectangle {} is not inside the {} x {} mesh", rect_yaml(rc),
                          spec_.mesh_width, spec_.mesh_height));
    return rc;
  }

  // `key` of `parent`: {rect, reduction}, at most one core per input column
  // and per output row (group).
  MatrixPlacement matrix(const Mapping& parent, const std::string& key, const MatrixShape& shape,
                         int wafer) {
    const Mapping n = mapping(get(parent, key), {"rect", "reduction", "reduction_groups"});
    MatrixPlacement m;
    m.name = shape.name;
    m.wafer = wafer;
    m.out_features = shape.out;
    m.in_features = shape.in;
    m.row_granule = shape.granule;
    const Value rn = get(n, "rect");
    m.rect = rect_in_mesh(rn);
    if (m.q() > shape.in)
      fail(rn, fmt::format("{} columns of cores for {} input columns: at most {}", m.q(), shape.in,
                           shape.in));
    const int groups = shape.out / shape.granule;
    if (m.p() > groups)
      fail(rn, fmt::format("{} rows of cores for {} output rows{}: at most {}", m.p(), shape.out,
                           shape.granule > 1 ? " (in gate/up pairs)" : "", groups));
    m.reduction = reduction(get(n, "reduction"));
    m.reduction_groups = reduction_groups(n, m.reduction);
    placed_.push_back({m.rect, wafer, rn});
    return m;
  }

  AttentionPlacement attention(const Mapping& parent, int wafer) {
    const Mapping an =
        mapping(get(parent, "attention"),
                {"rect", "segment_length", "segments_per_column", "reduction", "reduction_groups"});
    AttentionPlacement a;
    a.wafer = wafer;
    a.num_kv_heads = model_.num_kv_heads;
    a.head_dim = model_.head_dim;
    const Value seg = get(an, "segment_length"), spc = get(an, "segments_per_column");
    a.segment_length = static_cast<int>(integer(seg));
    a.segments_per_column = static_cast<int>(integer(spc));
    if (a.segment_length < 1) fail(seg, "must be at least 1 (cores per kv head)");
    if (a.segments_per_column < 1 || a.segments_per_column > model_.num_kv_heads)
      fail(spc, fmt::format("must be between 1 and {} (kv heads)", model_.num_kv_heads));
    const Value arn = get(an, "rect");
    a.rect = rect_in_mesh(arn);
    const int want_w = static_cast<int>(ceil_div(model_.num_kv_heads, a.segments_per_column));
    const int want_h = a.segments_per_column * a.segment_length;
    if (a.rect.width != want_w || a.rect.height != want_h)
      fail(arn, fmt::format("{} kv heads in segments of {} cores, {} per column, take a {} x {} "
                            "rectangle (width x height), not {} x {}",
                            model_.num_kv_heads, a.segment_length, a.segments_per_column, want_w,
                            want_h, a.rect.width, a.rect.height));
    a.reduction = reduction(get(an, "reduction"));
    a.reduction_groups = reduction_groups(an, a.reduction);
    a.context = context();
    a.users = users();
    const std::uint64_t slots = static_cast<std::uint64_t>(context()) * users();
    a.max_positions_per_core =
        static_cast<int>(ceil_div(slots, static_cast<std::uint64_t>(a.segment_length)));
    placed_.push_back({a.rect, wafer, arn});
    return a;
  }

  // Unknown-key note for a layer: the MLP keys of another architecture.
  std::string other_mlp_key_note(const std::string& key) const {
    for (const MlpKind kind : {MlpKind::swiglu, MlpKind::gelu, MlpKind::experts}) {
      const std::vector<std::string> keys = mlp_keys(kind);
      if (std::find(keys.begin(), keys.end(), key) != keys.end())
        return fmt::format("; {} layers ({}) have {}", model_.name,
                           models::architecture_name(model_.architecture), mlp_description(model_));
    }
    return {};
  }

  // Layer l; `before`: the layer before it (none for the first).
  LayerStage layer(const Value& layer_value, int l, const LayerStage* before) {
    std::vector<std::string> keys{"layer",    "wafer", "region",    "dataflow",
                                  "stacking", "qkv",   "attention", "o"};
    for (std::string& k : mlp_keys(mlp_kind(model_))) keys.push_back(std::move(k));
    const Mapping ln =
        mapping(layer_value, keys, [&](const std::string& k) { return other_mlp_key_note(k); });
    const Value idx = get(ln, "layer");
    if (integer(idx) != l) fail(idx, fmt::format("layers must be in order: expected layer {}", l));
    LayerStage st;
    st.layer = l;
    st.wafer = wafer(get(ln, "wafer"));
    const Value region = get(ln, "region");
    st.strip = rect_in_mesh(region);
    if (whole_region(ln)) {
      region_layer(ln, region, st, before);
      return st;
    }
    const std::size_t first_matrix = placed_.size();
    bool upward = false;
    if (ln.has("stacking")) {
      const Value sn = get(ln, "stacking");
      const std::string stacking = text(sn);
      if (stacking != "top-down" && stacking != "bottom-up")
        fail(sn, fmt::format("unknown stacking '{}'; valid: top-down, bottom-up (every matrix "
                             "of the layer turned upside down: inputs enter at its bottom "
                             "row){}",
                             stacking, suggest_name(stacking, {"top-down", "bottom-up"})));
      upward = stacking == "bottom-up";
    }
    const std::string L = fmt::format("layer {} ", l);
    const int hidden = model_.hidden_size;
    st.qkv = matrix(ln, "qkv", {L + "qkv", model_.q_dim() + 2 * model_.kv_dim(), hidden}, st.wafer);
    st.attention = attention(ln, st.wafer);
    st.o = matrix(ln, "o", {L + "o", hidden, model_.q_dim()}, st.wafer);
    mlp(ln, L, st);
    for (MatrixPlacement* m : {&st.qkv, &st.o, &st.gate_up, &st.down, &st.router})
      m->upward = upward && m->p() > 0;  // as placed: the MLP kind the model lacks stays 0 x 0
    for (ExpertPlacement& e : st.experts) e.gate_up.upward = e.down.upward = upward;
    regions_.push_back({st.strip, st.wafer, region, first_matrix, placed_.size()});
    return st;
  }

  // A layer's `dataflow`: rectangles (absent) or whole-region.
  static bool whole_region(const Mapping& ln) {
    const Value* d = ln.find("dataflow");
    if (d == nullptr) return false;
    const std::string s = text(*d);
    if (s == kWholeRegion) return true;
    if (s == kRectangles) return false;
    fail(*d,
         fmt::format("unknown dataflow '{}'; valid: {} (every matrix and the KV segments on "
                     "rectangles of their own; the default), {} (every matrix and the KV "
                     "cache span the layer's region){}",
                     s, kRectangles, kWholeRegion, suggest_name(s, {kRectangles, kWholeRegion})));
  }

  // A whole-region layer: its matrices and KV cache laid over its region as
  // the whole-region strategy lays them (StagePlanner::region_stage), each
  // with the file's reduction. The consecutive layers with the same region
  // (and wafer) are one layer group: the region's cores are checked once
  // for them all, and their bytes summed on each core (check_sram).
  void region_layer(const Mapping& ln, const Value& region, LayerStage& st,
                    const LayerStage* before) {
    if (const Value* sn = ln.find("stacking"))
      fail(*sn, fmt::format("a layer with dataflow: {} has no stacking: every matrix spans its "
                            "region (remove stacking, or give the layer dataflow: {})",
                            kWholeRegion, kRectangles));
    try {
      st = planner_.region_stage(st.layer, st.wafer, st.strip, kWholeRegion);
    } catch (const fabric::FitError& e) {
      fail(region, e.what());
    }
    region_matrix(ln, "qkv", st.qkv);
    const std::optional<Value> kv_region = region_attention(ln, st);
    region_matrix(ln, "o", st.o);
    switch (mlp_kind(model_)) {
      case MlpKind::swiglu:
      case MlpKind::gelu:
        region_matrix(ln, mlp_kind(model_) == MlpKind::swiglu ? "gate_up" : "up", st.gate_up);
        region_matrix(ln, "down", st.down);
        break;
      case MlpKind::experts: {
        region_matrix(ln, "router", st.router);
        const std::vector<Mapping> entries = expert_entries(get(ln, "experts"));
        for (std::size_t e = 0; e < entries.size(); ++e) {
          region_matrix(entries[e], "gate_up", st.experts[e].gate_up);
          region_matrix(entries[e], "down", st.experts[e].down);
        }
        break;
      }
    }
    const bool joins = before != nullptr && st.joins_group_of(*before);
    const int group = joins ? regions_.back().group : static_cast<int>(regions_.size());
    const std::size_t first = placed_.size();
    if (!joins) placed_.push_back({st.strip, st.wafer, region});
    regions_.push_back({st.strip, st.wafer, region, first, placed_.size(), group});
    // A KV region of its own, outside the stage's region: the group's layers
    // in a row may share it as they share their region (placed once).
    if (kv_region) {
      if (!(joins && last_kv_ == st.attention.rect))
        placed_.push_back({st.attention.rect, st.wafer, *kv_region});
      last_kv_ = st.attention.rect;
    } else {
      last_kv_.reset();
    }
  }

  // A whole-region layer's `attention`: its reduction and, optionally, a
  // `region` of its own for the KV cache (outside the layer's region, on
  // cores nothing else holds), laid out there as over the layer's region.
  // Returns that region's value (none: the KV cache spreads over the
  // layer's region).
  std::optional<Value> region_attention(const Mapping& ln, LayerStage& st) {
    const Mapping an = region_reduction(ln, "attention", st.attention.reduction,
                                        st.attention.reduction_groups, true);
    const Value* rv = an.find("region");
    if (rv == nullptr) return std::nullopt;
    const Value where = *rv;
    const fabric::Rect r = rect_in_mesh(where);
    if (overlap(r, st.strip))
      fail(where, fmt::format("the KV cache's region {} overlaps its layer's region {}: give it "
                              "cores of its own (or leave region out: the KV cache then spreads "
                              "over the layer's region)",
                              rect_yaml(r), rect_yaml(st.strip)));
    const ReductionScheme scheme = st.attention.reduction;
    const int groups = st.attention.reduction_groups;
    try {
      st.attention = planner_.region_attention(st.layer, st.wafer, r, kWholeRegion);
    } catch (const fabric::FitError& e) {
      fail(where, e.what());
    }
    st.attention.reduction = scheme;
    st.attention.reduction_groups = groups;
    return where;
  }

  void region_matrix(const Mapping& parent, const std::string& key, MatrixPlacement& m) const {
    region_reduction(parent, key, m.reduction, m.reduction_groups);
  }

  // `key` of `parent` in a whole-region layer: {reduction, reduction_groups}
  // (attention, `kv`, may add a `region`). Returns the mapping.
  static Mapping region_reduction(const Mapping& parent, const std::string& key, ReductionScheme& r,
                                  int& groups, bool kv = false) {
    std::vector<std::string> keys{"reduction", "reduction_groups"};
    if (kv) keys.emplace_back("region");
    const Mapping n =
        mapping(get(parent, key), std::move(keys),
                [](const std::string& k) -> std::string {
                  if (k != "rect" && k != "segment_length" && k != "segments_per_column") return {};
                  return fmt::format(
                      "; in a layer with dataflow: {} every matrix and the KV "
                      "cache span the layer's region (to place them one by one, "
                      "give the layer dataflow: {})",
                      kWholeRegion, kRectangles);
                });
    r = reduction(get(n, "reduction"));
    groups = reduction_groups(n, r);
    return n;
  }

  // The layer's MLP: the dense matrices of its kind, or the router and experts.
  void mlp(const Mapping& ln, const std::string& L, LayerStage& st) {
    const int hidden = model_.hidden_size, inter = model_.intermediate_size;
    switch (mlp_kind(model_)) {
      case MlpKind::swiglu:
        // Rows interleave gate and up: 2i = gate i, 2i+1 = up i (granule 2).
        st.gate_up = matrix(ln, "gate_up", {L + "gate_up", 2 * inter, hidden, 2}, st.wafer);
        st.down = matrix(ln, "down", {L + "down", hidden, inter}, st.wafer);
        break;
      case MlpKind::gelu:
        // gpt2's plain up matrix takes gate_up's place (granule 1).
        st.gate_up = matrix(ln, "up", {L + "up", inter, hidden}, st.wafer);
        st.down = matrix(ln, "down", {L + "down", hidden, inter}, st.wafer);
        break;
      case MlpKind::experts:
        st.router = matrix(ln, "router", {L + "router", model_.num_experts, hidden}, st.wafer);
        st.experts = experts(get(ln, "experts"), L, st.wafer);
        break;
    }
  }

  // A layer's experts: one entry per expert, in order, each with its own
  // gate_up (interleaved, as the dense one) and down.
  std::vector<ExpertPlacement> experts(const Value& entries, const std::string& L, int wafer) {
    std::vector<ExpertPlacement> out;
    const int hidden = model_.hidden_size, inter = model_.intermediate_size;
    const std::vector<Mapping> items = expert_entries(entries);
    for (std::size_t e = 0; e < items.size(); ++e) {
      const std::string E = fmt::format("{}expert {} ", L, e);
      ExpertPlacement ep;
      ep.gate_up = matrix(items[e], "gate_up", {E + "gate_up", 2 * inter, hidden, 2}, wafer);
      ep.down = matrix(items[e], "down", {E + "down", hidden, inter}, wafer);
      out.push_back(std::move(ep));
    }
    return out;
  }

  // The entries of a layer's `experts`: one per expert, in order, each with
  // expert, gate_up and down.
  std::vector<Mapping> expert_entries(const Value& entries) const {
    const std::vector<Value> items =
        list(entries, static_cast<std::size_t>(model_.num_experts),
             fmt::format("experts (one per expert of {}, each with expert, gate_up and down)",
                         model_.name));
    std::vector<Mapping> out;
    for (int e = 0; e < model_.num_experts; ++e) {
      out.push_back(mapping(items[static_cast<std::size_t>(e)], {"expert", "gate_up", "down"}));
      const Value idx = get(out.back(), "expert");
      if (integer(idx) != e)
        fail(idx, fmt::format("experts must be in order: expected expert {}", e));
    }
    return out;
  }

  HeadStage head(const Value& head_value) {
    HeadStage head;
    head.tied = model_.tie_embeddings;
    std::vector<std::string> keys{"wafer", "region", "lm_head"};
    if (!head.tied) keys.push_back("embedding");
    if (model_.is_gpt2()) keys.push_back("position_embedding");
    const Mapping hn = mapping(head_value, keys);
    head.wafer = wafer(get(hn, "wafer"));
    const Value region = get(hn, "region");
    head.strip = rect_in_mesh(region);
    const std::size_t first_matrix = placed_.size();
    const int vocab = model_.vocab_size, hidden = model_.hidden_size;
    head.lm_head = matrix(hn, "lm_head", {"lm_head", vocab, hidden}, head.wafer);
    head.embedding = head.tied ? head.lm_head
                               : matrix(hn, "embedding", {"embedding", vocab, hidden}, head.wafer);
    if (model_.is_gpt2())
      head.position_embedding =
          matrix(hn, "position_embedding", {"position_embedding", model_.max_position, hidden},
                 head.wafer);
    regions_.push_back({head.strip, head.wafer, region, first_matrix, placed_.size()});
    return head;
  }

  // Index of core `c` of wafer `wafer` in per-core arrays of every wafer.
  std::size_t core_index(int wafer, Coord c) const {
    const auto cores = static_cast<std::size_t>(spec_.mesh_width) * spec_.mesh_height;
    return static_cast<std::size_t>(wafer) * cores +
           static_cast<std::size_t>(c.y) * spec_.mesh_width + static_cast<std::size_t>(c.x);
  }

  // Stage regions: each contains its own matrices, and no two share a core.
  void check_regions() const {
    for (const StageRegion& r : regions_) {
      for (std::size_t i = r.first; i < r.last; ++i) {
        const PlacedRect& m = placed_[i];
        if (!r.rect.encloses(m.rect))
          fail(m.where,
               fmt::format("rectangle {} is not inside its stage's region {} (line {})",
                           rect_yaml(m.rect), rect_yaml(r.rect), r.where.node.Mark().line + 1));
      }
    }
    for (std::size_t i = 0; i < regions_.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        const StageRegion& a = regions_[i];
        const StageRegion& b = regions_[j];
        if (a.group >= 0 && a.group == b.group) continue;  // one layer group's region
        if (a.wafer == b.wafer && overlap(a.rect, b.rect))
          fail(a.where,
               fmt::format("region {} overlaps {} {} (line {}) on wafer {}{}", rect_yaml(a.rect),
                           b.where.path, rect_yaml(b.rect), b.where.node.Mark().line + 1, a.wafer,
                           a.group >= 0 && b.group >= 0 && a.rect == b.rect
                               ? fmt::format("; layers with dataflow: {} share a region only "
                                             "whole and as consecutive layers (a layer group)",
                                             kWholeRegion)
                               : std::string()));
      }
    }
  }

  static bool overlap(const fabric::Rect& a, const fabric::Rect& b) {
    return a.x0 < b.x0 + b.width && b.x0 < a.x0 + a.width && a.y0 < b.y0 + b.height &&
           b.y0 < a.y0 + a.height;
  }

  // Every core of every rectangle: alive, and in no other rectangle.
  void check_cores_alive_and_unshared() const {
    const fabric::DefectMap defects(spec_);
    std::vector<int> owner(core_index(wafers_, Coord{0, 0}), -1);
    for (std::size_t i = 0; i < placed_.size(); ++i) {
      const PlacedRect& p = placed_[i];
      for_each_core(p.rect, [&](Coord c) {
        if (defects.dead(c))
          fail(p.where, fmt::format("rectangle {} contains the dead core ({}, {})",
                                    rect_yaml(p.rect), c.x, c.y));
        int& o = owner[core_index(p.wafer, c)];
        if (o >= 0) {
          const PlacedRect& q = placed_[static_cast<std::size_t>(o)];
          fail(p.where,
               fmt::format("rectangle {} overlaps {} {} (line {}) at core ({}, {}) of wafer {}",
                           rect_yaml(p.rect), q.where.path, rect_yaml(q.rect),
                           q.where.node.Mark().line + 1, c.x, c.y, p.wafer));
        }
        o = static_cast<int>(i);
      });
    }
  }

  // Every core within its SRAM, its bytes counted as the allocator will
  // allocate them (for_each_allocation); the first rectangle (in file order)
  // with a core over is the error.
  void check_sram(const Placement& pl) const {
    std::vector<std::uint64_t> used(core_index(wafers_, Coord{0, 0}), 0);
    for_each_allocation(model_, pl, req_, [&](const CoreAllocation& a) {
      used[core_index(a.wafer, a.core)] += a.bytes.value;
    });
    const std::uint64_t capacity = spec_.sram_per_core.value;
    for (const PlacedRect& p : placed_) {
      Coord fullest{p.rect.x0, p.rect.y0};
      for_each_core(p.rect, [&](Coord c) {
        if (used[core_index(p.wafer, c)] > used[core_index(p.wafer, fullest)]) fullest = c;
      });
      const std::uint64_t most = used[core_index(p.wafer, fullest)];
      if (most > capacity)
        fail(p.where,
             fmt::format("its fullest core ({}, {}) would hold {} bytes but a core has {} ({} "
                         "tokens x {} users of KV cache where it is attention); use more cores",
                         fullest.x, fullest.y, most, capacity, context(), users()));
    }
  }

  static void for_each_core(const fabric::Rect& r, const std::function<void(Coord)>& f) {
    for (int y = r.y0; y < r.y0 + r.height; ++y)
      for (int x = r.x0; x < r.x0 + r.width; ++x) f(Coord{x, y});
  }

  std::string file_;
  const models::ModelConfig& model_;
  const fabric::WaferSpec& spec_;
  const PlacementRequest& req_;
  StagePlanner planner_;     // lays out whole-region layers as the strategy does
  std::optional<fabric::Rect> last_kv_;  // the last layer's own KV region, if any
  int expected_wafers_ = 0;  // the scenario's wafers; 0: any (wafers: auto)
  int wafers_ = 1;
  std::vector<PlacedRect> placed_;  // in file order
  // A stage's region and its matrices (placed_[first, last)); a
  // whole-region layer's rectangle is its region, placed once for its layer
  // group (group: the index of the group's first region; -1: not
  // whole-region).
  struct StageRegion {
    fabric::Rect rect;
    int wafer = 0;
    Value where;
    std::size_t first = 0, last = 0;
    int group = -1;
  };
  std::vector<StageRegion> regions_;

 public:
  void expect_wafers(int n) { expected_wafers_ = n; }
};

}  // namespace

std::string placement_file_yaml(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                                const Placement& pl) {
  std::string o;
  o += "# wafersim placement file: edit the rectangles and read it back with\n";
  o += "# `placement: {file: THIS}` or `wafersim run|place SCENARIO --placement THIS`.\n";
  o += "# rect: [x0, y0, width, height] in cores; a matrix's P x Q tiles are height x width.\n";
  o += roots_comment(model);
  o += whole_region_comment(pl);
  o += "placement_file: 1\n";
  o += fmt::format("model: \"{}\"\n", model.name);
  o += fmt::format("mesh: {{width: {}, height: {}}}\n", spec.mesh_width, spec.mesh_height);
  o += fmt::format("wafers: {}\n", pl.wafers);
  o += fmt::format("strategy: \"{}\"\n", pl.strategy);
  o += "layers:\n";
  for (const LayerStage& st : pl.layers) write_layer(o, model, st);
  write_head(o, pl.head);
  return o;
}

Placement read_placement_file(const std::filesystem::path& path, const models::ModelConfig& model,
                              const fabric::WaferSpec& spec, const PlacementRequest& req,
                              int wafers) {
  const std::string file = path.string();
  // A folder, an unreadable file, invalid YAML, a second document or a tag:
  // errors at the file (strict_yaml.hpp).
  const YAML::Node root = yaml::parse_file(path);
  PlacementFileReader reader(file, model, spec, req);
  reader.expect_wafers(wafers);
  return reader.read(yaml::document(root, file, ""));
}

}  // namespace wafersim::sim
