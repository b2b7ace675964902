// Untrusted results files: a real results file, damaged in many ways (a byte
// flipped at many offsets, 4 KiB zeroed, truncated), must each be refused
// with ResultReadError within seconds -- never read as if whole, never a
// crash or a hang. The seal (analysis/result_seal.hpp) makes this hold for
// every change; the unsealed corpus shows what libhdf5 alone does.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <H5Cpp.h>
#include <gtest/gtest.h>

#include "analysis/hdf5_output.hpp"
#include "analysis/metrics.hpp"
#include "analysis/result_seal.hpp"
#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

namespace fs = std::filesystem;
using CorruptResults = fixtures::ScratchDir;

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

fs::path written(const fs::path& dir) {
  const fs::path p = dir / "run.h5";
  const RunResult r = fixtures::sample_result(true);
  write_hdf5(p, r, compute_metrics(r));
  return p;
}

// The damaged copies of `good`: a byte flipped (all bits, then the lowest)
// at every offset in the seal and HDF5's superblock and at a spread of offsets
// through the rest; 4 KiB zeroed at several places; cut short at several lengths.
std::vector<std::pair<std::string, std::string>> damaged(const std::string& good) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < std::min<std::size_t>(good.size(), 1100); i += 3) offsets.push_back(i);
  for (std::size_t i = 1100; i < good.size(); i += 53) offsets.push_back(i);
  offsets.push_back(good.size() - 1);
  for (const std::size_t at : offsets) {
    for (const unsigned char mask : {0xFFu, 0x01u}) {
      std::string b = good;
      b[at] = static_cast<char>(static_cast<unsigned char>(b[at]) ^ mask);
      out.emplace_back("flip " + std::to_string(mask) + " at " + std::to_string(at), b);
    }
  }
  for (const std::size_t at : {std::size_t{0}, std::size_t{512}, std::size_t{4096},
                               good.size() / 2, good.size() - 4096}) {
    std::string b = good;
    for (std::size_t i = at; i < std::min(good.size(), at + 4096); ++i) b[i] = '\0';
    out.emplace_back("4 KiB zeroed at " + std::to_string(at), b);
  }
  for (const std::size_t n : {std::size_t{0}, std::size_t{100}, std::size_t{511},
                              std::size_t{512}, std::size_t{520}, std::size_t{2048},
                              good.size() / 2, good.size() - 1}) {
    out.emplace_back("cut to " + std::to_string(n) + " bytes", good.substr(0, n));
  }
  std::string longer = good + std::string(100, 'x');
  out.emplace_back("100 bytes appended", longer);
  return out;
}

TEST_F(CorruptResults, AWrittenFileIsSealedAndReadsBack) {
  const fs::path p = written(dir());
  EXPECT_EQ(check_results_seal(p), SealState::verified);
  const std::string b = bytes_of(p);
  ASSERT_GT(b.size(), kSealBytes);
  EXPECT_EQ(b.substr(0, 16), "WAFERSIM-SHA256\n");
  EXPECT_EQ(b.substr(kSealBytes, 4), "\x89HDF");  // HDF5's signature after the user block
  std::vector<std::string> warnings;
  EXPECT_EQ(read_hdf5(p, &warnings).scenario_name, "tiny-decode");
  EXPECT_TRUE(warnings.empty());
}

TEST_F(CorruptResults, EveryDamagedCopyIsAReadErrorWithinSeconds) {
  const std::string good = bytes_of(written(dir()));
  const fs::path copy = dir() / "damaged.h5";
  const auto cases = damaged(good);
  ASSERT_GT(cases.size(), 500u);
  double slowest = 0.0;
  for (const auto& [what, bytes] : cases) {
    put(copy, bytes);
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)read_hdf5(copy);
      ADD_FAILURE() << what << ": read as if whole";
    } catch (const ResultReadError& e) {
      EXPECT_NE(std::string(e.what()).find(copy.string()), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what() << " is not a ResultReadError";
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    slowest = std::max(slowest, s);
    EXPECT_LT(s, 5.0) << what;
  }
  RecordProperty("slowest_read_s", std::to_string(slowest));
}

TEST_F(CorruptResults, TheMessageSaysWhatIsWrong) {
  const std::string good = bytes_of(written(dir()));
  const fs::path copy = dir() / "damaged.h5";
  auto message = [&](const std::string& bytes) {
    put(copy, bytes);
    try {
      (void)read_hdf5(copy);
    } catch (const ResultReadError& e) {
      return std::string(e.what());
    }
    return std::string("(read)");
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  EXPECT_NE(message(flipped).find("checksum mismatch"), std::string::npos) << message(flipped);
  std::string seal = good;
  seal[20] = 'z';
  EXPECT_NE(message(seal).find("checksum block is damaged"), std::string::npos) << message(seal);
  EXPECT_NE(message(good.substr(0, 100)).find("not an HDF5 file"), std::string::npos);
}

TEST_F(CorruptResults, FoldersDevicesAndMissingFilesAreReadErrors) {
  EXPECT_THROW(read_hdf5(dir()), ResultReadError);
  EXPECT_THROW(read_hdf5(dir() / "absent.h5"), ResultReadError);
  EXPECT_THROW(read_hdf5("/dev/null"), ResultReadError);
  try {
    (void)read_hdf5(dir());
  } catch (const ResultReadError& e) {
    EXPECT_NE(std::string(e.what()).find("is a folder"), std::string::npos) << e.what();
  }
}

// An HDF5 file without the seal (as wafersim wrote before sealing, or any
// other HDF5 file) is still opened, with a warning; one not ours is refused.
TEST_F(CorruptResults, AnUnsealedFileIsReadWithAWarning) {
  const fs::path other = dir() / "other.h5";
  { H5::H5File f(other.string(), H5F_ACC_TRUNC); }
  EXPECT_EQ(check_results_seal(other), SealState::unsealed);
  std::vector<std::string> warnings;
  EXPECT_THROW(read_hdf5(other, &warnings), ResultReadError);  // not a wafersim file
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no checksum"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace wafersim::analysis
