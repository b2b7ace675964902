#include "analysis/compare.hpp"

#include <cmath>
#include <limits>
#include <ostream>

#include <fmt/format.h>

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
  const double tokens = r.token_records.empty() ? 1.0 : static_cast<double>(r.token_records.size());
  const double headroom = static_cast<double>(m.sram_bytes_per_core_capacity) -
                          static_cast<double>(m.max_core_sram_bytes);
  const BusiestLink link = m.busiest_link.value_or(BusiestLink{});
  auto f = [](std::string name, std::string unit, bool higher, double v) {
    FigureChange c;
    c.name = std::move(name);
    c.unit = std::move(unit);
    c.higher_is_better = higher;
    c.a = v;
    return c;
  };
  return {
      f("decode_tokens_per_s_per_user", "tokens/s", true, m.decode_tokens_per_s_per_user),
      f("aggregate_tokens_per_s", "tokens/s", true, m.aggregate_tokens_per_s),
      f("ttft_s", "s", false, m.ttft_s),
      f("inter_token_latency_s", "s", false, m.inter_token_latency_s),
      f("cycles_per_token", "cycles", false, static_cast<double>(m.cycles_per_token)),
      f("hop_bytes_per_token", "bytes", false, static_cast<double>(m.total_link_bytes) / tokens),
      f("busiest_link_bytes", "bytes", false, static_cast<double>(link.bytes)),
      f("busiest_link_load", "fraction", false, link.load),
      f("sram_headroom_bytes", "bytes", true, headroom),
      f("cores_used", "cores", false, static_cast<double>(r.cores_used)),
  };
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
