// wafersim place: place a scenario's model and evaluate the placement, without
// simulating it (summary, JSON, SVG picture, an editable placement file).
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/output_file.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/placement/placement.hpp"
#include "sim/studies/placement_report.hpp"
#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace {

struct PlaceArgs {
  std::string scenario, svg, write_placement, layer_replay = "auto";
  bool json = false;
  int block_rows = 0;
  ScenarioOverrideOptions overrides;
};

int run(const PlaceArgs& a, const std::filesystem::path& presets) {
  Scenario sc = load_scenario_with(a.scenario, presets, a.overrides);
  check_single_batch(sc, "place");
  if (!a.svg.empty()) analysis::check_writable(a.svg);  // before placing, not after
  if (!a.write_placement.empty()) analysis::check_writable(a.write_placement);
  if (a.block_rows > 0) sc.placement.block_rows = a.block_rows;
  const PlacementReport report = evaluate_placement(
      sc, show_placement_progress, show_search_progress, layer_replay_mode(a.layer_replay));
  if (report.replayed_layer_passes > 0)
    std::cerr << "decode step alone: replayed " << report.replayed_layer_passes
              << " layer passes as shifted copies of the layer simulated before them "
                 "(exact; --layer-replay off simulates each)\n";
  if (!a.svg.empty()) {
    write_text_atomically(a.svg, placement_svg(report));
    report_written(a.svg, "placement picture");
  }
  if (!a.write_placement.empty()) {
    write_text_atomically(a.write_placement, report.placement_file);
    report_written(a.write_placement, "placement file; use it with --placement");
  }
  if (a.json)
    std::cout << placement_json(report).dump(2) << "\n";
  else
    write_placement_summary(std::cout, report);
  return kExitSuccess;
}

}  // namespace

RegisteredCommand add_place_command(CLI::App& app) {
  auto a = std::make_shared<PlaceArgs>();
  CLI::App* place = app.add_subcommand(
      "place", "Place a scenario's model and evaluate the placement (no simulation)");
  place->add_option("scenario", a->scenario, "Scenario YAML file")->required();
  place->add_flag("--json", a->json, "Print one JSON object");
  place->add_option("--svg", a->svg, "Write a picture: regions, SRAM and link-load heatmaps");
  place
      ->add_option("--block-rows", a->block_rows, "serpentine, sram-balanced: rows of layer blocks")
      ->check(CLI::Range(1, 64));
  add_scenario_override_options(place, a->overrides);
  add_layer_replay_option(place, a->layer_replay);
  place->add_option("--write-placement", a->write_placement,
                    "Write the placement (regions, every matrix's rectangle and reduction) as an "
                    "editable YAML file");
  const CLI::App* root = &app;
  return {place, [a, root] { return run(*a, preset_dir(*root)); }, [a] { return a->scenario; }};
}

}  // namespace wafersim::sim
