// What the commands share: the --presets flag and the progress bars.
#include "sim/cli/commands.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "sim/config/scenario.hpp"

namespace wafersim::sim {

std::string presets_flag(const CLI::App& app) {
  const CLI::Option* presets = app.get_option_no_throw("--presets");
  return presets && presets->count() > 0 ? presets->as<std::string>() : "";
}

std::filesystem::path preset_dir(const CLI::App& app) {
  const std::string flag = presets_flag(app);
  return flag.empty() ? default_preset_dir() : std::filesystem::path(flag);
}

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

std::vector<std::pair<std::string, std::string>> parse_set_options(
    const std::vector<std::string>& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& kv : options) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CommandError(kExitUsage,
                         "--set takes KEY=VALUE (e.g. workload.users=8), got '" + kv + "'");
    out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

void show_placement_progress(int wafers, int wafer) {
  show_progress_bar(fmt::format("placing on {} wafer{}", wafers, wafers == 1 ? "" : "s"), wafer,
                    wafers);
}

}  // namespace wafersim::sim
