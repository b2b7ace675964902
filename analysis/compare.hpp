// Comparing two runs: every headline figure side by side with its change,
// and which of them got worse by more than a threshold (placement regression).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/metrics.hpp"
#include "analysis/run_result.hpp"

namespace wafersim::analysis {

struct FigureChange {
  std::string name;  // e.g. "decode_tokens_per_s_per_user"
  std::string unit;  // e.g. "tokens/s"
  bool higher_is_better = true;
  double a = 0.0;
  double b = 0.0;
  // (b - a) / a in percent; 0 when both are 0, +/-inf when only a is 0.
  double change_percent() const;
  // How much worse b is than a, in percent (0 when b is as good or better).
  double worsening_percent() const;
};

struct Comparison {
  std::string a_label, b_label;
  std::vector<FigureChange> figures;
  // What makes the two runs measure different things: "hardware: A X, B Y"
  // for the hardware, model and precision that differ; empty when none does.
  std::vector<std::string> setup_differences;
  // Figures that got worse by more than `percent`.
  std::vector<const FigureChange*> regressions(double percent) const;
};

// Headline figures of a run, as compared (kComparedFigures in
// analysis/figures.hpp): tokens/s per user and aggregate, TTFT, inter-token
// latency, cycles per token, hop-bytes per token (bytes x hops over all mesh
// links, per token processed), busiest link bytes and load, SRAM headroom on
// the fullest core, cores used.
std::vector<FigureChange> headline_figures(const RunResult& r, const Metrics& m);

Comparison compare(const RunResult& a, const RunResult& b, std::string a_label,
                   std::string b_label);

// Throws ResultReadError when `path` is not an HDF5 file, saying what it
// looks like instead (JSON, YAML or other text, nothing), before the HDF5
// library is asked to open it.
void check_results_file(const std::filesystem::path& path);

void write_comparison(std::ostream& out, const Comparison& c, double fail_percent);
nlohmann::ordered_json comparison_json(const Comparison& c, double fail_percent);

}  // namespace wafersim::analysis
