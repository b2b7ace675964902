// libFuzzer target: the scenario loader on arbitrary bytes. Every input must
// load or be refused with a ScenarioError; anything else (a crash, a hang,
// another exception, a sanitizer report) is a finding. Built with
// -DWAFERSIM_FUZZ=ON (clang); run by tests/fuzz/run_fuzzers.sh.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  static const fs::path file = fs::temp_directory_path() /
                               ("wafersim-fuzz-scenario-" + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    (void)wafersim::sim::load_scenario(file, WAFERSIM_SCENARIO_DIR);
  } catch (const wafersim::sim::ScenarioError&) {
  }
  return 0;
}
