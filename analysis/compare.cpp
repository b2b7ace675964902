#include "analysis/compare.hpp"

#include <cmath>
#include <limits>
#include <ostream>

#include <fmt/format.h>

#include "analysis/figures.hpp"

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
  return c;
}

void write_comparison(std::ostream& out, const Comparison& c, double fail_percent) {
  out << fmt::format("A: {}\nB: {}\n\n", c.a_label, c.b_label);
  out << fmt::format("{:<30} {:>16} {:>16} {:>10}  {}\n", "figure", "A", "B", "change", "");
  for (const FigureChange& f : c.figures) {
    const double change = f.change_percent();
    const double worse = f.worsening_percent();
    const char* verdict = change == 0.0 ? "" : worse > 0 ? "worse" : "better";
    out << fmt::format("{:<30} {:>16.6g} {:>16.6g} {:>+9.2f}%  {}{}\n", f.name, f.a, f.b, change,
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
