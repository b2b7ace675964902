#include "sim/placement_file.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "fabric/defects.hpp"
#include "sim/placement_cost.hpp"
#include "sim/program.hpp"
#include "sim/scenario.hpp"

namespace wafersim::sim {

namespace {

std::string rect_yaml(const fabric::Rect& r) {
  return fmt::format("[{}, {}, {}, {}]", r.x0, r.y0, r.width, r.height);
}

std::string matrix_yaml(const MatrixPlacement& m) {
  return fmt::format("{{rect: {}, reduction: {}}}", rect_yaml(m.rect), reduction_name(m.reduction));
}

// A node of the file with its key path, for errors with file:line:column.
struct Node {
  YAML::Node node;
  std::string path;
};

class FileReader {
 public:
  explicit FileReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const Node& n, const std::string& what) const {
    const YAML::Mark m = n.node.Mark();
    const bool known = !m.is_null() && m.line >= 0;
    throw ScenarioError(file_, known ? m.line + 1 : 0, known ? m.column + 1 : 0, n.path, what);
  }

  // The mapping's keys, checked against `keys` (unknown keys are errors with a did-you-mean).
  void check_keys(const Node& n, const std::vector<std::string>& keys) const {
    if (!n.node.IsMap())
      fail(n, fmt::format("expected a mapping with keys {}", fmt::join(keys, ", ")));
    for (auto it = n.node.begin(); it != n.node.end(); ++it) {
      const std::string k = it->first.Scalar();
      if (std::find(keys.begin(), keys.end(), k) == keys.end())
        fail(Node{it->first, n.path.empty() ? k : n.path + "." + k},
             fmt::format("unknown key '{}'; valid keys here: {}{}", k, fmt::join(keys, ", "),
                         suggest_name(k, keys)));
    }
  }

  Node get(const Node& n, const std::string& key) const {
    const YAML::Node v = n.node[key];
    if (!v) fail(n, fmt::format("missing key '{}'", key));
    return Node{v, n.path.empty() ? key : n.path + "." + key};
  }

  long long integer(const Node& n) const {
    try {
      if (!n.node.IsScalar()) throw YAML::Exception(n.node.Mark(), "");
      return n.node.as<long long>();
    } catch (const YAML::Exception&) {
      fail(n, "expected an integer");
    }
  }

  std::string text(const Node& n) const {
    if (!n.node.IsScalar()) fail(n, "expected a string");
    return n.node.Scalar();
  }

  fabric::Rect rect(const Node& n) const {
    if (!n.node.IsSequence() || n.node.size() != 4)
      fail(n, "expected [x0, y0, width, height] (cores)");
    fabric::Rect r;
    int* f[] = {&r.x0, &r.y0, &r.width, &r.height};
    for (std::size_t i = 0; i < 4; ++i) *f[i] = static_cast<int>(integer(Node{n.node[i], n.path}));
    return r;
  }

  fabric::ReductionScheme reduction(const Node& n) const {
    const std::string s = text(n);
    if (s == "chain") return fabric::ReductionScheme::chain;
    if (s == "tree") return fabric::ReductionScheme::tree;
    if (s == "two-level") return fabric::ReductionScheme::two_level;
    fail(n, fmt::format("unknown reduction '{}'; valid: chain, tree, two-level{}", s,
                        suggest_name(s, {"chain", "tree", "two-level"})));
  }

 private:
  std::string file_;
};

// One rectangle of the file, remembered with where it was written for
// overlap and SRAM errors.
struct PlacedRect {
  fabric::Rect rect;
  int wafer = 0;
  Node where;
  std::uint64_t bytes_per_core = 0;  // the most any of its cores holds
};

}  // namespace

std::string placement_file_yaml(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                                const Placement& pl) {
  if (model.is_moe() || model.is_gpt2())
    throw UnsupportedModelError(fmt::format(
        "placement files describe llama-family dense layers (qkv, o, gate_up, down); {} ({}) "
        "has {} and cannot be written to or read from one yet",
        model.name, models::architecture_name(model.architecture),
        model.is_moe() ? "mixture-of-experts layers" : "gpt2 layers and position embeddings"));
  std::string o;
  o += "# wafersim placement file: edit the rectangles and read it back with\n";
  o += "# `placement: {file: THIS}` or `wafersim run|place SCENARIO --placement THIS`.\n";
  o += "# rect: [x0, y0, width, height] in cores; a matrix's P x Q tiles are height x width.\n";
  o += "placement_file: 1\n";
  o += fmt::format("model: \"{}\"\n", model.name);
  o += fmt::format("mesh: {{width: {}, height: {}}}\n", spec.mesh_width, spec.mesh_height);
  o += fmt::format("wafers: {}\n", pl.wafers);
  o += fmt::format("strategy: \"{}\"\n", pl.strategy);
  o += "layers:\n";
  for (const LayerStage& st : pl.layers) {
    o += fmt::format("  - layer: {}\n    wafer: {}\n    region: {}\n", st.layer, st.wafer,
                     rect_yaml(st.strip));
    o += fmt::format("    qkv: {}\n", matrix_yaml(st.qkv));
    const AttentionPlacement& a = st.attention;
    o += fmt::format(
        "    attention: {{rect: {}, segment_length: {}, segments_per_column: {}, reduction: {}}}\n",
        rect_yaml(a.rect), a.segment_length, a.segments_per_column, reduction_name(a.reduction));
    o += fmt::format("    o: {}\n", matrix_yaml(st.o));
    o += fmt::format("    gate_up: {}\n", matrix_yaml(st.gate_up));
    o += fmt::format("    down: {}\n", matrix_yaml(st.down));
  }
  o += fmt::format("head:\n  wafer: {}\n  region: {}\n", pl.head.wafer, rect_yaml(pl.head.strip));
  o += fmt::format("  lm_head: {}\n", matrix_yaml(pl.head.lm_head));
  if (!pl.head.tied) o += fmt::format("  embedding: {}\n", matrix_yaml(pl.head.embedding));
  return o;
}

Placement read_placement_file(const std::filesystem::path& path, const models::ModelConfig& model,
                              const fabric::WaferSpec& spec, const PlacementRequest& req) {
  if (model.is_moe() || model.is_gpt2())
    throw UnsupportedModelError(fmt::format(
        "placement files describe llama-family dense layers (qkv, o, gate_up, down); {} ({}) "
        "has {} and cannot be written to or read from one yet",
        model.name, models::architecture_name(model.architecture),
        model.is_moe() ? "mixture-of-experts layers" : "gpt2 layers and position embeddings"));
  const std::string file = path.string();
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    throw ScenarioError(file, 0, 0, "", "cannot read the placement file");
  } catch (const YAML::ParserException& e) {
    throw ScenarioError(file, e.mark.line + 1, e.mark.column + 1, "", e.msg);
  }
  const FileReader r(file);
  const Node top{root, ""};
  r.check_keys(top, {"placement_file", "model", "mesh", "wafers", "strategy", "layers", "head"});
  if (r.integer(r.get(top, "placement_file")) != 1)
    r.fail(r.get(top, "placement_file"), "unsupported placement file version (this build reads 1)");
  const Node model_name = r.get(top, "model");
  if (r.text(model_name) != model.name)
    r.fail(model_name, fmt::format("the file places '{}' but the scenario's model is '{}'",
                                   r.text(model_name), model.name));
  const Node mesh = r.get(top, "mesh");
  r.check_keys(mesh, {"width", "height"});
  const Node mw = r.get(mesh, "width"), mh = r.get(mesh, "height");
  if (r.integer(mw) != spec.mesh_width || r.integer(mh) != spec.mesh_height)
    r.fail(mesh, fmt::format("the file is for a {} x {} mesh but {} is {} x {}", r.integer(mw),
                             r.integer(mh), spec.name, spec.mesh_width, spec.mesh_height));
  const Node wafers_node = r.get(top, "wafers");
  const long long wafers = r.integer(wafers_node);
  if (wafers < 1 || wafers > model.num_layers)
    r.fail(wafers_node,
           fmt::format("must be between 1 and {} (the model's layers)", model.num_layers));

  Placement pl;
  pl.strategy = r.text(r.get(top, "strategy"));
  pl.planner_note = fmt::format("read from {}", file);
  pl.wafers = static_cast<int>(wafers);
  const int users = std::max(1, req.users);
  const int ctx = std::max(1, req.context_tokens);
  pl.context_tokens = req.context_tokens;
  pl.users = users;
  pl.max_context_tokens = model.max_position;
  const std::int64_t slots = static_cast<std::int64_t>(ctx) * users;
  const int bits = req.weight_bits;
  const std::uint64_t capacity = spec.sram_per_core.value;
  const int hd = model.head_dim, group = model.num_heads / model.num_kv_heads;
  const std::uint64_t slot_bytes = 2 * static_cast<std::uint64_t>(hd) * bits / 8;
  const std::uint64_t att_buffers = static_cast<std::uint64_t>(group) * (2 * hd + 2) * 4;
  const fabric::DefectMap defects(spec);
  std::vector<PlacedRect> placed;

  auto check_in_mesh = [&](const fabric::Rect& rc, const Node& where) {
    if (rc.width < 1 || rc.height < 1 || rc.x0 < 0 || rc.y0 < 0 ||
        rc.x0 + rc.width > spec.mesh_width || rc.y0 + rc.height > spec.mesh_height)
      r.fail(where, fmt::format("rectangle {} is not inside the {} x {} mesh", rect_yaml(rc),
                                spec.mesh_width, spec.mesh_height));
  };
  auto check_wafer = [&](const Node& n) {
    const long long w = r.integer(n);
    if (w < 0 || w >= wafers)
      r.fail(n, fmt::format("wafer {} does not exist (wafers: {})", w, wafers));
    return static_cast<int>(w);
  };
  auto read_matrix = [&](const Node& parent, const std::string& key, const std::string& name,
                         int out, int in, int granule, int wafer) {
    const Node n = r.get(parent, key);
    r.check_keys(n, {"rect", "reduction"});
    MatrixPlacement m;
    m.name = name;
    m.wafer = wafer;
    m.out_features = out;
    m.in_features = in;
    m.row_granule = granule;
    const Node rn = r.get(n, "rect");
    m.rect = r.rect(rn);
    check_in_mesh(m.rect, rn);
    if (m.q() > in)
      r.fail(rn,
             fmt::format("{} columns of cores for {} input columns: at most {}", m.q(), in, in));
    if (m.p() > out / granule)
      r.fail(rn, fmt::format("{} rows of cores for {} output rows{}: at most {}", m.p(), out,
                             granule > 1 ? " (in gate/up pairs)" : "", out / granule));
    m.reduction = r.reduction(r.get(n, "reduction"));
    const std::uint64_t tile = m.max_tile_elements();
    const std::uint64_t cols =
        ceil_div(static_cast<std::uint64_t>(in), static_cast<std::uint64_t>(m.q()));
    const std::uint64_t rows = tile / std::max<std::uint64_t>(1, cols);
    placed.push_back({m.rect, wafer, rn, ceil_div(tile * bits, 8) + (rows + cols) * 4});
    return m;
  };

  const Node layers = r.get(top, "layers");
  if (!layers.node.IsSequence() || static_cast<int>(layers.node.size()) != model.num_layers)
    r.fail(layers, fmt::format("expected a list of {} layers", model.num_layers));
  for (int l = 0; l < model.num_layers; ++l) {
    const Node ln{layers.node[static_cast<std::size_t>(l)], fmt::format("layers[{}]", l)};
    r.check_keys(ln, {"layer", "wafer", "region", "qkv", "attention", "o", "gate_up", "down"});
    const Node idx = r.get(ln, "layer");
    if (r.integer(idx) != l)
      r.fail(idx, fmt::format("layers must be in order: expected layer {}", l));
    LayerStage st;
    st.layer = l;
    st.wafer = check_wafer(r.get(ln, "wafer"));
    const Node region = r.get(ln, "region");
    st.strip = r.rect(region);
    check_in_mesh(st.strip, region);
    const std::string L = fmt::format("layer {} ", l);
    st.qkv = read_matrix(ln, "qkv", L + "qkv", model.q_dim() + 2 * model.kv_dim(),
                         model.hidden_size, 1, st.wafer);
    st.o = read_matrix(ln, "o", L + "o", model.hidden_size, model.q_dim(), 1, st.wafer);
    st.gate_up = read_matrix(ln, "gate_up", L + "gate_up", 2 * model.intermediate_size,
                             model.hidden_size, 2, st.wafer);
    st.down = read_matrix(ln, "down", L + "down", model.hidden_size, model.intermediate_size, 1,
                          st.wafer);
    // RMSNorm gains sit on o's roots.
    placed[placed.size() - 3].bytes_per_core += ceil_div(
        static_cast<std::uint64_t>(2 * ceil_div(model.hidden_size, st.o.p())) * 2 * bits, 16);
    const Node an = r.get(ln, "attention");
    r.check_keys(an, {"rect", "segment_length", "segments_per_column", "reduction"});
    AttentionPlacement& a = st.attention;
    a.wafer = st.wafer;
    a.num_kv_heads = model.num_kv_heads;
    const Node seg = r.get(an, "segment_length"), spc = r.get(an, "segments_per_column");
    a.segment_length = static_cast<int>(r.integer(seg));
    a.segments_per_column = static_cast<int>(r.integer(spc));
    if (a.segment_length < 1) r.fail(seg, "must be at least 1 (cores per kv head)");
    if (a.segments_per_column < 1 || a.segments_per_column > model.num_kv_heads)
      r.fail(spc, fmt::format("must be between 1 and {} (kv heads)", model.num_kv_heads));
    const Node arn = r.get(an, "rect");
    a.rect = r.rect(arn);
    check_in_mesh(a.rect, arn);
    const int want_w = static_cast<int>(ceil_div(model.num_kv_heads, a.segments_per_column));
    if (a.rect.width != want_w || a.rect.height != a.segments_per_column * a.segment_length)
      r.fail(arn,
             fmt::format("{} kv heads in segments of {} cores, {} per column, take a {} x {} "
                         "rectangle (width x height), not {} x {}",
                         model.num_kv_heads, a.segment_length, a.segments_per_column, want_w,
                         a.segments_per_column * a.segment_length, a.rect.width, a.rect.height));
    a.reduction = r.reduction(r.get(an, "reduction"));
    a.context = ctx;
    a.users = users;
    a.max_positions_per_core = static_cast<int>(
        ceil_div(static_cast<std::uint64_t>(slots), static_cast<std::uint64_t>(a.segment_length)));
    placed.push_back(
        {a.rect, a.wafer, arn,
         slot_bytes * static_cast<std::uint64_t>(a.max_positions_per_core) + att_buffers});
    pl.layers.push_back(std::move(st));
  }

  const Node hn = r.get(top, "head");
  const bool tied = model.tie_embeddings;
  r.check_keys(hn, tied ? std::vector<std::string>{"wafer", "region", "lm_head"}
                        : std::vector<std::string>{"wafer", "region", "lm_head", "embedding"});
  HeadStage& head = pl.head;
  head.tied = tied;
  head.wafer = check_wafer(r.get(hn, "wafer"));
  const Node hregion = r.get(hn, "region");
  head.strip = r.rect(hregion);
  check_in_mesh(head.strip, hregion);
  head.lm_head =
      read_matrix(hn, "lm_head", "lm_head", model.vocab_size, model.hidden_size, 1, head.wafer);
  placed.back().bytes_per_core +=
      ceil_div(ceil_div(static_cast<std::uint64_t>(model.hidden_size),
                        static_cast<std::uint64_t>(std::min(head.lm_head.p(), model.hidden_size))) *
                   2 * bits,
               16);
  if (tied) {
    head.embedding = head.lm_head;
  } else {
    head.embedding = read_matrix(hn, "embedding", "embedding", model.vocab_size, model.hidden_size,
                                 1, head.wafer);
  }

  // Every core: at most one rectangle, alive, and within its SRAM.
  const std::size_t cores = static_cast<std::size_t>(spec.mesh_width) * spec.mesh_height;
  std::vector<int> owner(cores * static_cast<std::size_t>(wafers), -1);
  for (std::size_t i = 0; i < placed.size(); ++i) {
    const PlacedRect& p = placed[i];
    if (p.bytes_per_core > capacity)
      r.fail(p.where, fmt::format("its fullest core would hold {} bytes but a core has {} ({} "
                                  "tokens x {} users of KV cache where it is attention); use "
                                  "more cores",
                                  p.bytes_per_core, capacity, ctx, users));
    for (int y = p.rect.y0; y < p.rect.y0 + p.rect.height; ++y)
      for (int x = p.rect.x0; x < p.rect.x0 + p.rect.width; ++x) {
        if (defects.dead(Coord{x, y}))
          r.fail(p.where, fmt::format("rectangle {} contains the dead core ({}, {})",
                                      rect_yaml(p.rect), x, y));
        int& o = owner[static_cast<std::size_t>(p.wafer) * cores +
                       static_cast<std::size_t>(y) * spec.mesh_width + x];
        if (o >= 0) {
          const YAML::Mark m = placed[static_cast<std::size_t>(o)].where.node.Mark();
          r.fail(p.where,
                 fmt::format("rectangle {} overlaps {} {} (line {}) at core ({}, {}) of wafer {}",
                             rect_yaml(p.rect), placed[static_cast<std::size_t>(o)].where.path,
                             rect_yaml(placed[static_cast<std::size_t>(o)].rect), m.line + 1, x, y,
                             p.wafer));
        }
        o = static_cast<int>(i);
      }
  }
  pl.estimated_hop_bytes = estimate_hop_bytes(model, pl, spec.mesh_width);
  return pl;
}

}  // namespace wafersim::sim
