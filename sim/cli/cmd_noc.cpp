// wafersim noc: synthetic-traffic latency-throughput curves on a small mesh,
// at the wavelet (cycle) level or the flow level, with the router parameters
// of a hardware preset.
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "fabric/synthetic.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"

namespace wafersim::sim {

namespace {

struct NocOptions {
  std::string mesh;
  std::string pattern = "uniform";
  std::vector<double> rates;
  std::string level = "wavelet";
  std::uint64_t seed = 1;
  bool json = false;
  std::string hardware = "wse3";
  int packet_wavelets = 1;
  int colors = 1;
  int buffer_depth = fabric::WaveletConfig{}.buffer_depth;
  std::uint64_t warmup = 1000, measure = 2000, drain = 4000;
};

// "16x16" or "16" -> (16, 16); "32x8" -> (32, 8).
std::pair<int, int> parse_mesh(const std::string& text) {
  const auto x = text.find_first_of("xX");
  try {
    std::size_t used = 0;
    const int w = std::stoi(text.substr(0, x), &used);
    if (used != (x == std::string::npos ? text.size() : x)) throw std::invalid_argument(text);
    int h = w;
    if (x != std::string::npos) {
      h = std::stoi(text.substr(x + 1), &used);
      if (used != text.size() - x - 1) throw std::invalid_argument(text);
    }
    if (w < 1 || h < 1 || w > 1024 || h > 1024) throw std::invalid_argument(text);
    return {w, h};
  } catch (const std::logic_error&) {
    throw CLI::ValidationError("--mesh", "expected WxH (e.g. 16x16), each 1-1024: " + text);
  }
}

int run_noc(const NocOptions& o, const std::string& preset_dir) {
  const auto [w, h] = parse_mesh(o.mesh);
  const auto pattern = fabric::parse_pattern(o.pattern);
  if (!pattern)
    throw CLI::ValidationError("--pattern",
                               o.pattern + ": unknown; valid: " +
                                   fmt::format("{}", fmt::join(fabric::pattern_names(), ", ")));
  const fabric::Level level = o.level == "flow" ? fabric::Level::flow : fabric::Level::wavelet;
  fabric::WaferSpec spec = preset_dir.empty() ? load_hardware_preset(o.hardware)
                                              : load_hardware_preset(o.hardware, preset_dir);
  spec.mesh_width = w;
  spec.mesh_height = h;
  spec.dies_x = spec.dies_y = 1;
  const fabric::Mesh mesh(w, h);
  fabric::WaveletConfig config;
  config.buffer_depth = o.buffer_depth;
  const bool uniform = *pattern == fabric::Pattern::uniform;
  const double bound = fabric::uniform_random_bound(w, h);

  std::vector<fabric::LoadPoint> points;
  for (double rate : o.rates) {
    fabric::SyntheticLoad load;
    load.pattern = *pattern;
    load.rate = rate;
    load.packet_wavelets = o.packet_wavelets;
    load.colors = o.colors;
    load.warmup = o.warmup;
    load.measure = o.measure;
    load.drain = o.drain;
    load.seed = o.seed;
    points.push_back(fabric::measure_load(mesh, spec, load, level, config));
  }

  if (o.json) {
    nlohmann::ordered_json j;
    j["mesh"] = {{"width", w}, {"height", h}};
    j["pattern"] = fabric::pattern_name(*pattern);
    j["level"] = fabric::level_name(level);
    j["hardware"] = spec.name;
    j["seed"] = o.seed;
    j["packet_wavelets"] = o.packet_wavelets;
    j["colors"] = o.colors;
    j["buffer_depth"] = o.buffer_depth;
    j["warmup_cycles"] = o.warmup;
    j["measure_cycles"] = o.measure;
    j["bisection_bound"] =
        uniform ? nlohmann::ordered_json(bound) : nlohmann::ordered_json(nullptr);
    j["points"] = nlohmann::ordered_json::array();
    for (const auto& p : points)
      j["points"].push_back({{"rate", p.offered},
                             {"latency_cycles", p.latency_cycles},
                             {"accepted_rate", p.accepted_rate},
                             {"saturated", p.saturated},
                             {"measured_packets", p.measured_packets},
                             {"delivered_packets", p.delivered_packets}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  fmt::print(
      "noc: {}x{} mesh, {}, {} level, seed {}; router of {}: {} cycle/hop, {} B/cycle links\n", w,
      h, fabric::pattern_name(*pattern), fabric::level_name(level), o.seed, spec.name,
      spec.hop_latency.value, spec.link_bytes_per_cycle.value);
  if (uniform)
    fmt::print("uniform-random bound (bisection, XY): {:.4f} wavelets/node/cycle\n", bound);
  fmt::print("{:>8}  {:>12}  {:>10}\n", "rate", "latency", "accepted");
  for (const auto& p : points)
    fmt::print("{:>8.4f}  {:>12.2f}  {:>10.4f}{}\n", p.offered, p.latency_cycles, p.accepted_rate,
               p.saturated ? "  saturated" : "");
  fmt::print(
      "rate and accepted in wavelets per source node per cycle; latency in cycles from "
      "creation to tail arrival\n");
  return 0;
}

}  // namespace

RegisteredCommand add_noc_command(CLI::App& app) {
  auto o = std::make_shared<NocOptions>();
  auto* cmd =
      app.add_subcommand("noc", "Latency-throughput curve of synthetic traffic on a small mesh");
  cmd->add_option("--mesh", o->mesh, "Mesh size WxH (e.g. 16x16)")->required();
  cmd->add_option("--pattern", o->pattern,
                  "uniform | transpose | bit-complement | hotspot | neighbor")
      ->capture_default_str();
  cmd->add_option("--rates", o->rates,
                  "Offered rates in wavelets per node per cycle, e.g. 0.05,0.1")
      ->required()
      ->delimiter(',')
      ->check(CLI::Range(1e-9, 1.0));
  cmd->add_option("--level", o->level, "wavelet (cycle level) or flow")
      ->check(CLI::IsMember({"wavelet", "flow"}))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_option("--hardware", o->hardware, "Hardware preset for the router parameters")
      ->capture_default_str();
  cmd->add_option("--packet-wavelets", o->packet_wavelets, "Wavelets per packet")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--colors", o->colors, "Colors (virtual channels) packets spread over")
      ->check(CLI::Range(1, 24))
      ->capture_default_str();
  cmd->add_option("--buffer-depth", o->buffer_depth, "Wavelets per input FIFO (wavelet level)")
      ->check(CLI::Range(1, 255))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Warm-up cycles")->capture_default_str();
  cmd->add_option("--measure", o->measure, "Measurement window in cycles")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{100'000'000}))
      ->capture_default_str();
  cmd->add_option("--drain", o->drain, "Cycles after the window for measured packets to arrive")
      ->capture_default_str();
  const CLI::App* root = &app;
  return {cmd, [o, root]() {
            try {
              return run_noc(*o, presets_flag(*root));
            } catch (const CLI::ValidationError& e) {
              throw CommandError(kExitUsage, e.what());
            } catch (const std::invalid_argument& e) {  // e.g. transpose on a non-square mesh
              throw CommandError(kExitUsage, std::string("noc: ") + e.what());
            }
          }};
}

}  // namespace wafersim::sim
