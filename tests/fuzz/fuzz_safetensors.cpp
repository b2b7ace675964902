// libFuzzer target: arbitrary bytes as a safetensors file (models/safetensors.hpp).
// A file that is not a valid safetensors file must be a WeightsError, never
// a crash, a read outside the mapping or a hang; every tensor of one that
// opens is read through (widened where its dtype allows).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  static const fs::path file =
      fs::temp_directory_path() / ("wafersim-fuzz-" + std::to_string(::getpid()) + ".safetensors");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const wafersim::models::SafetensorsFile f(file);
    for (const auto& [name, tensor] : f.tensors()) {
      try {
        (void)f.read_fp32(name);
      } catch (const wafersim::models::WeightsError&) {
      }
    }
  } catch (const wafersim::models::WeightsError&) {
  }
  return 0;
}
