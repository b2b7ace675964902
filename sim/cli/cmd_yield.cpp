// wafersim yield: the fraction of drawn wafers that repair fully, per defect
// rate (sim/studies/yield.hpp). No simulation: a repair check per wafer.
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
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
  std::vector<double> densities;  // per mm^2 (x the hardware's core.area)
  int wafers = 100;
  int runs = 0;
  int threads = 0;
  bool json = false;
  ScenarioOverrideOptions overrides;  // all but --wafers, which counts the wafers drawn here
};

int run_yield(const YieldOptions& o, const CLI::App& root) {
  const Scenario sc = load_scenario_with(o.scenario, preset_dir(root), o.overrides);
  const fabric::WaferSpec& hw = sc.hardware;
  if (o.rates.empty() && o.densities.empty())
    throw CommandError(kExitUsage,
                       "give --rates (defect probability per core, e.g. 5e-5,1e-4) or --densities "
                       "(defects per mm^2, e.g. 0.001,0.002), or both");
  for (double r : o.rates)
    if (!(r >= 0.0 && r < 1.0))
      throw CommandError(kExitUsage, fmt::format("--rates: {} is not in [0, 1)", r));
  if (!o.densities.empty() && !(hw.core_area_mm2 > 0.0))
    throw CommandError(kExitBadInput,
                       fmt::format("--densities: the hardware {} has no core area; give "
                                   "hardware.core.area (e.g. --set hardware.core.area='0.05 "
                                   "mm^2') or use --rates",
                                   hw.name));
  for (double d : o.densities)
    if (!(d >= 0.0 && d * hw.core_area_mm2 < 1.0))
      throw CommandError(kExitUsage,
                         fmt::format("--densities: {} per mm^2 x {} mm^2 per core is not a "
                                     "probability in [0, 1)",
                                     d, hw.core_area_mm2));
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<YieldPoint> points = wafer_yield(hw, o.rates, o.wafers, threads, o.densities);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // What the repairs cost a token: the first --runs repaired wafers of each
  // rate simulated, beside the scenario with no drawn defect.
  std::optional<RepairCost> cost;
  if (o.runs > 0 && !o.overrides.as_sets().empty())
    throw CommandError(kExitUsage,
                       "yield --runs simulates the scenario file as it is, and its runs do not "
                       "take command-line overrides yet: put them in the scenario (or drop "
                       "--runs)");
  if (o.runs > 0) {
    RepairedRunOptions ro;
    ro.binary = std::filesystem::read_symlink("/proc/self/exe");
    ro.scenario = o.scenario;
    ro.presets = presets_flag(root);
    ro.runs = o.runs;
    ro.jobs = threads;
    // No spares: the what-if of a placement that avoids dead cores itself.
    ro.every_wafer = !hw.redundancy.enabled();
    ro.first_seed = hw.defect_seed;
    try {
      cost = repair_cost(points, ro);
    } catch (const std::runtime_error& e) {
      throw CommandError(kExitBadInput, fmt::format("{}: {}", o.scenario, e.what()));
    }
  }
  const double runs_wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - wall_s;
  const long long physical = static_cast<long long>(hw.physical_width()) * hw.mesh_height;
  if (o.json) {
    nlohmann::ordered_json j;
    j["hardware"] = hw.name;
    j["logical_cores"] = hw.core_count();
    j["physical_cores"] = physical;
    j["columns_per_group"] = hw.redundancy.columns_per_group;
    j["spare_columns"] = hw.redundancy.spare_columns;
    j["first_seed"] = hw.defect_seed;
    if (hw.core_area_mm2 > 0.0) j["core_area_mm2"] = hw.core_area_mm2;
    j["wafers"] = o.wafers;
    j["wall_s"] = wall_s;
    if (cost) {
      j["defect_free_tokens_per_s_per_user"] = cost->defect_free_tokens_per_s_per_user;
      j["runs_wall_s"] = runs_wall_s;
      // Which wafers ran: repaired ones, or (no spares) the first drawn.
      j["runs_on"] = hw.redundancy.enabled() ? "repaired" : "drawn";
    }
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < points.size(); ++i) {
      const YieldPoint& p = points[i];
      nlohmann::ordered_json row = {
          {"rate", p.rate},
          {"density_per_mm2", p.density_per_mm2 > 0.0 ? nlohmann::ordered_json(p.density_per_mm2)
                                                      : nlohmann::ordered_json()},
          {"repaired", p.repaired},
          {"yield", p.yield()},
          {"expected_yield", p.expected_yield},
          {"mean_dead_cores", p.mean_dead_cores},
          {"mean_failed_segments", p.mean_failed_segments}};
      if (cost) {
        const RepairedRuns& r = cost->rates[i];
        auto opt = [](const std::optional<double>& v) {
          return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
        };
        nlohmann::ordered_json runs = nlohmann::ordered_json::array();
        for (const RepairedRun& run : r.runs) {
          nlohmann::ordered_json x = {{"seed", run.seed}, {"exit_code", run.exit_code}};
          if (run.exit_code == 0) {
            x["decode_tokens_per_s_per_user"] = run.decode_tokens_per_s_per_user;
            x["dead_cores"] = run.dead_cores;
            x["repaired_links"] = run.repaired_links;
            x["repair_extra_hops"] = run.repair_extra_hops;
          } else {
            x["error"] = run.error;
          }
          runs.push_back(std::move(x));
        }
        row["runs"] = std::move(runs);
        row["tokens_per_s_per_user"] = {{"min", opt(r.min)},
                                        {"median", opt(r.median)},
                                        {"mean", opt(r.mean)},
                                        {"max", opt(r.max)}};
      }
      rows.push_back(std::move(row));
    }
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
  const bool densities = !o.densities.empty();
  fmt::print("{}{:>10}  {:>9}  {:>7}  {:>9}  {:>10}  {:>15}{}\n",
             densities ? fmt::format("{:>12}  ", "defects/mm2") : std::string(), "rate", "repaired",
             "yield", "expected", "dead/wafer", "failed segments",
             cost ? "  runs   tok/s/user median [min, max]   vs no defect" : "");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const YieldPoint& p = points[i];
    std::string speed;
    if (cost) {
      const RepairedRuns& r = cost->rates[i];
      int ok = 0;
      for (const RepairedRun& run : r.runs) ok += run.exit_code == 0 ? 1 : 0;
      const double base = cost->defect_free_tokens_per_s_per_user;
      speed = r.median ? fmt::format("  {:>4}   {:>9.1f} [{:.1f}, {:.1f}]   {:+.3f}%", ok,
                                     *r.median, *r.min, *r.max, 100.0 * (*r.median / base - 1.0))
                       : fmt::format("  {:>4}   -", ok);
    }
    const std::string expected = std::isnan(p.expected_yield)
                                     ? std::string("-")
                                     : fmt::format("{:.1f}%", 100.0 * p.expected_yield);
    const std::string density = !densities ? std::string()
                                : p.density_per_mm2 > 0.0
                                    ? fmt::format("{:>12g}  ", p.density_per_mm2)
                                    : fmt::format("{:>12}  ", "-");
    fmt::print("{}{:>10g}  {:>4}/{:<4}  {:>6.1f}%  {:>9}  {:>10.1f}  {:>15.2f}{}\n", density,
               p.rate, p.repaired, p.wafers, 100.0 * p.yield(), expected, p.mean_dead_cores,
               p.mean_failed_segments, speed);
  }
  fmt::print("({:.2f} s; expected: the closed form{})\n", wall_s,
             hw.defect_clustering > 0.0
                 ? fmt::format(" of clustered defects (shape {}, areas of {} x {} cores){}",
                               hw.defect_clustering, hw.defect_cluster_size, hw.defect_cluster_size,
                               hw.redundancy.enabled() ? ": none with spares" : "")
                 : std::string(" for independent defects"));
  if (cost && hw.redundancy.enabled())
    fmt::print(
        "(runs: the first {} repaired wafers of each rate simulated, timing only, in "
        "{:.1f} s; with no drawn defect {:.1f} tokens/s per user)\n",
        o.runs, runs_wall_s, cost->defect_free_tokens_per_s_per_user);
  if (cost && !hw.redundancy.enabled()) {
    fmt::print(
        "(no spares: runs are the first {} wafers drawn at each rate, each placed around its "
        "own dead cores, timing only, in {:.1f} s; with no drawn defect {:.1f} tokens/s per "
        "user)\n",
        o.runs, runs_wall_s, cost->defect_free_tokens_per_s_per_user);
    for (const RepairedRuns& r : cost->rates)
      for (const RepairedRun& run : r.runs)
        if (run.exit_code != 0) {
          fmt::print("(rate {:g}: first wafer that did not place, seed {}: {})\n", r.rate, run.seed,
                     run.error);
          break;
        }
  }
  return kExitSuccess;
}

}  // namespace

RegisteredCommand add_yield_command(CLI::App& app) {
  auto o = std::make_shared<YieldOptions>();
  CLI::App* cmd =
      app.add_subcommand("yield", "Fraction of wafers whose defects the spares repair, per rate");
  cmd->add_option("scenario", o->scenario, "Scenario YAML file (its hardware is used)")->required();
  cmd->add_option("--rates", o->rates, "Defect rates per physical core, e.g. 5e-5,1e-4,1e-3")
      ->delimiter(',');
  cmd->add_option("--densities", o->densities,
                  "Defect densities per mm^2 of silicon (x the hardware's core.area), e.g. "
                  "0.001,0.002; after the rates")
      ->delimiter(',');
  cmd->add_option("--wafers", o->wafers, "Wafers drawn per rate (seeds defects.seed + 0, 1, ...)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--runs", o->runs,
                  "Also simulate the scenario (timing only) on the first N repaired wafers of "
                  "each rate: what the repairs cost a token (default 0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-j,--threads", o->threads,
                  "Host threads, and runs at once (0: all the host has)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
  static constexpr std::array<std::string_view, 1> kNotOverridden = {"--wafers"};
  add_scenario_override_options(cmd, o->overrides, kNotOverridden);
  const CLI::App* root = &app;
  return {cmd, [o, root] { return run_yield(*o, *root); }, [o] { return o->scenario; }};
}

}  // namespace wafersim::sim
