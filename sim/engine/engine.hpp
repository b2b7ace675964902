// The run: builds the fabric, places and lowers the model, then simulates
// prefill and greedy decode in SystemC (one module per pipeline stage plus a
// host), and returns the results. One Engine::run() per process: a SystemC
// simulation cannot be restarted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "analysis/run_result.hpp"
#include "analysis/run_trace.hpp"
#include "sim/config/scenario.hpp"

namespace wafersim::sim {

// Host wall-clock seconds spent in each part of a run (for benchmarks; never
// part of the results, which must be bit-identical from run to run).
struct HostTimes {
  double place_s = 0.0;      // fabric build, placement, SRAM allocation, lowering
  double weights_s = 0.0;    // synthetic weights (functional mode)
  double simulate_s = 0.0;   // the SystemC simulation (and functional arithmetic)
  double reference_s = 0.0;  // the reference forward pass (functional mode)
  int token_passes = 0;      // tokens that crossed the whole model (all users)
  // Link-record recycling (RunOptions::recycle_link_records): wafers'
  // records given back, blocks of records mapped, blocks taken again.
  std::uint64_t record_releases = 0;
  std::uint64_t record_blocks_made = 0;
  std::uint64_t record_blocks_reused = 0;
  // Layer passes replayed instead of simulated (RunOptions::layer_replay),
  // and those simulated only because other messages were in flight
  // (LayerReplay::crowded).
  std::uint64_t replayed_layer_passes = 0;
  std::uint64_t crowded_layer_passes = 0;
  // Layer passes of several messages in flight replayed with the whole
  // pipeline (sim/exec/pipeline_replay.hpp); the crowded ones include them.
  std::uint64_t pipeline_replayed_layer_passes = 0;
  // Timing works (GEMVs, attention blocks' rows and columns) that could
  // take a second host thread, on two threads and on one
  // (Executor::set_timing_helper, sim/exec/thread_choice.hpp).
  std::uint64_t works_on_two_threads = 0;
  std::uint64_t works_on_one_thread = 0;
};

enum class LayerReplayMode { off, when_it_pays, always };

// Where a run's simulation stands: tokens back from the wafer (a decode
// batch counts its users), and stage passes, each weighted as its token
// will count (so `passes_total` is `tokens_total` times the stages a token
// crosses; it reaches that total with the last token back): the finer
// measure of the two while tokens are on the wafer.
struct RunProgress {
  int tokens_done = 0, tokens_total = 0;
  long long passes_done = 0, passes_total = 0;
};

struct RunOptions {
  bool functional = true;  // compute real numbers and compare with the reference
  // Called as the simulation starts (nothing done), after each stage pass
  // and after each token back.
  std::function<void(const RunProgress&)> progress;
  // Called with (wafers, wafer being planned) as the placement is searched
  // (PlacementRequest::progress).
  std::function<void(int, int)> placement_progress;
  // Called with (percent, 100) as a long search inside a wafer's plan
  // advances (PlacementRequest::search_progress: anneal).
  std::function<void(int, int)> search_progress;
  // Called with (matrices made, matrices in all) as a functional run makes
  // its synthetic weights (from any host thread, one call at a time).
  std::function<void(int, int)> weights_progress;
  // When set, filled with where the host's time went.
  HostTimes* host_times = nullptr;
  // Host threads. With more than one, a functional run computes its numbers
  // on a thread of their own behind the simulation (the functional lane,
  // sim/exec/value_lane.hpp), with threads - 2 more helping with its GEMVs
  // (models::WorkTeam); with one, this thread computes them beside the
  // timing. With more than one, a further thread also faults in the wafers'
  // link and ramp records ahead of the simulation (fabric::PagePrefaulter;
  // in functional runs while the weights are made). 0 = as many as the host
  // has. Results are bit-identical for every value; only the host time (and,
  // for the prefaulting, resident memory) changes.
  int threads = 0;
  // With more than one wafer, give the link records of wafers a token has
  // left back for reuse (sim/exec/record_recycler.hpp). Results are bit-identical
  // either way; off, every wafer keeps its records for the whole run.
  bool recycle_link_records = true;
  // Replay a layer that repeats the one just simulated, shifted in time,
  // instead of simulating it again (sim/exec/layer_replay.hpp): whole-region
  // layer groups crossed by one message at a time. Results are bit-identical
  // in every mode; `when_it_pays` replays where the host times measured so
  // far say the checks cost less than the layers they spare, `always`
  // wherever a replay is possible, `off` never.
  LayerReplayMode layer_replay = LayerReplayMode::when_it_pays;
  // When set (`run --trace`), filled with every stage pass and its phases
  // as the simulation runs (analysis/run_trace.hpp). Null: nothing is
  // recorded, and the results are the same either way.
  analysis::RunTrace* trace = nullptr;
};

analysis::RunResult run_scenario(const Scenario& scenario, const RunOptions& options);

}  // namespace wafersim::sim
