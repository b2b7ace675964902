// wafersim validate: load and check a scenario without running it.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "models/model_config.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

RegisteredCommand add_validate_command(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  CLI::App* validate = app.add_subcommand("validate", "Check a scenario without running it");
  validate->add_option("scenario", *file, "Scenario YAML file")->required();
  const CLI::App* root = &app;
  return {validate,
          [file, root] {
            const Scenario sc = load_scenario(*file, preset_dir(*root));
            check_wafer_supports(sc.model);
            fmt::print(
                "{}: ok: {} on {} ({}x{} cores), {}, {} prompt + {} generated tokens, seed {}\n",
                *file, sc.model.name, sc.hardware.name, sc.hardware.mesh_width,
                sc.hardware.mesh_height, models::dtype_name(sc.precision),
                sc.workload.prompt_ids.size(), sc.workload.generate_tokens, sc.workload.seed);
            return kExitSuccess;
          },
          [file] { return *file; }};
}

}  // namespace wafersim::sim
