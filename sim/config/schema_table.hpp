// The scenario schema as tables: each config key is declared once, as a row
// that says what its value is (for the docs), how it is read into the config
// struct and how the resolved scenario writes it. The rows drive reading, the
// list of keys a mapping accepts (so unknown keys are errors with a
// did-you-mean), the resolved-scenario emitter and the documented key list
// (schema.hpp, checked against docs/scenario-schema.md by a test).
//
// A dotted name ("core.clock") is a key of a nested mapping; the rows of one
// nested mapping follow each other in the table. Private to sim/config.
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_config.hpp"
#include "sim/config/schema.hpp"
#include "sim/config/strict_yaml.hpp"

namespace wafersim::sim::schema {

using yaml::Loc;
using yaml::Mapping;
using yaml::Value;

// Where each hardware/model field was last set (preset file or override), so
// that validate() errors point at the line that set the value.
class Provenance {
 public:
  void note(const Value& v) { where_[v.path] = v.key_loc(); }

  // The location of `path`, or of its closest parent that was set.
  std::optional<Loc> find(std::string path) const;

 private:
  std::map<std::string, Loc> where_;
};

// What a key's reader may need besides its value.
struct ReadContext {
  std::filesystem::path preset_dir;
  const models::ModelConfig* model = nullptr;  // the scenario's model (workload, draft)
  const Mapping* mapping = nullptr;            // the mapping the key is in (set while reading it)
  std::string checkpoint;  // the scenario's checkpoint folder, "" = none (workload's tokenizer)
};

// One key of a section.
template <class Config>
struct Key {
  std::string_view name;         // "clock"; "core.clock" in a nested mapping
  Need need;                     // required in a complete description (preset file, inline)
  std::string_view value;        // for the docs: kind, example, valid range
  std::string_view description;  // for the docs
  void (*read)(const Value&, Config&, const ReadContext&);
  // The value as the resolved scenario writes it (nullptr: not written). A
  // value that starts with a line break is a block under its key.
  std::string (*write)(const Config&) = nullptr;
  bool (*written)(const Config&) = nullptr;  // written only when this holds (nullptr: always)
  // Reading order where it differs from the table's: keys are read by rank,
  // then in table order (the table's order is that of the key list in
  // messages and of the resolved scenario; the scenario's top level is
  // written in reading order, see emit_resolved).
  int rank = 0;
  bool flow = false;  // its nested mapping is written in flow style: {a: 1, b: 2}
  // Called instead of `read` when the key is absent and not required (nullptr:
  // the config's own default stands), for a default that needs the context.
  void (*absent)(Config&, const ReadContext&) = nullptr;
};

namespace detail {

inline std::string_view head(std::string_view name) {
  return name.substr(0, name.find('.'));
}
inline std::string_view leaf(std::string_view name) {
  const auto dot = name.find('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
}

}  // namespace detail

// The keys a section's mapping takes, in table order: each plain key and each
// nested mapping once.
template <class Config>
std::vector<std::string> top_keys(std::span<const Key<Config>> keys) {
  std::vector<std::string> out;
  for (const Key<Config>& k : keys) {
    const std::string h(detail::head(k.name));
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  }
  return out;
}

// The keys of the nested mapping `group`.
template <class Config>
std::vector<std::string> group_keys(std::span<const Key<Config>> keys, std::string_view group) {
  std::vector<std::string> out;
  for (const Key<Config>& k : keys) {
    if (detail::head(k.name) == group && !detail::leaf(k.name).empty())
      out.emplace_back(detail::leaf(k.name));
  }
  return out;
}

// The indices of `keys` in reading order: by rank, then in table order.
template <class Config>
std::vector<std::size_t> reading_order(std::span<const Key<Config>> keys) {
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return keys[a].rank < keys[b].rank; });
  return order;
}

// Reads the keys of `keys` present in `m` into `config`. With `complete` (a
// preset file, an inline description, a scenario section) a missing required
// key is an error; without it (overrides on top of a preset) only the keys
// given are read. Every key read is noted in `prov`; an absent key's `absent`
// default, if it has one, is applied.
template <class Config>
void read_keys(const Mapping& m, bool complete, std::span<const Key<Config>> keys, Config& config,
               Provenance& prov, const ReadContext& ctx) {
  const std::vector<std::size_t> order = reading_order(keys);
  auto required = [&](std::string_view group) {
    return std::any_of(keys.begin(), keys.end(), [&](const Key<Config>& k) {
      return detail::head(k.name) == group && !detail::leaf(k.name).empty() &&
             k.need == Need::required;
    });
  };
  auto read_one = [&](const Mapping& in, const std::string& name, const Key<Config>& k) {
    const Value* v = in.find(name);
    if (v == nullptr && complete && k.need == Need::required) in.require(name);
    if (v == nullptr && k.absent == nullptr) return;
    ReadContext here = ctx;
    here.mapping = &in;
    if (v == nullptr) {
      k.absent(config, here);
      return;
    }
    prov.note(*v);
    k.read(*v, config, here);
  };
  std::string group;             // the nested mapping being read
  std::optional<Mapping> inner;  // empty when that mapping is absent
  for (const std::size_t i : order) {
    const Key<Config>& k = keys[i];
    const std::string h(detail::head(k.name));
    const std::string l(detail::leaf(k.name));
    if (l.empty()) {
      group.clear();
      read_one(m, h, k);
      continue;
    }
    if (h != group) {  // the first key of a nested mapping: the mapping itself
      group = h;
      inner.reset();
      const Value* v = m.find(h);
      if (v == nullptr) {
        if (complete && required(h)) m.require(h);
        continue;
      }
      prov.note(*v);
      inner.emplace(*v, group_keys(keys, h));
    }
    if (inner) read_one(*inner, l, k);
  }
}

// The keys of `config` as block YAML, each line prefixed by `pad`.
template <class Config>
std::string write_keys(std::span<const Key<Config>> keys, const Config& config,
                       const std::string& pad) {
  std::string o;
  auto shown = [&](const Key<Config>& k) {
    return k.write != nullptr && (k.written == nullptr || k.written(config));
  };
  for (std::size_t i = 0; i < keys.size();) {
    const Key<Config>& k = keys[i];
    const std::string_view h = detail::head(k.name);
    if (detail::leaf(k.name).empty()) {
      if (shown(k)) {
        const std::string value = k.write(config);
        o += fmt::format("{}{}:{}{}\n", pad, h, value.starts_with('\n') ? "" : " ", value);
      }
      ++i;
      continue;
    }
    std::vector<std::string> lines;
    std::size_t j = i;
    for (;
         j < keys.size() && detail::head(keys[j].name) == h && !detail::leaf(keys[j].name).empty();
         ++j) {
      if (shown(keys[j]))
        lines.push_back(fmt::format("{}: {}", detail::leaf(keys[j].name), keys[j].write(config)));
    }
    if (!lines.empty()) {
      if (k.flow) {
        o += fmt::format("{}{}: {{{}}}\n", pad, h, yaml::join_list(lines));
      } else {
        o += fmt::format("{}{}:\n", pad, h);
        for (const std::string& line : lines) o += fmt::format("{}  {}\n", pad, line);
      }
    }
    i = j;
  }
  return o;
}

// A block (lines written by write_keys) as a Key::write value: a line break
// first, the last one left to the writer.
inline std::string block(const std::string& lines) {
  std::string out(1, '\n');
  out.append(lines, 0, lines.empty() ? 0 : lines.size() - 1);
  return out;
}

// The table's keys for the docs, under `section`.
template <class Config>
void document_keys(std::vector<KeyDoc>& out, std::string_view section,
                   std::span<const Key<Config>> keys) {
  for (const Key<Config>& k : keys) {
    out.push_back(KeyDoc{std::string(section), std::string(k.name), k.need, std::string(k.value),
                         std::string(k.description)});
  }
}

}  // namespace wafersim::sim::schema
