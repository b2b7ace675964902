// wafersim sweep and merge as a user (or a batch system) runs them: journals
// that resume, a sweep stopped by a signal, shards merged, and the points
// spread over MPI ranks by mpirun (one output, every point exactly once, a
// killed rank resumed).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/wafersim_cli.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Outcome = wafersim::test_support::CliOutcome;
using Clock = std::chrono::steady_clock;

std::string quickstart() { return std::string(WAFERSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml"; }

Outcome wafersim(const std::string& args) { return wafersim::test_support::run_wafersim(args); }

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Journal lines after the header: the points done.
int records_in(const fs::path& journal) {
  std::ifstream in(journal);
  std::string line;
  int n = -1;
  while (std::getline(in, line))
    if (!line.empty()) ++n;
  return std::max(n, 0);
}

// A command started in the background through sh (its stdout and stderr to
// files), so a test can signal it while it runs.
pid_t start(const std::string& command) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits (at most a minute) until the journal holds `n` points.
bool wait_for_records(const fs::path& journal, int n) {
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until) {
    if (fs::exists(journal) && records_in(journal) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

const std::string kUsers = "--users 1,2,3,4,5,6,7,8 --timing-only";

// The points of an uninterrupted sweep on one process: what every other way
// of running the same grid must give back.
const Json& plain_points() {
  static const Json points = [] {
    const Outcome o = wafersim("sweep " + quickstart() + " --json " + kUsers);
    EXPECT_EQ(o.code, 0) << o.err;
    return Json::parse(o.out).at("points");
  }();
  return points;
}

void expect_every_point_once(const Json& sweep) {
  ASSERT_EQ(sweep.at("points").size(), 8u) << sweep.dump();
  std::map<int, int> seen;
  for (const Json& p : sweep.at("points")) ++seen[p.at("index").get<int>()];
  for (int i = 0; i < 8; ++i) EXPECT_EQ(seen[i], 1) << "point " << i;
  EXPECT_EQ(sweep.at("complete"), true);
  EXPECT_EQ(sweep.at("points"), plain_points());
}

TEST(SweepCli, AJournalKeepsEveryPointAndARerunResumesWithoutRunningThemAgain) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("sweep_journal");
  const fs::path j = d / "plan.jsonl";
  const std::string args = "sweep " + quickstart() + " --json " + kUsers + " --out " + j.string();
  const Outcome first = wafersim(args);
  ASSERT_EQ(first.code, 0) << first.err;
  expect_every_point_once(Json::parse(first.out));
  EXPECT_EQ(records_in(j), 8);
  const Outcome again = wafersim(args);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("resuming: 8 of 8 points already in"), std::string::npos) << again.err;
  EXPECT_EQ(Json::parse(again.out).at("points"), Json::parse(first.out).at("points"));
  EXPECT_EQ(records_in(j), 8);
  // Lose the last two points (as a crash before they were written would).
  std::string text = read(j);
  for (int k = 0; k < 2; ++k) text.erase(text.rfind('\n', text.size() - 2) + 1);
  std::ofstream(j, std::ios::trunc) << text;
  const Outcome resumed = wafersim(args);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming: 6 of 8 points already in"), std::string::npos);
  expect_every_point_once(Json::parse(resumed.out));
  EXPECT_EQ(records_in(j), 8);
  // Another grid on the same journal is refused, not mixed in.
  const Outcome other = wafersim("sweep " + quickstart() + " --users 1,2 --out " + j.string());
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.err.find("holds another sweep"), std::string::npos) << other.err;
  fs::remove_all(d);
}

TEST(SweepCli, SigintWritesThePointsDoneExitsNonZeroAndTheSameCommandResumes) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("sweep_sigint");
  const fs::path j = d / "plan.jsonl", csv = d / "plan.csv", out = d / "out.json",
                 err = d / "err.txt";
  const std::string args = "sweep " + quickstart() + " --json " + kUsers + " --out " +
                           j.string() + " --csv " + csv.string();
  const pid_t pid =
      start(std::string(WAFERSIM_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string());
  ASSERT_TRUE(wait_for_records(j, 1)) << read(err);
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 128 + SIGINT) << read(err);
  EXPECT_NE(read(err).find("interrupted:"), std::string::npos) << read(err);
  const Json partial = Json::parse(read(out));
  EXPECT_EQ(partial.at("interrupted"), true);
  const int done = static_cast<int>(partial.at("points").size());
  EXPECT_GE(done, 1);
  EXPECT_EQ(records_in(j), done);  // the journal and the output agree
  if (done < 8) {
    EXPECT_EQ(partial.at("complete"), false);
  }
  EXPECT_TRUE(fs::exists(csv));  // what was done is written
  const Outcome resumed = wafersim(args);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  expect_every_point_once(Json::parse(resumed.out));
  fs::remove_all(d);
}

TEST(SweepCli, ShardsOfABatchArrayMergeIntoTheWholeSweep) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("sweep_merge");
  const std::string base = "sweep " + quickstart() + " " + kUsers;
  for (int k = 0; k < 3; ++k) {
    const Outcome o = wafersim(base + " --shard " + std::to_string(k) + "/3 --out " +
                               (d / ("s" + std::to_string(k) + ".jsonl")).string());
    ASSERT_EQ(o.code, 0) << o.err;
  }
  const std::string s0 = (d / "s0.jsonl").string(), s1 = (d / "s1.jsonl").string(),
                    s2 = (d / "s2.jsonl").string();
  const Outcome all = wafersim("merge " + s0 + " " + s1 + " " + s2 + " --json --csv " +
                               (d / "all.csv").string());
  ASSERT_EQ(all.code, 0) << all.err;
  expect_every_point_once(Json::parse(all.out));
  // A lost job: merge names what is missing, and a merged journal resumes it.
  const fs::path whole = d / "whole.jsonl";
  const Outcome part = wafersim("merge " + s0 + " " + s2 + " --out " + whole.string());
  EXPECT_EQ(part.code, 1);
  EXPECT_NE(part.err.find("3 of 8 points are in no journal (1, 4, 7)"), std::string::npos)
      << part.err;
  const Outcome rest = wafersim(base + " --json --out " + whole.string());
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_NE(rest.err.find("resuming: 5 of 8 points"), std::string::npos) << rest.err;
  expect_every_point_once(Json::parse(rest.out));
  fs::remove_all(d);
}

// ---- MPI --------------------------------------------------------------------

std::string mpirun(int ranks) {
  std::string m = std::string(WAFERSIM_MPIEXEC) + " -n " + std::to_string(ranks) +
                  " --oversubscribe --bind-to none";
  if (::geteuid() == 0) m += " --allow-run-as-root";  // CI runs as root
  return m + " ";
}

TEST(SweepMpi, ThreeRanksGiveOneOutputWithEveryPointExactlyOnce) {
  if (std::string(WAFERSIM_MPIEXEC).empty()) GTEST_SKIP() << "built without MPI";
  const fs::path d = wafersim::test_support::cli_scratch_dir("sweep_mpi");
  const fs::path csv = d / "plan.csv";
  const Outcome o = wafersim::test_support::run_command(
      mpirun(3) + WAFERSIM_BINARY + " sweep " + quickstart() + " --json " + kUsers + " --csv " +
      csv.string());
  ASSERT_EQ(o.code, 0) << o.err;
  expect_every_point_once(Json::parse(o.out));  // one JSON object: only rank 0 prints
  std::ifstream in(csv);
  std::string line;
  int wafer_rows = 0;
  while (std::getline(in, line)) wafer_rows += line.find(",wafer,") != std::string::npos;
  EXPECT_EQ(wafer_rows, 8);
  fs::remove_all(d);
}

// The pid of the MPI rank `rank` whose command line mentions `tag`.
pid_t find_rank(int rank, const std::string& tag) {
  DIR* proc = ::opendir("/proc");
  pid_t found = -1;
  for (dirent* e; proc && (e = ::readdir(proc)) != nullptr;) {
    const std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = read(fs::path("/proc") / pid / "cmdline");
    std::string env = read(fs::path("/proc") / pid / "environ");
    if (cmd.find(tag) == std::string::npos || cmd.find(" run ") != std::string::npos) continue;
    const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
    if (env.find(std::string(1, '\0') + want + '\0') != std::string::npos ||
        env.rfind(want + '\0', 0) == 0) {
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      if (cmd.find(" sweep ") == std::string::npos) continue;
      found = std::stoi(pid);
      break;
    }
  }
  if (proc) ::closedir(proc);
  return found;
}

TEST(SweepMpi, ARankKilledMidSweepLosesNoFinishedPointAndTheRerunCompletesIt) {
  if (std::string(WAFERSIM_MPIEXEC).empty()) GTEST_SKIP() << "built without MPI";
  const fs::path d = wafersim::test_support::cli_scratch_dir("sweep_mpi_kill");
  const fs::path j = d / "plan.jsonl", err = d / "err.txt";
  const std::string sweep = std::string(WAFERSIM_BINARY) + " sweep " + quickstart() +
                            " --json " + kUsers + " --out " + j.string();
  const pid_t pid = start(mpirun(3) + sweep + " >/dev/null 2>" + err.string());
  ASSERT_TRUE(wait_for_records(j, 2)) << read(err);
  const pid_t rank1 = find_rank(1, j.string());
  ASSERT_GT(rank1, 0) << "no rank 1 found";
  ::kill(rank1, SIGKILL);
  const int code = wait_exit(pid);
  const int kept = records_in(j);
  if (kept < 8) {
    EXPECT_NE(code, 0) << read(err);  // the launcher reports the lost rank
  }
  EXPECT_GE(kept, 2);
  const Outcome again = wafersim::test_support::run_command(mpirun(3) + sweep);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("resuming: " + std::to_string(kept) + " of 8"), std::string::npos)
      << again.err;
  expect_every_point_once(Json::parse(again.out));
  EXPECT_EQ(records_in(j), 8);  // no point journaled twice
  fs::remove_all(d);
}

TEST(SweepMpi, ShardIsRefusedUnderTheLauncher) {
  if (std::string(WAFERSIM_MPIEXEC).empty()) GTEST_SKIP() << "built without MPI";
  const Outcome o = wafersim::test_support::run_command(
      mpirun(2) + WAFERSIM_BINARY + " sweep " + quickstart() + " --users 1,2 --shard 0/2");
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("drop --shard"), std::string::npos) << o.err;
}

}  // namespace
