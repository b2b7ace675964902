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
#include <map>
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
  for (std::size_t i = 0; i < std::min<std::size_t>(good.size(), 1100); i += 3)
    offsets.push_back(i);
  for (std::size_t i = 1100; i < good.size(); i += 53) offsets.push_back(i);
  offsets.push_back(good.size() - 1);
  for (const std::size_t at : offsets) {
    for (const unsigned char mask : {0xFFu, 0x01u}) {
      std::string b = good;
      b[at] = static_cast<char>(static_cast<unsigned char>(b[at]) ^ mask);
      out.emplace_back("flip " + std::to_string(mask) + " at " + std::to_string(at), b);
    }
  }
  for (const std::size_t at :
       {std::size_t{0}, std::size_t{512}, std::size_t{4096}, good.size() / 2, good.size() - 4096}) {
    std::string b = good;
    for (std::size_t i = at; i < std::min(good.size(), at + 4096); ++i) b[i] = '\0';
    out.emplace_back("4 KiB zeroed at " + std::to_string(at), b);
  }
  for (const std::size_t n :
       {std::size_t{0}, std::size_t{100}, std::size_t{511}, std::size_t{512}, std::size_t{520},
        std::size_t{2048}, good.size() / 2, good.size() - 1}) {
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
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  EXPECT_NE(message(good.substr(0, 100)).find("truncated"), std::string::npos);
  EXPECT_NE(message("not a results file at all").find("not an HDF5 file"), std::string::npos);
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

// ---- Without the seal ----------------------------------------------------------
//
// A file as wafersim wrote it before results were sealed: the same objects,
// no user block. Its damaged copies reach libhdf5 directly; each is read in a
// child process (a crash or a hang there must not take the test down) and
// must end as a ResultReadError or a read, within seconds.

herr_t copy_attribute(hid_t loc, const char* name, const H5A_info_t*, void* to) {
  const hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  const hid_t type = H5Aget_type(a);
  const hid_t space = H5Aget_space(a);
  std::vector<char> buffer(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)) *
                           H5Tget_size(type));
  H5Aread(a, type, buffer.data());
  const hid_t b = H5Acreate2(*static_cast<hid_t*>(to), name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(b, type, buffer.data());
  if (H5Tdetect_class(type, H5T_VLEN) > 0 || H5Tis_variable_str(type) > 0)
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, buffer.data());  // the strings read
  H5Aclose(b);
  H5Sclose(space);
  H5Tclose(type);
  H5Aclose(a);
  return 0;
}

herr_t copy_object(hid_t group, const char* name, const H5L_info_t*, void* to) {
  return H5Ocopy(group, name, *static_cast<hid_t*>(to), name, H5P_DEFAULT, H5P_DEFAULT);
}

void write_unsealed_copy(const fs::path& from, const fs::path& to) {
  const hid_t src = H5Fopen(from.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t dst = H5Fcreate(to.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t src_root = H5Gopen2(src, "/", H5P_DEFAULT);
  hid_t dst_root = H5Gopen2(dst, "/", H5P_DEFAULT);
  H5Literate(src_root, H5_INDEX_NAME, H5_ITER_INC, nullptr, copy_object, &dst_root);
  H5Aiterate2(src_root, H5_INDEX_NAME, H5_ITER_INC, nullptr, copy_attribute, &dst_root);
  H5Gclose(dst_root);
  H5Gclose(src_root);
  H5Fclose(dst);
  H5Fclose(src);
}

// How reading `file` ended, in a child process with a 30 s alarm (the
// reader's own trial read of an unsealed file gives up after 5 s).
enum class Ending { read, read_error, other_error, crashed, hung };

int last_signal = 0;  // the signal that ended the last crashed child

Ending read_in_child(const fs::path& file) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(30);
    try {
      (void)read_hdf5(file);
      ::_exit(10);
    } catch (const ResultReadError&) {
      ::_exit(11);
    } catch (...) {
      ::_exit(12);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) {
    last_signal = WTERMSIG(status);
    return last_signal == SIGALRM ? Ending::hung : Ending::crashed;
  }
  last_signal = 0;
  switch (WEXITSTATUS(status)) {
    case 10:
      return Ending::read;
    case 11:
      return Ending::read_error;
    case 12:
      return Ending::other_error;
    default:  // a sanitizer's report exits with 1
      return Ending::crashed;
  }
}

TEST_F(CorruptResults, DamagedUnsealedFilesAreReadErrorsOrReadsNeverCrashes) {
  const fs::path sealed = written(dir());
  const fs::path unsealed = dir() / "unsealed.h5";
  write_unsealed_copy(sealed, unsealed);
  ASSERT_EQ(check_results_seal(unsealed), SealState::unsealed);
  ASSERT_EQ(read_hdf5(unsealed).scenario_name, "tiny-decode");  // a faithful copy
  const std::string good = bytes_of(unsealed);
  const fs::path copy = dir() / "damaged.h5";
  std::map<Ending, int> endings;
  std::vector<std::string> bad;
  for (std::size_t at = 0; at < good.size(); at += 41) {
    std::string b = good;
    b[at] = static_cast<char>(static_cast<unsigned char>(b[at]) ^ 0xFFu);
    put(copy, b);
    const Ending e = read_in_child(copy);
    ++endings[e];
    if (e != Ending::read && e != Ending::read_error)
      bad.push_back("flip at " + std::to_string(at) + ": " +
                    (e == Ending::crashed ? "crashed (signal " + std::to_string(last_signal) + ")"
                     : e == Ending::hung  ? "hung"
                                          : "other error"));
  }
  for (const std::size_t at : {std::size_t{0}, std::size_t{2048}, good.size() / 2}) {
    std::string b = good;
    for (std::size_t i = at; i < std::min(good.size(), at + 4096); ++i) b[i] = '\0';
    put(copy, b);
    const Ending e = read_in_child(copy);
    ++endings[e];
    if (e != Ending::read && e != Ending::read_error)
      bad.push_back("4 KiB zeroed at " + std::to_string(at));
  }
  for (const std::size_t n : {std::size_t{0}, std::size_t{100}, good.size() / 2, good.size() - 1}) {
    put(copy, good.substr(0, n));
    const Ending e = read_in_child(copy);
    ++endings[e];
    if (e != Ending::read && e != Ending::read_error) bad.push_back("cut to " + std::to_string(n));
  }
  RecordProperty("read", endings[Ending::read]);
  RecordProperty("read_error", endings[Ending::read_error]);
  std::string all;
  for (const std::string& b : bad) all += "\n  " + b;
  EXPECT_TRUE(bad.empty()) << bad.size() << " damaged unsealed copies ended badly:" << all;
}

}  // namespace
}  // namespace wafersim::analysis
