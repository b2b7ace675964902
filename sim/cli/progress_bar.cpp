#include <unistd.h>

#include <cstdio>
#include <string>

#include "sim/cli/commands.hpp"

namespace wafersim::sim {

void show_progress_bar(const std::string& what, int done, int total, const std::string& unit) {
  if (!::isatty(STDERR_FILENO) || total <= 0) return;
  const int width = 30;
  const int filled = done * width / total;
  const std::string line = "  " + what + " [" + std::string(static_cast<std::size_t>(filled), '#') +
                           std::string(static_cast<std::size_t>(width - filled), '.') + "] " +
                           std::to_string(done) + "/" + std::to_string(total) +
                           (unit.empty() ? "" : " " + unit);
  std::fprintf(stderr, "\r%s", line.c_str());
  if (done == total) std::fprintf(stderr, "\r%*s\r", static_cast<int>(line.size()), "");
  std::fflush(stderr);
}

}  // namespace wafersim::sim
