// wafersim serve and capacity, run as a user runs them: a static batch through
// the serving path against `wafersim run` of the same batch, conservation,
// determinism, GPU systems alone, the outputs, the calibration cache and the
// errors that send a user to the right command.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "support/wafersim_cli.hpp"

namespace {

namespace fs = std::filesystem;
using wafersim::test_support::cli_scratch_dir;
using wafersim::test_support::run_wafersim;

fs::path write(const fs::path& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}

// One column of serve's --csv, by request id (one system).
std::vector<double> csv_column(const fs::path& file, const std::string& name) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  const auto cells = [](const std::string& l) {
    std::vector<std::string> out;
    std::stringstream ss(l);
    for (std::string c; std::getline(ss, c, ',');) out.push_back(c);
    return out;
  };
  const std::vector<std::string> header = cells(line);
  const auto index = [&](const std::string& key) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), key) - header.begin());
  };
  std::map<int, double> by_id;
  while (std::getline(in, line)) {
    const std::vector<std::string> c = cells(line);
    by_id[std::stoi(c.at(index("id")))] = std::stod(c.at(index(name)));
  }
  std::vector<double> out;
  for (const auto& [id, v] : by_id) out.push_back(v);
  return out;
}

// Each user's TTFT in a `run --json` of several users: the run's mean TTFT
// plus how much later than the users' mean that user's prompt ended.
std::vector<double> run_ttft_by_user(const nlohmann::json& run) {
  std::vector<double> ends;
  for (const auto& t : run["token_records"]) {
    if (!t["prefill"].get<bool>()) continue;
    const auto u = t["user"].get<std::size_t>();
    if (u >= ends.size()) ends.resize(u + 1, 0.0);
    ends[u] = std::max(ends[u], t["end_cycle"].get<double>());
  }
  double mean = 0.0;
  for (const double e : ends) mean += e / static_cast<double>(ends.size());
  std::vector<double> out;
  for (const double e : ends)
    out.push_back(run["ttft_s"].get<double>() + (e - mean) / run["clock_hz"].get<double>());
  return out;
}

// tiny-llama on the small mesh serving the trace in `d`/trace.csv, prefill
// first, up to 16 sequences, calibrated with prompt blocks of 8 (as `run`
// with prefill_block: 8 and the same reservation): the scenario the
// serve-against-run checks share.
fs::path tiny_trace_scenario(const fs::path& d, const std::string& trace) {
  write(d, "trace.csv", trace);
  return write(d, "s.yaml", R"(name: tiny-trace
hardware: small
model: tiny-llama
traffic: {trace: trace.csv}
deployment:
  wafer: {max_batch: 16, prefill_block: 8}
  prefill: {policy: prefill-first}
compare_with: []
)");
}

// `run` of a tiny trace scenario's requests as engine users (`workload`, a
// flow mapping with per-user lengths and arrivals_s) on the serving
// placement: each user's last token in seconds, and its decode records.
struct EngineUsers {
  std::vector<double> last_token_s;
  std::vector<int> decode_records;
};
EngineUsers run_as_users(const fs::path& scenario, const std::string& workload) {
  const auto run = run_wafersim("run " + scenario.string() +
                                " --json --timing-only --set traffic=null --set deployment=null "
                                "--set 'placement.reserve={users: 16, context_tokens: 120}' "
                                "--set 'workload=" +
                                workload + "'");
  EXPECT_EQ(run.code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EngineUsers out;
  out.last_token_s.assign(j["users"].get<std::size_t>(), 0.0);
  out.decode_records.assign(out.last_token_s.size(), 0);
  for (const auto& t : j["token_records"]) {
    const auto u = t["user"].get<std::size_t>();
    out.last_token_s[u] =
        std::max(out.last_token_s[u], t["end_cycle"].get<double>() / j["clock_hz"].get<double>());
    if (!t["prefill"].get<bool>()) ++out.decode_records[u];
  }
  return out;
}

// 16 requests at t = 0, 96 prompt + 12 output tokens each, prefill first: a
// static batch. Its decode steps come from the calibration grid, interpolated
// at contexts between its points; `run` of the same 16 users decoding from
// context 96 on the same placement measures them directly. The whole batch
// ends within 2% of `run` of the same 16 users (-0.2% measured): the grid
// sends prompts of the traffic's longest length 2, 4, 8 and 16 at once, so the
// links the 16 prompts share on this 64x64 mesh are in it (-24% when it sent
// 4 prompts of at most 32 tokens). A batch of 12, between the grid's numbers
// of prompts in flight, measures +1.7%; held to 3%.
// Each prompt's first token comes at its own place in the prefill-first
// iteration, as the engine's come one after another: mean TTFT 290.9 us
// against the engine's 292.9 (-0.7%; 453.4 when every prompt's came with the
// last one's), each user within -0.4% to -1.5% (the 2.0 us of wafer I/O that
// `run`'s TTFT adds, 1.5% of user 0's 130 us; batch of 12: -1.0% mean, -1.9%
// at worst). Held to 2% on the mean and 3% per user. The mean time between
// tokens then carries the first token's wait for the rest of the prompts, as
// in the engine: 21.65 us against `run`'s 21.35 (+1.4%), held to 3%; its
// median is the decode step (+0.1%).
TEST(ServeCli, StaticBatchDecodesAsRunDoes) {
  const fs::path d = cli_scratch_dir("serve_static");
  const auto batch_of = [&](int n) {
    std::string trace = "arrival_s,prompt_tokens,output_tokens\n";
    for (int i = 0; i < n; ++i) trace += "0,96,12\n";
    return tiny_trace_scenario(d, trace);
  };
  const fs::path sc = batch_of(16);
  const std::string serve_args = "serve " + sc.string() + " --json --cache " + (d / "c").string();
  const auto serve = run_wafersim(serve_args + " --csv " + (d / "r.csv").string());
  ASSERT_EQ(serve.code, 0) << serve.err;
  const auto s = nlohmann::json::parse(serve.out)["systems"][0];
  EXPECT_EQ(s["served"], 16);
  EXPECT_EQ(s["tokens_generated"], 16 * 12);
  EXPECT_EQ(s["tokens_asked"], 16 * 12);
  const std::string same =
      " --json --timing-only --set traffic=null --set deployment=null --set "
      "'placement.reserve={users: 16, context_tokens: 108}' ";
  const auto decode = run_wafersim("run " + sc.string() + same +
                                   "--set 'workload={prompt_tokens: 1, cached_tokens: 95, "
                                   "generate_tokens: 12, users: 16}'");
  ASSERT_EQ(decode.code, 0) << decode.err;
  const double direct = nlohmann::json::parse(decode.out)["inter_token_latency_s"].get<double>();
  const double served = s["tbt_s"]["p50"].get<double>();
  EXPECT_NEAR(served / direct, 1.0, 0.02) << "serve " << served << " run " << direct;
  const auto batch_run = [&](int users) {
    const auto batch = run_wafersim("run " + sc.string() + same +
                                    "--set 'workload={prompt_tokens: 96, generate_tokens: 12, "
                                    "users: " +
                                    std::to_string(users) + ", prefill_block: 8}'");
    EXPECT_EQ(batch.code, 0) << batch.err;
    return nlohmann::json::parse(batch.out);
  };
  const nlohmann::json run16 = batch_run(16);
  EXPECT_NEAR(s["end_to_end_s"]["max"].get<double>() / run16["total_time_s"].get<double>(), 1.0,
              0.02);
  EXPECT_NEAR(s["tbt_s"]["mean"].get<double>() / run16["inter_token_latency_s"].get<double>(), 1.0,
              0.03);
  EXPECT_NEAR(s["ttft_s"]["mean"].get<double>() / run16["ttft_s"].get<double>(), 1.0, 0.02);
  const std::vector<double> engine = run_ttft_by_user(run16);
  const std::vector<double> ttft = csv_column(d / "r.csv", "ttft_s");
  ASSERT_EQ(ttft.size(), 16u);
  ASSERT_EQ(engine.size(), 16u);
  for (std::size_t u = 0; u < 16; ++u)
    EXPECT_NEAR(ttft[u] / engine[u], 1.0, 0.03)
        << "user " << u << ": serve " << ttft[u] << " run " << engine[u];
  // The same grid (the longest prompt and the batch are the same).
  batch_of(12);
  const auto twelve = run_wafersim(serve_args);
  ASSERT_EQ(twelve.code, 0) << twelve.err;
  const auto t = nlohmann::json::parse(twelve.out);
  EXPECT_NE(t["calibration"].get<std::string>().find("read from"), std::string::npos);
  const nlohmann::json run12 = batch_run(12);
  EXPECT_NEAR(
      t["systems"][0]["end_to_end_s"]["max"].get<double>() / run12["total_time_s"].get<double>(),
      1.0, 0.03);
  EXPECT_NEAR(t["systems"][0]["ttft_s"]["mean"].get<double>() / run12["ttft_s"].get<double>(), 1.0,
              0.02);
  // The grid against the engine off its points (decode, prefill, prompts in
  // flight): within the issue's 5%.
  const auto bench =
      run_wafersim("bench steps --scenario " + sc.string() + " --cache " + (d / "c").string());
  ASSERT_EQ(bench.code, 0) << bench.err;
  EXPECT_NE(bench.out.find("stream"), std::string::npos) << bench.out;
  const std::string marker = "largest error ";
  const std::size_t at = bench.out.find(marker);
  ASSERT_NE(at, std::string::npos) << bench.out;
  EXPECT_LE(std::stod(bench.out.substr(at + marker.size())), 5.0) << bench.out;
}

// Which stage order holds is the engine's to say: request A (96-token
// prompt, 24 tokens) arrives at 0, B (the same) at 100 us while A decodes.
// `run` with the same two users (workload.arrivals_s) sends B's prompt
// blocks in at its arrival, and A's next token trails them through every
// stage. The serving simulation with fifo stages (the default) gives each
// request's last token within 2% of the engine's (measured -0.7% and
// -0.2%); with decode-first A's tokens pass B's blocks and A ends 7% early.
TEST(ServeCli, ADecodeTokenTrailsALaterPromptAsInTheEngine) {
  const fs::path d = cli_scratch_dir("serve_staggered");
  const fs::path sc =
      tiny_trace_scenario(d, "arrival_s,prompt_tokens,output_tokens\n0,96,24\n0.0001,96,24\n");
  std::vector<std::string> calibrations;
  const auto served = [&](const std::string& order) {
    const fs::path csv = d / ("r-" + order + ".csv");
    const auto o = run_wafersim("serve " + sc.string() + " --json --cache " + (d / "c").string() +
                                " --set deployment.wafer.stage_order=" + order + " --csv " +
                                csv.string());
    EXPECT_EQ(o.code, 0) << o.err;
    calibrations.push_back(nlohmann::json::parse(o.out)["calibration"].get<std::string>());
    return csv_column(csv, "last_token_s");
  };
  const std::vector<double> fifo = served("fifo"), decode_first = served("decode-first");
  // The stage order is the serving simulation's, not the calibration runs':
  // the second study reads the grid the first measured.
  EXPECT_EQ(calibrations[0].find("read from"), std::string::npos) << calibrations[0];
  EXPECT_NE(calibrations[1].find("read from"), std::string::npos) << calibrations[1];
  const std::vector<double> last =
      run_as_users(sc,
                   "{prompt_tokens: 96, generate_tokens: 24, users: 2, prefill_block: 8, "
                   "arrivals_s: [0, 0.0001]}")
          .last_token_s;
  ASSERT_EQ(last.size(), 2u);
  ASSERT_EQ(fifo.size(), 2u);
  ASSERT_EQ(decode_first.size(), 2u);
  for (std::size_t u = 0; u < 2; ++u)
    EXPECT_NEAR(fifo[u] / last[u], 1.0, 0.02)
        << "request " << u << ": serve " << fifo[u] << " run " << last[u];
  EXPECT_LT(decode_first[0] / last[0], 0.95) << decode_first[0] << " against " << last[0];
}

// Four requests of different prompt and output lengths, arriving while the
// earlier ones decode: `run` with the same users (per-user prompt_tokens and
// generate_tokens, arrivals_s) measures each one's last token through the
// cycle-level engine, prompts and decode tokens at their own contexts
// sharing the stages. The serving simulation (prefill first; the engine's
// host, like it, sends a prompt whole) ends each request within 4% of the
// engine (measured -1.8%, -0.7%, +2.7%, +0.6%).
TEST(ServeCli, RequestsOfDifferentLengthsEndAsInTheEngine) {
  const fs::path d = cli_scratch_dir("serve_mixed");
  const fs::path sc = tiny_trace_scenario(
      d, "arrival_s,prompt_tokens,output_tokens\n0,96,24\n0.00005,32,40\n0.0001,64,8\n"
         "0.0002,16,30\n");
  const fs::path csv = d / "r.csv";
  const auto served = run_wafersim("serve " + sc.string() + " --cache " + (d / "c").string() +
                                   " --csv " + csv.string());
  ASSERT_EQ(served.code, 0) << served.err;
  const std::vector<double> serve = csv_column(csv, "last_token_s");
  const EngineUsers run = run_as_users(
      sc,
      "{prompt_tokens: [96, 32, 64, 16], generate_tokens: [24, 40, 8, 30], users: 4, "
      "prefill_block: 8, arrivals_s: [0, 0.00005, 0.0001, 0.0002]}");
  // Each its own output, less the first token (the prompt's pass gives it).
  EXPECT_EQ(run.decode_records, (std::vector<int>{23, 39, 7, 29}));
  const std::vector<double>& last = run.last_token_s;
  ASSERT_EQ(last.size(), 4u);
  ASSERT_EQ(serve.size(), 4u);
  for (std::size_t u = 0; u < 4; ++u)
    EXPECT_NEAR(serve[u] / last[u], 1.0, 0.04)
        << "request " << u << ": serve " << serve[u] << " run " << last[u];
}

const char* kOpen = R"(name: open
hardware: small
model: tiny-llama
traffic:
  seed: 3
  arrivals: {process: poisson, rate: 40/s}
  requests: 300
  prompt_tokens: {uniform: [8, 60]}
  output_tokens: {uniform: [4, 30]}
deployment: {wafer: {max_batch: 8}}
compare_with: [dgx-h100]
slo: {ttft: 100 ms}
serving: {round_trip: 10 ms, connection_setup: 40 ms}
)";

TEST(ServeCli, SameSeedSameBitsAndEveryTokenAskedFor) {
  const fs::path d = cli_scratch_dir("serve_bits");
  const fs::path sc = write(d, "s.yaml", kOpen);
  const std::string args = "serve " + sc.string() + " --json --cache " + (d / "c").string();
  const auto a = run_wafersim(args);
  ASSERT_EQ(a.code, 0) << a.err;
  const auto b = run_wafersim(args);  // the grid from the cache this time
  ASSERT_EQ(b.code, 0) << b.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_NE(ja["calibration"].get<std::string>().find("cached in"), std::string::npos);
  EXPECT_NE(jb["calibration"].get<std::string>().find("read from"), std::string::npos);
  ja["calibration"] = "";
  jb["calibration"] = "";
  EXPECT_EQ(ja.dump(), jb.dump());
  // Wafer and H100, each per request and persistent.
  ASSERT_EQ(ja["systems"].size(), 4u);
  for (const auto& s : ja["systems"]) {
    EXPECT_EQ(s["served"], 300);
    EXPECT_EQ(s["tokens_generated"], s["tokens_asked"]);
    EXPECT_NEAR(s["littles_l"].get<double>(), s["littles_lambda_w"].get<double>(),
                1e-9 + 1e-6 * s["littles_l"].get<double>());
  }
  // The persistent connection's TTFT: 80% of the round trip and half the set-up saved.
  const double fresh = ja["systems"][0]["ttft_s"]["p50"].get<double>();
  const double kept = ja["systems"][1]["ttft_s"]["p50"].get<double>();
  EXPECT_NEAR(fresh - kept, 0.8 * 0.010 + 0.5 * 0.040, 0.002);
}

TEST(ServeCli, OutputsHdf5AndCsvWithEveryRequest) {
  const fs::path d = cli_scratch_dir("serve_out");
  const fs::path sc = write(d, "s.yaml", kOpen);
  const auto o = run_wafersim("serve " + sc.string() + " --no-cache --out " +
                              (d / "r.h5").string() + " --csv " + (d / "r.csv").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::exists(d / "r.h5"));
  EXPECT_TRUE(fs::exists(d / "r.h5.scenario.yaml"));
  std::ifstream csv(d / "r.csv");
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 1 + 4 * 300);
  EXPECT_NE(o.out.find("SLO met"), std::string::npos);
}

TEST(ServeCli, GpuSystemsAloneNeedNoWafer) {
  const fs::path d = cli_scratch_dir("serve_gpu");
  const fs::path sc = write(d, "s.yaml", R"(name: gpus
model: llama-3.1-8b
traffic:
  arrivals: {rate: 5/s}
  requests: 200
  prompt_tokens: 1024
  output_tokens: 128
compare_with: [dgx-h100, dgx-a100-40gb]
)");
  const auto o = run_wafersim("serve " + sc.string() + " --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["systems"].size(), 2u);
  EXPECT_EQ(j["systems"][0]["system"], "dgx-h100");
  EXPECT_EQ(j["systems"][1]["tokens_generated"], 200 * 128);
  // The same scenario is not something `run` simulates, and says what does.
  const auto r = run_wafersim("run " + sc.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("wafersim serve"), std::string::npos) << r.err;
}

TEST(ServeCli, CapacityFindsARateWithinTheSloAndTheReplicasForATarget) {
  const fs::path d = cli_scratch_dir("serve_capacity");
  const fs::path sc = write(d, "s.yaml", kOpen);
  const auto o =
      run_wafersim("capacity " + sc.string() + " --target-rate 100 --cache " + (d / "c").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("req/s/replica"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("dgx-h100"), std::string::npos) << o.out;
}

// --json and --report: every load the search simulated is kept; the highest
// that met the SLO is the capacity, every load above it that was tried
// missed it; the report is written whole and says so.
TEST(ServeCli, CapacityJsonKeepsTheSearchAndTheReportDrawsIt) {
  const fs::path d = cli_scratch_dir("serve_capacity_json");
  const fs::path sc = write(d, "s.yaml", kOpen);
  const fs::path html = d / "capacity.html";
  const auto o = run_wafersim("capacity " + sc.string() + " --target-rate 100 --json --report " +
                              html.string() + " --cache " + (d / "c").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["format"], "wafersim-capacity");
  EXPECT_EQ(j["load_unit"], "requests/s");
  ASSERT_FALSE(j["systems"].empty());
  for (const auto& s : j["systems"]) {
    const double cap = s["max_rate_per_replica"].get<double>();
    ASSERT_FALSE(s["probes"].empty()) << s["system"];
    bool found = cap <= 0.0;
    for (const auto& p : s["probes"]) {
      const double load = p["load"].get<double>();
      if (p["met"].get<bool>()) {
        EXPECT_LE(load, cap) << s["system"];
      } else {
        EXPECT_GT(load, cap) << s["system"];
      }
      found |= load == cap && p["met"].get<bool>();
    }
    EXPECT_TRUE(found) << "the capacity is one of the loads simulated: " << s["system"];
    if (cap > 0.0) {
      EXPECT_TRUE(s["at_max"]["slo_met"].get<bool>()) << s["system"];
      ASSERT_FALSE(s["target_checks"].empty());
      EXPECT_EQ(s["target_checks"].back()["replicas"], s["replicas_needed"]);
    }
  }
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(page.find("wafersim capacity"), std::string::npos);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("SLO bound"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_NE(o.err.find("wrote " + html.string()), std::string::npos) << o.err;
}

}  // namespace
