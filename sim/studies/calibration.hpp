// The wafer's step times for a serving study, from the cycle-level engine:
// the deployment's placement (max_batch sequences of max_context positions,
// placement.reserve) is planned once; then a grid of `wafersim run
// --timing-only` child processes on that placement measures the decode step
// of b sequences at context c (workload.cached_tokens, no prompt simulated)
// and the prefill of n prompt tokens after c cached ones. The grid is cached
// on disk, keyed by the resolved scenario, the plan and the binary, so a
// second study of the same deployment starts at once.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sim/config/scenario.hpp"
#include "sim/serving/step_model.hpp"

namespace wafersim::sim {

// What the grid covers and the placement every point shares.
struct CalibrationPlan {
  int max_batch = 1;          // sequences the placement holds (placement.reserve.users)
  long long max_context = 0;  // positions per sequence (placement.reserve.context_tokens)
  long long slot_tokens = 0;  // positions per sequence the placement could hold (>= max_context)
  int wafers = 1;             // per pipeline
  std::vector<int> users;     // decode grid
  std::vector<long long> contexts;  // decode grid: cached positions
  std::vector<long long> prefill_tokens;
  std::vector<long long> prefill_contexts;  // cached positions before the prompt
  // The traffic's longest prompt where beyond prefill_tokens (else 0):
  // measured after nothing cached, alone and with stream_users in flight.
  long long long_prompt_tokens = 0;
  // Prompts of this many sequences sent at once (at each prefill_tokens,
  // nothing cached; every users value above 1): what each prompt beyond the
  // first adds to the last one's first token, by the number in flight (they
  // share the pipeline's links and stages). Empty = no such points.
  std::vector<int> stream_users;
  // At most this many prompt tokens in one such run (users x length), 2
  // prompts excepted: more prompts of a length are left out, the share then
  // the one measured with the most prompts of that length. Prompts sent
  // together are the grid's dearest runs (on Llama 3.1 8B / WSE-3 about
  // 18 ms of CPU per prompt token), and the share varies little beyond 8
  // prompts (8B: 0.751 and 0.752 with 8 and 16 prompts of 512 tokens;
  // tiny-llama on 64x64: 1.002 and 1.008 with 96).
  long long stream_token_budget = 2048;
  int generate_tokens = 3;  // per decode point: its first token ends the prompt, then 2 steps
  int prefill_block = 64;
};

// The plan for a scenario's deployment: max_context from deployment.max_context
// or else `traffic_max_context`; prompts measured up to the traffic's longest
// (`traffic_max_prompt`); max_batch from deployment.wafer.max_batch or
// else the most sequences of max_context whose KV cache fits (placement
// planned without allocating). Throws fabric::FitError (naming the figures)
// when not even one sequence of max_context fits, ScenarioError when
// max_context is beyond the model's.
CalibrationPlan plan_calibration(const Scenario& scenario, long long traffic_max_context,
                                 long long traffic_max_prompt = 0);

// Every prompt length the plan measures: prefill_tokens, then the long prompt.
std::vector<long long> measured_prompt_lengths(const CalibrationPlan& plan);

// The (users, prompt length) of every run of prompts sent together: each
// measured length with each of stream_users within stream_token_budget, and
// with the fewest at least.
std::vector<std::pair<int, long long>> stream_points(const CalibrationPlan& plan);

// Where a calibration is: its runs done of all, and the same weighted by
// each run's estimated host work (point_work), which is what the time left
// is told from: a grid's runs differ in cost by 100x and more.
struct CalibrationProgress {
  int runs_done = 0;
  int runs_total = 0;
  long long work_done = 0;
  long long work_total = 0;
};

// The host work of one grid run (a decode point when `tokens` is 0, else
// prompts of `tokens` tokens), estimated in units of one single-token
// message through the pipeline: each message costs 16 units plus one per
// token row it carries (a 64-token block's GEMMs and moves cost several
// single-token passes, not 64), and attention over `context` cached
// positions adds context / 8192 of that. Measured on an 8-group
// whole-region 8B (docs/performance.md, s27): 48 users x 3 tokens at 4,068
// cached took 180 s, one 3,072-token prompt in 64-token blocks 213 s; the
// estimate puts them at 3,663 and 3,840 units.
long long point_work(const CalibrationPlan& plan, int users, long long context, long long tokens);

struct CalibrationOptions {
  std::filesystem::path binary;  // the wafersim executable
  std::string scenario;          // the scenario file the children run
  std::string presets;           // --presets for the children ("" = default)
  // --set KEY=VALUE overrides the study itself was given (the children get them too).
  std::vector<std::pair<std::string, std::string>> extra_sets;
  int jobs = 1;
  std::filesystem::path cache_dir;                           // "" = no cache
  std::function<void(const CalibrationProgress&)> progress;  // after each run
};

// A calibration of `scenario` run by this very executable (/proc/self/exe)
// with `presets`, up to `jobs` runs at once (0: the host's cores), caching
// in `cache_dir` ("" = no cache).
CalibrationOptions self_calibration(const std::string& scenario,
                                    const std::filesystem::path& presets, int jobs,
                                    const std::filesystem::path& cache_dir);

struct Calibration {
  CalibrationPlan plan;
  std::vector<serving::GridPoint> decode;
  std::vector<serving::GridPoint> prefill;
  std::filesystem::path cache_file;  // where it was read or written ("" = not cached)
  bool from_cache = false;
};

// What a prefill point's run measured, from its --json result: the mean
// prefill over its sequences (`users` 1: the prompt's prefill), or with
// several sequences the last one's (the time until every prompt has passed).
double measured_prefill_s(const nlohmann::json& run, int users);
// With several sequences: the first one's prefill (the first prompt sent).
double measured_first_prefill_s(const nlohmann::json& run);

// The step grid's cache file format ("wafersim-step-grid"): 3 added each
// prefill point's first_s (the first prompt's first token with several sent
// together); a file of another version is measured again.
inline constexpr int kStepGridFormatVersion = 3;

// The child command line that measures one point (a decode point when
// `tokens` is 0, else a prefill point).
std::vector<std::string> calibration_run_arguments(const CalibrationOptions& options,
                                                   const CalibrationPlan& plan, int users,
                                                   long long context, long long tokens);

// Runs the grid (or reads it from the cache). Throws std::runtime_error with
// the failing child's first error line.
Calibration calibrate(const Scenario& scenario, const CalibrationPlan& plan,
                      const CalibrationOptions& options);

// The wafer pipeline's step model from a calibration.
std::unique_ptr<serving::WaferSteps> wafer_steps(const Scenario& scenario,
                                                 const Calibration& calibration);

// Where step grids are cached by default: $WAFERSIM_CACHE, else
// $XDG_CACHE_HOME/wafersim, else ~/.cache/wafersim ("" when none is known).
std::filesystem::path default_cache_dir();

}  // namespace wafersim::sim
