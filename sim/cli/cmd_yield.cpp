// wafersim yield: the fraction of drawn wafers that repair fully, per defect
// rate (sim/studies/yield.hpp). No simulation: a repair check per wafer.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/redundancy.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/studies/yield.hpp"

namespace wafersim::sim {

namespace {

struct YieldOptions {
  std::string scenario;
  std::vector<double> rates;
  int wafers = 100;
  int threads = 0;
  bool json = false;
  ScenarioOverrideOptions overrides;  // all but --wafers, which counts the wafers drawn here
};

int run_yield(const YieldOptions& o, const CLI::App& root) {
  const Scenario sc = load_scenario_with(o.scenario, preset_dir(root), o.overrides);
  const fabric::WaferSpec& hw = sc.hardware;
  for (double r : o.rates)
    if (!(r >= 0.0 && r < 1.0))
      throw CommandError(kExitUsage, fmt::format("--rates: {} is not in [0, 1)", r));
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<YieldPoint> points = wafer_yield(hw, o.rates, o.wafers, threads);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long long physical = static_cast<long long>(hw.physical_width()) * hw.mesh_height;
  if (o.json) {
    nlohmann::ordered_json j;
    j["hardware"] = hw.name;
    j["logical_cores"] = hw.core_count();
    j["physical_cores"] = physical;
    j["columns_per_group"] = hw.redundancy.columns_per_group;
    j["spare_columns"] = hw.redundancy.spare_columns;
    j["first_seed"] = hw.defect_seed;
    j["wafers"] = o.wafers;
    j["wall_s"] = wall_s;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const YieldPoint& p : points)
      rows.push_back({{"rate", p.rate},
                      {"repaired", p.repaired},
                      {"yield", p.yield()},
                      {"expected_yield", p.expected_yield},
                      {"mean_dead_cores", p.mean_dead_cores},
                      {"mean_failed_segments", p.mean_failed_segments}});
    j["points"] = rows;
    fmt::print("{}\n", j.dump(2));
    return kExitSuccess;
  }
  fmt::print("{}: {} logical cores on {} physical ({}), {} wafers per rate from seed {}\n", hw.name,
             hw.core_count(), physical,
             hw.redundancy.enabled()
                 ? fmt::format("{} spare column{} per {} columns", hw.redundancy.spare_columns,
                               hw.redundancy.spare_columns == 1 ? "" : "s",
                               hw.redundancy.columns_per_group)
                 : std::string("no spares"),
             o.wafers, hw.defect_seed);
  fmt::print("{:>10}  {:>9}  {:>7}  {:>9}  {:>10}  {:>15}\n", "rate", "repaired", "yield",
             "expected", "dead/wafer", "failed segments");
  for (const YieldPoint& p : points)
    fmt::print("{:>10g}  {:>4}/{:<4}  {:>6.1f}%  {:>8.1f}%  {:>10.1f}  {:>15.2f}\n", p.rate,
               p.repaired, p.wafers, 100.0 * p.yield(), 100.0 * p.expected_yield, p.mean_dead_cores,
               p.mean_failed_segments);
  fmt::print("({:.2f} s; expected: the closed form for independent defects)\n", wall_s);
  return kExitSuccess;
}

}  // namespace

RegisteredCommand add_yield_command(CLI::App& app) {
  auto o = std::make_shared<YieldOptions>();
  CLI::App* cmd =
      app.add_subcommand("yield", "Fraction of wafers whose defects the spares repair, per rate");
  cmd->add_option("scenario", o->scenario, "Scenario YAML file (its hardware is used)")->required();
  cmd->add_option("--rates", o->rates, "Defect rates per physical core, e.g. 5e-5,1e-4,1e-3")
      ->delimiter(',')
      ->required();
  cmd->add_option("--wafers", o->wafers, "Wafers drawn per rate (seeds defects.seed + 0, 1, ...)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-j,--threads", o->threads, "Host threads (0: all the host has)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
  add_scenario_override_options(cmd, o->overrides, {"--wafers"});
  const CLI::App* root = &app;
  return {cmd, [o, root] { return run_yield(*o, *root); }, [o] { return o->scenario; }};
}

}  // namespace wafersim::sim
