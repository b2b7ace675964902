// Running the wafersim binary as a user does, for the tests that check the
// command line: a child process's exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace wafersim::test_support {

struct CliOutcome {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs a shell command line (stderr captured apart from stdout).
inline CliOutcome run_command(const std::string& command) {
  namespace fs = std::filesystem;
  const fs::path err_file =
      fs::temp_directory_path() / ("wafersim_cli_err_" + std::to_string(::getpid()));
  const std::string cmd = command + " 2>" + err_file.string();
  CliOutcome o;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  fs::remove(err_file);
  return o;
}

inline CliOutcome run_wafersim(const std::string& args) {
  return run_command(std::string(WAFERSIM_BINARY) + " " + args);
}

// A fresh, empty folder under the temporary directory for one test.
inline std::filesystem::path cli_scratch_dir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path d =
      fs::temp_directory_path() / ("wafersim_cli_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace wafersim::test_support
