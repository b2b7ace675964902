// The schema tables (sim/config/schema.hpp) and docs/scenario-schema.md list
// the same keys: every key a table declares is documented, and every key the
// document's key tables list is one the loader reads.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "sim/config/schema.hpp"

namespace wafersim::sim {
namespace {

std::string schema_doc() {
  std::ifstream in(std::string(WAFERSIM_SOURCE_DIR) + "/docs/scenario-schema.md");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

// The names in backtick spans of `text`: `mesh.width`, and each of
// `{round_trip, per_token_overhead}`.
std::set<std::string> backticked_names(const std::string& text) {
  std::set<std::string> out;
  std::size_t open = text.find('`');
  while (open != std::string::npos) {
    const std::size_t close = text.find('`', open + 1);
    if (close == std::string::npos) break;
    std::string name;
    for (std::size_t i = open + 1; i <= close; ++i) {
      if (i < close && name_char(text[i])) {
        name += text[i];
      } else if (!name.empty()) {
        out.insert(name);
        name.clear();
      }
    }
    open = text.find('`', close + 1);
  }
  return out;
}

// The sections whose keys the document lists in a table (first column), by
// the heading the table is under.
const std::map<std::string, std::string>& table_sections() {
  static const std::map<std::string, std::string> kSections = {
      {"## Top level", "scenario"}, {"## Hardware", "hardware"}, {"## Model", "model"},
      {"## Workload", "workload"},  {"## GPU baselines", "gpu"}, {"## Traffic", "traffic"}};
  return kSections;
}

// Section -> the names in the first column of its table.
std::map<std::string, std::set<std::string>> documented_tables(const std::string& doc) {
  std::map<std::string, std::set<std::string>> out;
  std::istringstream lines(doc);
  std::string line;
  std::string section;
  while (std::getline(lines, line)) {
    if (line.starts_with("## ")) {
      const auto it = table_sections().find(line);
      section = it == table_sections().end() ? "" : it->second;
      continue;
    }
    if (section.empty() || !line.starts_with("| `")) continue;
    const std::string first_cell = line.substr(1, line.find('|', 1) - 1);
    for (const std::string& name : backticked_names(first_cell)) out[section].insert(name);
  }
  return out;
}

TEST(SchemaDocs, EveryKeyOfTheSchemaIsDocumented) {
  const std::string doc = schema_doc();
  ASSERT_FALSE(doc.empty());
  const std::set<std::string> names = backticked_names(doc);
  const auto tables = documented_tables(doc);
  for (const KeyDoc& k : scenario_schema()) {
    if (tables.count(k.section) != 0) {
      EXPECT_EQ(tables.at(k.section).count(k.key), 1u)
          << k.section << " key " << k.key << " is missing from its table in the docs";
    } else {
      const std::string leaf = k.key.substr(k.key.rfind('.') + 1);
      EXPECT_EQ(names.count(leaf), 1u) << k.section << " key " << k.key << " is not documented";
    }
    EXPECT_FALSE(k.value.empty()) << k.key;
    EXPECT_FALSE(k.description.empty()) << k.key;
  }
}

TEST(SchemaDocs, EveryDocumentedKeyIsInTheSchema) {
  std::map<std::string, std::set<std::string>> schema;
  for (const KeyDoc& k : scenario_schema()) schema[k.section].insert(k.key);
  const auto tables = documented_tables(schema_doc());
  ASSERT_EQ(tables.size(), table_sections().size());
  for (const auto& [section, keys] : tables) {
    for (const std::string& key : keys) {
      EXPECT_EQ(schema[section].count(key), 1u)
          << "docs list " << section << " key " << key << " that the schema does not have";
    }
  }
}

}  // namespace
}  // namespace wafersim::sim
