#include "sim/studies/bench_sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/studies/host_measures.hpp"
#include "sim/studies/subprocess.hpp"
#include "sim/studies/sweep_mpi.hpp"

namespace wafersim::sim {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct Way {
  std::string name;
  std::vector<std::string> argv;
  double wall_s = 0.0;
  int exit_code = 0;
  std::string error;
  Json points;
};

// An executable on PATH, or nullopt.
std::optional<std::string> on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return std::nullopt;
}

void run(Way& w) {
  const auto t0 = HostClock::now();
  const ProcessOutput p = run_process(w.argv);
  w.wall_s = seconds_since(t0);
  w.exit_code = p.exit_code;
  if (p.exit_code != 0) {
    w.error = first_error_line(p.err);
    return;
  }
  try {
    w.points = Json::parse(p.out).at("points");
  } catch (const std::exception& e) {
    w.exit_code = 3;
    w.error = std::string("unreadable sweep JSON: ") + e.what();
  }
}

}  // namespace

int bench_sweep(const BenchSweepOptions& o) {
  const fs::path binary = fs::read_symlink("/proc/self/exe");
  const std::string scenario =
      o.scenario.empty() ? (o.preset_dir / "quickstart.yaml").string() : o.scenario;
  const int jobs = o.jobs > 0 ? o.jobs
                              : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  std::string users;
  for (int u = 1; u <= o.points; ++u) {
    if (u > 1) users += ',';
    users += std::to_string(u);
  }
  const std::vector<std::string> sweep = {binary.string(), "--presets", o.preset_dir.string(),
                                          "sweep",          scenario,    "--json",
                                          "--timing-only",  "--users",   users};
  auto with = [&](std::vector<std::string> prefix, std::vector<std::string> tail) {
    prefix.insert(prefix.end(), sweep.begin(), sweep.end());
    prefix.insert(prefix.end(), tail.begin(), tail.end());
    return prefix;
  };
  std::vector<Way> ways;
  auto way = [](std::string name, std::vector<std::string> argv) {
    Way w;
    w.name = std::move(name);
    w.argv = std::move(argv);
    return w;
  };
  ways.push_back(way("one point at a time (-j 1)", with({}, {"-j", "1"})));
  ways.push_back(way(fmt::format("{} points at once (-j {})", jobs, jobs),
                     with({}, {"-j", std::to_string(jobs)})));
  std::string mpi_note;
  const std::optional<std::string> mpiexec = on_path("mpiexec");
  if (!built_with_mpi()) {
    mpi_note = "this wafersim was built without MPI";
  } else if (!mpiexec) {
    mpi_note = "no mpiexec on PATH";
  } else {
    std::vector<std::string> launcher = {*mpiexec, "-n", std::to_string(jobs), "--oversubscribe",
                                         "--bind-to", "none"};
    if (::geteuid() == 0) launcher.push_back("--allow-run-as-root");
    ways.push_back(way(fmt::format("{} MPI ranks (mpiexec -n {}, -j 1)", jobs, jobs),
                       with(launcher, {"-j", "1"})));
  }
  for (Way& w : ways) run(w);

  const Way& first = ways.front();
  auto same = [&](const Way& w) { return w.exit_code == 0 && w.points == first.points; };
  if (o.json) {
    Json j = Json::object();
    j["scenario"] = scenario;
    j["points"] = o.points;
    j["host_cores"] = std::thread::hardware_concurrency();
    Json rows = Json::array();
    for (const Way& w : ways) {
      Json r = {{"way", w.name}, {"wall_s", w.wall_s}, {"exit_code", w.exit_code}};
      if (w.exit_code == 0) {
        r["speedup"] = first.wall_s / w.wall_s;
        r["every_point_identical"] = same(w);
      } else {
        r["error"] = w.error;
      }
      rows.push_back(std::move(r));
    }
    j["ways"] = std::move(rows);
    if (!mpi_note.empty()) j["mpi"] = mpi_note;
    std::cout << j.dump(2) << "\n";
  } else {
    fmt::print("sweep of {} points ({} --users 1..{}, timing only) on {} host cores\n", o.points,
               scenario, o.points, std::thread::hardware_concurrency());
    fmt::print("  {:<40} {:>9} {:>9}  {}\n", "way", "wall s", "speed-up", "every point, identical");
    for (const Way& w : ways) {
      if (w.exit_code != 0) {
        fmt::print("  {:<40} failed: {}\n", w.name, w.error);
        continue;
      }
      fmt::print("  {:<40} {:>9.2f} {:>8.2f}x  {}\n", w.name, w.wall_s, first.wall_s / w.wall_s,
                 same(w) ? "yes" : "NO");
    }
    if (!mpi_note.empty()) fmt::print("  (no MPI row: {})\n", mpi_note);
  }
  for (const Way& w : ways)
    if (!same(w)) return 3;
  return 0;
}

}  // namespace wafersim::sim
