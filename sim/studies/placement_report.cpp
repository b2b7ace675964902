#include "sim/studies/placement_report.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "sim/config/placement_file.hpp"
#include "sim/engine/system.hpp"
#include "sim/exec/executor.hpp"
#include "sim/placement/placement_cost.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

PlacementReport evaluate_placement(const Scenario& sc,
                                   const std::function<void(int, int)>& progress) {
  const std::unique_ptr<PlacedSystem> sys = place_system(sc, progress);
  const Placement& pl = sys->placement;
  PlacementReport r;
  r.scenario = sc.name;
  r.strategy = pl.strategy;
  r.planner_note = pl.planner_note;
  r.estimated_hop_bytes = pl.estimated_hop_bytes;
  r.estimated_latency_cycles = estimate_latency_cycles(
      LatencyModel{sc.hardware, models::dtype_bits(sc.precision), std::max(1, pl.context_tokens)},
      sc.model, pl);
  r.wafers = pl.wafers;
  r.mesh_width = sc.hardware.mesh_width;
  r.mesh_height = sc.hardware.mesh_height;
  r.layers = sc.model.num_layers;
  r.sram_capacity_per_core = sc.hardware.sram_per_core.value;
  r.clock_hz = sc.hardware.clock_hz;
  r.max_context_tokens = pl.max_context_tokens;
  // Placement files give each matrix a rectangle of its own: a whole-region
  // placement (matrices sharing regions) has none yet.
  const bool shared = std::any_of(pl.layers.begin(), pl.layers.end(),
                                  [](const LayerStage& st) { return st.whole_region; });
  if (!shared) r.placement_file = placement_file_yaml(sc.model, sc.hardware, pl);
  for (const LayerStage& st : pl.layers) {
    if (st.whole_region) {
      // Every matrix and the KV cache span the layer's region (shared with
      // the other layers of its group): the region is the layer's one rectangle.
      r.regions.push_back(
          {fmt::format("layer {} (whole region)", st.layer), st.layer, st.wafer, st.strip});
      continue;
    }
    for (const MatrixPlacement* m : st.matrices())
      r.regions.push_back({m->name, st.layer, st.wafer, m->rect, m->upward});
    r.regions.push_back(
        {fmt::format("layer {} attention", st.layer), st.layer, st.wafer, st.attention.rect});
  }
  r.regions.push_back({"lm_head", -1, pl.head.wafer, pl.head.lm_head.rect});
  if (!pl.head.tied) r.regions.push_back({"embedding", -1, pl.head.wafer, pl.head.embedding.rect});
  if (pl.head.position_embedding.p() > 0)
    r.regions.push_back({"position_embedding", -1, pl.head.wafer, pl.head.position_embedding.rect});

  // One decode token (user 0, position 0) through every stage, timing only.
  fabric::WaferIo io(sc.hardware, pl.wafers);
  Executor ex(sys->wafer_ptrs, &io, sc.model, pl, sys->program, nullptr,
              models::dtype_bits(sc.precision));
  TokenMessage m;
  m.needs_logits = true;
  m.token = sc.workload.prompt_ids.front();
  slot(m, Slot::x) = ex.embed(m.token, 0, Timed{}, true);
  for (const StageProgram& sp : sys->program.stages)
    run_stage(ex, sp, m, [](const std::string&, const Timed&) {});
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

namespace {

// A blue -> green -> yellow ramp for t in [0, 1].
std::string heat(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const int r = static_cast<int>(std::lround(68 + t * (253 - 68)));
  const int g = static_cast<int>(std::lround(1 + t * (231 - 1)));
  const int b = static_cast<int>(
      std::lround(84 + (t < 0.5 ? t * 2 * (140 - 84) : (1 - t) * 2 * (140 - 84) - 50 * (t - 0.5))));
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, std::clamp(b, 0, 255));
}

std::string layer_colour(int layer, int layers) {
  if (layer < 0) return "#555555";
  const double hue = 360.0 * (layer % std::max(1, layers)) / std::max(1, layers);
  return fmt::format("hsl({:.0f},65%,60%)", hue);
}

}  // namespace

std::string placement_svg(const PlacementReport& r) {
  const int W = r.mesh_width, H = r.mesh_height;
  const int cell =
      std::max(1, static_cast<int>(std::ceil(std::max(W, H) / 160.0)));  // cores per cell side
  const int cw = (W + cell - 1) / cell, ch = (H + cell - 1) / cell;
  const double px = 480.0 / std::max(cw, ch);  // pixels per cell
  const double panel_w = cw * px, panel_h = ch * px;
  const double gap = 30, top = 40;
  const double total_w = 3 * panel_w + 4 * gap, total_h = r.wafers * (panel_h + top + gap) + gap;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      total_w, total_h);
  const double region_scale = px / cell;  // pixels per core
  for (int w = 0; w < r.wafers; ++w) {
    const double y0 = gap + w * (panel_h + top + gap) + top;
    const char* titles[] = {"regions (colour = layer)", "SRAM used per core",
                            "link bytes per decode token"};
    for (int p = 0; p < 3; ++p)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">wafer {}: {}</text>\n",
                       gap + p * (panel_w + gap), y0 - 8, w, titles[p]);
    // Panel 1: regions.
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#eee\"/>\n", gap,
        y0, panel_w, panel_h);
    for (const RegionInfo& g : r.regions) {
      if (g.wafer != w) continue;
      const double x = gap + g.rect.x0 * region_scale, y = y0 + g.rect.y0 * region_scale;
      const double gw = g.rect.width * region_scale, gh = g.rect.height * region_scale;
      s += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
          "stroke=\"#333\" "
          "stroke-width=\"0.3\"><title>{} ({} x {} cores{})</title></rect>\n",
          x, y, gw, gh, layer_colour(g.layer, r.layers), g.name, g.rect.width, g.rect.height,
          g.upward ? ", input from the bottom row" : "");
      if (gh > 10 && gw > 14 && (g.name.find(" qkv") != std::string::npos || g.layer < 0))
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\">{}</text>\n", x + 1,
                         y + 9, g.layer < 0 ? g.name : std::to_string(g.layer));
    }
    // Panels 2 and 3: heatmaps, a cell = the max (SRAM) or sum (links) of its cores.
    for (int p = 1; p < 3; ++p) {
      std::vector<double> v(static_cast<std::size_t>(cw) * ch, 0.0);
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          const std::size_t core = (static_cast<std::size_t>(w) * H + y) * W + x;
          double& c = v[static_cast<std::size_t>(y / cell) * cw + x / cell];
          if (p == 1) {
            c = std::max(c, static_cast<double>(r.core_sram[core]));
          } else {
            for (int d = 0; d < 4; ++d) c += static_cast<double>(r.link_bytes[core * 4 + d]);
          }
        }
      const double vmax = std::max(1.0, *std::max_element(v.begin(), v.end()));
      const double norm = p == 1 ? static_cast<double>(r.sram_capacity_per_core) : vmax;
      const double x0 = gap + p * (panel_w + gap);
      for (int cy = 0; cy < ch; ++cy)
        for (int cx = 0; cx < cw; ++cx) {
          const double val = v[static_cast<std::size_t>(cy) * cw + cx];
          s += fmt::format(
              "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"/>\n",
              x0 + cx * px, y0 + cy * px, px + 0.05, px + 0.05,
              val <= 0 ? std::string("#f4f4f4")
                       : heat(p == 1 ? val / norm : std::sqrt(val / norm)));
        }
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\">max {} {}</text>\n", x0,
                       y0 + panel_h + 12,
                       human(p == 1 ? static_cast<double>(r.sram_capacity_per_core) : vmax),
                       p == 1 ? "(capacity)" : "per cell (sqrt scale)");
    }
  }
  s += "</svg>\n";
  return s;
}

}  // namespace wafersim::sim
