// libFuzzer target: arbitrary bytes as a placement file (sim/config/
// placement_file.hpp) for the quick start's model and hardware. Anything
// wrong must be a ScenarioError naming file and line (or a FitError for bytes
// that do not fit), never a crash, an overflow or a hang.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "fabric/sram.hpp"
#include "models/model_config.hpp"
#include "sim/config/placement_file.hpp"
#include "sim/config/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  using namespace wafersim;
  static const sim::Scenario sc = sim::load_scenario(
      fs::path(WAFERSIM_SCENARIO_DIR) / "quickstart.yaml", WAFERSIM_SCENARIO_DIR);
  static const fs::path file = fs::temp_directory_path() /
                               ("wafersim-fuzz-placement-" + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  sim::PlacementRequest req;
  req.context_tokens =
      static_cast<int>(sc.workload.prompt_ids.size()) + sc.workload.generate_tokens;
  req.users = std::max(1, sc.workload.users);
  req.weight_bits = models::dtype_bits(sc.precision);
  try {
    (void)sim::read_placement_file(file, sc.model, sc.hardware, req, sc.wafers);
  } catch (const sim::ScenarioError&) {
  } catch (const fabric::FitError&) {
  }
  return 0;
}
