// A validated scenario: hardware, model, precision, placement choices and
// workload, with presets resolved. Immutable after load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <map>

#include "fabric/collectives.hpp"
#include "fabric/wafer_spec.hpp"
#include "models/gpu/cluster_model.hpp"
#include "models/gpu/gpu_spec.hpp"
#include "models/gpu/serving.hpp"
#include "models/model_config.hpp"
#include "sim/placement/placement.hpp"
#include "sim/serving/deployment.hpp"
#include "sim/serving/traffic.hpp"

namespace wafersim::sim {

// A scenario (or preset) file that cannot be used. The message already names
// the file, line, column and key path; the fields let tests check them.
class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(std::string file, int line, int column, std::string key_path,
                const std::string& what);
  const std::string& file() const { return file_; }
  int line() const { return line_; }                         // 1-based; 0 when unknown
  int column() const { return column_; }                     // 1-based; 0 when unknown
  const std::string& key_path() const { return key_path_; }  // e.g. "hardware.core.sram"

 private:
  std::string file_;
  int line_;
  int column_;
  std::string key_path_;
};

using ReductionScheme = fabric::ReductionScheme;
using fabric::reduction_name;
// Every scheme's name, in enum order (chain, tree, two-level, k-tree, ring),
// and the scheme a name means (nullopt for none).
const std::vector<std::string>& reduction_names();
std::optional<ReductionScheme> parse_reduction(std::string_view name);

// The scenario's `placement:` keys: the strategy and its parameters (what
// place() is asked, sim/placement/request.hpp), or a placement file.
struct PlacementOptions : PlacementChoices {
  // A placement file (wafersim place --write-placement) to use instead of a
  // strategy; resolved against the scenario's folder.
  std::string file;
  // placement.layer_groups: auto (whole-region): the count is chosen when the
  // scenario is placed, from one layer of each candidate timed on the fabric
  // model (sim/engine/layer_group_choice.hpp); layer_groups is then ignored.
  bool layer_groups_auto = false;
  // placement.reduction: auto (whole-region): the scheme of every matrix
  // without its own is chosen when the scenario is placed, from candidates
  // timed on the fabric model (sim/engine/reduction_choice.hpp); reduction
  // is chain until then.
  bool reduction_auto = false;
  // placement.matrices.<kind>.reduction: auto: the kinds whose own scheme is
  // chosen so, in MatrixKind order (their override's reduction is unset).
  std::vector<MatrixKind> matrix_reduction_auto;
};

struct Workload {
  // Either given explicitly, or drawn from `seed` when only a count was given
  // (the loader fills prompt_ids in both cases).
  std::vector<std::int32_t> prompt_ids;
  int generate_tokens = 0;
  std::uint64_t seed = 0;
  // Sequences decoded at once, each with its own KV cache, in flight through
  // the layer pipeline together. User 0's prompt is prompt_ids; user u's is
  // derived from it (see user_prompt()).
  int users = 1;
  // Prompt tokens that travel through a stage together as one block (prefill
  // as GEMM: each core streams its weight tile once per block). 1 = token by
  // token (GEMV per prompt token).
  int prefill_block = 1;
  // Users whose decode tokens travel through a stage together as one
  // batch: every matrix a GEMM of that many rows, attention each row over
  // its own user's cache. 1 = each user's token on its own, pipelined behind
  // the others' through the layer stages. Users are batched in order
  // (0..b-1, b..2b-1, ...); a batch waits for its last member's token.
  int decode_batch = 1;
  // With decode_batch > 1: a batch's prompts travel together too, block by
  // block (block i of every member whose prompt has one, in one message:
  // every matrix a GEMM of all their rows), sent once the batch's last
  // member has arrived. false = each user's prompt on its own, pipelined
  // behind the others'.
  bool batch_prompts = false;
  // When each user's prompt reaches the host, in seconds of simulated time
  // (one per user, in user order); empty = every prompt at 0. A later user's
  // prompt blocks enter the pipeline at its arrival, behind whatever the host
  // sent before (other users' decode tokens included), and its time to first
  // token counts from its arrival.
  std::vector<double> arrivals_s;
  // Positions already in every user's KV cache when its prompt arrives
  // (timing only): the prompt starts at this position, so decode is timed
  // at a long context without simulating that context's prefill. The KV
  // cache is reserved for cached + prompt + generated tokens.
  int cached_tokens = 0;
  // Per-user lengths: workload.prompt_tokens, generate_tokens and
  // cached_tokens given as lists, one per user (a mix of requests at
  // different phases). Empty: every user has the single value. Given, the
  // single value is the users' largest (generate_tokens, cached_tokens) and
  // prompt_ids is drawn at the longest prompt; read them per user with
  // user_prompt_tokens() and the others below.
  std::vector<int> prompt_tokens_by_user;
  std::vector<int> generate_tokens_by_user;
  std::vector<int> cached_tokens_by_user;
  // The prompt as text (workload.prompt), encoded into prompt_ids with the
  // tokenizer; empty when the prompt was given as ids or a count.
  std::string prompt_text;
  // tokenizer.json (absolute path) that encodes prompt_text and decodes the
  // generated ids into text; empty: none (ids only). Defaults to the
  // checkpoint folder's tokenizer.json when it has one.
  std::string tokenizer;
};

// The prompt of user `u`: user 0 gets the workload's prompt_ids; user u > 0
// gets each id shifted by u * 7919 modulo the vocabulary, so users differ.
// With per-user prompt lengths, the first user_prompt_tokens(w, u) of them.
std::vector<std::int32_t> user_prompt(const Workload& w, int u, int vocab_size);
// User u's prompt length, tokens to generate and positions cached before its
// prompt (the per-user lists where given, else the single values).
int user_prompt_tokens(const Workload& w, int u);
int user_generate_tokens(const Workload& w, int u);
int user_cached_tokens(const Workload& w, int u);
// Positions user u's KV cache holds at the end: cached + prompt + generated.
int user_context_tokens(const Workload& w, int u);
// Token passes of the whole workload: every user's prompt tokens and its
// generated tokens but the last (which no pass follows).
long long workload_token_passes(const Workload& w);

// Where a functional run's weights come from (`weights:`).
struct WeightsOptions {
  enum class Source { synthetic, checkpoint };
  // Default: checkpoint when `model:` names a checkpoint folder, else
  // synthetic (drawn from workload.seed).
  Source source = Source::synthetic;
  // checkpoint: the folder, .safetensors file or model.safetensors.index.json
  // (absolute); defaults to the model's checkpoint folder.
  std::string path;
  // checkpoint: the content hash (models::WeightsOrigin) the files must have;
  // empty = not checked.
  std::string sha256;
};

struct Outputs {
  std::optional<std::string> results;  // HDF5 path, relative to the current directory
  bool functional = true;              // compute real numbers (false: timing only)
};

// GPU clusters the report puts beside the wafer (scenarios/gpus/*.yaml).
struct GpuComparison {
  std::vector<models::gpu::ClusterSpec> systems;  // compare_with, resolved (presets expanded)
  int tp = 0;  // gpu_parallelism.tp; 0 = chosen for lowest latency
  int pp = 0;  // gpu_parallelism.pp; 0 = chosen for lowest latency
};

// Speculative decoding on both sides (models/gpu/cluster_model.hpp).
struct SpeculativeOptions {
  std::string draft_preset;  // preset name of the draft model (or "inline")
  models::gpu::SpeculativeDecoding decoding;
  // The folder (absolute) draft_model read config.json from; empty for a
  // preset or an inline model.
  std::string draft_checkpoint;
  // The draft's weights (speculative_decoding.draft_weights): by default its
  // checkpoint's when draft_model names a checkpoint folder, else synthetic.
  WeightsOptions draft_weights;
};

struct Scenario {
  std::string name;
  std::string source_file;      // path as given by the user
  std::string hardware_preset;  // name of the preset used (or "inline")
  std::string model_preset;     // name of the preset used (or "inline")
  fabric::WaferSpec hardware;
  models::ModelConfig model;
  // The folder (absolute) `model:` read config.json from; empty for a preset
  // or an inline model.
  std::string model_checkpoint;
  WeightsOptions weights;
  models::DType precision = models::DType::bf16;
  // Wafers in the pipeline; with wafers_auto the run uses the fewest that fit.
  int wafers = 1;
  bool wafers_auto = false;
  PlacementOptions placement;
  Workload workload;
  Outputs outputs;
  GpuComparison gpu;
  std::optional<SpeculativeOptions> speculative;
  std::optional<models::gpu::ServingOverhead> serving;
  // A serving study (wafersim serve): the requests, how the wafer and the GPU
  // systems are deployed to serve them, and the service-level objectives.
  std::optional<serving::TrafficSpec> traffic;
  serving::DeploymentSpec deployment;
  serving::Slo slo;
  // Whether the scenario names a wafer (hardware:); a serving study of GPU
  // systems alone has none.
  bool has_wafer() const { return !hardware_preset.empty(); }
  // The fully resolved scenario (presets expanded, defaults filled) as YAML
  // that load_scenario() accepts again and that reproduces this run.
  std::string resolved_yaml;
};

// Throws ScenarioError when the scenario cannot run in the chosen mode: a
// functional run of a workload with cached_tokens (there are no values for
// positions it did not compute), or one whose checkpoint has no weights files.
void check_run_mode(const Scenario& scenario, bool functional);

// Throws ScenarioError unless the scenario is one `what` ("run", "place", ...)
// can simulate: it names a wafer and a workload, and no traffic (a serving
// study is for `wafersim serve`).
void check_single_batch(const Scenario& scenario, const std::string& what);

// A `model:` (or draft_model) value that names a Hugging Face checkpoint
// rather than a preset: one with a '/' (a folder holding config.json, e.g.
// ./my-model) or ending in .json.
bool names_checkpoint(const std::string& model);
// The folder of a checkpoint path: the path itself when it is a folder, else
// the folder of the file (a config.json, a .safetensors or an index).
std::filesystem::path checkpoint_folder(const std::filesystem::path& path);

// "\n  did you mean 'x'?" for the closest of `candidates`, or "" (as scenario errors use).
std::string suggest_name(const std::string& word, const std::vector<std::string>& candidates);

// Where preset files are looked up: $WAFERSIM_PRESETS if set, else the
// scenarios/ folder of the source tree the binary was built from.
std::filesystem::path default_preset_dir();

// Loads, validates and resolves a scenario. Throws ScenarioError.
Scenario load_scenario(const std::filesystem::path& file,
                       const std::filesystem::path& preset_dir = default_preset_dir());

// Command-line overrides of a scenario's keys (wafersim run --model ... ),
// applied before validation, so they are checked like the file's own keys
// and appear in the resolved scenario.
struct ScenarioOverrides {
  std::optional<std::string> hardware;        // preset name
  std::optional<std::string> model;           // preset name (or what `model:` accepts)
  std::optional<std::string> precision;       // fp32 | fp16 | bf16 | ...
  std::optional<std::string> wafers;          // N | auto
  std::optional<int> users;                   // workload.users
  std::optional<std::string> layer_groups;    // placement.layer_groups: N | auto (whole-region)
  std::optional<std::string> placement_file;  // placement.file (relative to the current directory)
  // Any key by its dotted path ("workload.cached_tokens") and its value as
  // YAML text ("2048", "{users: 16}"); null (or ~) removes the key. Applied after the
  // named overrides above, in order.
  std::vector<std::pair<std::string, std::string>> set;
};
Scenario load_scenario(const std::filesystem::path& file, const std::filesystem::path& preset_dir,
                       const ScenarioOverrides& overrides);

// Loads a preset by name from <preset_dir>/hardware/<name>.yaml or
// <preset_dir>/models/<name>.yaml. Throws ScenarioError.
fabric::WaferSpec load_hardware_preset(
    const std::string& name, const std::filesystem::path& preset_dir = default_preset_dir());
models::ModelConfig load_model_preset(
    const std::string& name, const std::filesystem::path& preset_dir = default_preset_dir());
// <preset_dir>/gpus/<name>.yaml, validated. Throws ScenarioError.
models::gpu::ClusterSpec load_gpu_preset(
    const std::string& name, const std::filesystem::path& preset_dir = default_preset_dir());
// GPU systems a scenario without compare_with is compared with, when their presets exist.
inline const std::vector<std::string>& default_compare_with() {
  static const std::vector<std::string> kNames = {"dgx-h100", "dgx-b200"};
  return kNames;
}

}  // namespace wafersim::sim
