// wafersim list: the hardware and model presets, grouped by kind.
#include <string>

#include <fmt/format.h>

#include "sim/cli/commands.hpp"
#include "sim/config/presets.hpp"

namespace wafersim::sim {

RegisteredCommand add_list_command(CLI::App& app) {
  CLI::App* list = app.add_subcommand("list", "List hardware and model presets");
  const CLI::App* root = &app;
  return {list, [root] {
            std::string kind;
            for (const PresetInfo& p : list_presets(preset_dir(*root))) {
              if (p.kind != kind) fmt::print("{}{}:\n", kind.empty() ? "" : "\n", kind = p.kind);
              fmt::print("  {:<16} {}\n", p.name, p.summary);
            }
            return kExitSuccess;
          }};
}

}  // namespace wafersim::sim
