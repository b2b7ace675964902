// The scripts of tests/checkpoints, run from a test: make_checkpoint.py writes
// tiny Hugging Face folders (config.json, safetensors, tokenizer.json) and
// numpy_forward.py decodes them with an implementation that shares nothing
// with wafersim's (float64 NumPy following the Hugging Face modeling code).
// Needs Debian's python3 with python3-numpy, found when CMake configures
// (tests/CMakeLists.txt): without them a test using this fixture fails and
// says so, never skips.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace wafersim::testing {

inline std::string shell_quoted(const std::string& s) {  // for /bin/sh: '...' with ' as '\''
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string id_list(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// A fixture with a scratch folder of its own and the scripts at hand.
class CheckpointScriptsTest : public ::testing::Test {
 protected:
  using json = nlohmann::json;

  void SetUp() override {
    // Fail, never skip: a missing NumPy would otherwise hide the only check
    // against an independent implementation.
    const std::string problem = WAFERSIM_NUMPY_PROBLEM;
    if (!problem.empty()) GTEST_FAIL() << problem;
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name)
      if (c == '/') c = '_';
    dir_ = std::filesystem::temp_directory_path() /
           ("wafersim_numpy_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs a script of tests/checkpoints with `args`; its stdout, or a test
  // failure showing its stderr.
  std::string python(const std::string& script, const std::string& args) {
    const std::filesystem::path err = dir_ / "stderr.txt";
    const std::string scripts = std::string(WAFERSIM_SOURCE_DIR) + "/tests/checkpoints/";
    const std::string cmd = shell_quoted(WAFERSIM_PYTHON3) + " " + shell_quoted(scripts + script) +
                            " " + args + " 2>" + shell_quoted(err.string());
    return run(cmd, err);
  }

  // Runs a shell command; its stdout, or a test failure showing the stderr
  // it wrote to `err`.
  std::string run(const std::string& cmd, const std::filesystem::path& err) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) {
      ADD_FAILURE() << "cannot run " << cmd;
      return out;
    }
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = ::pclose(p);
    if (status != 0) {
      std::ifstream in(err);
      std::stringstream text;
      text << in.rdbuf();
      ADD_FAILURE() << cmd << "\nexited with status " << status << ":\n" << text.str();
    }
    return out;
  }

  // make_checkpoint.py `args` into the folder `name` of dir_.
  std::filesystem::path make_checkpoint(const std::string& name, const std::string& args) {
    const std::filesystem::path folder = dir_ / name;
    python("make_checkpoint.py", shell_quoted(folder.string()) + " " + args);
    return folder;
  }

  // numpy_forward.py's output: one JSON object per request line.
  std::vector<json> numpy(const std::filesystem::path& folder, const std::string& args) {
    const std::string out = python("numpy_forward.py", shell_quoted(folder.string()) + " " + args);
    std::vector<json> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      try {
        lines.push_back(json::parse(line));
      } catch (const json::parse_error& e) {
        ADD_FAILURE() << "numpy_forward.py printed a line that is not JSON (" << e.what() << "):\n"
                      << line;
      }
    }
    return lines;
  }

  std::filesystem::path dir_;
};

}  // namespace wafersim::testing
