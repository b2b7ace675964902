// Sweep records, outputs and journals (sim/studies/sweep.hpp,
// sweep_journal.hpp): what a sweep keeps of a point, how it resumes, merges
// shards and refuses what is not its own.
#include "sim/studies/sweep_journal.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "support/scratch_folder.hpp"

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

SweepPoint point(int index, int users) {
  SweepPoint p;
  p.index = index;
  p["users"] = std::to_string(users);
  return p;
}

// A run's --json as `wafersim run` prints it, cut to what a sweep reads.
std::string run_json(int users, double rate) {
  Json j = {{"format", "wafersim-result"},
            {"model", "tiny-llama"},
            {"hardware", "tiny-64"},
            {"precision", "fp32"},
            {"wafers_used", 1},
            {"users", users},
            {"decode_tokens_per_s_per_user", rate},
            {"aggregate_tokens_per_s", rate * users},
            {"ttft_s", 1.0 / 3.0},
            {"inter_token_latency_s", 1.0 / rate},
            {"max_context_tokens", 4096},
            {"bottleneck", "core compute"},
            {"wafer_system", {{"power_kw", 23.0}}},
            {"gpu_baselines", Json::array({{{"system", "dgx-h100"},
                                            {"gpus", 8},
                                            {"tp", 8},
                                            {"pp", 1},
                                            {"decode_tokens_per_s_per_user", 123.456789012345},
                                            {"aggregate_tokens_per_s", 123.456789012345 * users},
                                            {"ttft_s", 0.01},
                                            {"power_kw", 10.2},
                                            {"bottleneck", "HBM bandwidth"},
                                            {"kv_limited", false}}})},
            {"token_records", Json::array({1, 2, 3})}};
  return j.dump();
}

SweepRecord ran(int index, int users, double rate) {
  return sweep_record(point(index, users), 0, run_json(users, rate), "");
}

Json identity(int total, const std::string& digest = "abc") {
  SweepAxes a;
  a["users"] = {"1", "2", "3", "4"};
  return sweep_identity("s.yaml", a, false, digest, total);
}

class SweepJournalTest : public test_support::ScratchFolder {
 protected:
  SweepJournalTest() : ScratchFolder("sweep_journal_") {}
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SweepRecord, KeepsTheHeadlineFiguresPowerAndGpuRowsNotTheTokens) {
  const SweepRecord r = ran(2, 4, 1000.0);
  EXPECT_EQ(r.at("index"), 2);
  EXPECT_EQ(r.at("exit_code"), 0);
  EXPECT_EQ(r.at("overrides").at("users"), 4);
  EXPECT_EQ(r.at("aggregate_tokens_per_s"), 4000.0);
  EXPECT_EQ(r.at("power_kw"), 23.0);
  ASSERT_EQ(r.at("gpu_baselines").size(), 1u);
  EXPECT_EQ(r.at("gpu_baselines")[0].at("system"), "dgx-h100");
  EXPECT_FALSE(r.contains("token_records"));
  EXPECT_FALSE(r.contains("error"));
}

TEST(SweepRecord, AFailedRunKeepsItsErrorLineAndUnreadableOutputIsAnInternalFailure) {
  const SweepRecord no_fit = sweep_record(
      point(0, 1), 1, "", "progress\nwafersim: error: s.yaml: the model does not fit: x\n");
  EXPECT_EQ(no_fit.at("exit_code"), 1);
  EXPECT_EQ(no_fit.at("error"), "wafersim: error: s.yaml: the model does not fit: x");
  EXPECT_FALSE(sweep_has_internal_failures({no_fit}));
  const SweepRecord garbled = sweep_record(point(1, 1), 0, "{\"model\": ", "");
  EXPECT_EQ(garbled.at("exit_code"), 3);
  EXPECT_NE(garbled.at("error").get<std::string>().find("unreadable JSON"), std::string::npos);
  EXPECT_TRUE(sweep_has_internal_failures({no_fit, garbled}));
}

TEST(SweepCsv, OneRowPerPointAndSystemAtFullPrecision) {
  const std::string csv = sweep_csv({ran(1, 2, 1000.0 / 3.0), ran(0, 1, 500.0)});
  std::istringstream in(csv);
  std::string header, r0, r0gpu, r1;
  std::getline(in, header);
  std::getline(in, r0);
  std::getline(in, r0gpu);
  std::getline(in, r1);
  EXPECT_EQ(header.rfind("index,exit_code,system,override_model,", 0), 0u) << header;
  EXPECT_NE(header.find(",power_kw,error"), std::string::npos) << header;
  EXPECT_EQ(r0.rfind("0,0,wafer,", 0), 0u) << r0;  // index order whatever the input order
  EXPECT_EQ(r0gpu.rfind("0,0,dgx-h100,", 0), 0u) << r0gpu;
  EXPECT_NE(r0gpu.find("123.456789012345"), std::string::npos) << r0gpu;  // not 6 digits
  EXPECT_NE(r0gpu.find("HBM bandwidth"), std::string::npos);
  EXPECT_NE(r0gpu.find(",tiny-llama,"), std::string::npos);  // the point's workload
  EXPECT_EQ(r1.rfind("1,0,wafer,", 0), 0u) << r1;
  // 1000/3 round-trips exactly from its text.
  EXPECT_NE(r1.find(fmt::format("{}", 1000.0 / 3.0)), std::string::npos) << r1;
  EXPECT_EQ(std::stod(fmt::format("{}", 1000.0 / 3.0)), 1000.0 / 3.0);
}

TEST(SweepJson, SaysWhichPointsAreMissing) {
  SweepSummary s;
  s.scenario = "s.yaml";
  s.points_total = 4;
  s.points_in_shard = 4;
  const Json j = sweep_json(s, {ran(3, 4, 1.0), ran(0, 1, 1.0)});
  EXPECT_EQ(j.at("complete"), false);
  EXPECT_EQ(j.at("missing"), Json({1, 2}));
  EXPECT_EQ(j.at("points")[0].at("index"), 0);
  EXPECT_EQ(j.at("points")[1].at("index"), 3);
  s.shard = {1, 2};
  EXPECT_EQ(missing_points(s, {ran(3, 4, 1.0)}), std::vector<int>{1});
}

TEST_F(SweepJournalTest, ResumesWithTheRecordsItHoldsAndAppendsAfterThem) {
  const fs::path f = dir_ / "j.jsonl";
  {
    SweepJournal j(f, identity(4), {});
    EXPECT_TRUE(j.resumed().empty());
    j.append(ran(2, 3, 10.0));
    j.append(ran(0, 1, 10.0));
  }
  {
    SweepJournal j(f, identity(4), {});
    ASSERT_EQ(j.resumed().size(), 2u);
    EXPECT_EQ(j.resumed()[0].at("index"), 2);
    j.append(ran(1, 2, 10.0));
  }
  const JournalContents c = read_journal(f);
  ASSERT_EQ(c.records.size(), 3u);
  EXPECT_EQ(c.records[2].at("index"), 1);
  EXPECT_FALSE(c.torn_tail);
}

TEST_F(SweepJournalTest, ALineTornByACrashIsCutOffAndThePointRunsAgain) {
  const fs::path f = dir_ / "j.jsonl";
  {
    SweepJournal j(f, identity(4), {});
    j.append(ran(0, 1, 10.0));
  }
  const std::string whole = read(f);
  {
    std::ofstream out(f, std::ios::app | std::ios::binary);
    out << ran(1, 2, 10.0).dump().substr(0, 40);  // killed mid-write
  }
  EXPECT_TRUE(read_journal(f).torn_tail);
  SweepJournal j(f, identity(4), {});
  ASSERT_EQ(j.resumed().size(), 1u);
  EXPECT_EQ(read(f), whole);
}

TEST_F(SweepJournalTest, RefusesAnotherSweepsJournalAndASecondWriter) {
  const fs::path f = dir_ / "j.jsonl";
  SweepJournal held(f, identity(4), {});
  EXPECT_THROW(SweepJournal(f, identity(4), {}), SweepJournalError);  // locked
  const fs::path g = dir_ / "g.jsonl";
  { SweepJournal j(g, identity(4), {}); }
  try {
    SweepJournal j(g, identity(4, "a changed preset"), {});
    FAIL() << "resumed another sweep";
  } catch (const SweepJournalError& e) {
    EXPECT_NE(std::string(e.what()).find("holds another sweep"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(g.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(SweepJournal(g, identity(4), SweepShard{1, 2}), SweepJournalError);
  EXPECT_THROW(SweepJournal(dir_, identity(4), {}), SweepJournalError);  // a folder
}

TEST_F(SweepJournalTest, CorruptLinesAndPointsOutsideTheShardAreErrorsWithTheirLine) {
  const fs::path f = dir_ / "j.jsonl";
  { SweepJournal j(f, identity(4), SweepShard{1, 2}); }
  {
    std::ofstream out(f, std::ios::app);
    out << ran(0, 1, 1.0).dump() << "\n";  // index 0 is shard 0's
  }
  try {
    (void)read_journal(f);
    FAIL();
  } catch (const SweepJournalError& e) {
    EXPECT_NE(std::string(e.what()).find(f.string() + ":2:"), std::string::npos) << e.what();
  }
  std::ofstream(f) << "{\"format\": \"something else\"}\n";
  EXPECT_THROW((void)read_journal(f), SweepJournalError);
  std::ofstream(f) << "";
  EXPECT_THROW((void)read_journal(f), SweepJournalError);
}

TEST_F(SweepJournalTest, MergeShardsBecomeOneSweepAndMissingPointsAreNamed) {
  const fs::path a = dir_ / "a.jsonl", b = dir_ / "b.jsonl";
  {
    SweepJournal j(a, identity(4), SweepShard{0, 2});
    j.append(ran(2, 3, 1.0));
    j.append(ran(0, 1, 1.0));
    SweepJournal k(b, identity(4), SweepShard{1, 2});
    k.append(ran(1, 2, 1.0));
  }
  MergedSweep m = merge_journals({a, b, a});  // the same journal twice counts once
  ASSERT_EQ(m.records.size(), 3u);
  EXPECT_EQ(m.records[0].at("index"), 0);
  EXPECT_EQ(m.records[2].at("index"), 2);
  EXPECT_EQ(m.missing, std::vector<int>{3});
  // A merged journal of the whole grid resumes as shard 0/1.
  const fs::path w = dir_ / "whole.jsonl";
  std::ofstream(w) << journal_text(m.sweep, SweepShard{}, m.records);
  SweepJournal whole(w, identity(4), {});
  EXPECT_EQ(whole.resumed().size(), 3u);
}

TEST_F(SweepJournalTest, MergeRefusesJournalsOfOtherSweepsAndDisagreeingPoints) {
  const fs::path a = dir_ / "a.jsonl", b = dir_ / "b.jsonl", c = dir_ / "c.jsonl";
  {
    SweepJournal j(a, identity(4), {});
    j.append(ran(0, 1, 1.0));
    SweepJournal k(b, identity(4), {});
    k.append(ran(0, 1, 2.0));  // the same point, other figures
    SweepJournal l(c, identity(4, "other"), {});
  }
  EXPECT_THROW((void)merge_journals({a, b}), SweepJournalError);
  EXPECT_THROW((void)merge_journals({a, c}), SweepJournalError);
  EXPECT_THROW((void)merge_journals({}), SweepJournalError);
}

}  // namespace
}  // namespace wafersim::sim
