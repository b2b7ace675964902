#include "sim/studies/placement_report.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "sim/config/placement_file.hpp"
#include "sim/engine/system.hpp"
#include "sim/exec/executor.hpp"
#include "sim/exec/layer_replay.hpp"
#include "sim/placement/placement_cost.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

std::vector<RegionInfo> placement_regions(const Placement& pl) {
  std::vector<RegionInfo> regions;
  for (const LayerStage& st : pl.layers) {
    if (st.whole_region) {
      // Every matrix and the KV cache span the layer's region (shared with
      // the other layers of its group): the region is the layer's one rectangle.
      regions.push_back(
          {fmt::format("layer {} (whole region)", st.layer), st.layer, st.wafer, st.strip});
      if (st.attention_apart())
        regions.push_back(
            {fmt::format("layer {} KV cache", st.layer), st.layer, st.wafer, st.attention.rect});
      continue;
    }
    for (const MatrixPlacement* m : st.matrices())
      regions.push_back({m->name, st.layer, st.wafer, m->rect, m->upward});
    regions.push_back(
        {fmt::format("layer {} attention", st.layer), st.layer, st.wafer, st.attention.rect});
  }
  regions.push_back({"lm_head", -1, pl.head.wafer, pl.head.lm_head.rect});
  if (!pl.head.tied) regions.push_back({"embedding", -1, pl.head.wafer, pl.head.embedding.rect});
  if (pl.head.position_embedding.p() > 0)
    regions.push_back({"position_embedding", -1, pl.head.wafer, pl.head.position_embedding.rect});

  return regions;
}

PlacementReport evaluate_placement(const Scenario& sc,
                                   const std::function<void(int, int)>& progress,
                                   const std::function<void(int, int)>& search_progress,
                                   LayerReplayMode replay_mode) {
  const std::unique_ptr<PlacedSystem> sys = place_system(sc, progress, search_progress);
  const Placement& pl = sys->placement;
  PlacementReport r;
  r.scenario = sc.name;
  r.strategy = pl.strategy;
  r.planner_note = pl.planner_note;
  r.layer_group_choice = sys->layer_group_choice;
  r.reduction_choices = sys->reduction_choices;
  r.estimated_hop_bytes = pl.estimated_hop_bytes;
  r.estimated_latency_cycles = estimate_latency_cycles(
      LatencyModel{sc.hardware, models::dtype_bits(sc.precision), std::max(1, pl.context_tokens),
                   static_cast<double>(pl.value_bytes)},
      sc.model, pl);
  r.wafers = pl.wafers;
  r.mesh_width = sc.hardware.mesh_width;
  r.mesh_height = sc.hardware.mesh_height;
  r.layers = sc.model.num_layers;
  r.sram_capacity_per_core = sc.hardware.sram_per_core.value;
  r.clock_hz = sc.hardware.clock_hz;
  r.max_context_tokens = pl.max_context_tokens;
  r.placement_file = placement_file_yaml(sc.model, sc.hardware, pl);
  r.regions = placement_regions(pl);

  // One decode token (user 0, position 0) through every stage, timing only,
  // as the engine runs one message alone: each stage starts when the one
  // before handed the token on, and a layer equal to the one before is
  // replayed instead of simulated (sim/exec/layer_replay.hpp; exact).
  fabric::WaferIo io(sc.hardware, pl.wafers);
  Executor ex(sys->wafer_ptrs, &io, sc.model, pl, sys->program, nullptr,
              models::dtype_bits(sc.precision));
  TokenMessage m;
  m.needs_logits = true;
  m.token = sc.workload.prompt_ids.front();
  slot(m, Slot::x) = ex.embed(m.token, 0, Timed{}, true);
  std::unique_ptr<LayerReplay> replay;
  if (replay_mode != LayerReplayMode::off && LayerReplay::usable(ex))
    replay =
        std::make_unique<LayerReplay>(ex, sys->program, 1, replay_mode == LayerReplayMode::always,
                                      models::WorkTeam::host_threads());
  if (replay) replay->sent();
  Cycles now{0};
  for (const StageProgram& sp : sys->program.stages) {
    Cycles until;
    if (replay && replay->enter(sp, m, now, until))
      now = until;
    else
      run_stage(ex, sp, m, [&](const std::string&, const Timed& t) { now = std::max(now, t.at); });
    if (replay) replay->left(sp, m, now);
  }
  if (replay) {
    replay->returned();
    replay->settle();
    r.replayed_layer_passes = replay->replayed();
  }
  r.token_cycles = m.done.at.value;

  for (const auto& f : sys->wafers) {
    const auto& sram = f->sram().all_used();
    r.core_sram.insert(r.core_sram.end(), sram.begin(), sram.end());
    const auto links = f->flow().link_bytes_by_core();
    r.link_bytes.insert(r.link_bytes.end(), links.begin(), links.end());
  }
  std::uint64_t sum = 0;
  r.sram_min = UINT64_MAX;
  for (std::uint64_t b : r.core_sram)
    if (b > 0)
      ++r.cores_used, sum += b, r.sram_min = std::min(r.sram_min, b),
                                r.sram_max = std::max(r.sram_max, b);
  if (r.cores_used == 0) r.sram_min = 0;
  r.sram_mean = r.cores_used ? static_cast<double>(sum) / static_cast<double>(r.cores_used) : 0.0;
  for (std::uint64_t b : r.link_bytes) {
    r.hop_bytes_per_token += b;
    r.worst_link_bytes_per_token = std::max(r.worst_link_bytes_per_token, b);
  }
  return r;
}

namespace {

std::string human(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024.0 && i < 4) b /= 1024.0, ++i;
  return fmt::format("{:.2f} {}", b, u[i]);
}

}  // namespace

void write_placement_summary(std::ostream& out, const PlacementReport& r) {
  out << fmt::format("placement {} of {}: {} wafer(s) of {} x {} cores, {} layers\n", r.strategy,
                     r.scenario, r.wafers, r.mesh_width, r.mesh_height, r.layers);
  out << fmt::format("  cores used        {} of {}\n", r.cores_used,
                     static_cast<std::uint64_t>(r.mesh_width) * r.mesh_height * r.wafers);
  out << fmt::format("  SRAM per core     min {}, mean {}, max {} of {}\n",
                     human(static_cast<double>(r.sram_min)), human(r.sram_mean),
                     human(static_cast<double>(r.sram_max)),
                     human(static_cast<double>(r.sram_capacity_per_core)));
  out << fmt::format(
      "  hop-bytes/token   {} (bytes x hops over all mesh links, one decode token)\n",
      human(static_cast<double>(r.hop_bytes_per_token)));
  out << fmt::format("  closed-form est.  {} hop-bytes/token (what the strategies search with)\n",
                     human(r.estimated_hop_bytes));
  if (!r.planner_note.empty()) out << fmt::format("  planner           {}\n", r.planner_note);
  if (r.layer_group_choice)
    for (const std::string& l : analysis::layer_group_choice_lines(*r.layer_group_choice))
      out << "  " << l << "\n";
  for (const analysis::ReductionChoice& ch : r.reduction_choices)
    for (const std::string& l : analysis::reduction_choice_lines(ch)) out << "  " << l << "\n";
  out << fmt::format("  worst link/token  {}\n",
                     human(static_cast<double>(r.worst_link_bytes_per_token)));
  out << fmt::format("  decode step alone {} cycles ({:.2f} us)\n", r.token_cycles,
                     static_cast<double>(r.token_cycles) / r.clock_hz * 1e6);
  out << fmt::format("  closed-form est.  {:.0f} cycles/token critical path at the full context\n",
                     r.estimated_latency_cycles);
  out << fmt::format("  max context       {} tokens per user\n", r.max_context_tokens);
  out << "  regions (layer: cores)\n   ";
  std::vector<std::uint64_t> per_layer(static_cast<std::size_t>(r.layers) + 1, 0);
  for (const RegionInfo& g : r.regions)
    per_layer[g.layer < 0 ? per_layer.size() - 1 : static_cast<std::size_t>(g.layer)] +=
        static_cast<std::uint64_t>(g.rect.cores());
  for (std::size_t l = 0; l < per_layer.size(); ++l) {
    out << fmt::format(" {}: {}",
                       l + 1 == per_layer.size() ? std::string("head") : std::to_string(l),
                       per_layer[l]);
    if (l % 8 == 7) out << "\n   ";
  }
  out << "\n";
}

nlohmann::ordered_json placement_json(const PlacementReport& r) {
  nlohmann::ordered_json j;
  j["scenario"] = r.scenario;
  j["strategy"] = r.strategy;
  j["wafers"] = r.wafers;
  j["mesh_width"] = r.mesh_width;
  j["mesh_height"] = r.mesh_height;
  j["cores_used"] = r.cores_used;
  j["hop_bytes_per_token"] = r.hop_bytes_per_token;
  j["estimated_hop_bytes_per_token"] = r.estimated_hop_bytes;
  j["planner"] = r.planner_note;
  if (r.layer_group_choice)
    j["layer_groups_auto"] = analysis::layer_group_choice_json(*r.layer_group_choice);
  if (!r.reduction_choices.empty())
    j["reduction_auto"] = analysis::reduction_choices_json(r.reduction_choices);
  j["worst_link_bytes_per_token"] = r.worst_link_bytes_per_token;
  j["sram_bytes_per_core_min"] = r.sram_min;
  j["sram_bytes_per_core_mean"] = r.sram_mean;
  j["sram_bytes_per_core_max"] = r.sram_max;
  j["sram_bytes_per_core_capacity"] = r.sram_capacity_per_core;
  j["decode_step_cycles_alone"] = r.token_cycles;
  j["estimated_latency_cycles_per_token"] = r.estimated_latency_cycles;
  j["max_context_tokens"] = r.max_context_tokens;
  j["regions"] = nlohmann::ordered_json::array();
  for (const RegionInfo& g : r.regions)
    j["regions"].push_back({{"name", g.name},
                            {"layer", g.layer},
                            {"wafer", g.wafer},
                            {"x", g.rect.x0},
                            {"y", g.rect.y0},
                            {"width", g.rect.width},
                            {"height", g.rect.height},
                            {"upward", g.upward}});
  return j;
}

analysis::PlacementPicture placement_picture(const PlacementReport& r) {
  analysis::PlacementPicture p;
  p.mesh_width = r.mesh_width;
  p.mesh_height = r.mesh_height;
  p.wafers = r.wafers;
  p.layers = r.layers;
  p.regions = r.regions;
  p.core_sram = r.core_sram;
  p.link_bytes = r.link_bytes;
  p.sram_capacity_per_core = r.sram_capacity_per_core;
  p.link_basis = "one decode token";
  return p;
}

std::string placement_svg(const PlacementReport& r) {
  return analysis::placement_svg(placement_picture(r));
}

analysis::PlacementPicture run_placement_picture(const Scenario& sc,
                                                 const analysis::RunResult& result) {
  const Placement pl = plan_system(sc, placement_request(sc));
  analysis::PlacementPicture p;
  p.mesh_width = result.mesh_width;
  p.mesh_height = result.mesh_height;
  p.wafers = result.wafers;
  p.layers = sc.model.num_layers;
  p.regions = placement_regions(pl);
  p.core_sram = result.core_sram_bytes;
  p.link_bytes = result.link_bytes;
  p.sram_capacity_per_core = sc.hardware.sram_per_core.value;
  p.link_basis = "the whole run";
  return p;
}

}  // namespace wafersim::sim
