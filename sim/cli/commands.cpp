// What the commands share: the --presets flag, the scenario overrides, the
// progress reports and the messages for a mistyped command line.
#include "sim/cli/commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/cli/progress.hpp"
#include "sim/config/scenario.hpp"
#include "sim/config/strict_yaml.hpp"
#include "sim/placement/request.hpp"

namespace wafersim::sim {

std::string presets_flag(const CLI::App& app) {
  const CLI::Option* presets = app.get_option_no_throw("--presets");
  return presets && presets->count() > 0 ? presets->as<std::string>() : "";
}

std::filesystem::path preset_dir(const CLI::App& app) {
  const std::string flag = presets_flag(app);
  return flag.empty() ? default_preset_dir() : std::filesystem::path(flag);
}

void show_progress_bar(const std::string& what, long long done, long long total,
                       const std::string& unit, std::string_view shown) {
  if (total <= 0) return;
  static std::mutex mutex;
  static std::map<std::string, ProgressReporter> reporters;  // by WHAT
  static std::size_t drawn = 0;  // the width of the bar on the terminal now
  static const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = reporters.find(what);
  if (it == reporters.end())
    it = reporters.emplace(what, ProgressReporter(what, unit, terminal)).first;
  const std::optional<std::string> text =
      it->second.update(done, total, ProgressReporter::Clock::now(), shown);
  if (text && terminal) {
    std::fprintf(stderr, "\r%-*s", static_cast<int>(drawn), text->c_str());
    drawn = std::max(drawn, text->size());
    if (done >= total) {
      std::fprintf(stderr, "\r%*s\r", static_cast<int>(drawn), "");
      drawn = 0;
    }
  } else if (text) {
    std::fprintf(stderr, "%s\n", text->c_str());
  }
  if (done >= total) reporters.erase(it);
  std::fflush(stderr);
}

std::vector<std::pair<std::string, std::string>> parse_set_options(
    const std::vector<std::string>& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& kv : options) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CommandError(kExitUsage,
                         "--set takes KEY=VALUE (e.g. workload.users=8), got '" + kv + "'");
    out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

ScenarioOverrides ScenarioOverrideOptions::resolve() const {
  ScenarioOverrides o = named;
  if (!strategy.empty()) o.set.emplace_back("placement.strategy", strategy);
  if (!reduction.empty()) o.set.emplace_back("placement.reduction", reduction);
  for (auto& kv : parse_set_options(set)) o.set.push_back(std::move(kv));
  return o;
}

std::vector<std::pair<std::string, std::string>> ScenarioOverrideOptions::as_sets() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (named.hardware) out.emplace_back("hardware", *named.hardware);
  if (named.model) out.emplace_back("model", *named.model);
  if (named.precision) out.emplace_back("precision", *named.precision);
  if (named.wafers) out.emplace_back("wafers", *named.wafers);
  if (named.users) out.emplace_back("workload.users", std::to_string(*named.users));
  if (named.layer_groups) out.emplace_back("placement.layer_groups", *named.layer_groups);
  if (named.placement_file)
    out.emplace_back("placement.file",
                     std::filesystem::absolute(*named.placement_file).lexically_normal().string());
  const ScenarioOverrides rest = resolve();  // --strategy, --reduction, then the --set ones
  out.insert(out.end(), rest.set.begin(), rest.set.end());
  return out;
}

void add_layer_replay_option(CLI::App* command, std::string& mode) {
  command
      ->add_option("--layer-replay", mode,
                   "Layers that repeat the one just simulated, shifted in time (one message's, "
                   "or with several in flight the whole pipeline's), are replayed instead of "
                   "simulated (exact: the same results): auto, where it saves host time (the "
                   "pipeline's: wherever it repeats); always, wherever it can; off, every "
                   "layer simulated")
      ->check(CLI::IsMember({"auto", "always", "off"}))
      ->default_str("auto");
}

LayerReplayMode layer_replay_mode(const std::string& mode) {
  return mode == "off"      ? LayerReplayMode::off
         : mode == "always" ? LayerReplayMode::always
                            : LayerReplayMode::when_it_pays;
}

void add_scenario_override_options(CLI::App* command, ScenarioOverrideOptions& o,
                                   std::span<const std::string_view> skip) {
  auto wanted = [&](std::string_view name) {
    return std::find(skip.begin(), skip.end(), name) == skip.end();
  };
  if (wanted("--hardware"))
    command->add_option("--hardware", o.named.hardware, "Override the scenario's hardware preset");
  if (wanted("--model"))
    command->add_option("--model", o.named.model, "Override the scenario's model preset");
  if (wanted("--precision"))
    command->add_option("--precision", o.named.precision,
                        "Override the precision (fp32, fp16, bf16, ...)");
  if (wanted("--wafers"))
    command->add_option("--wafers", o.named.wafers,
                        "Wafers in the pipeline: N or auto (the fewest that fit)");
  if (wanted("--users"))
    command->add_option("--users", o.named.users, "Sequences decoded at once (workload.users)");
  if (wanted("--layer-groups"))
    command->add_option("--layer-groups", o.named.layer_groups,
                        "whole-region: groups of layers, each sharing one region: N, or auto "
                        "(the count whose simulated layer is best for the workload) "
                        "(placement.layer_groups)");
  if (wanted("--strategy"))
    command->add_option("--strategy", o.strategy,
                        fmt::format("Override the placement strategy (placement.strategy: {})",
                                    fmt::join(placement_strategies(), ", ")));
  if (wanted("--reduction"))
    command->add_option("--reduction", o.reduction,
                        "How partial sums are reduced along a line: chain, tree, two-level, "
                        "k-tree, ring, or auto (whole-region: the scheme whose simulated layer "
                        "is best for the workload) (placement.reduction)");
  if (wanted("--placement"))
    command->add_option(
        "--placement", o.named.placement_file,
        "Use this placement file (wafersim place --write-placement) instead of the strategy");
  if (wanted("--set"))
    command
        ->add_option("--set", o.set,
                     "KEY=VALUE: set any scenario key by its dotted path, the value as YAML "
                     "(e.g. workload.cached_tokens=2048; KEY=null removes the key); repeatable")
        ->type_name("KEY=VALUE");
}

namespace {

// The command-line options that override a scenario, each with the key it
// sets and how the user wrote it.
struct GivenOverride {
  std::string key;    // e.g. "workload.users"
  std::string shown;  // e.g. "--users 0" or "--set workload.users=abc"
};

std::vector<GivenOverride> given_overrides(const ScenarioOverrideOptions& o) {
  std::vector<GivenOverride> out;
  const ScenarioOverrides& n = o.named;
  if (n.hardware) out.push_back({"hardware", "--hardware " + *n.hardware});
  if (n.model) out.push_back({"model", "--model " + *n.model});
  if (n.precision) out.push_back({"precision", "--precision " + *n.precision});
  if (n.wafers) out.push_back({"wafers", "--wafers " + *n.wafers});
  if (n.users) out.push_back({"workload.users", fmt::format("--users {}", *n.users)});
  if (n.layer_groups)
    out.push_back({"placement.layer_groups", "--layer-groups " + *n.layer_groups});
  if (n.placement_file) out.push_back({"placement.file", "--placement " + *n.placement_file});
  if (!o.strategy.empty()) out.push_back({"placement.strategy", "--strategy " + o.strategy});
  if (!o.reduction.empty()) out.push_back({"placement.reduction", "--reduction " + o.reduction});
  for (const std::string& kv : o.set) {
    const std::size_t eq = kv.find('=');
    out.push_back({kv.substr(0, eq), "--set " + kv});
  }
  return out;
}

bool within(const std::string& key_path, const std::string& key) {
  return key_path == key ||
         (key_path.size() > key.size() && key_path.compare(0, key.size(), key) == 0 &&
          (key_path[key.size()] == '.' || key_path[key.size()] == '['));
}

}  // namespace

Scenario load_scenario_with(const std::string& file, const std::filesystem::path& presets,
                            const ScenarioOverrideOptions& options) {
  const ScenarioOverrides overrides = options.resolve();
  try {
    return load_scenario(file, presets, overrides);
  } catch (const ScenarioError& e) {
    // An override's value is parsed on its own, so its errors point at line
    // 1 (or nowhere) of the scenario file: name the option instead. The last
    // option that set the key is the one that counts.
    if (e.file() != file || e.line() > 1) throw;
    const std::vector<GivenOverride> given = given_overrides(options);
    for (auto it = given.rbegin(); it != given.rend(); ++it) {
      if (!within(e.key_path(), it->key)) continue;
      std::string what = e.what();
      const std::string marker = "error: ";
      const std::size_t at = what.find(marker);
      if (at != std::string::npos) what = what.substr(at + marker.size());
      if (!e.key_path().empty() &&
          what.compare(0, e.key_path().size() + 2, e.key_path() + ": ") == 0)
        what = what.substr(e.key_path().size() + 2);
      throw ScenarioError("command line " + it->shown + " (overriding " + file + ")", 0, 0,
                          e.key_path(), what);
    }
    throw;
  }
}

void report_written(const std::string& path, const std::string& what) {
  std::fprintf(stderr, "wrote %s%s\n", path.c_str(),
               what.empty() ? "" : (" (" + what + ")").c_str());
  std::fflush(stderr);
}

namespace {

std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> out;
  for (const CLI::Option* o : command.get_options()) {
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
    for (const std::string& s : o->get_snames()) out.push_back("-" + s);
  }
  return out;
}

bool has_option(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::string explain_parse_error(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> commands;
  for (const CLI::App* c : app.get_subcommands({})) commands.push_back(c->get_name());
  const std::string command_list = fmt::format("commands: {}", fmt::join(commands, ", "));
  const std::vector<std::string> top_options = option_names(app);
  // The first word that is not an option (or an option's value) names the command.
  int i = 1;
  const CLI::App* chosen = nullptr;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-", 0) == 0) {
      const std::string name = arg.substr(0, arg.find('='));
      if (name == "--presets" && arg.find('=') == std::string::npos) ++i;  // its value
      if (name == "--help" || name == "-h") return "";
      if (!has_option(top_options, name))
        return fmt::format("unknown option {} before the command{}\n  {}", name,
                           yaml::did_you_mean(name, top_options), command_list);
      continue;
    }
    const auto found = std::find(commands.begin(), commands.end(), arg);
    if (found == commands.end())
      return fmt::format("unknown command '{}'{}\n  {}", arg, yaml::did_you_mean(arg, commands),
                         command_list);
    chosen = app.get_subcommand(arg);
    break;
  }
  if (chosen == nullptr)
    return fmt::format(
        "no command given\n  {}\n  (wafersim COMMAND --help for one command's options)",
        command_list);
  // Options after the command: the first that the command does not know.
  const std::vector<std::string> known = option_names(*chosen);
  std::vector<std::string> all = known;
  all.insert(all.end(), top_options.begin(), top_options.end());
  for (++i; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("-", 0) != 0 || arg == "-") continue;
    if (arg.size() > 1 && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.'))
      continue;  // a negative number
    const std::string name =
        arg.rfind("--", 0) == 0 ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);  // -j4
    if (has_option(all, name)) continue;
    return fmt::format("{}: unknown option {}{}\n  (wafersim {} --help lists its options)",
                       chosen->get_name(), name, yaml::did_you_mean(name, known),
                       chosen->get_name());
  }
  return "";
}

void show_search_progress(int percent, int total) {
  show_progress_bar("searching the placement (anneal), percent", percent, total);
}

void show_placement_progress(int wafers, int wafer) {
  show_progress_bar(fmt::format("placing on {} wafer{}", wafers, wafers == 1 ? "" : "s"), wafer,
                    wafers);
}

}  // namespace wafersim::sim
