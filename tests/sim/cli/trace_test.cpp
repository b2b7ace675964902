// `wafersim run --trace FILE`: the Chrome trace-event JSON of a run, checked
// strictly against the trace-event format (every event has ph/ts/pid/tid,
// B/E balanced per track, X durations non-negative and properly nested,
// flow and async ids paired, ts monotone per track, ts in microseconds of
// simulated time) and against the run's own results (--json).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/wafersim_cli.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Outcome = wafersim::test_support::CliOutcome;

Outcome wafersim(const std::string& args) {
  return wafersim::test_support::run_wafersim(args);
}

std::string src(const std::string& rel) {
  return std::string(WAFERSIM_SOURCE_DIR) + "/" + rel;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

using Track = std::pair<int, int>;  // pid, tid

Track track_of(const json& e) {
  return {e["pid"].get<int>(), e["tid"].get<int>()};
}

// Microseconds agree to a few parts in 10^12 (doubles of cycles / clock).
bool same_us(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

// The trace-event format's rules, as the viewers rely on them. Returns the
// problems found (empty: none).
std::vector<std::string> format_problems(const json& trace) {
  std::vector<std::string> bad;
  if (!trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return {"no traceEvents array"};
  std::map<Track, double> last_ts;                           // X, B, E, s, f, per track
  std::map<std::pair<int, std::string>, double> counter_ts;  // C, per (pid, name)
  std::map<Track, std::vector<double>> open_b;               // B/E stacks
  std::map<Track, std::vector<double>> open_x_end;           // enclosing X ends
  std::map<std::string, int> flow_starts, flow_ends;
  std::map<std::string, double> flow_start_ts;
  std::map<std::string, double> async_begin;
  std::size_t i = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string at = "event " + std::to_string(i++) + ": ";
    for (const char* key : {"ph", "ts", "pid", "tid", "name"})
      if (!e.contains(key)) bad.push_back(at + "no " + key);
    if (!e.contains("ph") || !e.contains("ts") || !e.contains("pid") || !e.contains("tid"))
      continue;
    const std::string ph = e["ph"];
    const double ts = e["ts"];
    const Track track = track_of(e);
    if (ts < 0) bad.push_back(at + "negative ts");
    if (ph == "M") continue;
    if (ph == "C") {
      auto& last = counter_ts[{track.first, e["name"].get<std::string>()}];
      if (ts < last) bad.push_back(at + "counter ts goes back");
      last = ts;
      if (!e.contains("args") || e["args"].empty()) bad.push_back(at + "counter without values");
      continue;
    }
    if (ph == "b" || ph == "e") {
      const std::string id = e["cat"].get<std::string>() + "/" + e["id"].dump();
      if (ph == "b") {
        if (async_begin.count(id)) bad.push_back(at + "async id begun twice");
        async_begin[id] = ts;
      } else {
        if (!async_begin.count(id))
          bad.push_back(at + "async end without begin");
        else if (ts < async_begin[id])
          bad.push_back(at + "async end before its begin");
        async_begin.erase(id);
      }
      continue;
    }
    // Events on a thread track: time never goes back.
    auto it = last_ts.find(track);
    if (it != last_ts.end() && ts < it->second) bad.push_back(at + "ts goes back on its track");
    last_ts[track] = ts;
    if (ph == "X") {
      if (!e.contains("dur") || e["dur"].get<double>() < 0) {
        bad.push_back(at + "X without a non-negative dur");
        continue;
      }
      const double end = ts + e["dur"].get<double>();
      // Slices that ended by this one's start are closed; the one left
      // open encloses it, so it must end within it.
      std::vector<double>& stack = open_x_end[track];
      while (!stack.empty() && (stack.back() < ts || same_us(stack.back(), ts))) stack.pop_back();
      if (!stack.empty() && end > stack.back() && !same_us(end, stack.back()))
        bad.push_back(at + "X overlaps its enclosing slice without nesting");
      stack.push_back(end);
    } else if (ph == "B") {
      open_b[track].push_back(ts);
    } else if (ph == "E") {
      if (open_b[track].empty())
        bad.push_back(at + "E without B");
      else
        open_b[track].pop_back();
    } else if (ph == "s" || ph == "f") {
      const std::string id = e["cat"].get<std::string>() + "/" + e["id"].dump();
      if (ph == "s") {
        ++flow_starts[id];
        flow_start_ts[id] = ts;
      } else {
        ++flow_ends[id];
        if (flow_start_ts.count(id) && ts < flow_start_ts[id])
          bad.push_back(at + "flow ends before it starts");
      }
    } else {
      bad.push_back(at + "unexpected ph " + ph);
    }
  }
  for (const auto& [track, stack] : open_b)
    if (!stack.empty()) bad.push_back("B without E on a track");
  for (const auto& [id, n] : flow_starts)
    if (n != 1 || flow_ends[id] != 1) bad.push_back("flow " + id + " not one start and one end");
  for (const auto& [id, n] : flow_ends)
    if (!flow_starts.count(id)) bad.push_back("flow " + id + " ends without a start");
  if (!async_begin.empty()) bad.push_back("async slices left open");
  return bad;
}

struct QuickstartTrace {
  json trace;
  json results;
};

// One run of the quickstart with --trace and --json, shared by the tests.
const QuickstartTrace& quickstart_trace() {
  static const QuickstartTrace t = [] {
    const fs::path d = wafersim::test_support::cli_scratch_dir("trace");
    const fs::path file = d / "trace.json";
    const Outcome o =
        wafersim("run " + src("scenarios/quickstart.yaml") + " --json --trace " + file.string());
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.err.find("wrote " + file.string()), std::string::npos) << o.err;
    QuickstartTrace q;
    q.results = json::parse(o.out);
    q.trace = read_json(file);
    return q;
  }();
  return t;
}

std::vector<json> events(const json& trace, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  return out;
}

TEST(Trace, FollowsTheTraceEventFormat) {
  const json& trace = quickstart_trace().trace;
  const std::vector<std::string> bad = format_problems(trace);
  EXPECT_TRUE(bad.empty()) << bad.size() << " problems, first: " << (bad.empty() ? "" : bad[0]);
  EXPECT_FALSE(events(trace, "X", "stage").empty());
  EXPECT_FALSE(events(trace, "X", "phase").empty());
  EXPECT_FALSE(events(trace, "s").empty());
  const json& other = trace["otherData"];
  EXPECT_EQ(other["format"], "wafersim trace");
  EXPECT_EQ(other["truncated"], false);
  EXPECT_EQ(other["dropped_passes"], 0);
}

TEST(Trace, TheValidatorRejectsBrokenTraces) {
  // A checker that passes everything proves nothing: each broken event,
  // added to the real trace, is found for its own reason.
  const json& good = quickstart_trace().trace;
  const auto problems_with = [&](const json& extra) {
    json t = good;
    t["traceEvents"].push_back(extra);
    return format_problems(t);
  };
  const auto names = [](const std::vector<std::string>& problems, const std::string& what) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(what) != std::string::npos; });
  };
  json negative = events(good, "X", "stage").back();
  negative["dur"] = -1.0;
  EXPECT_TRUE(names(problems_with(negative), "non-negative dur"));
  json lone_flow = events(good, "s").back();
  lone_flow["id"] = 987654321;
  EXPECT_TRUE(names(problems_with(lone_flow), "not one start and one end"));
  json early = events(good, "X", "stage").back();
  early["ts"] = 0.0;
  early["dur"] = 0.0;
  EXPECT_TRUE(names(problems_with(early), "ts goes back"));
  json straddling = events(good, "X", "stage").back();  // past its track's last slice
  straddling["ts"] = straddling["ts"].get<double>() + straddling["dur"].get<double>() / 2;
  EXPECT_TRUE(names(problems_with(straddling), "without nesting")) << straddling.dump();
  json no_pid = events(good, "X", "phase").back();
  no_pid.erase("pid");
  EXPECT_TRUE(names(problems_with(no_pid), "no pid"));
  json unbalanced = events(good, "X", "phase").back();
  unbalanced["ph"] = "B";
  EXPECT_TRUE(names(problems_with(unbalanced), "B without E"));
  EXPECT_TRUE(format_problems(good).empty());
}

TEST(Trace, TimesAreMicrosecondsOfSimulatedTime) {
  const QuickstartTrace& q = quickstart_trace();
  const double clock = q.results["clock_hz"];
  ASSERT_GT(clock, 0.0);
  EXPECT_EQ(q.trace["otherData"]["clock_hz"].get<double>(), clock);
  for (const json& x : events(q.trace, "X", "stage")) {
    const double enter = x["args"]["enter_cycle"].get<double>() / clock * 1e6;
    const double leave = x["args"]["leave_cycle"].get<double>() / clock * 1e6;
    ASSERT_TRUE(same_us(x["ts"], enter)) << x.dump();
    ASSERT_TRUE(same_us(x["ts"].get<double>() + x["dur"].get<double>(), leave)) << x.dump();
  }
  // The last slice ends when the run does.
  double last = 0;
  for (const json& x : events(q.trace, "X"))
    last = std::max(last, x["ts"].get<double>() + x["dur"].get<double>());
  EXPECT_TRUE(same_us(last, q.results["total_cycles"].get<double>() / clock * 1e6))
      << last << " vs " << q.results["total_cycles"];
}

TEST(Trace, OneTrackPerPipelineStageEachDecodeTokenCrossesAll) {
  const QuickstartTrace& q = quickstart_trace();
  std::set<Track> named;
  for (const json& m : events(q.trace, "M"))
    if (m["name"] == "thread_name" && m["pid"] != 1) named.insert(track_of(m));
  const std::size_t stages = q.trace["otherData"]["stages"];
  EXPECT_EQ(named.size(), stages);
  // tiny-llama: five stages per layer and the head.
  EXPECT_GT(stages, 5u);
  EXPECT_EQ((stages - 1) % 5, 0u);
  std::set<Track> used;
  std::map<int, std::set<Track>> decode_tracks;  // position -> tracks it passed
  for (const json& x : events(q.trace, "X", "stage")) {
    used.insert(track_of(x));
    if (!x["args"]["prefill"].get<bool>())
      decode_tracks[x["args"]["position"].get<int>()].insert(track_of(x));
  }
  EXPECT_EQ(used, named);
  ASSERT_FALSE(decode_tracks.empty());
  for (const auto& [position, tracks] : decode_tracks) EXPECT_EQ(tracks, named) << position;
}

TEST(Trace, ADecodeTokensStageSlicesSpanItsReportedCycles) {
  const QuickstartTrace& q = quickstart_trace();
  const double clock = q.results["clock_hz"];
  // Per position (one user): the first entry and the last exit, and the sum
  // of its stage slices and of their phases.
  struct Span {
    double first = 1e300, last = 0, stage_sum = 0;
  };
  std::map<int, Span> spans;
  for (const json& x : events(q.trace, "X", "stage")) {
    if (x["args"]["prefill"].get<bool>()) continue;
    Span& s = spans[x["args"]["position"].get<int>()];
    s.first = std::min(s.first, x["ts"].get<double>());
    s.last = std::max(s.last, x["ts"].get<double>() + x["dur"].get<double>());
    s.stage_sum += x["dur"].get<double>();
  }
  std::size_t checked = 0;
  for (const json& r : q.results["token_records"]) {
    if (r["prefill"].get<bool>()) continue;
    const auto it = spans.find(r["position"].get<int>());
    ASSERT_NE(it, spans.end()) << r.dump();
    const double start = r["start_cycle"].get<double>() / clock * 1e6;
    const double end = r["end_cycle"].get<double>() / clock * 1e6;
    EXPECT_TRUE(same_us(it->second.first, start)) << it->second.first << " vs " << start;
    EXPECT_TRUE(same_us(it->second.last, end)) << it->second.last << " vs " << end;
    // One token in flight at a time: its stages run back to back.
    EXPECT_NEAR(it->second.stage_sum, end - start, 1e-6 * (end - start)) << r.dump();
    ++checked;
  }
  EXPECT_EQ(checked, spans.size());
  EXPECT_EQ(checked, q.results["tokens"].size() - 1);  // the first comes from the prompt's pass
}

TEST(Trace, PhasesTileTheirStagePass) {
  const json& trace = quickstart_trace().trace;
  // Phases follow their pass on the same track (the message's flow events
  // between them), back to back from its entry.
  const std::vector<json> all = trace["traceEvents"].get<std::vector<json>>();
  const auto is_flow = [](const json& e) { return e["ph"] == "s" || e["ph"] == "f"; };
  std::size_t passes_with_phases = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const json& x = all[i];
    if (x["ph"] != "X" || x["cat"] != "stage") continue;
    double at = x["ts"], sum = 0;
    std::size_t phases = 0;
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      if (is_flow(all[j])) continue;
      if (all[j]["ph"] != "X" || all[j]["cat"] != "phase") break;
      ASSERT_EQ(all[j]["tid"], x["tid"]);
      ASSERT_TRUE(same_us(all[j]["ts"], at)) << all[j].dump();
      at = all[j]["ts"].get<double>() + all[j]["dur"].get<double>();
      sum += all[j]["dur"].get<double>();
      ++phases;
    }
    if (phases == 0) continue;  // the head passes prompt tokens without work
    ++passes_with_phases;
    EXPECT_TRUE(same_us(at, x["ts"].get<double>() + x["dur"].get<double>())) << x.dump();
    EXPECT_NEAR(sum, x["dur"].get<double>(), 1e-6 * std::max(1.0, x["dur"].get<double>()));
  }
  EXPECT_GT(passes_with_phases, 0u);
}

TEST(Trace, FlowsJoinConsecutiveStagesOfOneMessage) {
  const json& trace = quickstart_trace().trace;
  // The pass each flow event binds to: the stage slice of its track around it.
  std::map<std::string, json> starts, ends;
  std::map<Track, json> current_pass;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "stage") current_pass[track_of(e)] = e;
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    ASSERT_TRUE(current_pass.count(track_of(e))) << e.dump();
    const json& pass = current_pass[track_of(e)];
    const double ts = e["ts"];
    EXPECT_GE(ts, pass["ts"].get<double>()) << e.dump();
    EXPECT_LE(ts, pass["ts"].get<double>() + pass["dur"].get<double>()) << e.dump();
    (e["ph"] == "s" ? starts : ends)[e["id"].dump()] = pass;
  }
  ASSERT_FALSE(starts.empty());
  EXPECT_EQ(starts.size(), ends.size());
  for (const auto& [id, from] : starts) {
    ASSERT_TRUE(ends.count(id)) << id;
    const json& to = ends[id];
    EXPECT_EQ(to["args"]["message"], from["args"]["message"]) << id;
    EXPECT_EQ(to["tid"].get<int>(), from["tid"].get<int>() + 1) << id;  // the next stage
    EXPECT_GE(to["ts"].get<double>() + 1e-9, from["ts"].get<double>() + from["dur"].get<double>());
  }
}

TEST(Trace, CountersMatchTheRunsLinkBytesAndSram) {
  const QuickstartTrace& q = quickstart_trace();
  double max_link = 0, prev = 0;
  std::size_t samples = 0;
  for (const json& c : events(q.trace, "C")) {
    if (c["name"] == "link bytes") {
      const double b = c["args"]["bytes"];
      EXPECT_GE(b, prev);  // counted, never uncounted
      prev = b;
      max_link = std::max(max_link, b);
      ++samples;
    } else if (c["name"] == "SRAM used") {
      EXPECT_EQ(c["args"]["bytes"], q.results["sram_bytes_used"]);
    } else if (c["name"] == "link load") {
      EXPECT_GE(c["args"]["bytes_per_cycle"].get<double>(), 0.0);
    }
  }
  EXPECT_GT(samples, 0u);
  // One wafer: by the run's end its links carried what the results count.
  EXPECT_EQ(max_link, q.results["total_link_bytes"].get<double>());
}

TEST(Trace, ResultsAreTheSameWithAndWithoutIt) {
  const Outcome plain = wafersim("run " + src("scenarios/quickstart.yaml") + " --json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(json::parse(plain.out), quickstart_trace().results);
}

TEST(Trace, AMissingFolderIsAnErrorBeforeSimulating) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("trace_missing");
  const std::string file = (d / "no-such-folder" / "t.json").string();
  const fs::path results = d / "r.h5";
  const Outcome o = wafersim("run " + src("scenarios/quickstart.yaml") + " --out " +
                             results.string() + " --trace " + file);
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find((d / "no-such-folder").string() + " does not exist"), std::string::npos)
      << o.err;
  // The results are written after the simulation: none means it never ran.
  EXPECT_FALSE(fs::exists(results));
  EXPECT_TRUE(o.out.empty()) << o.out;
  EXPECT_FALSE(fs::exists(file));
  // A folder given as the file is an error too.
  const Outcome f = wafersim("run " + src("scenarios/quickstart.yaml") + " --trace " + d.string());
  EXPECT_EQ(f.code, 1);
  EXPECT_NE(f.err.find("it is a folder"), std::string::npos) << f.err;
}

}  // namespace
