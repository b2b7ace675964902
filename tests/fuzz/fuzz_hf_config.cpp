// libFuzzer target: arbitrary bytes as a Hugging Face config.json
// (models/hf_config.hpp). Anything that is not a config wafersim can model
// must be an HfConfigError or ConfigError naming what is wrong, never a
// crash, an overflow or a hang.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/hf_config.hpp"
#include "models/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  static const fs::path dir =
      fs::temp_directory_path() / ("wafersim-fuzz-hf-" + std::to_string(::getpid()));
  static const bool made = fs::create_directories(dir) || true;
  (void)made;
  {
    std::ofstream out(dir / "config.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    (void)wafersim::models::load_hf_config(dir / "config.json");
  } catch (const wafersim::models::HfConfigError&) {
  } catch (const wafersim::models::ConfigError&) {
  }
  return 0;
}
