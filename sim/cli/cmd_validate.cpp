// wafersim validate: load and check a scenario without running it.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "models/model_config.hpp"
#include "models/safetensors.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/system.hpp"
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
            check_run_mode(sc, sc.outputs.functional);
            // The checkpoint's headers against the model (no values read).
            std::string weights = "none (timing only)";
            if (sc.outputs.functional) {
              if (sc.weights.source == WeightsOptions::Source::checkpoint)
                weights = "checkpoint " + models::check_safetensors(sc.weights.path, sc.model) +
                          " (every tensor's name, shape and dtype checked)";
              else
                weights = fmt::format("synthetic, drawn from seed {}", sc.workload.seed);
              if (sc.speculative &&
                  sc.speculative->draft_weights.source == WeightsOptions::Source::checkpoint)
                (void)models::check_safetensors(sc.speculative->draft_weights.path,
                                                sc.speculative->decoding.draft);
            }
            // The fit: planned and allocated as `run` would (a FitError
            // says what does not fit and what would).
            const std::unique_ptr<PlacedSystem> sys = place_system(sc);
            const Placement& pl = sys->placement;
            fmt::print(
                "{}: ok: {} on {} ({}x{} cores), {}, {} prompt + {} generated tokens, seed {}\n"
                "  fits on {} wafer{} ({}), up to {} tokens of context per user for {} user{}\n"
                "  weights {}\n",
                *file, sc.model.name, sc.hardware.name, sc.hardware.mesh_width,
                sc.hardware.mesh_height, models::dtype_name(sc.precision),
                sc.workload.prompt_ids.size(), sc.workload.generate_tokens, sc.workload.seed,
                pl.wafers, pl.wafers == 1 ? "" : "s", pl.strategy, pl.max_context_tokens, pl.users,
                pl.users == 1 ? "" : "s", weights);
            return kExitSuccess;
          },
          [file] { return *file; }};
}

}  // namespace wafersim::sim
