#include "sim/studies/regression.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/figures.hpp"
#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

// Keys that describe where a run was made, not what it computed.
bool volatile_key(const std::string& key) {
  return key == "scenario_file";
}

Json run_case(const fs::path& binary, const std::string& presets, const fs::path& scenario) {
  std::vector<std::string> args = {binary.string()};
  if (!presets.empty()) args.insert(args.end(), {"--presets", presets});
  args.insert(args.end(), {"run", scenario.string(), "--json"});
  const ProcessOutput p = run_process(args);
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

std::string shown_number(double v) {
  return fmt::format("{:.6g}", v);
}

}  // namespace

std::vector<std::string> summarise_changes(const Json& want, const Json& got,
                                           const std::vector<std::string>& diffs) {
  std::vector<std::string> out;
  if (diffs.empty()) return out;
  if (!want.is_object() || !got.is_object()) return {diffs.front()};
  // A different machine or model: the figures measure something else.
  for (const char* key : {"hardware", "model", "precision"}) {
    if (want.contains(key) && got.contains(key) && want.at(key) != got.at(key))
      out.push_back(fmt::format("{} was {}, is {}: a different setup, figures not compared", key,
                                want.at(key).dump(), got.at(key).dump()));
  }
  if (!out.empty()) return out;
  std::size_t explained = 0;
  for (const analysis::Figure* f : analysis::kComparedFigures) {
    const std::string name(f->name);
    if (!want.contains(name) || !got.contains(name)) continue;
    const Json& a = want.at(name);
    const Json& b = got.at(name);
    if (a == b || !a.is_number() || !b.is_number()) continue;
    ++explained;
    const double x = a.get<double>(), y = b.get<double>();
    const bool better = f->higher_is_better ? y > x : y < x;
    const std::string change =
        x == 0.0 ? std::string("from 0") : fmt::format("{:+.2f}%", (y - x) / std::fabs(x) * 100.0);
    out.push_back(fmt::format("{}: {} -> {} {} ({}, {}; {} is better)", name, shown_number(x),
                              shown_number(y), f->compared_unit(), change,
                              better ? "better" : "worse",
                              f->higher_is_better ? "higher" : "lower"));
  }
  for (const char* key : {"tokens", "reference_tokens"}) {
    if (want.contains(key) && got.contains(key) && want.at(key) != got.at(key)) {
      ++explained;
      out.push_back(fmt::format("{}: different token ids", key));
    }
  }
  if (diffs.size() > explained) {
    out.push_back(fmt::format(
        "{} value{} differ{} in all (wafersim regress --verbose lists them); first: {}",
        diffs.size(), diffs.size() == 1 ? "" : "s", diffs.size() == 1 ? "s" : "", diffs.front()));
  }
  return out;
}

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
    const Json got = run_case(options.binary, options.presets, s);
    const fs::path expected = expected_dir / (s.stem().string() + ".json");
    c.expected_file = expected;
    if (options.accept) {
      fs::create_directories(expected_dir);
      write_text_atomically(expected, got.dump(2) + "\n");
      c.recorded = c.passed = true;
    } else {
      std::ifstream f(expected);
      if (f) {
        const Json want = Json::parse(f);
        diff(want, got, "", options.relative_tolerance, c.diffs);
        c.summary = summarise_changes(want, got, c.diffs);
      } else {  // a new case: it fails until its baseline is recorded on purpose
        c.diffs.push_back(expected.string() + ": no recorded result (a new case?)");
        c.summary = c.diffs;
      }
      c.passed = c.diffs.empty();
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace wafersim::sim
