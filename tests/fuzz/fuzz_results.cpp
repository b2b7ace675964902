// libFuzzer target: the results reader on arbitrary bytes. Every input must
// be read or refused with a ResultReadError; anything else is a finding.
// With WAFERSIM_FUZZ_RESEAL=1 each input that looks like a sealed file is
// sealed again first, so that the fuzzer reaches past the checksum into the
// HDF5 structure and our checks of it (libhdf5 included).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "analysis/hdf5_output.hpp"
#include "analysis/result_seal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  using namespace wafersim::analysis;
  static const fs::path file =
      fs::temp_directory_path() / ("wafersim-fuzz-results-" + std::to_string(::getpid()) + ".h5");
  static const bool reseal = std::getenv("WAFERSIM_FUZZ_RESEAL") != nullptr;
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  if (reseal && size > kSealBytes + 8 && std::memcmp(data + kSealBytes, "\x89HDF", 4) == 0) {
    try {
      seal_results_file(file);
    } catch (const std::runtime_error&) {
      return 0;
    }
  }
  try {
    (void)read_hdf5(file);
  } catch (const ResultReadError&) {
  }
  return 0;
}
