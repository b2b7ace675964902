// The keys of the scenario schema, as the schema tables declare them
// (sim/config/schema_table.hpp): what docs/scenario-schema.md documents, and
// what a test compares it with.
#pragma once

#include <string>
#include <vector>

namespace wafersim::sim {

// Whether a key must be given in a complete description (a preset file, an
// inline one, a scenario section); over a preset every key is optional.
enum class Need { required, optional };

struct KeyDoc {
  std::string section;  // "scenario", "hardware", "model", "gpu", "placement", "workload", ...
  std::string key;      // as the docs write it: "core.clock" inside its section
  Need need = Need::optional;
  std::string value;        // kind, example, valid range
  std::string description;  // what it means
};

// Every key of every section, in table order.
std::vector<KeyDoc> scenario_schema();

}  // namespace wafersim::sim
