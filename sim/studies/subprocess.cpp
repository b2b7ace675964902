#include "sim/studies/subprocess.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "analysis/hdf5_output.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  q += '\'';
  return q;
}

}  // namespace

ProcessOutput run_process(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("run_process: no program");
  // stderr goes to a file of its own (reading two pipes from one thread
  // could deadlock); unique per process and call.
  static std::atomic<unsigned> calls{0};
  const fs::path err_file =
      fs::temp_directory_path() /
      ("wafersim-child-" + std::to_string(::getpid()) + "-" + std::to_string(calls++) + ".err");
  std::string cmd;
  for (const std::string& a : argv) {
    if (!cmd.empty()) cmd += ' ';
    cmd += shell_quote(a);
  }
  cmd += " 2> ";
  cmd += shell_quote(err_file.string());
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot start " + argv.front());
  ProcessOutput o;
  std::array<char, 65536> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int status = ::pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  {
    std::ifstream f(err_file, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    o.err = s.str();
  }
  std::error_code ec;
  fs::remove(err_file, ec);
  return o;
}

std::string first_error_line(const std::string& err) {
  std::istringstream in(err);
  std::string line, first;
  while (std::getline(in, line)) {
    if (line.find("error") != std::string::npos) return line;
    if (first.empty() && !line.empty() && line.front() != '\r') first = line;
  }
  return first;
}

}  // namespace wafersim::sim
