// The wafersim command line, run as a user runs it: a child process, its exit
// code, stdout and stderr.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/wafersim_cli.hpp"

namespace {

namespace fs = std::filesystem;

using Outcome = wafersim::test_support::CliOutcome;

Outcome wafersim(const std::string& args) {
  return wafersim::test_support::run_wafersim(args);
}

std::string src(const std::string& rel) {
  return std::string(WAFERSIM_SOURCE_DIR) + "/" + rel;
}

fs::path scratch_dir(const std::string& name) {
  return wafersim::test_support::cli_scratch_dir(name);
}

TEST(Cli, PlacementFileWrittenAndReadBackGivesTheSamePlacementAndTokens) {
  const fs::path d = scratch_dir("placement_file");
  const std::string file = (d / "p.yaml").string();
  const Outcome a = wafersim("place " + src("scenarios/quickstart.yaml") +
                             " --strategy anneal --json --write-placement " + file);
  ASSERT_EQ(a.code, 0) << a.err;
  const Outcome b =
      wafersim("place " + src("scenarios/quickstart.yaml") + " --json --placement " + file);
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  for (const char* key : {"hop_bytes_per_token", "worst_link_bytes_per_token", "cores_used",
                          "estimated_hop_bytes_per_token"})
    EXPECT_EQ(ja[key], jb[key]) << key;
  // Functional run on the file's placement: the reference tokens (exit 3 otherwise).
  const Outcome r =
      wafersim("run " + src("scenarios/quickstart.yaml") + " --json --placement " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto jr = nlohmann::json::parse(r.out);
  EXPECT_EQ(jr["tokens"], jr["reference_tokens"]);
  // A broken file is an error with its file and line.
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("reduction: "), 11, "reductoin: ");
  std::ofstream(file) << text;
  const Outcome e = wafersim("place " + src("scenarios/quickstart.yaml") + " --placement " + file);
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find(file + ":"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("did you mean 'reduction'"), std::string::npos) << e.err;
  fs::remove_all(d);
}

// Per architecture and strategy: a functional run from the placement file
// that `place --write-placement` wrote is the strategy's own run -- the
// reference tokens, the same cycles, cores, bytes and link loads.
struct FileRun {
  const char* model;
  const char* strategy;
  int wafers = 1;
  int layer_groups = 1;  // whole-region: groups of layers per wafer
};

void PrintTo(const FileRun& c, std::ostream* os) {
  *os << c.model << " " << c.strategy << " on " << c.wafers << " wafer(s), " << c.layer_groups
      << " layer group(s)";
}

class CliPlacementFile : public ::testing::TestWithParam<FileRun> {};

TEST_P(CliPlacementFile, RunFromTheWrittenFileIsTheStrategysRun) {
  const FileRun& c = GetParam();
  const fs::path d = scratch_dir(std::string("pfile_") + c.model + "_" + c.strategy);
  const std::string scenario = (d / "s.yaml").string(), file = (d / "p.yaml").string();
  std::ofstream(scenario) << "name: pfile\nhardware: small\nmodel: " << c.model
                          << "\nwafers: " << c.wafers << "\nplacement:\n  strategy: " << c.strategy
                          << "\n  reduction: tree\n"
                          << (std::string(c.strategy) == "whole-region"
                                  ? "  layer_groups: " + std::to_string(c.layer_groups) + "\n"
                                  : "")
                          << (std::string(c.strategy) == "anneal"
                                  ? "  anneal: {iterations: 20000}\n"
                                  : "")
                          << "workload:\n  prompt_tokens: 6\n  generate_tokens: 8\n  seed: 3\n"
                          << "outputs:\n  functional: true\n";
  const Outcome w = wafersim("place " + scenario + " --write-placement " + file);
  ASSERT_EQ(w.code, 0) << w.err;
  const Outcome a = wafersim("run " + scenario + " --json");
  const Outcome b = wafersim("run " + scenario + " --json --placement " + file);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  ASSERT_EQ(jb["tokens"].size(), 8u);
  EXPECT_EQ(jb["tokens"], jb["reference_tokens"]);
  EXPECT_EQ(ja["tokens"], jb["tokens"]);
  EXPECT_EQ(ja["cycles_per_token"], jb["cycles_per_token"]);
  EXPECT_EQ(ja["total_cycles"], jb["total_cycles"]);
  EXPECT_EQ(ja["token_records"], jb["token_records"]);
  // Everything else too, but the longest context: a strategy reports what a
  // re-plan of its shape could reach (matrices on their fewest rows), a file
  // what its own attention segments hold. The fixed layout holds this
  // workload (14 tokens) and can be no better than a re-plan.
  const int context_a = ja["max_context_tokens"], context_b = jb["max_context_tokens"];
  EXPECT_GE(context_b, 14);
  EXPECT_LE(context_b, context_a);
  for (auto* j : {&ja, &jb}) j->erase("max_context_tokens");
  EXPECT_EQ(ja, jb);
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, CliPlacementFile,
    ::testing::Values(
        FileRun{"tiny-llama", "serpentine"}, FileRun{"tiny-llama", "sram-balanced"},
        FileRun{"tiny-mixtral", "layer-rectangles"}, FileRun{"tiny-mixtral", "short-path"},
        FileRun{"tiny-mixtral", "anneal"}, FileRun{"tiny-mixtral", "serpentine", 2},
        FileRun{"tiny-gpt2", "layer-rectangles"}, FileRun{"tiny-gpt2", "sram-balanced"},
        FileRun{"tiny-gpt2", "anneal"}, FileRun{"tiny-gpt2", "serpentine", 2},
        FileRun{"tiny-llama", "whole-region", 1, 2}, FileRun{"tiny-mixtral", "whole-region"},
        FileRun{"tiny-gpt2", "whole-region", 2}),
    [](const ::testing::TestParamInfo<FileRun>& info) {
      std::string name =
          std::string(info.param.model) + "_" + info.param.strategy + "_" +
          std::to_string(info.param.wafers) + "w" +
          (info.param.layer_groups > 1 ? "_" + std::to_string(info.param.layer_groups) + "g" : "");
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// A scenario in `d` (s.yaml) and the placement file `place` wrote for it
// (p.yaml), for a test to edit and run.
struct WrittenPlacement {
  std::string scenario, file, text;
};

// tiny-llama on `small`, functional, 4 prompt and 6 generated tokens, with
// `placement` (the mapping's lines, indented).
WrittenPlacement written_placement(const fs::path& d, const std::string& placement) {
  WrittenPlacement w{(d / "s.yaml").string(), (d / "p.yaml").string(), {}};
  std::ofstream(w.scenario) << "name: pfile\nhardware: small\nmodel: tiny-llama\nplacement:\n"
                            << placement
                            << "workload:\n  prompt_tokens: 4\n  generate_tokens: 6\n  seed: 3\n"
                            << "outputs:\n  functional: true\n";
  const Outcome o = wafersim("place " + w.scenario + " --write-placement " + w.file);
  EXPECT_EQ(o.code, 0) << o.err;
  std::ifstream in(w.file);
  w.text.assign(std::istreambuf_iterator<char>(in), {});
  return w;
}

// `run` of the scenario with `text` as its placement file: a functional run
// whose `tokens` generated tokens are the reference's.
void expect_reference_tokens(const WrittenPlacement& w, const std::string& text,
                             std::size_t tokens) {
  std::ofstream(w.file) << text;
  const Outcome r = wafersim("run " + w.scenario + " --json --placement " + w.file);
  ASSERT_EQ(r.code, 0) << r.err << text;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tokens"].size(), tokens);
  EXPECT_EQ(j["tokens"], j["reference_tokens"]);
}

// A placement file may mix the dataflows: a serpentine placement whose last
// layer is turned whole-region on its own block (its matrices and KV cache
// spread over the block, the residual handed over between the layouts)
// decodes the reference's tokens.
TEST(Cli, APlacementFileMixesRectangleAndWholeRegionLayers) {
  const fs::path d = scratch_dir("pfile_mixed");
  const WrittenPlacement w = written_placement(d, "  strategy: serpentine\n");
  std::string text = w.text;
  // The last layer's entry: its region kept, its matrices' rectangles gone.
  const auto last = text.rfind("  - layer: ");
  const auto head = text.find("head:");
  ASSERT_NE(last, std::string::npos);
  ASSERT_NE(head, std::string::npos);
  std::string turned;
  for (std::size_t from = last; from < head;) {
    const std::size_t end = text.find('\n', from) + 1;
    const std::string line = text.substr(from, end - from);
    from = end;
    const std::string key = line.substr(0, line.find(':'));
    if (key == "    stacking") continue;
    if (key == "    qkv" || key == "    attention" || key == "    o" || key == "    gate_up" ||
        key == "    down") {
      turned += key + ": {reduction: chain}\n";
      continue;
    }
    turned += line;
    if (key == "    region") turned += "    dataflow: whole-region\n";
  }
  ASSERT_NE(turned.find("dataflow"), std::string::npos) << turned;
  expect_reference_tokens(w, text.substr(0, last) + turned + text.substr(head), 6);
  fs::remove_all(d);
}

// A whole-region layer group's KV cache on a region of its own (rows its
// region gives up): the functional run decodes the reference's tokens.
TEST(Cli, AWholeRegionKvCacheOnARegionOfItsOwnDecodesTheReferencesTokens) {
  const fs::path d = scratch_dir("pfile_kv_apart");
  const WrittenPlacement w = written_placement(d, "  strategy: whole-region\n  layer_groups: 1\n");
  std::string text = w.text;
  // small is 32 x 32 with the head on the west 4 columns: the group's region
  // gives up its 8 bottom rows to its layers' KV cache.
  auto replace_all = [&](const std::string& from, const std::string& to) {
    int n = 0;
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to), ++n;
    return n;
  };
  ASSERT_EQ(replace_all("region: [4, 0, 28, 32]", "region: [4, 0, 28, 24]"), 4) << text;
  ASSERT_EQ(replace_all("attention: {reduction: chain}",
                        "attention: {region: [4, 24, 28, 8], reduction: chain}"),
            4);
  expect_reference_tokens(w, text, 6);
  fs::remove_all(d);
}

// The shipped placement file docs/results.md measures (each group's KV cache
// on the idle cells) still reads and fits: its checks at full size.
TEST(Cli, TheShippedKvOnIdleCellsPlacementValidates) {
  const Outcome v = wafersim(
      "validate " + src("scenarios/llama-3.1-8b-wse3-whole-region.yaml") + " --placement " +
      src("scenarios/placements/llama-3.1-8b-wse3-8-groups-kv-on-idle-cells.yaml"));
  ASSERT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find("fits on 1 wafer (whole-region), up to 95508 tokens"), std::string::npos)
      << v.out;
}

// A mistake in a mixture-of-experts file is reported by `run` with the
// file, line and key path, and exit code 1.
TEST(Cli, BrokenExpertInAPlacementFileNamesFileLineAndKey) {
  const fs::path d = scratch_dir("pfile_broken_expert");
  const std::string file = (d / "p.yaml").string();
  const std::string model = " --model tiny-mixtral";
  const Outcome w =
      wafersim("place " + src("scenarios/quickstart.yaml") + model + " --write-placement " + file);
  ASSERT_EQ(w.code, 0) << w.err;
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string expert1 = "- expert: 1";
  const auto at = text.find(expert1);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, expert1.size(), "- expert: 3");
  std::ofstream(file) << text;
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
  const Outcome e =
      wafersim("run " + src("scenarios/quickstart.yaml") + model + " --placement " + file);
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find(file + ":" + std::to_string(line) + ":"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("layers[0].experts[1].expert"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("expected expert 1"), std::string::npos) << e.err;
  fs::remove_all(d);
}

TEST(Cli, RunJsonIsOneObjectWithTheDocumentedKeys) {
  const Outcome o = wafersim("run " + src("scenarios/quickstart.yaml") + " --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);  // nothing but JSON on stdout
  for (const char* key :
       {"scenario", "hardware", "model", "cores_used", "sram_bytes_used", "sram_bytes_capacity",
        "decode_tokens_per_s_per_user", "inter_token_latency_s", "ttft_s", "cycles_per_token",
        "clock_hz", "bottleneck", "tokens", "reference_tokens", "prompt_ids"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["tokens"], j["reference_tokens"]);
  EXPECT_EQ(j["tokens"].size(), 16u);
  // tokens/s per user is the inverse of the inter-token latency.
  EXPECT_NEAR(
      j["decode_tokens_per_s_per_user"].get<double>() * j["inter_token_latency_s"].get<double>(),
      1.0, 1e-12);
  EXPECT_LE(j["sram_bytes_used"].get<double>(), j["sram_bytes_capacity"].get<double>());
}

TEST(Cli, SameScenarioTwiceGivesBitIdenticalJson) {
  const Outcome a = wafersim("run " + src("scenarios/quickstart.yaml") + " --json");
  const Outcome b = wafersim("run " + src("scenarios/quickstart.yaml") + " --json");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

// Timing-only mixture of experts: each token's experts are drawn from a
// generator seeded by the scenario (Executor::timing_route), so two runs, in
// two processes, give the same bits: every token's record, every figure.
TEST(Cli, MixtralTimingOnlyIsDeterministic) {
  const std::string run =
      "run " + src("scenarios/quickstart.yaml") + " --model tiny-mixtral --timing-only --json";
  const Outcome a = wafersim(run);
  const Outcome b = wafersim(run);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  const auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["model"], "tiny-mixtral");
  EXPECT_FALSE(j["token_records"].empty());
  EXPECT_EQ(a.out, b.out);
}

// Sequences in flight share the layer pipeline: four users decode at nearly
// four times the rate of a one-user run of the same scenario (3.9x on the
// quickstart), as each user's token occupies one stage at a time. Were their
// steps taken one after the other, four would be no faster than one.
TEST(Cli, UsersInFlightRaiseAggregateThroughput) {
  auto aggregate = [](int users) {
    const Outcome o = wafersim("run " + src("scenarios/quickstart.yaml") +
                               " --timing-only --json --users " + std::to_string(users));
    EXPECT_EQ(o.code, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out);
    EXPECT_EQ(j["users"], users);
    return j["aggregate_tokens_per_s"].get<double>();
  };
  const double one = aggregate(1), four = aggregate(4);
  EXPECT_GT(one, 0.0);
  EXPECT_GT(four, 3.0 * one) << "one user " << one << " tok/s, four users " << four << " tok/s";
}

// A decode batch of four users (workload.decode_batch: 4) takes each step as
// one pass of a 4-row GEMM through the pipeline: its step is longer than one
// user's alone (each core still multiplies every row: a wafer core's MACs are
// its bound, not its weight reads) but well under four of them (the
// multicasts, reductions and hops are paid once for the four rows).
TEST(Cli, ADecodeBatchSharesTheHopsNotTheMacs) {
  auto step = [](const std::string& extra) {
    const Outcome o =
        wafersim("run " + src("scenarios/quickstart.yaml") + " --timing-only --json " + extra);
    EXPECT_EQ(o.code, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out);
    return j["cycles_per_token"].get<double>();
  };
  const double one = step("--users 1"), batch = step("--users 4 --set workload.decode_batch=4");
  EXPECT_GT(batch, 1.5 * one) << "one user " << one << " cycles, a batch of 4 " << batch;
  EXPECT_LT(batch, 3.5 * one) << "one user " << one << " cycles, a batch of 4 " << batch;
}

// A user whose prompt arrives after the first user has finished
// (workload.arrivals_s) finds the fabric idle: whether it arrives at 10 or
// at 20 ms, each of its records lasts exactly as long, its prompt's records
// start at its arrival, and its time to first token counts from there, so
// the run's TTFT (the mean over both users) is the same.
TEST(Cli, AUserArrivingOnAnIdleFabricDecodesTheSameWheneverItArrives) {
  const auto run = [](double late_s) {
    const Outcome o =
        wafersim("run " + src("scenarios/quickstart.yaml") +
                 " --timing-only --json --users 2 --set workload.generate_tokens=5 --set "
                 "'workload.arrivals_s=[0, " +
                 std::to_string(late_s) + "]'");
    EXPECT_EQ(o.code, 0) << o.err;
    return nlohmann::json::parse(o.out);
  };
  const nlohmann::json a = run(0.01), b = run(0.02);
  const double clock = a["clock_hz"].get<double>();
  const auto user1 = [](const nlohmann::json& j) {
    std::vector<nlohmann::json> out;
    for (const auto& t : j["token_records"])
      if (t["user"] == 1) out.push_back(t);
    return out;
  };
  const auto ra = user1(a), rb = user1(b);
  ASSERT_EQ(ra.size(), 8u + 4u);  // 8 prompt tokens, then 4 decode steps
  ASSERT_EQ(ra.size(), rb.size());
  EXPECT_EQ(ra.front()["start_cycle"].get<double>(), std::round(0.01 * clock));
  EXPECT_EQ(rb.front()["start_cycle"].get<double>(), std::round(0.02 * clock));
  for (std::size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i]["position"], rb[i]["position"]);
    EXPECT_EQ(ra[i]["end_cycle"].get<double>() - ra[i]["start_cycle"].get<double>(),
              rb[i]["end_cycle"].get<double>() - rb[i]["start_cycle"].get<double>())
        << "record " << i;
  }
  EXPECT_EQ(a["ttft_s"], b["ttft_s"]);
  EXPECT_LT(a["ttft_s"].get<double>(), 0.001);  // counted from each user's arrival
  EXPECT_GT(b["total_time_s"].get<double>(), 0.02);
}

// Per-user lengths that are all the same are the single count: a run with
// prompt_tokens, generate_tokens and cached_tokens as lists of equal values
// gives, byte for byte, the results of the run with the single counts.
TEST(Cli, PerUserLengthsThatAgreeAreTheSingleCount) {
  const auto run = [](const std::string& extra) {
    const Outcome o = wafersim("run " + src("scenarios/quickstart.yaml") +
                               " --timing-only --json --users 3 " + extra);
    EXPECT_EQ(o.code, 0) << o.err;
    return o.out;
  };
  const std::string single =
      run("--set workload.prompt_tokens=6 --set workload.generate_tokens=5 --set "
          "workload.cached_tokens=30");
  const std::string lists =
      run("--set 'workload.prompt_tokens=[6, 6, 6]' --set 'workload.generate_tokens=[5, 5, 5]' "
          "--set 'workload.cached_tokens=[30, 30, 30]'");
  EXPECT_FALSE(single.empty());
  EXPECT_EQ(single, lists);
}

// The functional arithmetic on one host thread (beside the timing, in the
// same executor) or several (the functional lane, sim/exec/value_lane.hpp: the
// numbers on a thread of their own, with WorkTeam helpers from three on)
// gives the same bits: tokens, logits errors, every timing figure. Dense,
// mixture-of-experts (the choice crosses from the values to the timing) and
// gpt2 models, decode and blocks of prompt tokens, two users, and
// speculative decoding with a draft that disagrees (rollbacks of both KV
// caches).
TEST(Cli, HostThreadCountDoesNotChangeAResult) {
  struct Case {
    std::string model, extra;
  };
  const std::vector<Case> cases = {
      {"tiny-llama", ""},
      {"tiny-mixtral", ""},
      {"tiny-gpt2", "  prefill_block: 4\n"},
      {"tiny-mixtral", "  decode_batch: 2\n"},
      {"tiny-llama",
       "speculative_decoding:\n  draft_model: tiny-mistral\n  draft_tokens: 3\n"
       "  acceptance_rate: 0.5\n"},
  };
  for (const Case& c : cases) {
    const fs::path d = scratch_dir("threads");
    const fs::path scenario = d / "threads.yaml";
    const bool workload_key = c.extra.rfind("  ", 0) == 0;
    std::ofstream(scenario) << "name: threads\nhardware: small\nmodel: " << c.model
                            << "\nprecision: bf16\nworkload:\n  prompt_tokens: 6\n"
                               "  generate_tokens: 6\n  users: 2\n"
                            << (workload_key ? c.extra : "") << (workload_key ? "" : c.extra);
    const Outcome one = wafersim("run " + scenario.string() + " --json --functional --threads 1");
    ASSERT_EQ(one.code, 0) << c.model << ": " << one.err;
    for (int threads : {2, 3}) {
      const Outcome more = wafersim("run " + scenario.string() + " --json --functional --threads " +
                                    std::to_string(threads));
      EXPECT_EQ(one.out, more.out) << c.model << " " << c.extra << " on " << threads << " threads";
    }
    if (!workload_key && !c.extra.empty()) {
      // The draft disagrees now and then: rejected proposals were rolled back.
      const auto j = nlohmann::json::parse(one.out);
      EXPECT_LT(j["speculative_decoding"]["wafer_acceptance_rate"].get<double>(), 1.0);
    }
    fs::remove_all(d);
  }
}

// Recycling the link records of wafers a token has left (RecordRecycler,
// FlowModel::use_record_pool) changes no figure: multi-wafer runs, dense,
// mixture-of-experts and gpt2 models, two users, blocks of prompt tokens,
// speculative decoding with the draft on a wafer of its own, functional and
// timing-only, give the same JSON as with every wafer's records kept. And
// the records were recycled (bench models --point reports the pool).
TEST(Cli, RecyclingLinkRecordsDoesNotChangeAResult) {
  struct Case {
    std::string model, wafers, extra;
    bool functional;
  };
  const std::vector<Case> cases = {
      {"tiny-llama", "4", "", true},
      {"tiny-mixtral", "2", "", false},
      {"tiny-gpt2", "2", "  prefill_block: 4\n", true},
      {"tiny-llama", "2", "  decode_batch: 2\n", false},
      {"tiny-llama", "2",
       "speculative_decoding:\n  draft_model: tiny-mistral\n  draft_tokens: 3\n"
       "  acceptance_rate: 0.5\n",
       true},
  };
  for (const Case& c : cases) {
    const fs::path d = scratch_dir("recycle");
    const fs::path scenario = d / "recycle.yaml";
    const bool workload_key = c.extra.rfind("  ", 0) == 0;
    std::ofstream(scenario) << "name: recycle\nhardware: small\nmodel: " << c.model
                            << "\nprecision: bf16\nwafers: " << c.wafers
                            << "\nworkload:\n  prompt_tokens: 6\n  generate_tokens: 6\n"
                               "  users: 2\n"
                            << (workload_key ? c.extra : "")
                            << "outputs:\n  functional: " << (c.functional ? "true" : "false")
                            << "\n"
                            << (workload_key ? "" : c.extra);
    const Outcome recycled = wafersim("run " + scenario.string() + " --json");
    ASSERT_EQ(recycled.code, 0) << c.model << ": " << recycled.err;
    const Outcome kept = wafersim("run " + scenario.string() + " --json --keep-link-records");
    ASSERT_EQ(kept.code, 0) << c.model << ": " << kept.err;
    EXPECT_EQ(recycled.out, kept.out) << c.model << " on " << c.wafers << " wafers " << c.extra;
    const Outcome point = wafersim("bench models --point " + scenario.string());
    ASSERT_EQ(point.code, 0) << point.err;
    const auto j = nlohmann::json::parse(point.out);
    EXPECT_GT(j["record_releases"].get<int>(), 0) << c.model;
    // Four wafers, three stocked blocks of each kind: a fourth wafer's worth
    // of records can only come back from the pool.
    if (c.wafers == "4") {
      EXPECT_GT(j["record_blocks_reused"].get<int>(), 0) << c.model;
    }
    fs::remove_all(d);
  }
}

// bench models --repeat N runs every case N times, the cases in turn, and
// reports the run with the median host time per token (the middle one of
// three), every run's figure and their range; each run's time is split
// at its first token back.
TEST(Cli, BenchModelsRepeatReportsTheMedianRun) {
  const Outcome o = wafersim("bench models --cases 1b-timing --repeat 3 --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["cases"].size(), 1u);
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["case"], "1b-timing");
  EXPECT_EQ(c["runs"].get<int>(), 3);
  std::vector<double> runs = c["wall_per_token_s_runs"].get<std::vector<double>>();
  ASSERT_EQ(runs.size(), 3u);
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(c["wall_per_token_s"].get<double>(), runs[1]);
  EXPECT_EQ(c["wall_per_token_s_min"].get<double>(), runs[0]);
  EXPECT_EQ(c["wall_per_token_s_max"].get<double>(), runs[2]);
  // The reported run is one run's whole record: its simulation time over its passes.
  EXPECT_DOUBLE_EQ(c["simulate_s"].get<double>() / c["token_passes"].get<double>(), runs[1]);
  // Its simulation time split where the first token is back: one user's
  // first token's time and each later one's add up to the time from the
  // simulation's start to the last token back, inside simulate_s.
  const double first = c["first_token_s"].get<double>();
  ASSERT_TRUE(c["later_per_token_s"].is_number()) << c.dump();
  const double later = c["later_per_token_s"].get<double>();
  EXPECT_GT(first, 0.0);
  EXPECT_GT(later, 0.0);
  const double parts = first + later * (c["token_passes"].get<double>() - 1);
  EXPECT_LE(parts, c["simulate_s"].get<double>());
  EXPECT_GT(parts, 0.9 * c["simulate_s"].get<double>());
  // Progress for each run on stderr.
  EXPECT_NE(o.err.find("run 3/3 of 1b-timing"), std::string::npos) << o.err;
}

// Timing-only runs with more than one host thread time GEMVs on two where
// the host times say it pays (Executor::set_timing_helper; a run's first
// 128 such works go on two threads, the next 128 on one, whatever the host:
// sim/exec/thread_choice.hpp): most of a band's multicasts and tiles on
// the helper, the rest and the rows' reductions on the simulation's own
// thread; in attention, a share of each block's rows and half its columns'
// reductions on the helper). The results are the same byte for byte as on one thread, for
// every reduction scheme (k-tree and ring keep to one thread), layer
// groups, users pipelined through the layers, decode batches, prompt
// blocks, two wafers, with layers replayed and without.
TEST(Cli, TimingHelperDoesNotChangeAResult) {
  struct Case {
    std::string model, extra, options;
  };
  const std::string whole = "placement:\n  strategy: whole-region\n  layer_groups: 1\n";
  const std::string two = "placement:\n  strategy: whole-region\n  layer_groups: 2\n";
  const std::vector<Case> cases = {
      {"tiny-llama", whole + "workload:\n  users: 1\n", ""},
      {"tiny-llama", whole + "workload:\n  users: 1\n", " --layer-replay off"},
      // Cached positions on the block rows the helper works out.
      {"tiny-llama", whole + "workload:\n  users: 1\n  cached_tokens: 100\n", ""},
      {"tiny-llama", two + "workload:\n  users: 1\n", " --reduction chain"},
      {"tiny-llama", two + "workload:\n  users: 1\n", " --reduction tree"},
      {"tiny-llama", two + "workload:\n  users: 1\n", " --reduction two-level"},
      {"tiny-llama", two + "workload:\n  users: 1\n", " --reduction ring"},
      {"tiny-llama", two + "workload:\n  users: 1\n",
       " --reduction k-tree --set placement.reduction_groups=1"},
      {"tiny-llama", "workload:\n  users: 2\n", ""},
      {"tiny-mixtral", whole + "workload:\n  users: 2\n  decode_batch: 2\n", ""},
      {"tiny-gpt2", whole + "workload:\n  users: 1\n  prefill_block: 3\n", ""},
      {"tiny-llama", whole + "workload:\n  users: 1\n", " --wafers 2 --set model.num_layers=8"},
      // Users pipelined, the whole pipeline's layers replayed.
      {"tiny-llama", whole + "workload:\n  users: 4\n", " --set model.num_layers=12"},
  };
  for (const Case& c : cases) {
    const fs::path d = scratch_dir("helper");
    const fs::path scenario = d / "helper.yaml";
    std::ofstream(scenario) << "name: helper\nhardware: small\nmodel: " << c.model
                            << "\nprecision: bf16\nwafers: 1\n"
                            << c.extra << "  prompt_tokens: 3\n  generate_tokens: 4\n";
    const std::string run = "run " + scenario.string() + " --json --timing-only" + c.options;
    const Outcome one = wafersim(run + " --threads 1");
    ASSERT_EQ(one.code, 0) << c.model << c.options << ": " << one.err;
    for (int threads : {2, 3}) {
      const Outcome more = wafersim(run + " --threads " + std::to_string(threads));
      ASSERT_EQ(more.code, 0) << c.model << c.options << ": " << more.err;
      EXPECT_EQ(one.out, more.out) << c.model << c.options << " on " << threads << " threads\n"
                                   << c.extra;
    }
    fs::remove_all(d);
  }
}

// Layers replayed as shifted copies of the one simulated before them
// (sim/exec/layer_replay.hpp) give byte for byte the results of simulating
// every layer, where the replay takes place (whole-region layer groups,
// one message in flight) and where it must not (several users' messages,
// numbers computed beside the timing, layers on rectangles of their own).
TEST(Cli, ReplayedLayersGiveTheResultsOfSimulatedOnes) {
  struct Case {
    std::string model, extra, options;
    bool replays;
  };
  const std::string whole = "placement:\n  strategy: whole-region\n  layer_groups: 1\n";
  const std::string two = "placement:\n  strategy: whole-region\n  layer_groups: 2\n";
  const std::string three = "placement:\n  strategy: whole-region\n  layer_groups: 3\n";
  const std::vector<Case> cases = {
      // Uneven runs (3, 3 and 2 layers; the last too short to learn) and
      // a decode batch of prompts: the runs' split cycles and partial ends.
      {"tiny-llama", three + "workload:\n  users: 1\n", " --timing-only --set model.num_layers=8",
       true},
      {"tiny-qwen3", three + "workload:\n  users: 2\n  decode_batch: 2\n  batch_prompts: true\n",
       " --timing-only --set model.num_layers=7", true},
      {"tiny-llama", whole + "workload:\n  users: 1\n", "", true},
      {"tiny-llama", whole + "workload:\n  users: 1\n", " --timing-only", true},
      {"tiny-qwen3", two + "workload:\n  users: 1\n", " --set model.num_layers=8", true},
      {"tiny-gpt2", whole + "workload:\n  users: 2\n  decode_batch: 2\n",
       " --set model.num_layers=6", true},
      {"tiny-mistral", whole + "workload:\n  users: 1\n  prefill_block: 2\n",
       " --set model.num_layers=5", true},
      // A decode batch's prompts as one message (each a block of its 3 tokens).
      {"tiny-llama",
       whole + "workload:\n  users: 3\n  decode_batch: 3\n  batch_prompts: true\n"
               "  prefill_block: 3\n",
       " --set model.num_layers=6", true},
      // Two groups (each layer's fingerprints over its region only), every
      // reduction scheme.
      {"tiny-llama", two + "workload:\n  users: 1\n",
       " --timing-only --set model.num_layers=8 --reduction chain", true},
      {"tiny-llama", two + "workload:\n  users: 1\n",
       " --timing-only --set model.num_layers=8 --reduction tree", true},
      {"tiny-llama", two + "workload:\n  users: 1\n",
       " --timing-only --set model.num_layers=8 --reduction ring", true},
      {"tiny-llama", two + "workload:\n  users: 1\n",
       " --timing-only --set model.num_layers=8 --reduction k-tree "
       "--set placement.reduction_groups=1",
       true},
      // Two wafers (recycled link records, and kept), and two groups on each.
      {"tiny-llama", whole + "workload:\n  users: 1\n", " --wafers 2 --set model.num_layers=8",
       true},
      {"tiny-llama", whole + "workload:\n  users: 1\n",
       " --wafers 2 --set model.num_layers=8 --keep-link-records --timing-only", true},
      {"tiny-llama", two + "workload:\n  users: 1\n",
       " --wafers 2 --set model.num_layers=16 --timing-only", true},
      // Mixtures of experts: one token's k experts time alike whichever they
      // are (functional: the numbers' choices are taken and dropped); a
      // decode batch's do not, and is simulated.
      {"tiny-mixtral", whole + "workload:\n  users: 1\n", " --set model.num_layers=6", true},
      {"tiny-qwen3-moe", two + "workload:\n  users: 1\n", " --set model.num_layers=8 --timing-only",
       true},
      {"tiny-mixtral", whole + "workload:\n  users: 2\n  decode_batch: 2\n",
       " --set model.num_layers=6", false},
      {"tiny-llama", whole + "workload:\n  users: 2\n", "", false},
      {"tiny-llama", whole + "workload:\n  users: 1\n", " --threads 1", false},
      {"tiny-llama", "workload:\n  users: 1\n", " --set model.num_layers=8", false},
  };
  for (const Case& c : cases) {
    const fs::path d = scratch_dir("replay");
    const fs::path scenario = d / "replay.yaml";
    std::ofstream(scenario) << "name: replay\nhardware: small\nmodel: " << c.model
                            << "\nprecision: bf16\nwafers: 1\n"
                            << c.extra << "  prompt_tokens: 3\n  generate_tokens: 5\n";
    const std::string run = "run " + scenario.string() + " --json" + c.options;
    // always: the tiny layers cost less host time than their checks.
    const Outcome replayed = wafersim(run + " --layer-replay always");
    ASSERT_EQ(replayed.code, 0) << c.model << c.options << ": " << replayed.err;
    const Outcome simulated = wafersim(run + " --layer-replay off");
    ASSERT_EQ(simulated.code, 0) << c.model << c.options << ": " << simulated.err;
    EXPECT_EQ(replayed.out, simulated.out) << c.model << c.options << "\n" << c.extra;
    EXPECT_EQ(replayed.err.find("replayed ") != std::string::npos, c.replays)
        << c.model << c.options << "\n"
        << c.extra << replayed.err;
    EXPECT_EQ(simulated.err.find("replayed "), std::string::npos);
    fs::remove_all(d);
  }
}

// A run of equal layers is replayed cycle by cycle, each cycle from a
// layer's second stage through the next layer's first (the first stage
// takes the layer's input, where the run's first layer differs from the
// others), the run's last layer a partial cycle written from a copy of the
// learned layer's end. So a token simulates the run's first stage and one
// cycle and replays the other n - 1 of its n layers: with one prompt token
// and five generated, 5 passes alone on the wafer; 8 layers in 1 group
// replay 5 x 7 = 35 passes, in 2 groups of 4 (a run each) 5 x 2 x 3 = 30.
// (Before the runs were split, a token simulated each run's first two
// layers: 5 x 6 = 30 and 5 x 2 x 2 = 20.)
TEST(Cli, ATokenReplaysAllButOneLayerOfEachRun) {
  const fs::path d = scratch_dir("replay_runs");
  const fs::path scenario = d / "runs.yaml";
  std::ofstream(scenario) << "name: runs\nhardware: small\nmodel: tiny-llama\nprecision: bf16\n"
                             "wafers: 1\nplacement:\n  strategy: whole-region\n"
                             "workload:\n  users: 1\n  prompt_tokens: 1\n  generate_tokens: 5\n";
  for (const auto& [groups, replayed] : {std::pair{1, 35}, std::pair{2, 30}}) {
    const std::string run = "run " + scenario.string() +
                            " --json --timing-only --set model.num_layers=8 --layer-groups " +
                            std::to_string(groups);
    const Outcome out = wafersim(run + " --layer-replay always");
    ASSERT_EQ(out.code, 0) << out.err;
    EXPECT_NE(out.err.find("replayed " + std::to_string(replayed) + " layer passes"),
              std::string::npos)
        << groups << " groups: " << out.err;
    const Outcome off = wafersim(run + " --layer-replay off");
    ASSERT_EQ(off.code, 0) << off.err;
    EXPECT_EQ(out.out, off.out) << groups << " groups";
  }
  fs::remove_all(d);
}

// Where replay applies but other messages share the wafer (two users
// pipelined), `run` says how many layer passes it simulated for that and
// what would let them replay; a decode batch of both users, prompts
// included, goes through alone and replays with no such line.
TEST(Cli, RunSaysWhenMessagesInFlightKeepLayersFromReplaying) {
  const fs::path d = scratch_dir("crowded");
  const fs::path scenario = d / "crowded.yaml";
  std::ofstream(scenario) << "name: crowded\nhardware: small\nmodel: tiny-llama\n"
                          << "placement:\n  strategy: whole-region\n  layer_groups: 1\n"
                          << "workload:\n  users: 2\n  prompt_tokens: 1\n  generate_tokens: 3\n";
  const std::string run =
      "run " + scenario.string() + " --timing-only --layer-replay always --set model.num_layers=6";
  const Outcome pipelined = wafersim(run);
  ASSERT_EQ(pipelined.code, 0) << pipelined.err;
  EXPECT_NE(pipelined.err.find("because other messages were on the wafer"), std::string::npos)
      << pipelined.err;
  EXPECT_NE(pipelined.err.find("workload.decode_batch"), std::string::npos) << pipelined.err;
  const Outcome batched =
      wafersim(run + " --set workload.decode_batch=2 --set workload.batch_prompts=true");
  ASSERT_EQ(batched.code, 0) << batched.err;
  EXPECT_EQ(batched.err.find("other messages"), std::string::npos) << batched.err;
  EXPECT_NE(batched.err.find("replayed "), std::string::npos) << batched.err;
  fs::remove_all(d);
}

// Several users' messages in flight on one whole-region layer group cross
// its equal layers as a convoy; once the whole pipeline's state repeats one
// layer on, every step of every message is replayed from the period before
// (sim/exec/pipeline_replay.hpp) until a message would step past the run.
// Byte for byte the results of simulating each step, for any number of
// users and groups, every reduction scheme, two wafers, a decode batch of
// some users, prompt blocks, later arrivals, mixtures of experts and the
// functional lane; and it does replay there. Where it cannot (16 users over
// 8 groups: never all inside one group's run) nothing is replayed.
TEST(Cli, PipelinedUsersReplayTheWholePipelineExactly) {
  struct Case {
    std::string model, workload, options;
    bool replays;
  };
  const std::vector<Case> cases = {
      {"tiny-llama", "  users: 4\n", " --timing-only", true},
      {"tiny-llama", "  users: 2\n", " --timing-only", true},
      {"tiny-llama", "  users: 4\n", " --timing-only --layer-groups 2", true},
      {"tiny-llama", "  users: 4\n", " --timing-only --reduction chain", true},
      {"tiny-llama", "  users: 4\n", " --timing-only --reduction tree", true},
      {"tiny-llama", "  users: 4\n", " --timing-only --reduction ring", true},
      {"tiny-llama", "  users: 4\n",
       " --timing-only --reduction k-tree --set placement.reduction_groups=1", true},
      {"tiny-llama", "  users: 4\n", " --timing-only --wafers 2", true},
      {"tiny-llama", "  users: 4\n", " --timing-only --wafers 2 --keep-link-records", true},
      {"tiny-llama", "  users: 4\n", " --timing-only --threads 1", true},
      {"tiny-llama", "  users: 4\n  decode_batch: 2\n", " --timing-only", true},
      {"tiny-llama", "  users: 4\n  cached_tokens: 100\n", " --timing-only", true},
      {"tiny-llama", "  users: 4\n  arrivals_s: [0, 0.00001, 0.00002, 0.00003]\n", " --timing-only",
       true},
      // The tracked message leads: the last period the run holds ends with
      // it stepping out of the run onto the head, which must stop the replay
      // there (it used to be replayed as one more layer).
      {"tiny-llama", "  users: 3\n  arrivals_s: [0, 0.00001, 0.00004]\n",
       " --timing-only --reduction chain", true},
      {"tiny-gpt2", "  users: 4\n", " --timing-only", true},
      {"tiny-mistral", "  users: 4\n  prefill_block: 2\n  prompt_tokens: 4\n", " --timing-only",
       true},
      {"tiny-llama", "  users: 4\n", "", true},  // functional, on the lane
      // Mixtures of experts, every expert placed alike: one token's k experts
      // time alike whichever they are (functional: the lane's choices are
      // taken and dropped).
      {"tiny-mixtral", "  users: 4\n", " --timing-only", true},
      {"tiny-mixtral", "  users: 4\n", "", true},
      {"tiny-qwen3-moe", "  users: 4\n", " --timing-only", true},
      // Steps of two messages that start in one cycle: one period on they
      // must start in the same order (sim/engine/step_clock.hpp). Under
      // SystemC's own timed waits this case's replay ended 26 cycles early.
      {"tiny-qwen3-moe",
       "  users: 3\n  prompt_tokens: 4\n  cached_tokens: 10\n  generate_tokens: 2\n",
       " --timing-only --reduction two-level", true},
      {"tiny-llama", "  users: 3\n  prompt_tokens: 3\n", " --timing-only", true},
      // A prompt block that needs no logits goes back to the host from the
      // last layer without a step in the head: here the third user's first
      // prompt token came back while the replay went on (an internal error
      // until the replay stopped before such a message's last layer).
      {"tiny-mistral", "  users: 3\n  prompt_tokens: 2\n  arrivals_s: [0, 0, 0.00003]\n  seed: 1\n",
       " --timing-only --reduction tree --set model.num_layers=8", true},
      {"tiny-llama", "  users: 16\n", " --timing-only --layer-groups 8", false},
  };
  for (const Case& c : cases) {
    const fs::path d = scratch_dir("pipeline_replay");
    const fs::path scenario = d / "convoy.yaml";
    std::ofstream(scenario)
        << "name: convoy\nhardware: small\nmodel: " << c.model
        << "\nprecision: bf16\nwafers: 1\n"
           "placement:\n  strategy: whole-region\n  layer_groups: 1\n"
           "workload:\n"
        << c.workload
        << (c.workload.find("prompt_tokens") == std::string::npos ? "  prompt_tokens: 1\n" : "")
        << (c.workload.find("generate_tokens") == std::string::npos ? "  generate_tokens: 3\n"
                                                                    : "");
    const std::string run =
        "run " + scenario.string() + " --json --set model.num_layers=16" + c.options;
    const Outcome replayed = wafersim(run + " --layer-replay always");
    ASSERT_EQ(replayed.code, 0) << c.model << c.options << ": " << replayed.err;
    const Outcome simulated = wafersim(run + " --layer-replay off");
    ASSERT_EQ(simulated.code, 0) << c.model << c.options << ": " << simulated.err;
    EXPECT_EQ(replayed.out, simulated.out) << c.model << c.options << "\n" << c.workload;
    // The default mode too (it replays where host time says it pays).
    const Outcome by_default = wafersim(run);
    ASSERT_EQ(by_default.code, 0) << c.model << c.options << ": " << by_default.err;
    EXPECT_EQ(by_default.out, simulated.out) << c.model << c.options << " (auto)\n" << c.workload;
    EXPECT_EQ(replayed.err.find("layer passes of messages in flight together") != std::string::npos,
              c.replays)
        << c.model << c.options << "\n"
        << c.workload << replayed.err;
    fs::remove_all(d);
  }
}

// `place` times one decode step alone with the engine's replay of equal
// layers: the same report whether it replays wherever it can or never.
TEST(Cli, PlaceReplaysItsDecodeStepExactly) {
  const fs::path d = scratch_dir("place_replay");
  const fs::path scenario = d / "s.yaml";
  std::ofstream(scenario) << "name: place-replay\nhardware: small\nmodel: tiny-llama\n"
                          << "placement:\n  strategy: whole-region\n  layer_groups: 1\n"
                          << "workload:\n  prompt_tokens: 3\n  generate_tokens: 2\n";
  const std::string place = "place " + scenario.string() + " --json --set model.num_layers=8";
  const Outcome replayed = wafersim(place + " --layer-replay always");
  ASSERT_EQ(replayed.code, 0) << replayed.err;
  const Outcome simulated = wafersim(place + " --layer-replay off");
  ASSERT_EQ(simulated.code, 0) << simulated.err;
  EXPECT_EQ(replayed.out, simulated.out);
  EXPECT_NE(replayed.err.find("replayed "), std::string::npos) << replayed.err;
  EXPECT_EQ(simulated.err.find("replayed "), std::string::npos) << simulated.err;
  fs::remove_all(d);
}

TEST(Cli, BenchKernelsPrintsEveryShapeForEveryKernel) {
  // Figures only (never checked against a speed): every shape, a positive
  // rate for the scalar kernel, where the host has it AVX2, and row bands.
  const Outcome o = wafersim("bench kernels --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j.size(), 4u);
  for (const auto& row : j) {
    EXPECT_GT(row["rows"].get<int>(), 0);
    EXPECT_GT(row["scalar"].get<double>(), 0.0) << row.dump();
    if (row.contains("avx2")) {
      EXPECT_GT(row["avx2"].get<double>(), 0.0) << row.dump();
    }
    EXPECT_GT(row["bands"].get<double>(), 0.0) << row.dump();
  }
}

TEST(Cli, TimingOnlyHasNoTokens) {
  const Outcome o = wafersim("run " + src("scenarios/quickstart.yaml") + " --json --timing-only");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_FALSE(j.contains("tokens"));
  EXPECT_FALSE(j["functional"].get<bool>());
}

TEST(Cli, OutWritesResultsAndTheResolvedScenarioThatReproducesTheRun) {
  const fs::path d = scratch_dir("out");
  const fs::path h5 = d / "r.h5";
  const Outcome o =
      wafersim("run " + src("scenarios/quickstart.yaml") + " --out " + h5.string() + " --json");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::exists(h5));
  const fs::path resolved = h5.string() + ".scenario.yaml";
  ASSERT_TRUE(fs::exists(resolved));
  // Rerunning the resolved scenario gives the same numbers.
  const Outcome again = wafersim("run " + resolved.string() + " --json");
  ASSERT_EQ(again.code, 0) << again.err;
  auto a = nlohmann::json::parse(o.out), b = nlohmann::json::parse(again.out);
  for (auto* j : {&a, &b}) j->erase("scenario_file");
  EXPECT_EQ(a, b);
  for (const auto& entry : fs::directory_iterator(d))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  fs::remove_all(d);
}

TEST(Cli, ModelTooLargeIsAClearErrorAndWritesNothing) {
  const fs::path d = scratch_dir("fit");
  const fs::path scenario = d / "big.yaml";
  std::ofstream(scenario) << "name: big\nhardware: small\nmodel: llama-3.1-8b\nworkload:\n"
                             "  prompt_tokens: 4\n  generate_tokens: 4\n";
  const Outcome o = wafersim("run " + scenario.string() + " --out " + (d / "r.h5").string());
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("does not fit"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("needs"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("big.yaml"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(d / "r.h5"));
  EXPECT_FALSE(fs::exists(d / "r.h5.scenario.yaml"));
  fs::remove_all(d);
}

// Every architecture the models accept runs on the wafer from the command
// line (validate, place, a functional run whose tokens equal the
// reference's: exit code 0, not 3).
TEST(Cli, EveryArchitectureValidatesPlacesAndRuns) {
  for (const char* model :
       {"tiny-mixtral", "tiny-gpt2", "tiny-qwen3", "tiny-mistral", "tiny-qwen3-moe"}) {
    const fs::path d = scratch_dir("arch");
    const fs::path scenario = d / "arch.yaml";
    std::ofstream(scenario) << "name: arch\nhardware: small\nmodel: " << model
                            << "\nworkload:\n  prompt_tokens: 6\n  generate_tokens: 6\n";
    for (const char* cmd : {"validate", "place", "run"}) {
      const Outcome o = wafersim(std::string(cmd) + " " + scenario.string() +
                                 (std::string(cmd) == "run" ? " --functional" : ""));
      EXPECT_EQ(o.code, 0) << model << " " << cmd << ": " << o.err;
    }
    fs::remove_all(d);
  }
}

TEST(Cli, BrokenScenarioNamesFileLineAndKey) {
  const fs::path d = scratch_dir("bad");
  const fs::path scenario = d / "typo.yaml";
  std::ofstream(scenario) << "name: typo\nhardware: small\nmodel: tiny-llama\nworkload:\n"
                             "  prompt_tokens: 4\n  generate_tokns: 4\n";
  const Outcome o = wafersim("validate " + scenario.string());
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("typo.yaml:6:3"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("workload.generate_tokns"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("generate_tokens"), std::string::npos) << o.err;  // did you mean
  fs::remove_all(d);
}

// workload.cached_tokens: decode timed at a long context without
// simulating its prefill. A run whose cache already holds 40 positions and
// whose prompt is the last 4 ids decodes each token exactly as fast as a
// run that prefilled all 44 (one user: every decode token crosses an idle
// pipeline, and its cost depends on its position only).
TEST(Cli, CachedTokensDecodeAsIfThePrefillHadRun) {
  const fs::path d = scratch_dir("cached");
  auto scenario = [&](const std::string& name, const std::string& workload) {
    std::ofstream(d / name) << "name: " << name << "\nhardware: small\nmodel: tiny-llama\n"
                            << "workload: {" << workload << ", generate_tokens: 4, seed: 3}\n"
                            << "outputs: {functional: false}\ncompare_with: []\n";
    const Outcome o = wafersim("run " + (d / name).string() + " --json");
    EXPECT_EQ(o.code, 0) << o.err;
    return nlohmann::json::parse(o.out);
  };
  std::string ids;
  for (int i = 0; i < 40; ++i) ids += std::to_string(10 + i) + ", ";
  const auto cached = scenario("cached.yaml", "cached_tokens: 40, prompt_ids: [5, 6, 7, 9]");
  const auto full = scenario("full.yaml", "prompt_ids: [" + ids + "5, 6, 7, 9]");
  // Decode tokens (positions 44, 45, 46) and their latencies, in order.
  auto decode = [](const nlohmann::json& j) {
    std::vector<std::pair<int, std::uint64_t>> out;
    for (const auto& r : j["token_records"])
      if (!r["prefill"].get<bool>())
        out.emplace_back(r["position"].get<int>(), r["end_cycle"].get<std::uint64_t>() -
                                                       r["start_cycle"].get<std::uint64_t>());
    return out;
  };
  const auto a = decode(cached), b = decode(full);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a.front().first, 44);
  EXPECT_EQ(a, b);
  // The cache is reserved for all 48 positions; a longer cache makes each
  // decode token slower (attention over more positions).
  EXPECT_GE(cached["max_context_tokens"].get<int>(), 48);
  const auto longer = scenario("longer.yaml", "cached_tokens: 100, prompt_ids: [5, 6, 7, 9]");
  EXPECT_GT(decode(longer).front().second, a.front().second);
  // Functional runs cannot start from positions they did not compute.
  const Outcome f = wafersim("run " + (d / "cached.yaml").string() + " --functional");
  EXPECT_EQ(f.code, 1);
  EXPECT_NE(f.err.find("workload.cached_tokens"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("timing-only"), std::string::npos) << f.err;
  fs::remove_all(d);
}

// bench op: one operation on an idle fabric. A plain GEMV and its
// transposed twin take the same cycles (the same lines, turned); a layer's
// steps end at its total, which is its critical path; its tokens/s is the
// clock over (cycles x layers); bad sizes are usage errors, a layer too big
// for its region says so.
TEST(Cli, BenchOpTimesOneOperationOnAnIdleFabric) {
  auto op = [](const std::string& args) {
    const Outcome o = wafersim("bench op " + args + " --json");
    EXPECT_EQ(o.code, 0) << o.err;
    return nlohmann::json::parse(o.out);
  };
  const auto plain = op("gemv --hardware wse2 --matrix 4096x4096 --region 64x48");
  const auto turned = op("gemv --hardware wse2 --matrix 4096x4096 --region 48x64 --transposed");
  EXPECT_EQ(plain["cycles"], turned["cycles"]);
  // A kernel cost per vector instruction: every core's tile has 4096 / 64 =
  // 64 input elements, so 64 instructions; on an idle fabric the whole GEMV
  // ends 64 x 27 cycles later, all of it compute.
  const auto looped =
      op("gemv --hardware wse2 --matrix 4096x4096 --region 64x48 --instruction-overhead 27");
  EXPECT_EQ(plain["instruction_overhead"], 0);
  EXPECT_EQ(looped["instruction_overhead"], 27);
  EXPECT_EQ(looped["cycles"].get<std::uint64_t>(), plain["cycles"].get<std::uint64_t>() + 64 * 27);
  EXPECT_EQ(looped["breakdown"]["compute"].get<std::uint64_t>(),
            plain["breakdown"]["compute"].get<std::uint64_t>() + 64 * 27);
  // 16-bit values on the fabric, two to a wavelet: the column's 64 inputs
  // are 32 wavelets, a row's 86 partial sums 43, so the GEMV's serialization
  // halves; hops and compute do not change.
  const auto half = op("gemv --hardware wse2 --matrix 4096x4096 --region 64x48 --fabric-bits 16");
  EXPECT_EQ(half["fabric_bits"], 16);
  EXPECT_EQ(2 * half["breakdown"]["serialization"].get<std::uint64_t>(),
            plain["breakdown"]["serialization"].get<std::uint64_t>());
  EXPECT_EQ(half["breakdown"]["hops"], plain["breakdown"]["hops"]);
  EXPECT_EQ(half["breakdown"]["compute"], plain["breakdown"]["compute"]);
  EXPECT_EQ(half["cycles"].get<std::uint64_t>(),
            plain["cycles"].get<std::uint64_t>() -
                half["breakdown"]["serialization"].get<std::uint64_t>());
  const auto layer = op("layer --hardware wse2 --model llama-3.2-1b --region 96x96 --context 64");
  const auto& steps = layer["steps"];
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back()["done_at"], layer["cycles"]);
  std::uint64_t sum = 0;
  for (const auto& [k, v] : layer["breakdown"].items()) sum += v.get<std::uint64_t>();
  EXPECT_EQ(sum, layer["cycles"].get<std::uint64_t>());
  EXPECT_NEAR(layer["tokens_per_s_if_every_layer"].get<double>(),
              1.1e9 / (layer["cycles"].get<double>() * 16), 1e-6);
  const auto few = op("attention --hardware wse2 --model llama-3.2-1b --region 96x96 --context 16");
  const auto many =
      op("attention --hardware wse2 --model llama-3.2-1b --region 96x96 --context 4096");
  EXPECT_GT(many["cycles"].get<std::uint64_t>(), few["cycles"].get<std::uint64_t>());
  // An all-reduce is timed alone, from cycle 0 (a k-tree's does not start
  // from the reduction to the first core), and its row says its own cycles.
  // Chain over 10 WSE-3 cores, 4 bytes: 9 reducing hops of 1 + 2 cycles and
  // one cycle of serialization to the first core (28); the all-reduce is that
  // and the multicast back, 9 hops and 1 cycle (38).
  const auto row = [](const std::string& text, const std::string& what) {
    const std::size_t at = text.find(what);
    EXPECT_NE(at, std::string::npos) << text;
    std::istringstream in(at == std::string::npos ? std::string() : text.substr(at + what.size()));
    std::uint64_t cycles = 0, done = 0;
    in >> cycles >> done;
    return std::pair{cycles, done};
  };
  const Outcome chain = wafersim("bench op allreduce --region 10x1 --reduction chain");
  ASSERT_EQ(chain.code, 0) << chain.err;
  EXPECT_EQ(row(chain.out, "reduce to the first core"),
            (std::pair<std::uint64_t, std::uint64_t>{28, 28}));
  EXPECT_EQ(row(chain.out, "all-reduce (reduce + multicast back)"),
            (std::pair<std::uint64_t, std::uint64_t>{38, 38}));
  const Outcome ktree = wafersim("bench op allreduce --region 10x1 --reduction k-tree");
  ASSERT_EQ(ktree.code, 0) << ktree.err;
  const auto [k_cycles, k_done] = row(ktree.out, "all-reduce (into its root, multicast both ways)");
  EXPECT_EQ(k_cycles, k_done);
  EXPECT_GT(k_cycles, 10u);  // at least the hops from one end of the line to the other
  EXPECT_EQ(wafersim("bench op gemv --region 4x").code, 2);
  const Outcome big = wafersim("bench op layer --region 8x8");
  EXPECT_EQ(big.code, 1);
  EXPECT_NE(big.err.find("does not fit"), std::string::npos) << big.err;
}

// placement.fabric_bits: 16 on a whole-region run (timing only): the token
// is shorter, by no more than the serialization the 32-bit token's critical
// path had; the cores' work (compute on the path) is the same or less.
TEST(Cli, SixteenBitFabricValuesShortenTheToken) {
  const std::string sc = src("scenarios/regression/tiny-small-whole-region.yaml");
  auto run = [&](const std::string& extra) {
    const Outcome o = wafersim("run " + sc + " --json --timing-only " + extra);
    EXPECT_EQ(o.code, 0) << o.err;
    return nlohmann::json::parse(o.out);
  };
  const auto r32 = run(""), r16 = run("--set placement.fabric_bits=16");
  const auto c32 = r32["cycles_per_token"].get<std::uint64_t>();
  const auto c16 = r16["cycles_per_token"].get<std::uint64_t>();
  EXPECT_LT(c16, c32);
  std::uint64_t most = 0;
  for (const auto& t : r32["token_records"])
    if (!t["prefill"].get<bool>())
      most = std::max(most, t["critical_path_cycles"]["serialization"].get<std::uint64_t>());
  EXPECT_GT(most, 0u);
  EXPECT_LE(c32 - c16, most);
}

// A functional run with 16-bit values on the fabric: the same timing as
// the timing-only run (the numbers never move a cycle); activations held in
// fp16 (fp16 weights) or bf16 move the logits off the fp32 reference's, and
// a difference in tokens is reported, not an error.
TEST(Cli, SixteenBitFabricValuesRunFunctionallyWithTheSameTiming) {
  const std::string sc = src("scenarios/regression/tiny-small-whole-region.yaml");
  auto run = [&](const std::string& extra) {
    const Outcome o = wafersim("run " + sc + " --json " + extra);
    EXPECT_EQ(o.code, 0) << o.err;
    return std::pair{nlohmann::json::parse(o.out), o.err};
  };
  const std::string half = "--set placement.fabric_bits=16 --set precision=fp16";
  const auto [timing, timing_err] = run(half + " --timing-only");
  const auto [fp16, fp16_err] = run(half);
  const auto [fp32, fp32_err] = run("--set precision=fp16");
  EXPECT_EQ(fp16["cycles_per_token"], timing["cycles_per_token"]);
  // Every record's times and critical path (the tokens fed in differ: a
  // timing-only run has no generated tokens to feed).
  auto times = [](nlohmann::json records) {
    for (auto& r : records) r.erase("token_in");
    return records;
  };
  EXPECT_EQ(times(fp16["token_records"]), times(timing["token_records"]));
  EXPECT_NE(fp16_err.find("the reference forward pass is fp32"), std::string::npos) << fp16_err;
  // Rounding to fp16 (11 significant bits) moves the logits far more than
  // fp32's order of additions does, and for this case no token.
  EXPECT_GT(fp16["max_logit_abs_error"].get<double>(),
            100 * fp32["max_logit_abs_error"].get<double>());
  EXPECT_EQ(fp16["tokens"], fp16["reference_tokens"]);
  // bf16 (8 significant bits) changes a token of this synthetic model.
  const auto [bf16, bf16_err] = run("--set placement.fabric_bits=16");
  EXPECT_NE(bf16["tokens"], bf16["reference_tokens"]);
  EXPECT_FALSE(bf16["tokens_match_reference"].get<bool>());
  EXPECT_NE(bf16_err.find("tokens match reference: no"), std::string::npos) << bf16_err;
}

TEST(Cli, ValidateSummarisesAGoodScenario) {
  const Outcome o = wafersim("validate " + src("scenarios/quickstart.yaml"));
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("ok: tiny-llama on small"), std::string::npos) << o.out;
}

TEST(Cli, ValidateSaysWhenARouterNeedsMoreColorsThanItHas) {
  const fs::path d = scratch_dir("colors");
  const fs::path scenario = d / "colors.yaml";
  std::ofstream(scenario) << "name: colors\nhardware: small\nmodel: tiny-llama\n"
                             "placement: {strategy: whole-region, reduction: k-tree}\n"
                             "workload: {prompt_tokens: 4, generate_tokens: 4}\n";
  const Outcome o = wafersim("validate " + scenario.string());
  EXPECT_EQ(o.code, 1);
  for (const char* part :
       {"needs 30 colors", "has 24 (virtual_channels)", "k-tree", "reduction_groups"})
    EXPECT_NE(o.err.find(part), std::string::npos) << part << "\n" << o.err;
  // What validate says of a scenario that fits.
  const Outcome good = wafersim("validate " + src("scenarios/quickstart.yaml"));
  EXPECT_NE(good.out.find("routes: at most 5 of the 24 colors per router"), std::string::npos)
      << good.out;
  fs::remove_all(d);
}

// `validate` places a speculative draft as `run` does: a draft that fits
// nowhere is refused by both, naming the draft (until s20 validate said ok
// and run refused), and one that fits is reported, its layer groups the
// target's but at most one a layer.
TEST(Cli, ValidateChecksTheSpeculativeDraftsFitAsRunDoes) {
  const fs::path d = scratch_dir("draft_fit");
  const fs::path scenario = d / "draft.yaml";
  const auto write = [&](const std::string& draft) {
    std::ofstream(scenario) << "name: draft\nhardware: small\nmodel: tiny-llama\n"
                               "placement: {strategy: whole-region, layer_groups: 4}\n"
                               "workload: {prompt_tokens: 2, generate_tokens: 3}\n"
                               "speculative_decoding: {draft_model: "
                            << draft << ", draft_tokens: 2, acceptance_rate: 0.7}\n";
  };
  const std::string set = " --set model.num_layers=4 --set outputs.functional=false";
  // One layer of this draft alone exceeds the small wafer.
  write("{preset: tiny-llama, name: huge-draft, intermediate_size: 1048576}");
  const Outcome checked = wafersim("validate " + scenario.string() + set);
  const Outcome ran = wafersim("run " + scenario.string() + set);
  EXPECT_EQ(checked.code, 1) << checked.out;
  EXPECT_EQ(ran.code, 1) << ran.err;
  for (const Outcome* o : {&checked, &ran})
    EXPECT_NE(o->err.find("the speculative draft huge-draft"), std::string::npos) << o->err;
  // tiny-qwen3-moe has 2 layers: the target's 4 groups become 2 for it.
  write("tiny-qwen3-moe");
  const Outcome good = wafersim("validate " + scenario.string() + set);
  EXPECT_EQ(good.code, 0) << good.err;
  EXPECT_NE(good.out.find("draft tiny-qwen3-moe fits on 1 wafer of its own (whole-region)"),
            std::string::npos)
      << good.out;
  EXPECT_EQ(wafersim("run " + scenario.string() + set).code, 0);
  fs::remove_all(d);
}

TEST(Cli, ListShowsThePresets) {
  const Outcome o = wafersim("list");
  EXPECT_EQ(o.code, 0) << o.err;
  for (const char* name : {"wse3", "wse2", "small", "tiny-llama", "llama-3.1-8b"})
    EXPECT_NE(o.out.find(name), std::string::npos) << name;
}

TEST(Cli, OverridesReplaceScenarioKeys) {
  const Outcome o = wafersim("run " + src("scenarios/quickstart.yaml") +
                             " --json --timing-only --wafers 2 --users 3 --precision fp16");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["wafers_used"], 2);
  EXPECT_EQ(j["users"], 3);
  EXPECT_EQ(j["precision"], "fp16");
  EXPECT_GT(j["aggregate_tokens_per_s"].get<double>(),
            j["decode_tokens_per_s_per_user"].get<double>());
  const Outcome bad = wafersim("run " + src("scenarios/quickstart.yaml") + " --wafers 0");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("wafers"), std::string::npos) << bad.err;
}

TEST(Cli, GoldenRegressionSuitePasses) {
  const Outcome o = wafersim("regress " + src("scenarios/regression"));
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("0 failed"), std::string::npos) << o.out;
}

TEST(Cli, RegressionSuiteCatchesAChangedResult) {
  // A copy of one case whose placement changed (chain -> tree reduction)
  // but whose recorded result did not: the suite must fail and say what moved.
  const fs::path d = scratch_dir("regress");
  fs::create_directories(d / "expected");
  std::ifstream in(src("scenarios/regression/tiny-small-chain.yaml"));
  std::string yaml((std::istreambuf_iterator<char>(in)), {});
  yaml.replace(yaml.find("reduction: chain"), 16, "reduction: tree");
  std::ofstream(d / "tiny-small-chain.yaml") << yaml;
  fs::copy_file(src("scenarios/regression/expected/tiny-small-chain.json"),
                d / "expected/tiny-small-chain.json");
  const Outcome o = wafersim("regress " + d.string());
  EXPECT_EQ(o.code, 4) << o.out << o.err;
  EXPECT_NE(o.out.find("CHANGED"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("cycles_per_token: "), std::string::npos) << o.out;
  // Accepting records the new baseline, after which it passes.
  EXPECT_EQ(wafersim("regress " + d.string() + " --accept").code, 0);
  EXPECT_EQ(wafersim("regress " + d.string()).code, 0);
  fs::remove_all(d);
}

TEST(Cli, CompareFailsOnARegressionBeyondTheThreshold) {
  const fs::path d = scratch_dir("compare");
  const std::string a = (d / "a.h5").string(), b = (d / "b.h5").string();
  ASSERT_EQ(wafersim("run " + src("scenarios/quickstart.yaml") + " --timing-only --out " + a).code,
            0);
  ASSERT_EQ(
      wafersim("run " + src("scenarios/quickstart.yaml") + " --timing-only --wafers 2 --out " + b)
          .code,
      0);
  EXPECT_EQ(wafersim("compare " + a + " " + a + " --fail-on-regression 0").code, 0);
  const Outcome o = wafersim("compare " + a + " " + b + " --json --fail-on-regression 5");
  EXPECT_EQ(o.code, 4) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  bool tps_regressed = false;
  for (const auto& name : j["regressions"]) tps_regressed |= name == "decode_tokens_per_s_per_user";
  EXPECT_TRUE(tps_regressed) << o.out;  // crossing the wafer I/O twice per token costs speed
  // B -> A is an improvement in tokens/s: not a regression of that figure.
  const auto back = nlohmann::json::parse(
      wafersim("compare " + b + " " + a + " --json --fail-on-regression 5").out);
  for (const auto& name : back["regressions"]) EXPECT_NE(name, "decode_tokens_per_s_per_user");
  EXPECT_EQ(wafersim("compare " + a + " " + (d / "missing.h5").string()).code, 1);
  fs::remove_all(d);
}

TEST(Cli, PlaceMeasuresTheSameTrafficAsARunOfOneToken) {
  // One prompt token and one generated token: the run pushes exactly one
  // token through every stage, as `place` does, so the bytes x hops on the
  // mesh must agree (two code paths, one number).
  const fs::path d = scratch_dir("place");
  for (const char* strategy : {"layer-rectangles", "serpentine"}) {
    const fs::path scenario = d / (std::string(strategy) + ".yaml");
    std::ofstream(scenario)
        << "name: one\nhardware: small\nmodel: tiny-llama\nplacement:\n  strategy: " << strategy
        << "\nworkload:\n  prompt_tokens: 1\n  generate_tokens: 1\n";
    const Outcome place =
        wafersim("place " + scenario.string() + " --json --svg " + (d / "p.svg").string());
    ASSERT_EQ(place.code, 0) << place.err;
    const auto p = nlohmann::json::parse(place.out);
    const Outcome run = wafersim("run " + scenario.string() + " --json --timing-only");
    ASSERT_EQ(run.code, 0) << run.err;
    const auto r = nlohmann::json::parse(run.out);
    EXPECT_EQ(p["hop_bytes_per_token"], r["total_link_bytes"]) << strategy;
    EXPECT_EQ(p["strategy"], strategy);
    EXPECT_LE(p["sram_bytes_per_core_max"].get<double>(),
              p["sram_bytes_per_core_capacity"].get<double>());
    EXPECT_GT(p["regions"].size(), 4u * 5u);  // 4 layers x (4 matrices + attention) + head
    std::ifstream svg(d / "p.svg");
    const std::string text((std::istreambuf_iterator<char>(svg)), {});
    EXPECT_EQ(text.rfind("<svg", 0), 0u);
    EXPECT_NE(text.find("</svg>"), std::string::npos);
    EXPECT_NE(text.find("layer 3 qkv"), std::string::npos);
  }
  EXPECT_EQ(wafersim("place " + (d / "serpentine.yaml").string() + " --strategy nope").code, 1);
  fs::remove_all(d);
}

TEST(Cli, UnknownCommandIsAUsageError) {
  EXPECT_EQ(wafersim("frobnicate").code, 2);
  EXPECT_EQ(wafersim("run").code, 2);
}

// ---- wafersim sweep ----------------------------------------------------------

nlohmann::json sweep(const std::string& args) {
  const Outcome o = wafersim("sweep " + src("scenarios/quickstart.yaml") + " --json " + args);
  EXPECT_EQ(o.code, 0) << o.err;
  return nlohmann::json::parse(o.out);
}

TEST(Cli, SweepOverUsersGivesOnePointEachAndMoreUsersMoreAggregate) {
  const auto j = sweep("--users 1,2,4 --timing-only");
  ASSERT_EQ(j["points"].size(), 3u);
  double last = 0.0;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& p = j["points"][i];
    EXPECT_EQ(p["index"], static_cast<int>(i));
    EXPECT_EQ(p["exit_code"], 0);
    EXPECT_EQ(p["users"], 1 << i);
    EXPECT_EQ(p["overrides"]["users"], 1 << i);
    // Users share the layer pipeline: each adds throughput, none is faster alone.
    EXPECT_GT(p["aggregate_tokens_per_s"].get<double>(), last);
    EXPECT_LE(p["decode_tokens_per_s_per_user"].get<double>(),
              j["points"][0]["decode_tokens_per_s_per_user"].get<double>());
    last = p["aggregate_tokens_per_s"].get<double>();
  }
}

TEST(Cli, SweepResultsDoNotDependOnHowManyRunAtOnce) {
  EXPECT_EQ(sweep("--users 1,2 --precision bf16,fp32 --timing-only -j 1"),
            sweep("--users 1,2 --precision bf16,fp32 --timing-only -j 3"));
}

TEST(Cli, SweepReportsAModelThatDoesNotFitAsAnAnswer) {
  const auto j = sweep("--model tiny-llama,llama-3.1-8b --timing-only");
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][0]["exit_code"], 0);
  EXPECT_EQ(j["points"][1]["exit_code"], 1);
  EXPECT_NE(j["points"][1]["error"].get<std::string>().find("does not fit"), std::string::npos);
}

TEST(Cli, SweepShardsSplitThePoints) {
  const auto all = sweep("--users 1,2,3 --timing-only");
  const auto s0 = sweep("--users 1,2,3 --timing-only --shard 0/2");
  const auto s1 = sweep("--users 1,2,3 --timing-only --shard 1/2");
  ASSERT_EQ(s0["points"].size(), 2u);
  ASSERT_EQ(s1["points"].size(), 1u);
  EXPECT_EQ(s0["points"][0], all["points"][0]);
  EXPECT_EQ(s1["points"][0], all["points"][1]);
  EXPECT_EQ(s0["points"][1], all["points"][2]);
}

// The placement's knobs are sweep axes: each point is the run with those
// options, and the table gains a column for each knob swept.
TEST(Cli, SweepOverReductionSchemesGivesEachSchemesRun) {
  const auto j = sweep("--strategy whole-region --reduction chain,tree --timing-only");
  ASSERT_EQ(j["points"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto& p = j["points"][i];
    const std::string scheme = i == 0 ? "chain" : "tree";
    EXPECT_EQ(p["overrides"]["strategy"], "whole-region");
    EXPECT_EQ(p["overrides"]["reduction"], scheme);
    const Outcome run =
        wafersim("run " + src("scenarios/quickstart.yaml") +
                 " --json --timing-only --strategy whole-region --reduction " + scheme);
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(p["decode_tokens_per_s_per_user"],
              nlohmann::json::parse(run.out)["decode_tokens_per_s_per_user"])
        << scheme;
  }
  // A tree's log2 levels against a chain's n - 1 hops: not the same token.
  EXPECT_NE(j["points"][0]["decode_tokens_per_s_per_user"],
            j["points"][1]["decode_tokens_per_s_per_user"]);
  const Outcome table = wafersim("sweep " + src("scenarios/quickstart.yaml") +
                                 " --strategy whole-region --reduction chain --decode-batch 1");
  ASSERT_EQ(table.code, 0) << table.err;
  const std::string header = table.out.substr(0, table.out.find('\n'));
  const std::size_t users = header.find(" users "), strategy = header.find(" strategy "),
                    reduction = header.find(" reduction "), batch = header.find(" batch "),
                    rate = header.find(" tok/s/user ");
  EXPECT_TRUE(users < strategy && strategy < reduction && reduction < batch && batch < rate &&
              rate != std::string::npos)
      << header;
  const std::string row = table.out.substr(header.size() + 1);
  // Each column as wide as its heading or its longest value, right-aligned.
  EXPECT_NE(row.find(" whole-region     chain     1 "), std::string::npos) << row;
}

TEST(Cli, SweepRefusesABadAxisValueNamingThePointAndTheKey) {
  const Outcome count = wafersim("sweep " + src("scenarios/quickstart.yaml") + " --users 2,0");
  EXPECT_EQ(count.code, 2);  // a usage error: nothing loaded or run
  EXPECT_NE(count.err.find("'0' is not a whole number from 1 to 1000000"), std::string::npos)
      << count.err;
  const Outcome scheme =
      wafersim("sweep " + src("scenarios/quickstart.yaml") + " --reduction tree,nope");
  EXPECT_EQ(scheme.code, 1);
  EXPECT_NE(scheme.err.find("sweep point 1 (--reduction nope)"), std::string::npos) << scheme.err;
  EXPECT_NE(scheme.err.find("placement.reduction: unknown reduction scheme 'nope'; valid: chain"),
            std::string::npos)
      << scheme.err;
  EXPECT_TRUE(scheme.out.empty());
}

TEST(Cli, SweepWithAnUnknownPresetFailsBeforeRunningAnything) {
  const Outcome o =
      wafersim("sweep " + src("scenarios/quickstart.yaml") + " --model tiny-llama,nope");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("unknown model preset 'nope'"), std::string::npos) << o.err;
  EXPECT_TRUE(o.out.empty());
}

}  // namespace
