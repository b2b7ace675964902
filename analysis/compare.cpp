#include "analysis/compare.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <ostream>

#include <fmt/format.h>

#include "analysis/figures.hpp"
#include "analysis/hdf5_output.hpp"

namespace wafersim::analysis {

double FigureChange::change_percent() const {
  if (a == b) return 0.0;
  if (a == 0.0)
    return b > 0 ? std::numeric_limits<double>::infinity()
                 : -std::numeric_limits<double>::infinity();
  return (b - a) / std::fabs(a) * 100.0;
}

double FigureChange::worsening_percent() const {
  const double change = change_percent();
  const double worse = higher_is_better ? -change : change;
  return worse > 0 ? worse : 0.0;
}

std::vector<const FigureChange*> Comparison::regressions(double percent) const {
  std::vector<const FigureChange*> out;
  for (const FigureChange& f : figures)
    if (f.worsening_percent() > percent) out.push_back(&f);
  return out;
}

std::vector<FigureChange> headline_figures(const RunResult& r, const Metrics& m) {
  std::vector<FigureChange> out;
  for (const Figure* f : kComparedFigures) {
    FigureChange c;
    c.name = f->name;
    c.unit = f->compared_unit();
    c.higher_is_better = f->higher_is_better;
    c.a = as_double(f->value(r, m));
    out.push_back(std::move(c));
  }
  return out;
}

Comparison compare(const RunResult& a, const RunResult& b, std::string a_label,
                   std::string b_label) {
  Comparison c;
  c.a_label = std::move(a_label);
  c.b_label = std::move(b_label);
  c.figures = headline_figures(a, compute_metrics(a));
  const std::vector<FigureChange> fb = headline_figures(b, compute_metrics(b));
  for (std::size_t i = 0; i < c.figures.size(); ++i) c.figures[i].b = fb[i].a;
  const auto differ = [&c](const char* what, const std::string& x, const std::string& y) {
    if (x != y) c.setup_differences.push_back(fmt::format("{}: A {}, B {}", what, x, y));
  };
  differ("hardware", a.hardware_name, b.hardware_name);
  differ("model", a.model_name, b.model_name);
  differ("precision", a.precision, b.precision);
  return c;
}

void check_results_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ResultReadError(path, std::filesystem::exists(path, ec)
                                    ? "not a file (a wafersim results file, HDF5, expected)"
                                    : "no such file");
  const auto size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  // HDF5's signature, at 0 or (after a user block) at 512, 1024, 2048, ...
  static constexpr std::array<char, 8> kSignature = {'\x89', 'H',  'D',    'F',
                                                     '\r',   '\n', '\x1a', '\n'};
  for (std::uintmax_t at = 0; at + 8 <= size; at = at == 0 ? 512 : at * 2) {
    std::array<char, 8> head{};
    in.seekg(static_cast<std::streamoff>(at));
    if (!in.read(head.data(), head.size())) break;
    if (head == kSignature) return;
  }
  std::string start(256, '\0');
  in.clear();
  in.seekg(0);
  in.read(start.data(), static_cast<std::streamsize>(start.size()));
  start.resize(static_cast<std::size_t>(in.gcount()));
  std::size_t i = 0;
  while (i < start.size() && std::isspace(static_cast<unsigned char>(start[i]))) ++i;
  std::string looks;
  if (size == 0 || i == start.size())
    looks = "it is empty";
  else if (start[i] == '{' || start[i] == '[')
    looks = "it looks like JSON, e.g. the output of run --json; write the results file with "
            "wafersim run SCENARIO --out FILE.h5";
  else if (std::all_of(start.begin(), start.end(), [](char ch) {
             return std::isprint(static_cast<unsigned char>(ch)) ||
                    std::isspace(static_cast<unsigned char>(ch));
           }))
    looks = "it looks like text, e.g. a scenario or CSV; write the results file with "
            "wafersim run SCENARIO --out FILE.h5";
  else
    looks = "it is not HDF5";
  throw ResultReadError(path,
                        fmt::format("not a wafersim results file (HDF5 expected; {})", looks));
}

void write_comparison(std::ostream& out, const Comparison& c, double fail_percent) {
  out << fmt::format("A: {}\nB: {}\n", c.a_label, c.b_label);
  for (const std::string& d : c.setup_differences)
    out << fmt::format("WARNING: different setups, {}: the figures measure different things\n", d);
  out << "\n";
  out << fmt::format("{:<30} {:>7} {:>16} {:>16} {:>10}  {}\n", "figure", "better", "A", "B",
                     "change", "B vs A");
  for (const FigureChange& f : c.figures) {
    const double change = f.change_percent();
    const double worse = f.worsening_percent();
    const char* verdict = change == 0.0 ? "" : worse > 0 ? "worse" : "better";
    out << fmt::format("{:<30} {:>7} {:>16.6g} {:>16.6g} {:>+9.2f}%  {}{}\n", f.name,
                       f.higher_is_better ? "higher" : "lower", f.a, f.b, change,
                       verdict, fail_percent >= 0 && worse > fail_percent ? "  REGRESSION" : "");
  }
  if (fail_percent >= 0) {
    const auto bad = c.regressions(fail_percent);
    out << fmt::format("\n{} figure(s) worse by more than {}%\n", bad.size(), fail_percent);
  }
}

nlohmann::ordered_json comparison_json(const Comparison& c, double fail_percent) {
  nlohmann::ordered_json j;
  j["a"] = c.a_label;
  j["b"] = c.b_label;
  j["setup_differences"] = c.setup_differences;
  j["figures"] = nlohmann::ordered_json::array();
  for (const FigureChange& f : c.figures) {
    const double change = f.change_percent();
    j["figures"].push_back(
        {{"name", f.name},
         {"unit", f.unit},
         {"higher_is_better", f.higher_is_better},
         {"a", f.a},
         {"b", f.b},
         {"change_percent", std::isfinite(change) ? nlohmann::ordered_json(change) : nullptr},
         {"worse", f.worsening_percent() > 0}});
  }
  if (fail_percent >= 0) {
    j["fail_on_regression_percent"] = fail_percent;
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    for (const FigureChange* f : c.regressions(fail_percent)) names.push_back(f->name);
    j["regressions"] = names;
  }
  return j;
}

}  // namespace wafersim::analysis
