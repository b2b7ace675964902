#include "sim/studies/regression.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

// Keys that describe where a run was made, not what it computed.
bool volatile_key(const std::string& key) {
  return key == "scenario_file";
}

Json run_case(const fs::path& binary, const fs::path& scenario) {
  const ProcessOutput p = run_process({binary.string(), "run", scenario.string(), "--json"});
  if (p.exit_code != 0)
    throw std::runtime_error(
        fmt::format("{}: the run failed (exit {})", scenario.string(), p.exit_code));
  Json j = Json::parse(p.out);
  for (auto it = j.begin(); it != j.end();)
    it = volatile_key(it.key()) ? j.erase(it) : std::next(it);
  return j;
}

void diff(const Json& want, const Json& got, const std::string& path, double tol,
          std::vector<std::string>& out) {
  if (want.is_number() && got.is_number() &&
      !(want.is_number_integer() && got.is_number_integer())) {
    const double a = want.get<double>(), b = got.get<double>();
    if (a == b || std::fabs(a - b) <= tol * std::max(std::fabs(a), std::fabs(b))) return;
  } else if (want.is_object() && got.is_object()) {
    for (auto it = want.begin(); it != want.end(); ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      if (!got.contains(it.key()))
        out.push_back(p + ": missing");
      else
        diff(*it, got.at(it.key()), p, tol, out);
    }
    for (auto it = got.begin(); it != got.end(); ++it)
      if (!want.contains(it.key()))
        out.push_back((path.empty() ? "" : path + ".") + it.key() + ": new key");
    return;
  } else if (want.is_array() && got.is_array() && want.size() == got.size()) {
    for (std::size_t i = 0; i < want.size(); ++i)
      diff(want[i], got[i], fmt::format("{}[{}]", path, i), tol, out);
    return;
  } else if (want == got) {
    return;
  }
  std::string w = want.dump(), g = got.dump();
  if (w.size() > 80) w = w.substr(0, 77) + "...";
  if (g.size() > 80) g = g.substr(0, 77) + "...";
  out.push_back(fmt::format("{}: expected {}, got {}", path, w, g));
}

}  // namespace

std::vector<RegressionCase> run_regression(const fs::path& folder, const RegressionOptions& options,
                                           const std::function<void(const std::string&)>& on_case) {
  if (!fs::is_directory(folder))
    throw std::runtime_error(folder.string() + ": not a folder of scenarios");
  std::vector<fs::path> scenarios;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_regular_file() && e.path().extension() == ".yaml") scenarios.push_back(e.path());
  std::sort(scenarios.begin(), scenarios.end());
  if (scenarios.empty()) throw std::runtime_error(folder.string() + ": no *.yaml scenarios");
  const fs::path expected_dir = folder / "expected";
  std::vector<RegressionCase> cases;
  for (const fs::path& s : scenarios) {
    if (on_case) on_case(s.filename().string());
    RegressionCase c;
    c.scenario = s.filename().string();
    const Json got = run_case(options.binary, s);
    const fs::path expected = expected_dir / (s.stem().string() + ".json");
    if (options.accept) {
      fs::create_directories(expected_dir);
      write_text_atomically(expected, got.dump(2) + "\n");
      c.recorded = c.passed = true;
    } else {
      std::ifstream f(expected);
      if (f)
        diff(Json::parse(f), got, "", options.relative_tolerance, c.diffs);
      else  // a new case: it fails until its baseline is recorded on purpose
        c.diffs.push_back(expected.string() + ": no recorded result (a new case?)");
      c.passed = c.diffs.empty();
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace wafersim::sim
