#include "analysis/trace_output.hpp"

#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/hdf5_output.hpp"
#include "analysis/output_file.hpp"

namespace wafersim::analysis {

namespace {

// Process ids: the host (token tracks) first, then one per wafer.
constexpr int kHostPid = 1;
constexpr int kTokenTid = 1;
int wafer_pid(int wafer) {
  return 2 + wafer;
}
// Thread ids: one per pipeline stage, in pipeline order (the target's stages,
// then the draft's).
int stage_tid(std::uint32_t stage) {
  return static_cast<int>(stage) + 1;
}

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

std::string token_name(int user, int position, int tokens) {
  if (tokens > 1) return fmt::format("user {} pos {}-{}", user, position, position + tokens - 1);
  return fmt::format("user {} pos {}", user, position);
}

class TraceText {
 public:
  explicit TraceText(double clock_hz) : us_per_cycle_(1e6 / clock_hz) {}

  double us(Cycles c) const { return static_cast<double>(c.value) * us_per_cycle_; }

  // Opens the next event: `{"name":...,"ph":...,"ts":...,"pid":...,"tid":...`
  // (the caller adds its other fields and closes it with end()).
  void begin(const std::string& quoted_name, char ph, double ts, int pid, int tid) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    fmt::format_to(std::back_inserter(out_), R"({{"name":{},"ph":"{}","ts":{},"pid":{},"tid":{})",
                   quoted_name, ph, ts, pid, tid);
  }
  template <class... Args>
  void add(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(out_), f, std::forward<Args>(args)...);
  }
  void end() { out_ += '}'; }
  std::string& text() { return out_; }

 private:
  double us_per_cycle_;
  std::string out_;
  bool first_ = true;
};

void metadata(TraceText& t, const char* name, int pid, int tid, const std::string& key,
              const std::string& quoted_value) {
  t.begin(quoted(name), 'M', 0.0, pid, tid);
  t.add(R"(,"args":{{"{}":{}}})", key, quoted_value);
  t.end();
}

void write_tracks(TraceText& t, const RunTrace& trace) {
  metadata(t, "process_name", kHostPid, 0, "name", quoted("host"));
  metadata(t, "process_sort_index", kHostPid, 0, "sort_index", "0");
  metadata(t, "thread_name", kHostPid, kTokenTid, "name", quoted("tokens"));
  for (std::size_t w = 0; w < trace.wafers.size(); ++w) {
    const int pid = wafer_pid(static_cast<int>(w));
    metadata(t, "process_name", pid, 0, "name", quoted(trace.wafers[w].name));
    metadata(t, "process_sort_index", pid, 0, "sort_index", std::to_string(w + 1));
  }
  for (std::size_t s = 0; s < trace.stages.size(); ++s) {
    const TraceStage& st = trace.stages[s];
    const int pid = wafer_pid(st.wafer), tid = stage_tid(static_cast<std::uint32_t>(s));
    metadata(t, "thread_name", pid, tid, "name", quoted(st.name));
    metadata(t, "thread_sort_index", pid, tid, "sort_index", std::to_string(s));
  }
  // The placement allocates every byte (weights, KV cache) before the run:
  // one sample per wafer.
  for (std::size_t w = 0; w < trace.wafers.size(); ++w) {
    t.begin(quoted("SRAM used"), 'C', 0.0, wafer_pid(static_cast<int>(w)), 0);
    t.add(R"(,"args":{{"bytes":{}}})", trace.wafers[w].sram_bytes_used);
    t.end();
  }
}

// The host's view of every token message: from when it left the host (or
// its id was ready) to when its output was ready, as the run's
// token_records say. Async slices: a user's prompt tokens overlap.
void write_tokens(TraceText& t, const RunResult& result) {
  for (std::size_t k = 0; k < result.token_records.size(); ++k) {
    const TokenRecord& r = result.token_records[k];
    const std::string name =
        quoted(token_name(r.user, r.position, 1) + (r.prefill ? " prompt" : " decode"));
    const Cycles end = std::max(r.start_cycle, r.end_cycle);
    t.begin(name, 'b', t.us(r.start_cycle), kHostPid, kTokenTid);
    t.add(R"(,"cat":"token","id":{},"args":{{"user":{},"position":{},"prefill":{},)"
          R"("start_cycle":{},"end_cycle":{}}})",
          k, r.user, r.position, r.prefill, r.start_cycle.value, r.end_cycle.value);
    t.end();
    t.begin(name, 'e', t.us(end), kHostPid, kTokenTid);
    t.add(R"(,"cat":"token","id":{})", k);
    t.end();
  }
}

void write_passes(TraceText& t, const RunTrace& trace) {
  // The pass each pass's message makes next and made before (none: -1).
  const std::size_t n = trace.passes.size();
  std::vector<std::int64_t> next(n, -1), prev(n, -1);
  {
    std::vector<std::int64_t> last;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t m = trace.passes[k].message;
      if (m >= last.size()) last.resize(m + 1, -1);
      if (last[m] >= 0) {
        prev[k] = last[m];
        next[static_cast<std::size_t>(last[m])] = static_cast<std::int64_t>(k);
      }
      last[m] = static_cast<std::int64_t>(k);
    }
  }
  std::vector<std::string> labels;
  for (const std::string& l : trace.labels) labels.push_back(quoted(l));
  // Per wafer: the last link-load sample (time, bytes).
  std::vector<Cycles> load_at(trace.wafers.size());
  std::vector<std::uint64_t> load_bytes(trace.wafers.size(), 0);

  for (std::size_t k = 0; k < n; ++k) {
    const TracePass& p = trace.passes[k];
    const int wafer = trace.stages[p.stage].wafer;
    const int pid = wafer_pid(wafer), tid = stage_tid(p.stage);
    // A flow event binds to the slice around it: it sits in the middle of
    // the pass's first phase (arriving) or last phase (leaving), where no
    // other slice of the track begins or ends.
    const auto middle = [&](std::uint32_t phase) {
      if (p.phase_count == 0) return (t.us(p.enter) + t.us(p.leave)) / 2;
      const TracePhase& ph = trace.phases[p.first_phase + phase];
      return (t.us(ph.begin) + t.us(ph.end)) / 2;
    };
    const auto arrival = [&] {
      if (prev[k] < 0) return;  // the message arrives from the stage before
      t.begin(R"("message")", 'f', middle(0), pid, tid);
      t.add(R"(,"cat":"message","bp":"e","id":{})", prev[k]);
      t.end();
    };
    t.begin(quoted(token_name(p.user, p.position, p.tokens)), 'X', t.us(p.enter), pid, tid);
    t.add(R"(,"dur":{},"cat":"stage","args":{{"user":{},"position":{},"tokens":{},)"
          R"("prefill":{},"message":{},"enter_cycle":{},"leave_cycle":{}}})",
          t.us(p.leave) - t.us(p.enter), p.user, p.position, p.tokens, p.prefill, p.message,
          p.enter.value, p.leave.value);
    t.end();
    if (p.phase_count == 0) arrival();
    for (std::uint32_t i = 0; i < p.phase_count; ++i) {
      const TracePhase& ph = trace.phases[p.first_phase + i];
      t.begin(labels[ph.label], 'X', t.us(ph.begin), pid, tid);
      t.add(R"(,"dur":{},"cat":"phase","args":{{"cycles":{},"link_bytes":{}}})",
            t.us(ph.end) - t.us(ph.begin), (ph.end - ph.begin).value, ph.link_bytes);
      t.end();
      if (i == 0) arrival();
    }
    if (next[k] >= 0) {  // the message leaves for the next stage, as the pass ends
      t.begin(R"("message")", 's', middle(p.phase_count ? p.phase_count - 1 : 0), pid, tid);
      t.add(R"(,"cat":"message","id":{})", k);
      t.end();
    }
    // The wafer's links: bytes carried so far, and the mean load since the
    // last sample (stamped at its start, so that it holds over its interval).
    t.begin(R"("link bytes")", 'C', t.us(p.leave), pid, 0);
    t.add(R"(,"args":{{"bytes":{}}})", p.wafer_link_bytes);
    t.end();
    const auto w = static_cast<std::size_t>(wafer);
    if (p.leave > load_at[w]) {
      const double per_cycle = static_cast<double>(p.wafer_link_bytes - load_bytes[w]) /
                               static_cast<double>((p.leave - load_at[w]).value);
      t.begin(R"("link load")", 'C', t.us(load_at[w]), pid, 0);
      t.add(R"(,"args":{{"bytes_per_cycle":{}}})", per_cycle);
      t.end();
      load_at[w] = p.leave;
      load_bytes[w] = p.wafer_link_bytes;
    }
  }
}

}  // namespace

void check_trace_path(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw OutputError(path, "--trace needs a file name");
  if (fs::is_directory(path, ec))
    throw OutputError(
        path, "it is a folder; --trace needs a file name, e.g. " + (path / "trace.json").string());
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::exists(folder, ec))
    throw OutputError(path, "the folder " + folder.string() + " does not exist");
  if (!fs::is_directory(folder, ec)) throw OutputError(path, folder.string() + " is not a folder");
  if (::access(folder.c_str(), W_OK) != 0)
    throw OutputError(path, "the folder " + folder.string() + " is not writable");
}

std::string trace_to_json_text(const RunTrace& trace, const RunResult& result) {
  TraceText t(result.clock_hz);
  t.text() = R"({"displayTimeUnit":"ns","traceEvents":[)";
  write_tracks(t, trace);
  write_tokens(t, result);
  write_passes(t, trace);
  nlohmann::ordered_json other;
  other["format"] = "wafersim trace";
  other["version"] = kTraceFormatVersion;
  other["time_unit"] = "microseconds of simulated time";
  other["clock_hz"] = result.clock_hz;
  other["scenario"] = result.scenario_name;
  other["hardware"] = result.hardware_name;
  other["model"] = result.model_name;
  other["wafers"] = trace.wafers.size();
  other["stages"] = trace.stages.size();
  other["passes"] = trace.passes.size();
  other["phases"] = trace.phases.size();
  other["max_records"] = trace.max_records();
  other["truncated"] = trace.truncated();
  other["dropped_passes"] = trace.dropped_passes();
  other["dropped_phases"] = trace.dropped_phases();
  std::string& out = t.text();
  out += "\n],\"otherData\":";
  out += other.dump();
  out += "}\n";
  return std::move(out);
}

void write_trace(const std::filesystem::path& path, const RunTrace& trace,
                 const RunResult& result) {
  write_text_atomically(path, trace_to_json_text(trace, result));
}

}  // namespace wafersim::analysis
