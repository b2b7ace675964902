// Output paths checked before the work that fills them, and temporary files
// of atomic writes removed when the process is interrupted.
#include "analysis/output_file.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "analysis/hdf5_output.hpp"
#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

namespace fs = std::filesystem;
using OutputFile = fixtures::ScratchDir;

std::string error_of(const fs::path& p) {
  try {
    check_writable(p);
  } catch (const OutputError& e) {
    EXPECT_EQ(e.path(), p);
    return e.what();
  }
  return "";
}

TEST_F(OutputFile, AWritablePathPassesAndLeavesNothing) {
  EXPECT_NO_THROW(check_writable(dir() / "r.h5"));
  EXPECT_TRUE(fs::is_empty(dir()));
  std::ofstream(dir() / "old.h5") << "older";
  EXPECT_NO_THROW(check_writable(dir() / "old.h5"));  // replaced at the end, kept until then
  std::ifstream in(dir() / "old.h5");
  std::string text;
  in >> text;
  EXPECT_EQ(text, "older");
}

TEST_F(OutputFile, MissingFolderFolderDeviceAndReadOnlyAreErrors) {
  EXPECT_NE(error_of(dir() / "no" / "r.h5").find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(dir()).find("is a folder"), std::string::npos);
  EXPECT_NE(error_of("/dev/null").find("not a regular file"), std::string::npos);
  std::ofstream(dir() / "file") << "x";
  EXPECT_NE(error_of(dir() / "file" / "r.h5").find("is not a folder"), std::string::npos);
  if (::geteuid() != 0) {  // root writes anywhere
    const fs::path ro = dir() / "read-only";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_NE(error_of(ro / "r.h5").find("cannot create files"), std::string::npos);
    fs::permissions(ro, fs::perms::owner_all);
  }
}

// A child registers a temporary file and is killed by `sig` while it exists:
// the file is gone and the child died of that signal.
void expect_removed_on(int sig, const fs::path& temp) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ofstream(temp) << "partial";
    const TemporaryFile registered(temp);
    ::raise(sig);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status)) << status;
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), sig);
  }
  EXPECT_FALSE(fs::exists(temp));
}

TEST_F(OutputFile, InterruptRemovesTheTemporaryFile) {
  expect_removed_on(SIGINT, dir() / "r.h5.tmp.1");
  expect_removed_on(SIGTERM, dir() / "r.h5.tmp.2");
}

TEST_F(OutputFile, AFinishedWriteIsNotRemovedByALaterInterrupt) {
  const fs::path kept = dir() / "kept.txt";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    write_text_atomically(kept, "whole");
    ::raise(SIGTERM);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir()), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace wafersim::analysis
