#include "analysis/placement_picture.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "analysis/png_image.hpp"
#include "analysis/svg_chart.hpp"

namespace wafersim::analysis {

namespace {

// Viridis (matplotlib's perceptually uniform map), sampled at nine stops.
constexpr std::array<std::array<int, 3>, 9> kViridis = {{{0x44, 0x01, 0x54},
                                                         {0x47, 0x2d, 0x7b},
                                                         {0x3b, 0x52, 0x8b},
                                                         {0x2c, 0x72, 0x8e},
                                                         {0x21, 0x91, 0x8c},
                                                         {0x28, 0xae, 0x80},
                                                         {0x5e, 0xc9, 0x62},
                                                         {0xad, 0xdc, 0x30},
                                                         {0xfd, 0xe7, 0x25}}};
constexpr std::array<std::uint8_t, 3> kEmpty = {0xf0, 0xf0, 0xf0};  // no bytes at all
constexpr int kLevels = 255;                                        // palette 1..255

std::array<std::uint8_t, 3> viridis(double t) {
  t = std::clamp(t, 0.0, 1.0) * (kViridis.size() - 1);
  const std::size_t i = std::min<std::size_t>(static_cast<std::size_t>(t), kViridis.size() - 2);
  const double f = t - static_cast<double>(i);
  std::array<std::uint8_t, 3> c{};
  for (int k = 0; k < 3; ++k)
    c[k] = static_cast<std::uint8_t>(
        std::lround(kViridis[i][k] + f * (kViridis[i + 1][k] - kViridis[i][k])));
  return c;
}

std::string hex(const std::array<std::uint8_t, 3>& c) {
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

std::string human_bytes(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (std::abs(b) >= 1024.0 && i < 4) b /= 1024.0, ++i;
  return i == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.3g} {}", b, u[i]);
}

// Neighbouring layers far apart in hue (golden angle), alternating lightness;
// a layer's matrices are shades of its hue.
std::string region_colour(int layer, int index_in_layer) {
  if (layer < 0) return index_in_layer == 0 ? "#8c8c8c" : "#b0b0b0";
  const double hue = std::fmod(layer * 137.508, 360.0);
  const int light = (layer % 2 ? 48 : 62) + (index_in_layer % 3) * 7;
  return fmt::format("hsl({:.0f},70%,{}%)", hue, light);
}

// "layer 3 qkv" -> "qkv"; other names as they are.
std::string short_name(const PlacedRegion& g) {
  const std::string prefix = fmt::format("layer {} ", g.layer);
  return g.layer >= 0 && g.name.rfind(prefix, 0) == 0 ? g.name.substr(prefix.size()) : g.name;
}

double text_width(const std::string& s, double font) {
  return 0.6 * font * s.size();
}

constexpr double kPanelLeft = 48;  // y-axis labels
constexpr double kBarSpace = 110;  // colour bar and its labels
constexpr double kRowTitle = 22, kRowAxis = 34;

struct Scale {
  double lo = 0, hi = 1;
  bool sqrt = false;
  double position(double v) const {  // in [0, 1]
    if (hi <= lo) return 1.0;
    const double t = std::clamp((v - lo) / (hi - lo), 0.0, 1.0);
    return sqrt ? std::sqrt(t) : t;
  }
};

std::string axes(double x0, double y0, double w_px, double h_px, double px_per_core, int W, int H) {
  std::string s = fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#444\" stroke-width=\"0.8\"/>\n",
      x0, y0, w_px, h_px);
  for (double t : nice_ticks(0, W, std::max(2, static_cast<int>(w_px / 70)))) {
    if (t > W || t != std::floor(t)) continue;
    const double x = x0 + t * px_per_core;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#444\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\" font-size=\"9\">{4}</text>\n",
        x, y0 + h_px, y0 + h_px + 4, y0 + h_px + 13, t);
  }
  for (double t : nice_ticks(0, H, std::max(2, static_cast<int>(h_px / 60)))) {
    if (t > H || t != std::floor(t)) continue;
    const double y = y0 + t * px_per_core;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#444\"/>"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\" font-size=\"9\">{5}</text>\n",
        x0 - 4, y, x0, x0 - 6, y + 3, t);
  }
  s += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"9\" fill=\"#444\">x "
      "(core column)</text>\n",
      x0 + w_px / 2, y0 + h_px + 25);
  s += fmt::format(
      "<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\" "
      "font-size=\"9\" fill=\"#444\">y (core row)</text>\n",
      x0 - 34, y0 + h_px / 2);
  return s;
}

std::string colour_bar(const std::string& id, double x, double y, double h, const Scale& sc,
                       const std::string& caption) {
  std::string s =
      fmt::format("<defs><linearGradient id=\"{}\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">", id);
  for (std::size_t i = 0; i < kViridis.size(); ++i)
    s += fmt::format(
        "<stop offset=\"{:.3f}\" stop-color=\"{}\"/>",
        static_cast<double>(i) / (kViridis.size() - 1),
        hex({static_cast<std::uint8_t>(kViridis[i][0]), static_cast<std::uint8_t>(kViridis[i][1]),
             static_cast<std::uint8_t>(kViridis[i][2])}));
  s += "</linearGradient></defs>\n";
  s += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"{:.1f}\" fill=\"url(#{})\" "
      "stroke=\"#444\" stroke-width=\"0.5\"/>\n",
      x, y, h, id);
  std::vector<double> ticks = nice_ticks(sc.lo, sc.hi, 4);
  ticks.erase(std::remove_if(ticks.begin(), ticks.end(),
                             [&](double t) {
                               return t < sc.lo || t > sc.hi ||
                                      std::abs(sc.position(t) - 1.0) * h < 10 ||
                                      std::abs(sc.position(t)) * h < 10;
                             }),
              ticks.end());
  ticks.insert(ticks.begin(), sc.lo);
  ticks.push_back(sc.hi);
  for (double t : ticks) {
    const double ty = y + h - sc.position(t) * h;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#444\"/>"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" font-size=\"9\">{5}</text>\n",
        x + 12, ty, x + 16, x + 18, ty + 3, xml_escape(human_bytes(t)));
  }
  s += fmt::format(
      "<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\" "
      "font-size=\"9\" fill=\"#444\">{}</text>\n",
      x + 78, y + h / 2, xml_escape(caption));
  return s;
}

// One wafer's heatmap as a palette image: a pixel = the max over its cores.
PaletteImage heatmap(const PlacementPicture& p, const PictureGrid& g, int wafer, bool links,
                     const Scale& sc) {
  PaletteImage im;
  im.width = g.columns;
  im.height = g.rows;
  im.palette.push_back(kEmpty);
  for (int i = 0; i < kLevels; ++i) im.palette.push_back(viridis(i / double(kLevels - 1)));
  std::vector<double> cell(static_cast<std::size_t>(g.columns) * g.rows, 0.0);
  const int W = p.mesh_width, H = p.mesh_height;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const std::size_t core = (static_cast<std::size_t>(wafer) * H + y) * W + x;
      double v = 0;
      if (links)
        for (int d = 0; d < 4; ++d) v += static_cast<double>(p.link_bytes[core * 4 + d]);
      else
        v = static_cast<double>(p.core_sram[core]);
      double& c =
          cell[static_cast<std::size_t>(y / g.cores_per_pixel) * g.columns + x / g.cores_per_pixel];
      c = std::max(c, v);
    }
  im.pixels.resize(cell.size());
  for (std::size_t i = 0; i < cell.size(); ++i)
    im.pixels[i] =
        cell[i] <= 0
            ? 0
            : static_cast<std::uint8_t>(1 + std::lround(sc.position(cell[i]) * (kLevels - 1)));
  return im;
}

struct Stage {
  int wafer = 0;
  double cx = 0, cy = 0;  // cores
};

}  // namespace

PictureGrid picture_grid(int W, int H) {
  PictureGrid g;
  const int longest = std::max({W, H, 1});
  g.cores_per_pixel = std::max(1, (longest + 239) / 240);
  g.columns = (W + g.cores_per_pixel - 1) / g.cores_per_pixel;
  g.rows = (H + g.cores_per_pixel - 1) / g.cores_per_pixel;
  // Panels up to ~340 px wide and ~480 px tall: three side by side fit a page.
  g.scale = std::max(1, std::min(480 / std::max(g.rows, 1), 340 / std::max(g.columns, 1)));
  return g;
}

std::string placement_svg(const PlacementPicture& p) {
  const int W = p.mesh_width, H = p.mesh_height;
  const std::size_t cores = static_cast<std::size_t>(W) * H * std::max(0, p.wafers);
  if (W <= 0 || H <= 0 || p.wafers <= 0 || p.core_sram.size() != cores ||
      p.link_bytes.size() != cores * 4)
    throw std::invalid_argument(fmt::format(
        "placement picture: per-core arrays ({} SRAM, {} link values) are not shaped like {} "
        "wafer(s) of {} x {} cores",
        p.core_sram.size(), p.link_bytes.size(), p.wafers, W, H));
  const PictureGrid g = picture_grid(W, H);
  const double pw = g.columns * g.scale, ph = g.rows * g.scale;
  const double ppc = static_cast<double>(g.scale) / g.cores_per_pixel;  // screen px per core
  const double panel_step = kPanelLeft + pw + kBarSpace;
  const double header = 58;
  const double row_h = kRowTitle + ph + kRowAxis;
  const double total_w = std::max(3 * panel_step + 10, 720.0);
  const double total_h = header + p.wafers * row_h + 10;

  // One scale per heatmap for every wafer, so wafers can be compared.
  Scale sram, links;
  links.sqrt = true;
  links.lo = 0;
  bool any_sram = false;
  double link_max = 0;
  sram.lo = 0;
  sram.hi = 0;
  for (std::uint64_t b : p.core_sram) {
    if (b == 0) continue;
    const double v = static_cast<double>(b);
    sram.lo = any_sram ? std::min(sram.lo, v) : v;
    sram.hi = any_sram ? std::max(sram.hi, v) : v;
    any_sram = true;
  }
  for (std::size_t c = 0; c < cores; ++c) {
    double v = 0;
    for (int d = 0; d < 4; ++d) v += static_cast<double>(p.link_bytes[c * 4 + d]);
    link_max = std::max(link_max, v);
  }
  links.hi = std::max(link_max, 1.0);
  if (!any_sram) sram.lo = 0, sram.hi = 1;

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<title>placement: regions, SRAM per core, link bytes per core</title>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
      "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" "
      "fill=\"#111\"/></marker></defs>\n",
      total_w, total_h, total_w, total_h);
  s += fmt::format(
      "<text x=\"10\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{} wafer{} of {} x {} cores; "
      "{}</text>\n",
      p.wafers, p.wafers == 1 ? "" : "s", W, H,
      g.cores_per_pixel == 1
          ? std::string("one pixel per core")
          : fmt::format("one pixel = the max over {0} x {0} cores", g.cores_per_pixel));
  s += fmt::format(
      "<text x=\"10\" y=\"34\" font-size=\"10\" fill=\"#333\">Regions: colour = layer (shades: "
      "its matrices), grey = head; arrows: the token's path. SRAM: colours span the used cores' "
      "range, {} to {} (capacity {} per core), one scale for every wafer.</text>\n",
      xml_escape(human_bytes(sram.lo)), xml_escape(human_bytes(sram.hi)),
      xml_escape(human_bytes(static_cast<double>(p.sram_capacity_per_core))));
  s += fmt::format(
      "<text x=\"10\" y=\"48\" font-size=\"10\" fill=\"#333\">Links: bytes leaving each core "
      "(E+W+S+N) over {}, square-root scale from 0 to {}, one scale for every wafer; light grey = "
      "none.</text>\n",
      xml_escape(p.link_basis), xml_escape(human_bytes(links.hi)));

  // The token's path: the stage centres in order (entry, layers, lm_head).
  std::map<int, std::array<double, 5>> layer_box;  // layer -> wafer, x0, y0, x1, y1
  for (const PlacedRegion& r : p.regions) {
    if (r.layer < 0) continue;
    auto [it, fresh] = layer_box.try_emplace(
        r.layer,
        std::array<double, 5>{double(r.wafer), double(r.rect.x0), double(r.rect.y0),
                              double(r.rect.x0 + r.rect.width), double(r.rect.y0 + r.rect.height)});
    if (!fresh && it->second[0] == r.wafer) {
      auto& b = it->second;
      b[1] = std::min(b[1], double(r.rect.x0));
      b[2] = std::min(b[2], double(r.rect.y0));
      b[3] = std::max(b[3], double(r.rect.x0 + r.rect.width));
      b[4] = std::max(b[4], double(r.rect.y0 + r.rect.height));
    }
  }
  const auto centre = [](const PlacedRegion& r) {
    return Stage{r.wafer, r.rect.x0 + r.rect.width / 2.0, r.rect.y0 + r.rect.height / 2.0};
  };
  std::vector<Stage> path;
  const PlacedRegion* lm_head = nullptr;
  const PlacedRegion* embedding = nullptr;
  for (const PlacedRegion& r : p.regions) {
    if (r.name == "lm_head") lm_head = &r;
    if (r.name == "embedding") embedding = &r;
  }
  if (embedding || lm_head) path.push_back(centre(embedding ? *embedding : *lm_head));
  for (const auto& [layer, b] : layer_box)
    path.push_back(Stage{static_cast<int>(b[0]), (b[1] + b[3]) / 2, (b[2] + b[4]) / 2});
  if (lm_head) path.push_back(centre(*lm_head));

  for (int w = 0; w < p.wafers; ++w) {
    const double top = header + w * row_h + kRowTitle;
    const char* titles[] = {"regions and the token's path", "SRAM used per core",
                            "link bytes leaving each core"};
    for (int k = 0; k < 3; ++k)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-weight=\"bold\">wafer {}: {}</text>\n",
                       k * panel_step + kPanelLeft, top - 7, w, titles[k]);
    // Panel 1: the regions.
    const double rx = kPanelLeft;
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#f4f4f4\"/>\n",
        rx, top, W * ppc, H * ppc);
    // Regions sharing one rectangle (a whole-region group's layers) are
    // drawn once, named for all of them.
    std::map<std::tuple<int, int, int, int, int>, std::vector<const PlacedRegion*>> sharing;
    for (const PlacedRegion& r : p.regions)
      sharing[{r.wafer, r.rect.x0, r.rect.y0, r.rect.width, r.rect.height}].push_back(&r);
    std::set<int> layers_labelled;
    std::map<int, int> seen_in_layer;
    std::string labels;
    for (const PlacedRegion& r : p.regions) {
      const int index = seen_in_layer[r.layer]++;
      if (r.wafer != w) continue;
      const auto& same = sharing[{r.wafer, r.rect.x0, r.rect.y0, r.rect.width, r.rect.height}];
      if (same.front() != &r) continue;
      const double x = rx + r.rect.x0 * ppc, y = top + r.rect.y0 * ppc;
      const double rw = r.rect.width * ppc, rh = r.rect.height * ppc;
      std::string name = r.name, full, brief = short_name(r);
      if (same.size() > 1) {
        int lo = r.layer, hi = r.layer;
        for (const PlacedRegion* o : same) {
          lo = std::min(lo, o->layer), hi = std::max(hi, o->layer);
          layers_labelled.insert(o->layer);
        }
        name = fmt::format("layers {}-{} share this region", lo, hi);
        for (std::size_t k = 0; k < same.size() && k < 12; ++k)
          name += (k ? ", " : ": ") + same[k]->name;
        if (same.size() > 12) name += ", ...";
        // A shared region's parts other than the layers' region itself (a
        // KV cache of its own) keep their name.
        const std::string part = short_name(r);
        full = part.rfind('(', 0) == 0 ? fmt::format("L{}-{} shared", lo, hi)
                                       : fmt::format("L{}-{} {}", lo, hi, part);
        brief = fmt::format("L{}-{}", lo, hi);
      } else {
        full = r.layer >= 0 ? fmt::format("L{} {}", r.layer, short_name(r)) : r.name;
      }
      s += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
          "stroke=\"white\" stroke-width=\"0.4\"><title>{} at ({}, {}), {} x {} cores{}</title>"
          "</rect>\n",
          x, y, rw, rh, region_colour(r.layer, index), xml_escape(name), r.rect.x0, r.rect.y0,
          r.rect.width, r.rect.height, r.upward ? ", input enters at its bottom row" : "");
      // A visible label where it fits: the name, else just the matrix.
      for (const std::string& text : {full, brief}) {
        const double font = 9;
        if (text_width(text, font) + 2 <= rw && rh >= font + 1) {
          labels += fmt::format(
              "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"9\">{}</text>\n",
              x + rw / 2, y + rh / 2 + 3, xml_escape(text));
          break;
        }
        if (text_width(text, font) + 2 <= rh && rw >= font + 1) {  // along a tall strip
          labels += fmt::format(
              "<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\" "
              "font-size=\"9\">{}</text>\n",
              x + rw / 2 + 3, y + rh / 2, xml_escape(text));
          break;
        }
      }
    }
    // Layers whose matrices were too small to label: the layer number at its centre.
    std::string layer_labels;
    for (const auto& [layer, b] : layer_box) {
      if (static_cast<int>(b[0]) != w) continue;
      const double bw = (b[3] - b[1]) * ppc, bh = (b[4] - b[2]) * ppc;
      if (layers_labelled.count(layer) ||
          labels.find(fmt::format(">L{} ", layer)) != std::string::npos)
        continue;
      const std::string text = std::to_string(layer);
      const double cx = rx + (b[1] + b[3]) / 2 * ppc, cy = top + (b[2] + b[4]) / 2 * ppc;
      if (bw >= text_width(text, 10) + 2 && bh >= 12) {
        layer_labels += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", cx, cy + 4, text);
      } else if (bw >= 7 && bh >= text_width(text, 10) + 2) {  // along a narrow strip
        const double font = std::min(10.0, bw + 1);
        layer_labels += fmt::format(
            "<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\" "
            "font-size=\"{:.0f}\">{}</text>\n",
            cx + font * 0.35, cy, font, text);
      }
    }
    // The token's path.
    std::string arrows;
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
      const Stage &a = path[i], &b = path[i + 1];
      if (a.wafer != w && b.wafer != w) continue;
      if (a.wafer == b.wafer) {
        if (std::hypot(a.cx - b.cx, a.cy - b.cy) * ppc < 3) continue;
        arrows += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
            "marker-end=\"url(#arrow)\"/>\n",
            rx + a.cx * ppc, top + a.cy * ppc, rx + b.cx * ppc, top + b.cy * ppc);
      } else if (a.wafer == w) {  // leaves this wafer
        arrows += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
            "marker-end=\"url(#arrow)\"/><text x=\"{:.1f}\" y=\"{:.1f}\" stroke=\"none\" "
            "fill=\"#111\" font-size=\"9\" text-anchor=\"end\">to wafer {}</text>\n",
            rx + a.cx * ppc, top + a.cy * ppc, rx + W * ppc, top + H * ppc + 2, rx + W * ppc,
            top + H * ppc + 22, b.wafer);
      } else {  // arrives from another wafer
        arrows += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
            "marker-end=\"url(#arrow)\"/><text x=\"{:.1f}\" y=\"{:.1f}\" stroke=\"none\" "
            "fill=\"#111\" font-size=\"9\">from wafer {}</text>\n",
            rx, top - 2, rx + b.cx * ppc, top + b.cy * ppc, rx + 2, top + 9, a.wafer);
      }
    }
    if (!arrows.empty())
      s += "<g stroke=\"#111\" stroke-width=\"1.2\" stroke-opacity=\"0.7\">\n" + arrows + "</g>\n";
    // Labels over the arrows.
    s += "<g stroke=\"white\" stroke-width=\"2.2\" paint-order=\"stroke\" fill=\"#111\">\n" +
         labels + "</g>\n";
    if (!layer_labels.empty())
      s += "<g font-size=\"10\" font-weight=\"bold\" stroke=\"white\" stroke-width=\"2.5\" "
           "paint-order=\"stroke\" fill=\"#111\">\n" +
           layer_labels + "</g>\n";
    s += axes(rx, top, W * ppc, H * ppc, ppc, W, H);

    // Panels 2 and 3: the heatmaps, drawn pixel for pixel.
    for (int k = 1; k < 3; ++k) {
      const bool is_links = k == 2;
      const double x0 = k * panel_step + kPanelLeft;
      const PaletteImage im = heatmap(p, g, w, is_links, is_links ? links : sram);
      s += fmt::format(
          "<image x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
          "preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"{}\"/>\n",
          x0, top, pw, ph, png_data_uri(im));
      s += axes(x0, top, W * ppc, H * ppc, ppc, W, H);
      s += colour_bar(
          fmt::format("bar{}-{}", w, k), x0 + pw + 12, top, std::min(ph, 240.0),
          is_links ? links : sram,
          is_links ? "bytes per core (sqrt scale)"
                   : fmt::format("bytes per core; capacity {}",
                                 human_bytes(static_cast<double>(p.sram_capacity_per_core))));
    }
  }
  s += "</svg>\n";
  return s;
}

}  // namespace wafersim::analysis
