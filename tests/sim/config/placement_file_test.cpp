// Placement files: written from a placement and read back to the same
// placement and SRAM, every architecture's keys, and their errors with file,
// line and key path.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sim/config/placement_file.hpp"
#include "sim/config/scenario.hpp"
#include "sim/placement/placement.hpp"
#include "sim/placement/placement_cost.hpp"
#include "sim/placement/stage_planner.hpp"
#include "support/placement_requests.hpp"
#include "support/presets.hpp"
#include "support/test_spec.hpp"

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;

using testing::eight_layers;
using testing::request;

class PlacementFile : public ::testing::Test {
 protected:
  fs::path dir =
      fs::temp_directory_path() / ("wafersim_placement_file_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir / name;
    std::ofstream(p) << text;
    return p;
  }
  ScenarioError read_error(const fs::path& p, const models::ModelConfig& m,
                           const fabric::WaferSpec& spec, const PlacementRequest& req) {
    try {
      read_placement_file(p, m, spec, req);
    } catch (const ScenarioError& e) {
      return e;
    }
    ADD_FAILURE() << "no ScenarioError";
    return ScenarioError("", 0, 0, "", "");
  }
};

// A file's longest context is what its attention segments hold: on each
// segment core the SRAM left by the attention buffers holds whole KV slots
// (2 x head_dim x bits / 8 bytes each), positions go round the segment, and
// the users share them. By hand for layer 0 (every layer is alike here).
TEST_F(PlacementFile, LongestContextIsWhatTheFilesSegmentsHold) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = request("serpentine");
  req.users = 3;
  fabric::Fabric a(spec);
  const Placement pl = place(m, a, req);
  const Placement back =
      read_placement_file(write("p.yaml", placement_file_yaml(m, spec, pl)), m, spec, req);
  const int group = m.num_heads / m.num_kv_heads;
  const std::uint64_t buffers = static_cast<std::uint64_t>(group) * (2 * m.head_dim + 2) * 4;
  const std::uint64_t slot = 2 * static_cast<std::uint64_t>(m.head_dim) * req.weight_bits / 8;
  const std::uint64_t per_core = (spec.sram_per_core.value - buffers) / slot;
  int shortest = m.max_position;
  for (const LayerStage& st : back.layers)
    shortest =
        std::min<int>(shortest, static_cast<int>(per_core * st.attention.segment_length / 3));
  EXPECT_EQ(back.max_context_tokens, shortest);
  EXPECT_GE(back.max_context_tokens, req.context_tokens);
  EXPECT_LE(back.max_context_tokens, pl.max_context_tokens);
}

TEST_F(PlacementFile, RoundTripGivesTheSamePlacementAndSram) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = request("anneal");
  req.reduction = fabric::ReductionScheme::two_level;
  fabric::Fabric a(spec);
  const Placement pl = place(m, a, req);
  const fs::path f = write("p.yaml", placement_file_yaml(m, spec, pl));
  const Placement back = read_placement_file(f, m, spec, req);
  ASSERT_EQ(back.layers.size(), pl.layers.size());
  for (std::size_t l = 0; l < pl.layers.size(); ++l) {
    const LayerStage &x = pl.layers[l], &y = back.layers[l];
    EXPECT_EQ(x.strip, y.strip);
    for (auto [p, q] :
         {std::pair{&x.qkv, &y.qkv}, {&x.o, &y.o}, {&x.gate_up, &y.gate_up}, {&x.down, &y.down}}) {
      EXPECT_EQ(p->rect, q->rect);
      EXPECT_EQ(p->reduction, q->reduction);
      EXPECT_EQ(p->row_granule, q->row_granule);
      EXPECT_EQ(p->name, q->name);
    }
    EXPECT_EQ(x.attention.rect, y.attention.rect);
    EXPECT_EQ(x.attention.segment_length, y.attention.segment_length);
    EXPECT_EQ(x.attention.max_positions_per_core, y.attention.max_positions_per_core);
  }
  EXPECT_EQ(back.head.lm_head.rect, pl.head.lm_head.rect);
  EXPECT_EQ(back.head.embedding.rect, pl.head.embedding.rect);
  fabric::Fabric b(spec);
  fabric::Fabric* wafers[] = {&b};
  allocate_placement(m, back, wafers, req);
  EXPECT_EQ(a.sram().all_used(), b.sram().all_used());
  EXPECT_DOUBLE_EQ(estimate_hop_bytes(m, back, spec.mesh_width), pl.estimated_hop_bytes);
  // Written again, the file is the same text.
  EXPECT_EQ(placement_file_yaml(m, spec, back), placement_file_yaml(m, spec, pl));
}

// A layer's `stacking` (layer-rectangles writes `bottom-up` for every other
// layer): read back, every matrix of the layer is upward; a file may turn a
// layer either way; an unknown word is an error naming its line and the
// valid ones.
TEST_F(PlacementFile, StackingTurnsEveryMatrixOfALayerAndIsChecked) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  const PlacementRequest req = request("layer-rectangles");
  const Placement pl = plan_placement(m, spec, 1, req);
  const std::string text = placement_file_yaml(m, spec, pl);
  const auto first = text.find("    stacking: bottom-up\n");
  ASSERT_NE(first, std::string::npos);
  const Placement back = read_placement_file(write("p.yaml", text), m, spec, req);
  for (std::size_t l = 0; l < back.layers.size(); ++l) {
    const LayerStage& st = back.layers[l];
    EXPECT_EQ(st.upward(), l % 2 == 1) << "layer " << l;
    for (const MatrixPlacement* x : st.matrices()) EXPECT_EQ(x->upward, st.upward()) << x->name;
  }
  // Layer 1 written top-down: read so.
  std::string flat = text;
  flat.replace(first, 23, "    stacking: top-down\n");
  EXPECT_FALSE(read_placement_file(write("flat.yaml", flat), m, spec, req).layers[1].o.upward);
  std::string bad = text;
  bad.replace(first, 23, "    stacking: bottom-upp\n");
  const ScenarioError e = read_error(write("bad.yaml", bad), m, spec, req);
  EXPECT_EQ(e.line(), 1 + static_cast<int>(std::count(
                              text.begin(), text.begin() + static_cast<long>(first), '\n')));
  EXPECT_NE(std::string(e.what()).find("valid: top-down, bottom-up"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("did you mean 'bottom-up'"), std::string::npos) << e.what();
}

TEST_F(PlacementFile, OverlapOutsideMeshSramDeadCoreAndUnknownKeyAreErrorsWithLines) {
  const models::ModelConfig m = eight_layers();
  fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  const PlacementRequest req = request("serpentine");
  const Placement pl = plan_placement(m, spec, 1, req);
  const std::string text = placement_file_yaml(m, spec, pl);
  auto line_of = [&](const std::string& needle) {
    const auto at = text.find(needle);
    return 1 +
           static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  // o of layer 0 moved onto qkv of layer 0.
  auto rect_text = [](const fabric::Rect& r) {
    return "[" + std::to_string(r.x0) + ", " + std::to_string(r.y0) + ", " +
           std::to_string(r.width) + ", " + std::to_string(r.height) + "]";
  };
  const fabric::Rect q = pl.layers[0].qkv.rect, o = pl.layers[0].o.rect;
  const std::string qkv0 = rect_text(q);
  const std::string o0 = "o: {rect: " + rect_text(o);
  const std::string o0_on_qkv =
      "o: {rect: " + rect_text(fabric::Rect{q.x0, q.y0, o.width, o.height});
  ScenarioError e = read_error(write("overlap.yaml", replaced(o0, o0_on_qkv)), m, spec, req);
  EXPECT_EQ(e.line(), line_of(o0));
  EXPECT_NE(std::string(e.what()).find("overlaps"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(qkv0), std::string::npos) << e.what();

  e = read_error(write("outside.yaml", replaced(o0, "o: {rect: [47, 47, 4, 4]")), m, spec, req);
  EXPECT_EQ(e.line(), line_of(o0));
  EXPECT_NE(std::string(e.what()).find("not inside"), std::string::npos) << e.what();

  e = read_error(write("key.yaml", replaced("segment_length", "segment_lenght")), m, spec, req);
  EXPECT_NE(std::string(e.what()).find("did you mean 'segment_length'"), std::string::npos)
      << e.what();

  // The same file with far less SRAM per core: the first matrix that no
  // longer fits is named with its line.
  fabric::WaferSpec small = spec;
  small.sram_per_core = Bytes{2048};
  e = read_error(write("sram.yaml", text), m, small, req);
  EXPECT_GT(e.line(), 0);
  EXPECT_NE(std::string(e.what()).find("fullest core"), std::string::npos) << e.what();

  fabric::WaferSpec dead = spec;
  dead.defect_cores = {{pl.layers[2].down.rect.x0, pl.layers[2].down.rect.y0}};
  e = read_error(write("dead.yaml", text), m, dead, req);
  EXPECT_NE(std::string(e.what()).find("dead core"), std::string::npos) << e.what();
  EXPECT_EQ(e.key_path(), "layers[2].down.rect");
}

// ---- Placement files: every architecture's parts ------------------------------

std::string rect_text(const fabric::Rect& r) {
  return "[" + std::to_string(r.x0) + ", " + std::to_string(r.y0) + ", " + std::to_string(r.width) +
         ", " + std::to_string(r.height) + "]";
}

// The same stages: every matrix (name, shape, rectangle, reduction), the
// attention segments, the regions and the head; then the whole structs, which
// also hold the parts a model lacks (0 x 0).
void expect_same_placement(const Placement& a, const Placement& b) {
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.wafers, b.wafers);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const auto ma = a.layers[l].matrices(), mb = b.layers[l].matrices();
    ASSERT_EQ(ma.size(), mb.size()) << "layer " << l;
    for (std::size_t i = 0; i < ma.size(); ++i)
      EXPECT_TRUE(*ma[i] == *mb[i]) << ma[i]->name << " " << rect_text(ma[i]->rect) << " vs "
                                    << mb[i]->name << " " << rect_text(mb[i]->rect);
    EXPECT_TRUE(a.layers[l].attention == b.layers[l].attention) << "layer " << l;
    EXPECT_TRUE(a.layers[l] == b.layers[l]) << "layer " << l;
  }
  EXPECT_TRUE(a.head.lm_head == b.head.lm_head);
  EXPECT_TRUE(a.head.embedding == b.head.embedding);
  EXPECT_TRUE(a.head.position_embedding == b.head.position_embedding);
  EXPECT_TRUE(a.head == b.head);
  EXPECT_DOUBLE_EQ(a.estimated_hop_bytes, b.estimated_hop_bytes);
}

struct RoundTripCase {
  const char* model;
  const char* strategy;
  int wafers = 1;
  fabric::ReductionScheme reduction = fabric::ReductionScheme::chain;
  int groups = 0;        // k-tree: reduction_groups, written as the matrices' K
  int layer_groups = 1;  // whole-region: groups of layers per wafer
};

void PrintTo(const RoundTripCase& c, std::ostream* os) {
  *os << c.model << " " << c.strategy << " on " << c.wafers << " wafer(s), "
      << reduction_name(c.reduction) << ", " << c.layer_groups << " layer group(s)";
}

class PlacementFileRoundTrip : public PlacementFile,
                               public ::testing::WithParamInterface<RoundTripCase> {};

// Placed by a strategy, written, read back: the same placement, the same
// bytes on every core of every wafer, and the same text written again.
TEST_P(PlacementFileRoundTrip, GivesTheSamePlacementSramAndText) {
  const RoundTripCase& c = GetParam();
  models::ModelConfig m = testing::preset_model(c.model);
  if (m.name == "tiny-llama") m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = request(c.strategy);
  req.reduction = c.reduction;
  req.reduction_groups = c.groups;
  req.layer_groups = c.layer_groups;
  std::vector<std::unique_ptr<fabric::Fabric>> a, b;
  std::vector<fabric::Fabric*> pa, pb;
  for (int w = 0; w < c.wafers; ++w) {
    a.push_back(std::make_unique<fabric::Fabric>(spec));
    b.push_back(std::make_unique<fabric::Fabric>(spec));
    pa.push_back(a.back().get());
    pb.push_back(b.back().get());
  }
  const Placement pl = place(m, pa, req);
  const std::string text = placement_file_yaml(m, spec, pl);
  const Placement back = read_placement_file(write("p.yaml", text), m, spec, req);
  expect_same_placement(pl, back);
  allocate_placement(m, back, pb, req);
  for (int w = 0; w < c.wafers; ++w)
    EXPECT_EQ(a[static_cast<std::size_t>(w)]->sram().all_used(),
              b[static_cast<std::size_t>(w)]->sram().all_used())
        << "wafer " << w;
  EXPECT_EQ(placement_file_yaml(m, spec, back), text);
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, PlacementFileRoundTrip,
    ::testing::Values(
        RoundTripCase{"tiny-llama", "layer-rectangles"}, RoundTripCase{"tiny-llama", "serpentine"},
        RoundTripCase{"tiny-llama", "short-path", 1, fabric::ReductionScheme::tree},
        RoundTripCase{"tiny-llama", "sram-balanced"}, RoundTripCase{"tiny-llama", "anneal", 2},
        RoundTripCase{"tiny-mixtral", "layer-rectangles"},
        RoundTripCase{"tiny-mixtral", "serpentine", 1, fabric::ReductionScheme::tree},
        RoundTripCase{"tiny-mixtral", "short-path"},
        RoundTripCase{"tiny-mixtral", "sram-balanced", 1, fabric::ReductionScheme::two_level},
        RoundTripCase{"tiny-mixtral", "anneal"}, RoundTripCase{"tiny-mixtral", "serpentine", 2},
        RoundTripCase{"tiny-qwen3-moe", "layer-rectangles"},
        RoundTripCase{"tiny-qwen3-moe", "short-path", 2, fabric::ReductionScheme::tree},
        RoundTripCase{"tiny-gpt2", "layer-rectangles"}, RoundTripCase{"tiny-gpt2", "serpentine"},
        RoundTripCase{"tiny-gpt2", "short-path", 1, fabric::ReductionScheme::two_level},
        RoundTripCase{"tiny-gpt2", "sram-balanced"},
        RoundTripCase{"tiny-gpt2", "anneal", 1, fabric::ReductionScheme::tree},
        RoundTripCase{"tiny-gpt2", "layer-rectangles", 2},
        RoundTripCase{"tiny-llama", "serpentine", 1, fabric::ReductionScheme::k_tree, 3},
        RoundTripCase{"tiny-gpt2", "short-path", 1, fabric::ReductionScheme::k_tree},
        RoundTripCase{"tiny-mixtral", "layer-rectangles", 1, fabric::ReductionScheme::ring},
        RoundTripCase{"tiny-llama", "whole-region", 1, fabric::ReductionScheme::two_level},
        RoundTripCase{"tiny-llama", "whole-region", 1, fabric::ReductionScheme::chain, 0, 3},
        RoundTripCase{"tiny-llama", "whole-region", 2, fabric::ReductionScheme::tree, 0, 2},
        RoundTripCase{"tiny-mixtral", "whole-region", 1, fabric::ReductionScheme::two_level},
        RoundTripCase{"tiny-qwen3-moe", "whole-region", 1, fabric::ReductionScheme::chain, 0, 2},
        RoundTripCase{"tiny-gpt2", "whole-region", 1, fabric::ReductionScheme::k_tree, 3}),
    [](const ::testing::TestParamInfo<RoundTripCase>& info) {
      std::string name =
          std::string(info.param.model) + "_" + info.param.strategy + "_" +
          std::to_string(info.param.wafers) + "w_" + reduction_name(info.param.reduction) +
          (info.param.groups > 0 ? "_K" + std::to_string(info.param.groups) : "") +
          (info.param.layer_groups > 1 ? "_G" + std::to_string(info.param.layer_groups) : "");
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// The full-size models the issue names, planned on WSE-3 wafers (no
// allocation, as `place` plans): the file gives back the same placement.
TEST_F(PlacementFile, FullSizeMixtralAndGpt2RoundTrip) {
  const fabric::WaferSpec wse3 = testing::preset_hardware("wse3");
  for (const auto& [name, wafers] : {std::pair{"mixtral-8x7b", 3}, std::pair{"gpt2", 1}}) {
    const models::ModelConfig m = testing::preset_model(name);
    PlacementRequest req = request("layer-rectangles", 64);
    req.reduction = fabric::ReductionScheme::tree;
    const Placement pl = plan_placement(m, wse3, wafers, req);
    const std::string text = placement_file_yaml(m, wse3, pl);
    const Placement back = read_placement_file(write("full.yaml", text), m, wse3, req);
    expect_same_placement(pl, back);
    EXPECT_EQ(placement_file_yaml(m, wse3, back), text) << name;
  }
}

// A layer's block narrower than its kv heads stacks them, per_column to a
// column: its attention takes ceil(kv heads / per_column) columns, no more
// (the block's width was taken before, one column with no KV in it, and the
// file written then did not read back). tiny-gpt2's 4 kv heads in blocks 3
// cores wide: 2 a column, 2 columns.
TEST_F(PlacementFile, KvHeadsStackedInANarrowBlockTakeTheirColumnsAndRoundTrip) {
  models::ModelConfig m = testing::preset_model("tiny-gpt2");
  m.num_layers = 8;
  const fabric::WaferSpec spec = fabric::testing::small_spec(32, 32);
  const PlacementRequest req = request("layer-rectangles");
  fabric::Fabric f(spec);
  const Placement pl = place(m, f, req);
  for (const LayerStage& st : pl.layers) {
    const AttentionPlacement& a = st.attention;
    ASSERT_LT(st.strip.width, m.num_kv_heads) << "layer " << st.layer;
    ASSERT_EQ(a.segments_per_column, 2) << "layer " << st.layer;
    EXPECT_EQ(a.rect.width, 2) << "layer " << st.layer;
    EXPECT_EQ(a.rect.height, 2 * a.segment_length) << "layer " << st.layer;
    // Every column of the rectangle holds a kv head's segment.
    for (int x = 0; x < a.rect.width; ++x)
      EXPECT_EQ(a.segment_core(x * a.segments_per_column, 0).x, a.rect.x0 + x);
  }
  const std::string text = placement_file_yaml(m, spec, pl);
  const Placement back = read_placement_file(write("narrow.yaml", text), m, spec, req);
  expect_same_placement(pl, back);
  EXPECT_EQ(placement_file_yaml(m, spec, back), text);
}

// Only the parts a model has are written: llama-family files have the keys
// they always had, mixtral's layers a router and experts, gpt2's an up
// matrix and its head the position embeddings.
TEST_F(PlacementFile, EachArchitectureWritesItsOwnKeys) {
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  auto text_of = [&](const char* name) {
    const models::ModelConfig m = testing::preset_model(name);
    return placement_file_yaml(m, spec, plan_placement(m, spec, 1, request("serpentine")));
  };
  auto has = [](const std::string& text, const std::string& key) {
    return text.find(" " + key + ":") != std::string::npos;
  };
  const std::string llama = text_of("tiny-llama"), mixtral = text_of("tiny-mixtral"),
                    gpt2 = text_of("tiny-gpt2");
  for (const char* key : {"router", "experts", "expert", "up", "position_embedding"})
    EXPECT_FALSE(has(llama, key)) << key;
  EXPECT_TRUE(has(llama, "gate_up") && has(llama, "down"));
  EXPECT_TRUE(has(mixtral, "router") && has(mixtral, "experts"));
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(mixtral, "    router: {rect: "), 2);  // per layer of 2
  EXPECT_EQ(count(mixtral, "      - expert: "), 2 * 4);
  EXPECT_EQ(count(mixtral, "\n    gate_up:") + count(mixtral, "\n    down:"), 0);  // in experts
  EXPECT_FALSE(has(gpt2, "gate_up"));
  EXPECT_TRUE(has(gpt2, "up") && has(gpt2, "down") && has(gpt2, "position_embedding"));
  EXPECT_FALSE(has(gpt2, "embedding"));  // tied to lm_head
}

// A llama-family file written before mixtures of experts and gpt2 could be
// written (tests/sim/data/tiny-llama-placement-v1.yaml, by the version 1
// writer) reads back to the strategy's placement and is written again as is.
TEST_F(PlacementFile, AVersion1LlamaFileReadsBackUnchanged) {
  const models::ModelConfig m = testing::preset_model("tiny-llama");
  const fabric::WaferSpec spec = testing::preset_hardware("small");
  const fs::path v1 = fs::path(WAFERSIM_SOURCE_DIR) / "tests/sim/data/tiny-llama-placement-v1.yaml";
  std::string text;
  {
    std::ifstream in(v1);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  PlacementRequest req = request("serpentine");
  const Placement back = read_placement_file(v1, m, spec, req);
  // Written before a layer could be stacked bottom-up: every layer reads
  // back top-down, as serpentine placed it then. Serpentine now turns the
  // layers whose input that brings nearer the previous output; the others
  // are as they were.
  const Placement now = plan_placement(m, spec, 1, req);
  ASSERT_EQ(back.layers.size(), now.layers.size());
  int turned = 0;
  for (std::size_t l = 0; l < back.layers.size(); ++l) {
    EXPECT_FALSE(back.layers[l].upward()) << "layer " << l;
    if (now.layers[l].upward())
      ++turned;
    else
      EXPECT_EQ(back.layers[l], now.layers[l]) << "layer " << l;
  }
  EXPECT_GT(turned, 0);
  EXPECT_EQ(back.head, now.head);
  EXPECT_EQ(placement_file_yaml(m, spec, back), text);
}

// ---- Whole-region layers -----------------------------------------------------

// A whole-region placement's file: every layer says its dataflow and gives
// its matrices' reductions only (they span the region); the consecutive
// layers with the same region are a layer group, which an architect regroups
// by editing regions; and each mistake is an error with its line.
class WholeRegionFile : public PlacementFile {
 protected:
  models::ModelConfig m = eight_layers();
  fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = [] {
    PlacementRequest r = request("whole-region");
    r.layer_groups = 2;
    r.reduction = fabric::ReductionScheme::two_level;
    return r;
  }();
  Placement pl = plan_placement(m, spec, 1, req);
  std::string text = placement_file_yaml(m, spec, pl);

  // `text` with the `n`-th `from` (0-based) replaced by `to`, and that line.
  std::pair<std::string, int> edit(const std::string& from, const std::string& to, int n = 0) {
    auto at = text.find(from);
    for (int i = 0; i < n; ++i) at = text.find(from, at + 1);
    EXPECT_NE(at, std::string::npos) << from;
    std::string t = text;
    t.replace(at, from.size(), to);
    return {t, 1 + static_cast<int>(
                       std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'))};
  }
  std::string region(int l) const { return "region: " + rect_text(pl.layers[l].strip); }
};

TEST_F(WholeRegionFile, LayersGiveTheirRegionDataflowAndReductions) {
  ASSERT_TRUE(pl.layers[0].whole_region);
  ASSERT_EQ(pl.layers[3].strip, pl.layers[0].strip);
  ASSERT_NE(pl.layers[4].strip, pl.layers[0].strip);
  std::size_t dataflows = 0, rects = 0;
  for (auto at = text.find("\n    dataflow: whole-region\n"); at != std::string::npos;
       at = text.find("\n    dataflow: whole-region\n", at + 1))
    ++dataflows;
  for (auto at = text.find("{rect:"); at != std::string::npos; at = text.find("{rect:", at + 1))
    ++rects;
  EXPECT_EQ(dataflows, 8u);
  EXPECT_EQ(rects, 2u) << text;  // the head's lm_head and embedding only
  EXPECT_NE(text.find("    qkv: {reduction: two-level}\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    attention: {reduction: two-level}\n"), std::string::npos) << text;

  // Layer 3 moved to the second group's region: groups of 3 and 5 layers,
  // each layer laid over its region as the strategy lays it.
  const auto [regrouped, line] = edit(region(3), region(4), 3);
  const Placement back = read_placement_file(write("regrouped.yaml", regrouped), m, spec, req);
  EXPECT_EQ(back.layers[3].strip, pl.layers[4].strip);
  EXPECT_EQ(back.layers[3].qkv.rect, pl.layers[4].qkv.rect);
  EXPECT_EQ(back.layers[3].attention.rect, pl.layers[4].attention.rect);
  EXPECT_EQ(back.layers[3].qkv.name, "layer 3 qkv");
  // One reduction edited: that matrix alone changes.
  const auto [chained, chain_line] =
      edit("    down: {reduction: two-level}", "    down: {reduction: chain}", 5);
  const Placement c = read_placement_file(write("chain.yaml", chained), m, spec, req);
  EXPECT_EQ(c.layers[5].down.reduction, fabric::ReductionScheme::chain);
  EXPECT_EQ(c.layers[5].o.reduction, fabric::ReductionScheme::two_level);
  EXPECT_EQ(c.layers[4].down.reduction, fabric::ReductionScheme::two_level);
}

TEST_F(WholeRegionFile, MistakesAreErrorsWithTheirLines) {
  // A layer of the first group on the second's region, between two of the
  // first's: the group's region is shared only by consecutive layers.
  auto [split, line] = edit(region(1), region(4), 1);
  ScenarioError e = read_error(write("split.yaml", split), m, spec, req);
  EXPECT_EQ(e.key_path(), "layers[2].region") << e.what();
  EXPECT_NE(std::string(e.what()).find("as consecutive layers (a layer group)"), std::string::npos)
      << e.what();
  // A rectangle where the matrices span the region.
  std::tie(split, line) =
      edit("    o: {reduction: two-level}", "    o: {rect: [0, 0, 4, 4], reduction: two-level}", 2);
  e = read_error(write("rect.yaml", split), m, spec, req);
  EXPECT_EQ(e.line(), line);
  EXPECT_EQ(e.key_path(), "layers[2].o.rect");
  EXPECT_NE(std::string(e.what()).find("span the layer's region"), std::string::npos) << e.what();
  std::tie(split, line) = edit("    dataflow: whole-region\n", "    dataflow: whole-regoin\n", 4);
  e = read_error(write("dataflow.yaml", split), m, spec, req);
  EXPECT_EQ(e.line(), line);
  EXPECT_NE(std::string(e.what()).find("did you mean 'whole-region'"), std::string::npos)
      << e.what();
  std::tie(split, line) = edit("    dataflow: whole-region\n",
                               "    dataflow: whole-region\n    stacking: bottom-up\n", 6);
  e = read_error(write("stacking.yaml", split), m, spec, req);
  EXPECT_EQ(e.line(), line + 1);
  EXPECT_NE(std::string(e.what()).find("has no stacking"), std::string::npos) << e.what();
  // The second group's first layer moved one core onto the first group's
  // region: it overlaps that region in part.
  const fabric::Rect r4 = pl.layers[4].strip, r0 = pl.layers[0].strip;
  fabric::Rect moved = r4;
  (r4.x0 > r0.x0 ? moved.x0 : moved.y0) -= 1;
  std::tie(split, line) = edit(region(4), "region: " + rect_text(moved), 0);
  e = read_error(write("overlap.yaml", split), m, spec, req);
  EXPECT_EQ(e.line(), line);
  EXPECT_EQ(e.key_path(), "layers[4].region") << e.what();
  EXPECT_NE(std::string(e.what()).find("overlaps layers[0].region " + rect_text(r0)),
            std::string::npos)
      << e.what();
  // A dead core in a region: named at the group's first region.
  fabric::WaferSpec dead = spec;
  dead.defect_cores = {{r4.x0 + 1, r4.y0 + 1}};
  e = read_error(write("dead.yaml", text), m, dead, req);
  EXPECT_NE(std::string(e.what()).find("dead core"), std::string::npos) << e.what();
  EXPECT_EQ(e.key_path(), "layers[4].region");
  // Too long a context for a group's four layers' KV cache on each core.
  PlacementRequest longer = req;
  longer.context_tokens = m.max_position;
  longer.users = 4096;
  e = read_error(write("sram.yaml", text), m, spec, longer);
  EXPECT_NE(std::string(e.what()).find("fullest core"), std::string::npos) << e.what();
  EXPECT_EQ(e.key_path(), "layers[0].region");
}

// A whole-region layer's KV cache may lie on a region of its own (cores its
// layer's region leaves free): laid out there as over the layer's region,
// its attention buffers there, the group's layers sharing it as they share
// their region; written back the same; and it may overlap nothing.
TEST_F(WholeRegionFile, AKvCacheMayLieOnARegionOfItsOwn) {
  const fabric::Rect r4 = pl.layers[4].strip;
  ASSERT_GT(r4.height, 12);
  const fabric::Rect shrunk{r4.x0, r4.y0, r4.width, r4.height - 8};
  const fabric::Rect kv{r4.x0, r4.y0 + r4.height - 8, r4.width, 8};
  std::string t = text;
  for (int n = 0; n < 4; ++n)
    t.replace(t.find(region(4)), region(4).size(), "region: " + rect_text(shrunk));
  const std::string att = "    attention: {reduction: two-level}\n";
  auto at = t.find(att, t.find("- layer: 4"));
  for (int l = 4; l < 8; ++l, at = t.find(att, at + 1))
    t.replace(at, att.size(),
              "    attention: {region: " + rect_text(kv) + ", reduction: two-level}\n");
  const Placement back = read_placement_file(write("kv.yaml", t), m, spec, req);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(back.layers[l].attention_apart(), l >= 4) << l;
  StagePlanner planner(m, spec, req);
  AttentionPlacement want = planner.region_attention(5, 0, kv, "whole-region");
  want.reduction = fabric::ReductionScheme::two_level;
  EXPECT_EQ(back.layers[5].attention, want);
  // Written, it names the block the KV cache takes (kv heads x their columns,
  // at most head_dim each: it may be narrower than the region given) and
  // reads back the same.
  const std::string written = placement_file_yaml(m, spec, back);
  EXPECT_NE(written.find("attention: {region: " + rect_text(want.rect)), std::string::npos);
  const Placement again = read_placement_file(write("again.yaml", written), m, spec, req);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(again.layers[l], back.layers[l]) << l;
  // Allocated: the KV region's corner holds, for each of the group's four
  // layers, its column's share of the KV slots and its attention buffers,
  // and nothing else.
  fabric::Fabric fab(spec);
  fabric::Fabric* wafers[] = {&fab};
  allocate_placement(m, back, wafers, req);
  const AttentionPlacement& a = back.layers[4].attention;
  const auto dims = static_cast<std::uint64_t>(a.dim_begin(1) - a.dim_begin(0));
  const std::uint64_t slots =
      2 * dims * static_cast<std::uint64_t>(req.weight_bits) / 8 * a.max_positions_per_core;
  const auto g = static_cast<std::uint64_t>(m.num_heads / m.num_kv_heads);
  EXPECT_EQ(fab.sram().used(fab.mesh().id(Coord{kv.x0, kv.y0})).value,
            4 * (slots + g * (2 * dims + 2) * 4));
  // Onto its own layer's region, and onto the other group's.
  std::string bad = t;
  const std::string kv_text = "region: " + rect_text(kv);
  bad.replace(bad.find(kv_text), kv_text.size(),
              "region: " + rect_text(fabric::Rect{kv.x0, kv.y0 - 1, kv.width, 8}));
  ScenarioError e = read_error(write("onto.yaml", bad), m, spec, req);
  EXPECT_EQ(e.key_path(), "layers[4].attention.region") << e.what();
  EXPECT_NE(std::string(e.what()).find("overlaps its layer's region"), std::string::npos);
  const fabric::Rect r0 = pl.layers[0].strip;
  bad = t;
  bad.replace(bad.find(kv_text), kv_text.size(),
              "region: " + rect_text(fabric::Rect{r0.x0, r0.y0, 4, 4}));
  e = read_error(write("other.yaml", bad), m, spec, req);
  EXPECT_NE(std::string(e.what()).find("overlaps"), std::string::npos) << e.what();
}

// A whole-region file's longest context is the edge of fitting: at it every
// core of every group holds its layers' KV slots, one position more and a
// core overflows (the group's layers share each core's SRAM, so the context
// is what the SRAM left holds of all their slots together).
TEST_F(WholeRegionFile, LongestContextIsTheEdgeOfFittingTheGroupsSram) {
  req.users = 4096;
  req.context_tokens = 1;
  const fs::path f = write("p.yaml", placement_file_yaml(m, spec, plan_placement(m, spec, 1, req)));
  const Placement back = read_placement_file(f, m, spec, req);
  ASSERT_LT(back.max_context_tokens, m.max_position);
  ASSERT_GT(back.max_context_tokens, 1);
  PlacementRequest at = req;
  at.context_tokens = back.max_context_tokens;
  EXPECT_NO_THROW(read_placement_file(f, m, spec, at));
  at.context_tokens = back.max_context_tokens + 1;
  const ScenarioError e = read_error(f, m, spec, at);
  EXPECT_NE(std::string(e.what()).find("fullest core"), std::string::npos) << e.what();
}

// Errors in the new keys name the key path and the line.
class PlacementFileErrors : public PlacementFile {
 protected:
  fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  models::ModelConfig model;
  PlacementRequest req = request("serpentine");
  Placement pl;
  std::string text;

  void use(const char* name) {
    model = testing::preset_model(name);
    pl = plan_placement(model, spec, 1, req);
    text = placement_file_yaml(model, spec, pl);
  }
  // Line (1-based) of the first `needle` at or after the first `after`.
  int line_of(const std::string& needle, const std::string& after = "") const {
    const auto from = after.empty() ? 0 : text.find(after);
    const auto at = text.find(needle, from);
    EXPECT_NE(at, std::string::npos) << needle;
    return 1 +
           static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  }
  std::string replaced(const std::string& from, const std::string& to,
                       const std::string& after = "") const {
    std::string t = text;
    const auto at = t.find(from, after.empty() ? 0 : t.find(after));
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    return t;
  }
  ScenarioError error_of(const std::string& edited) {
    return read_error(write("edited.yaml", edited), model, spec, req);
  }
};

std::string what(const ScenarioError& e) {
  return e.what();
}

TEST_F(PlacementFileErrors, MixtralMissingOrMisorderedExpertsNameTheirPathAndLine) {
  use("tiny-mixtral");
  // Expert 3 of layer 1 (the last layer's last expert) deleted: a list of 3, not 4.
  std::string t = text;
  const auto at = t.find("      - expert: 3\n", t.find("  - layer: 1"));
  t.erase(at, t.find("head:", at) - at);
  ScenarioError e = error_of(t);
  EXPECT_EQ(e.key_path(), "layers[1].experts");
  EXPECT_EQ(e.line(), line_of("      - expert: 0", "  - layer: 1"));
  EXPECT_NE(what(e).find("expected a list of 4 experts"), std::string::npos) << what(e);
  EXPECT_NE(what(e).find("not 3"), std::string::npos) << what(e);

  // Two experts swapped by index.
  e = error_of(replaced("- expert: 1", "- expert: 2"));
  EXPECT_EQ(e.key_path(), "layers[0].experts[1].expert");
  EXPECT_EQ(e.line(), line_of("- expert: 1"));
  EXPECT_NE(what(e).find("expected expert 1"), std::string::npos) << what(e);

  // An expert without its down matrix.
  const std::string down2 = "        down: ";
  std::string no_down = text;
  const auto d = no_down.find(down2, no_down.find("- expert: 2"));
  no_down.erase(d, no_down.find('\n', d) + 1 - d);
  e = read_error(write("no_down.yaml", no_down), model, spec, req);
  EXPECT_EQ(e.key_path(), "layers[0].experts[2]");
  EXPECT_EQ(e.line(), line_of("- expert: 2"));
  EXPECT_NE(what(e).find("missing key 'down'"), std::string::npos) << what(e);

  // No experts at all.
  e = error_of(replaced("    experts:", "    experts_:"));
  EXPECT_NE(what(e).find("unknown key 'experts_'"), std::string::npos) << what(e);
  EXPECT_NE(what(e).find("did you mean 'experts'"), std::string::npos) << what(e);
}

TEST_F(PlacementFileErrors, MixtralDenseKeysOverlapsShapesAndDeadCoresInExperts) {
  use("tiny-mixtral");
  // A dense MLP key in a mixture-of-experts layer says what the layer has.
  ScenarioError e = error_of(replaced("    router:", "    gate_up:"));
  EXPECT_EQ(e.key_path(), "layers[0].gate_up");
  EXPECT_EQ(e.line(), line_of("    router:"));
  EXPECT_NE(what(e).find("a mixture of 4 experts: router and experts"), std::string::npos)
      << what(e);

  // Expert 1's down moved onto expert 0's gate_up: the overlap names both.
  const LayerStage& l0 = pl.layers[0];
  const fabric::Rect g0 = l0.experts[0].gate_up.rect, d1 = l0.experts[1].down.rect;
  const std::string d1_text = "down: {rect: " + rect_text(d1);
  e = error_of(replaced(d1_text, "down: {rect: " + rect_text({g0.x0, g0.y0, d1.width, d1.height})));
  EXPECT_EQ(e.key_path(), "layers[0].experts[1].down.rect");
  EXPECT_EQ(e.line(), line_of(d1_text));
  EXPECT_NE(what(e).find("overlaps layers[0].experts[0].gate_up.rect"), std::string::npos)
      << what(e);

  // The router with more rows of cores than experts.
  const fabric::Rect r = l0.router.rect;
  const std::string r_text = "router: {rect: " + rect_text(r);
  e = error_of(replaced(r_text, "router: {rect: " + rect_text({r.x0, r.y0, r.width, 5})));
  EXPECT_EQ(e.key_path(), "layers[0].router.rect");
  EXPECT_EQ(e.line(), line_of(r_text));
  EXPECT_NE(what(e).find("5 rows of cores for 4 output rows: at most 4"), std::string::npos)
      << what(e);

  // A dead core under an expert's down matrix of the last layer.
  fabric::WaferSpec dead = spec;
  const fabric::Rect d = pl.layers[1].experts[3].down.rect;
  dead.defect_cores = {{d.x0 + d.width - 1, d.y0 + d.height - 1}};
  e = read_error(write("dead.yaml", text), model, dead, req);
  EXPECT_EQ(e.key_path(), "layers[1].experts[3].down.rect");
  EXPECT_NE(what(e).find("dead core"), std::string::npos) << what(e);

  // Far less SRAM: the first rectangle whose cores no longer fit, with its line.
  fabric::WaferSpec small = spec;
  small.sram_per_core = Bytes{1024};
  e = read_error(write("sram.yaml", text), model, small, req);
  EXPECT_GT(e.line(), 0);
  EXPECT_TRUE(e.key_path().ends_with(".rect")) << e.key_path();
  EXPECT_NE(what(e).find("fullest core"), std::string::npos) << what(e);
}

TEST_F(PlacementFileErrors, Gpt2UpPositionEmbeddingsAndTiedHeadKeys) {
  use("tiny-gpt2");
  // gate_up in a gpt2 layer says what the layer has.
  ScenarioError e = error_of(replaced("    up:", "    gate_up:"));
  EXPECT_EQ(e.key_path(), "layers[0].gate_up");
  EXPECT_EQ(e.line(), line_of("    up:"));
  EXPECT_NE(what(e).find("a GELU MLP: up and down"), std::string::npos) << what(e);

  // The up matrix moved onto its layer's o.
  const fabric::Rect u = pl.layers[1].gate_up.rect, o = pl.layers[1].o.rect;
  const std::string u_text = "up: {rect: " + rect_text(u);
  e = error_of(replaced(u_text, "up: {rect: " + rect_text({o.x0, o.y0, u.width, u.height})));
  EXPECT_EQ(e.key_path(), "layers[1].up.rect");
  EXPECT_EQ(e.line(), line_of(u_text));
  EXPECT_NE(what(e).find("overlaps layers[1].o.rect"), std::string::npos) << what(e);

  // Position embeddings missing, or outside the mesh.
  std::string no_pos = text;
  no_pos.erase(no_pos.find("  position_embedding:"));
  e = error_of(no_pos);
  EXPECT_EQ(e.key_path(), "head");
  EXPECT_NE(what(e).find("missing key 'position_embedding'"), std::string::npos) << what(e);
  const std::string p_text =
      "position_embedding: {rect: " + rect_text(pl.head.position_embedding.rect);
  e = error_of(replaced(p_text, "position_embedding: {rect: [40, 40, 9, 9]"));
  EXPECT_EQ(e.key_path(), "head.position_embedding.rect");
  EXPECT_EQ(e.line(), line_of(p_text));
  EXPECT_NE(what(e).find("not inside the 48 x 48 mesh"), std::string::npos) << what(e);

  // The position embeddings onto the lm_head.
  const fabric::Rect lm = pl.head.lm_head.rect, pe = pl.head.position_embedding.rect;
  e = error_of(replaced(
      p_text, "position_embedding: {rect: " + rect_text({lm.x0, lm.y0, pe.width, pe.height})));
  EXPECT_EQ(e.key_path(), "head.position_embedding.rect");
  EXPECT_NE(what(e).find("overlaps head.lm_head.rect"), std::string::npos) << what(e);

  // gpt2 ties its embedding to the lm_head: an embedding key is unknown.
  e = error_of(text + "  embedding: {rect: [0, 0, 1, 1], reduction: chain}\n");
  EXPECT_EQ(e.key_path(), "head.embedding");
  EXPECT_NE(what(e).find("unknown key 'embedding'"), std::string::npos) << what(e);

  // position_embedding in a llama-family file is unknown too.
  use("tiny-llama");
  e = error_of(text + "  position_embedding: {rect: [0, 0, 1, 1], reduction: chain}\n");
  EXPECT_EQ(e.key_path(), "head.position_embedding");
  EXPECT_NE(what(e).find("unknown key 'position_embedding'"), std::string::npos) << what(e);
}

// The reader counts a core's bytes as the allocator does (tiles, buffers,
// KV slots, norm gains, gpt2's biases and LayerNorm): a file fits cores of
// exactly the fullest core's bytes and not one byte less.
TEST_F(PlacementFile, SramIsCheckedToTheByteAsTheAllocatorCountsIt) {
  for (const char* name : {"tiny-llama", "tiny-mixtral", "tiny-gpt2", "tiny-qwen3"}) {
    const models::ModelConfig m = testing::preset_model(name);
    fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
    const PlacementRequest req = request("sram-balanced");
    fabric::Fabric fab(spec);
    const Placement pl = place(m, fab, req);
    const std::vector<std::uint64_t>& used = fab.sram().all_used();
    const std::uint64_t fullest = *std::max_element(used.begin(), used.end());
    const fs::path f = write("p.yaml", placement_file_yaml(m, spec, pl));
    spec.sram_per_core = Bytes{fullest};
    EXPECT_NO_THROW(read_placement_file(f, m, spec, req)) << name;
    spec.sram_per_core = Bytes{fullest - 1};
    const ScenarioError e = read_error(f, m, spec, req);
    EXPECT_GT(e.line(), 0) << name;
    EXPECT_NE(std::string(e.what()).find("would hold " + std::to_string(fullest) + " bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace wafersim::sim
