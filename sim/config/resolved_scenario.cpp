// The resolved scenario: presets expanded, defaults filled, every section
// written by its schema table, as YAML that load_scenario() reads back to an
// equal Scenario.
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

using namespace yaml;

std::string emit_resolved(const Scenario& s) {
  std::string o;
  o += "# Fully resolved scenario written by wafersim: presets expanded, defaults filled.\n";
  o += "# Loading this file reproduces the run.\n";
  o += fmt::format("# Source: {} (hardware preset: {}, model preset: {})\n",
                   one_line(s.source_file), s.hardware_preset, s.model_preset);
  o += fmt::format("name: {}\n", yaml_string(s.name));
  o += "hardware:\n" + write_keys(hardware_keys(), s.hardware, "  ");
  o += "model:\n" + write_keys(model_keys(), s.model, "  ");
  o += fmt::format("precision: {}\n", models::dtype_name(s.precision));
  o += s.wafers_auto ? std::string("wafers: auto\n") : fmt::format("wafers: {}\n", s.wafers);
  o += "placement:\n" + write_keys(placement_keys(), s.placement, "  ");
  o += "workload:\n" + write_keys(workload_keys(), s.workload, "  ");
  o += "outputs:\n" + write_keys(outputs_keys(), s.outputs, "  ");
  write_comparison(o, s);
  return o;
}

}  // namespace wafersim::sim::schema
