// What `wafersim run --trace FILE` records of a run while it is simulated:
// every pass of a token message through a pipeline stage, the phases of that
// pass, and the links' byte count of the stage's wafer as the pass ends.
// Plain data filled by the engine only when tracing is on (RunOptions::trace);
// analysis/trace_output.hpp turns it into a Chrome trace-event JSON file.
//
// Aggregated the way a viewer can show a full wafer: one track per pipeline
// stage (a stage is a region of cores; never one track per core), its phases
// nested in each pass. The number of records is capped (max_records); what
// did not fit is counted, and the file says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "fabric/units.hpp"

namespace wafersim::analysis {

// A wafer of the run: the target's, then a speculative draft's.
struct TraceWafer {
  std::string name;  // "wafer 0", ..., "draft wafer 0", ...
  std::uint64_t sram_bytes_used = 0;
  std::uint64_t sram_bytes_capacity = 0;
};

// A pipeline stage: one SystemC process taking one token message at a time.
struct TraceStage {
  std::string name;  // "layer 3 attention", "head"; "draft ..." for the draft's
  int wafer = 0;     // index into RunTrace::wafers (where its input lands)
};

// One phase of a stage pass (or the move onto the stage: "enter ...").
struct TracePhase {
  std::uint32_t label = 0;  // index into RunTrace::labels
  Cycles begin;             // when the stage's process started it
  Cycles end;               // when its output was complete (not before begin)
  // Bytes the phase put on links (every link it crossed counted, all the
  // pipeline's wafers).
  std::uint64_t link_bytes = 0;
};

// One token message (a token, or a block of prompt tokens) through one stage.
struct TracePass {
  std::uint32_t stage = 0;    // index into RunTrace::stages
  std::uint32_t message = 0;  // the message, numbered in the order it first entered a stage
  int user = 0;
  int position = 0;
  int tokens = 1;  // > 1: a block of prompt tokens at position .. position + tokens - 1
  bool prefill = false;
  Cycles enter;                   // the stage took it from its input fifo
  Cycles leave;                   // it was handed to the next stage (or the host)
  std::uint32_t first_phase = 0;  // its phases: RunTrace::phases[first_phase, + phase_count)
  std::uint32_t phase_count = 0;
  // Bytes the links of the stage's wafer had carried when the pass ended.
  std::uint64_t wafer_link_bytes = 0;
};

class RunTrace {
 public:
  // Passes plus phases kept at most. With the flows and counters that come
  // with them a record is ~270 bytes of JSON (Llama-3.1-8B on a WSE-3:
  // ~700 records, ~190 KB per token), so the default keeps a file under
  // ~110 MB, about 570 tokens of that model.
  static constexpr std::size_t kDefaultMaxRecords = 400000;

  explicit RunTrace(std::size_t max_records = kDefaultMaxRecords) : max_records_(max_records) {}

  std::vector<TraceWafer> wafers;
  std::vector<TraceStage> stages;
  std::vector<std::string> labels;
  std::vector<TracePass> passes;  // in the order they ended (simulated time order)
  std::vector<TracePhase> phases;

  // The index of `label` in labels, added if new.
  std::uint32_t label(const std::string& text) {
    const auto [it, added] =
        label_ids_.try_emplace(text, static_cast<std::uint32_t>(labels.size()));
    if (added) labels.push_back(text);
    return it->second;
  }

  // Keeps a pass and its phases, or counts them as dropped once they would
  // take the records past the cap: a pass is kept whole or not at all, and
  // after the first one dropped every later one is too (the trace is the
  // run's beginning, without holes).
  void add_pass(TracePass pass, const std::vector<TracePhase>& pass_phases) {
    if (dropped_passes_ > 0 ||
        passes.size() + phases.size() + 1 + pass_phases.size() > max_records_) {
      ++dropped_passes_;
      dropped_phases_ += pass_phases.size();
      return;
    }
    pass.first_phase = static_cast<std::uint32_t>(phases.size());
    pass.phase_count = static_cast<std::uint32_t>(pass_phases.size());
    phases.insert(phases.end(), pass_phases.begin(), pass_phases.end());
    passes.push_back(pass);
  }

  std::size_t max_records() const { return max_records_; }
  std::uint64_t dropped_passes() const { return dropped_passes_; }
  std::uint64_t dropped_phases() const { return dropped_phases_; }
  bool truncated() const { return dropped_passes_ > 0; }

 private:
  std::size_t max_records_;
  std::uint64_t dropped_passes_ = 0;
  std::uint64_t dropped_phases_ = 0;
  std::unordered_map<std::string, std::uint32_t> label_ids_;
};

}  // namespace wafersim::analysis
