// What came out of one run. Produced by sim::Engine, read by the report, the
// JSON writer and the HDF5 writer. Plain data; no behaviour beyond derived
// figures that every consumer needs identically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/baselines.hpp"
#include "analysis/layer_group_choice.hpp"
#include "analysis/reduction_choice.hpp"
#include "fabric/critical_path.hpp"
#include "fabric/units.hpp"

namespace wafersim::analysis {

// Where the cycles on a token's critical path went (fabric/critical_path.hpp);
// the categories add up to the token's latency in cycles.
using CycleBreakdown = wafersim::CycleBreakdown;

struct TokenRecord {
  int user = 0;          // which sequence (0-based)
  int position = 0;      // position in the sequence (0-based)
  bool prefill = false;  // a prompt token (true) or a generated one (false)
  Cycles start_cycle;
  Cycles end_cycle;           // cycle its logits (or last layer output) were ready
  std::int32_t token_in = 0;  // token id fed at this position
  CycleBreakdown critical_path;
};

// Speculative decoding as the wafer simulation ran it (its policy in
// sim/engine/speculative_rounds.cpp): the draft on wafers of its own
// proposing, the target verifying blocks.
struct SpeculativeRun {
  std::string draft_model;
  int draft_wafers = 0;                 // wafers the draft occupies (after the target's)
  int draft_tokens = 0;                 // gamma: proposals per round, at most
  double acceptance_rate = 0.0;         // the scenario's alpha (timing-only runs draw with it)
  bool accepted_by_comparison = false;  // functional: greedy choices compared, alpha unused
  std::uint64_t rounds = 0;             // verifications, all users
  std::uint64_t proposed = 0;           // draft tokens proposed
  std::uint64_t accepted = 0;           // of which the target accepted
  std::uint64_t rejected = 0;           // rounds that ended on a rejected proposal
  std::uint64_t draft_passes = 0;       // messages through the draft (prompt blocks included)
  Cycles draft_cycles;   // sum over proposals: id leaves the target/draft head -> proposal ready
  Cycles verify_cycles;  // sum over rounds: proposals leave the draft -> verified
  Cycles round_cycles;   // sum over rounds: round starts -> verified
  // Per-proposal acceptance, comparable with alpha: of the proposals the
  // target examined (up to and including the first rejection of a round),
  // the share it accepted. Proposals after a rejection are never examined.
  double measured_acceptance() const {
    const std::uint64_t examined = accepted + rejected;
    return examined ? static_cast<double>(accepted) / static_cast<double>(examined) : 0.0;
  }
  // Tokens each verification yields, on average (accepted + the target's own).
  double tokens_per_round() const {
    return rounds ? static_cast<double>(accepted + rounds) / static_cast<double>(rounds) : 0.0;
  }
};

// Where a functional run's weights came from (models::WeightsOrigin).
struct WeightsProvenance {
  struct File {
    std::string name;
    std::string sha256;
    std::uint64_t bytes = 0;
  };
  std::string source = "none";  // "checkpoint", "synthetic", or "none" (timing only)
  std::string path;             // checkpoint: the .safetensors or index file read
  std::string sha256;           // checkpoint: the content hash (single file: its SHA-256)
  std::vector<File> files;      // checkpoint: each safetensors file, by name
  std::uint64_t seed = 0;       // synthetic: the seed they were drawn from
};

struct RunResult {
  // Identification.
  std::string scenario_name;
  std::string scenario_file;
  std::string hardware_name;
  std::string model_name;
  std::string precision;
  std::string placement_strategy;
  // placement.layer_groups: auto: the candidates and the count chosen.
  std::optional<LayerGroupChoice> layer_group_choice;
  // placement.reduction: auto (and matrices.<m>.reduction: auto): each key's
  // candidates and the scheme chosen, in the order they were chosen.
  std::vector<ReductionChoice> reduction_choices;
  std::uint64_t seed = 0;
  bool functional = false;

  // Hardware figures the consumers need.
  int mesh_width = 0;   // per wafer
  int mesh_height = 0;  // per wafer
  int wafers = 1;       // per-core arrays hold the wafers one after another (stacked in y)
  double clock_hz = 0.0;
  Bytes link_bytes_per_cycle;  // per cycle: one link, one direction

  // Fit.
  std::uint64_t cores_used = 0;
  Bytes sram_bytes_used;
  Bytes sram_bytes_capacity;
  std::uint64_t parameter_count = 0;

  // Defects and their repair (fabric/redundancy.hpp), summed over the wafers:
  // dead cores (of the physical array when the wafer has spares), logical
  // links that detour around a repair, and their extra physical hops.
  std::uint64_t dead_cores = 0;
  std::uint64_t repaired_links = 0;
  std::uint64_t repair_extra_hops = 0;

  // Routing: the most colors (virtual channels) one router's routes need for
  // the placed collectives (sim/placement/route_budget.hpp), at most the
  // wafer's virtual_channels (a run over it fails).
  int max_route_colors = 0;

  // Per core, row-major [y][x] (size mesh_height * mesh_width). Dense counts
  // as the fabric keeps them (cycles, bytes, bytes), not Cycles/Bytes: they
  // go to and from HDF5 and the fabric's counters as plain arrays.
  std::vector<std::uint64_t> core_busy_cycles;
  std::vector<std::uint64_t> core_sram_bytes;
  // Per outgoing link, [y][x][dir] with dir 0=E, 1=W, 2=S, 3=N.
  std::vector<std::uint64_t> link_bytes;

  // The target's weights, and with speculative decoding the draft's
  // (functional runs; source "none" otherwise).
  WeightsProvenance weights;
  std::optional<WeightsProvenance> draft_weights;

  // Tokens.
  std::vector<std::int32_t> prompt_ids;
  std::vector<std::int32_t> tokens;            // generated ids
  std::vector<std::int32_t> reference_tokens;  // from the reference forward pass (functional)
  double max_logit_abs_error = 0.0;            // functional vs reference, over all steps
  // With a tokenizer (workload.tokenizer): the prompt and user 0's generated
  // tokens as text (functional runs); empty otherwise.
  std::string prompt_text;
  std::string generated_text;
  std::vector<TokenRecord> token_records;  // one per position processed

  // Timeline summary (cycles).
  Cycles total_cycles;  // end of the simulation
  Cycles ttft_cycles;   // request arrival to first generated token
  // Mean over users: the prompt on the wafer (its ids arrived) to the first
  // token's logits reduced; TTFT without the I/O either side.
  Cycles prefill_cycles;
  Cycles decode_cycles_per_token;  // per token: mean over users of each user's mean decode step
  int users = 1;                   // sequences decoded at once
  std::vector<Cycles> user_decode_cycles_per_token;  // per user: mean decode step (per token)
  std::uint64_t max_context_tokens = 0;  // longest context per user the placement could hold
  // With speculative decoding: how the draft and the verifications went. The
  // wafer counts above include the draft's wafers (after the target's).
  std::optional<SpeculativeRun> speculative;

  // The resolved scenario, as YAML, so the run can be reproduced.
  std::string resolved_scenario_yaml;

  // The wafer beside GPU clusters on the same workload (analysis/baselines.hpp);
  // empty when the scenario compares with nothing and asks for no speculative
  // decoding or serving overhead.
  std::optional<Baselines> baselines;
};

}  // namespace wafersim::analysis
