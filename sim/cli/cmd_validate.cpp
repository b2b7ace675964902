// wafersim validate: load and check a scenario without running it.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/output_file.hpp"
#include "models/model_config.hpp"
#include "models/safetensors.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/system.hpp"
#include "sim/program/program.hpp"
#include "sim/serving/traffic.hpp"
#include "sim/studies/serving_study.hpp"

namespace wafersim::sim {

namespace {

// A count for every user, or (per-user lengths) the users' counts as a list.
std::string user_lengths(const std::vector<int>& by_user, std::size_t single) {
  if (by_user.empty()) return std::to_string(single);
  return fmt::format("[{}]", fmt::join(by_user, ", "));
}

// A serving study: its traffic drawn, the wafer deployment planned (batch and
// KV slot at the traffic's longest context) and each GPU system's fit.
ExitCode validate_serving(const std::string& file, const Scenario& sc) {
  const std::vector<serving::Session> sessions = serving::generate_sessions(*sc.traffic);
  const TrafficSummary t = summarise_traffic(sessions);
  fmt::print(
      "{}: ok: serving study of {} at {}: {} requests in {} sessions, prompt {:.0f} "
      "tokens mean, output {:.0f}, longest context {}\n",
      file, sc.model.name, models::dtype_name(sc.precision), t.requests, t.sessions,
      t.mean_prompt_tokens, t.mean_output_tokens, t.max_context);
  if (sc.has_wafer()) {
    check_wafer_supports(sc.model);
    const CalibrationPlan plan = plan_calibration(sc, t.max_context, t.max_prompt);
    fmt::print(
        "  wafer: {} x {} {}: batch {} of {} positions each ({} reserved per sequence); "
        "calibration: {} decode + {} prefill engine runs\n",
        sc.deployment.wafer.replicas, plan.wafers, sc.hardware.name, plan.max_batch,
        plan.slot_tokens, plan.max_context, plan.users.size() * plan.contexts.size(),
        plan.prefill_tokens.size() * plan.prefill_contexts.size() +
            (plan.long_prompt_tokens > 0 ? 1 : 0) + stream_points(plan).size());
  }
  for (const models::gpu::ClusterSpec& c : sc.gpu.systems)
    fmt::print("  {}: {} replica{}\n", c.name, sc.deployment.gpu.replicas,
               sc.deployment.gpu.replicas == 1 ? "" : "s");
  return kExitSuccess;
}

}  // namespace

RegisteredCommand add_validate_command(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  auto overrides = std::make_shared<ScenarioOverrideOptions>();
  CLI::App* validate = app.add_subcommand("validate", "Check a scenario without running it");
  validate->add_option("scenario", *file, "Scenario YAML file")->required();
  add_scenario_override_options(validate, *overrides);
  const CLI::App* root = &app;
  return {validate,
          [file, overrides, root] {
            const Scenario sc = load_scenario_with(*file, preset_dir(*root), *overrides);
            // Everything `run` checks short of simulating: the results path too.
            if (sc.outputs.results) {
              analysis::check_writable(*sc.outputs.results);
              analysis::check_writable(*sc.outputs.results + ".scenario.yaml");
            }
            if (sc.traffic) return validate_serving(*file, sc);
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
            // A speculative draft on wafers of its own, as `run` places it.
            const std::unique_ptr<PlacedSystem> draft = place_draft(sc);
            const Placement& pl = sys->placement;
            fmt::print(
                "{}: ok: {} on {} ({}x{} cores), {}, {} prompt + {} generated tokens{}, seed {}\n"
                "  fits on {} wafer{} ({}), up to {} tokens of context per user for {} user{}\n"
                "  weights {}\n"
                "  routes: at most {} of the {} colors per router (wafer {} router ({}, {}))\n",
                *file, sc.model.name, sc.hardware.name, sc.hardware.mesh_width,
                sc.hardware.mesh_height, models::dtype_name(sc.precision),
                user_lengths(sc.workload.prompt_tokens_by_user, sc.workload.prompt_ids.size()),
                user_lengths(sc.workload.generate_tokens_by_user, sc.workload.generate_tokens),
                sc.workload.users > 1 &&
                        !(sc.workload.prompt_tokens_by_user.empty() &&
                          sc.workload.generate_tokens_by_user.empty())
                    ? " (per user)"
                    : "",
                sc.workload.seed,
                pl.wafers, pl.wafers == 1 ? "" : "s", pl.strategy, pl.max_context_tokens, pl.users,
                pl.users == 1 ? "" : "s", weights, sys->routes.max_colors, sys->routes.available,
                sys->routes.wafer, sys->routes.router.x, sys->routes.router.y);
            if (draft)
              fmt::print("  draft {} fits on {} wafer{} of its own ({})\n",
                         sc.speculative->decoding.draft.name, draft->placement.wafers,
                         draft->placement.wafers == 1 ? "" : "s", draft->placement.strategy);
            // The automatic choices, in place's words (their first lines).
            if (sys->layer_group_choice)
              fmt::print("  {}\n", analysis::layer_group_choice_lines(*sys->layer_group_choice)[0]);
            for (const analysis::ReductionChoice& ch : sys->reduction_choices)
              fmt::print("  {}\n", analysis::reduction_choice_lines(ch)[0]);
            return kExitSuccess;
          },
          [file] { return *file; }};
}

}  // namespace wafersim::sim
