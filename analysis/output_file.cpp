#include "analysis/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "analysis/hdf5_output.hpp"

namespace wafersim::analysis {

void sync_file(const std::filesystem::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open for fsync");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::system_error(err, std::generic_category(), "fsync");
}

namespace {

// Temporary files an interrupt must remove. Plain arrays and lock-free
// atomics: the signal handler may only touch what is async-signal-safe.
constexpr int kSlots = 16;
constexpr std::size_t kPathBytes = 4096;
char g_paths[kSlots][kPathBytes];
std::atomic<bool> g_used[kSlots];
std::atomic<bool> g_claimed[kSlots];

extern "C" void remove_temporaries_and_die(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load()) ::unlink(g_paths[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_handlers_once() {
  static const bool installed = [] {
    for (const int sig : {SIGINT, SIGTERM}) {
      struct sigaction old {};
      ::sigaction(sig, nullptr, &old);
      if (old.sa_handler != SIG_DFL) continue;  // someone else handles it
      struct sigaction act {};
      act.sa_handler = remove_temporaries_and_die;
      sigemptyset(&act.sa_mask);
      ::sigaction(sig, &act, nullptr);
    }
    return true;
  }();
  (void)installed;
}

}  // namespace

TemporaryFile::TemporaryFile(const std::filesystem::path& path) {
  const std::string& p = path.native();
  if (p.size() >= kPathBytes) return;
  install_handlers_once();
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_claimed[i].compare_exchange_strong(expected, true)) continue;
    std::memcpy(g_paths[i], p.c_str(), p.size() + 1);
    g_used[i].store(true);
    slot_ = i;
    return;
  }
}

TemporaryFile::~TemporaryFile() {
  if (slot_ < 0) return;
  g_used[slot_].store(false);
  g_claimed[slot_].store(false);
}

void check_writable(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::directory)
    throw OutputError(path, "it is a folder; give a file name inside it");
  if (fs::exists(st) && st.type() != fs::file_type::regular)
    throw OutputError(path, "it is not a regular file (a device, pipe or socket)");
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  const fs::file_status fst = fs::status(folder, ec);
  if (!fs::exists(fst))
    throw OutputError(path, "its folder " + folder.string() + " does not exist; create it first");
  if (fst.type() != fs::file_type::directory)
    throw OutputError(path, folder.string() + " is not a folder");
  const fs::path probe = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    const int err = errno;
    throw OutputError(path,
                      "cannot create files in " + folder.string() + ": " + std::strerror(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const TemporaryFile registered(tmp);
  const auto discard = [&] {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
  };
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.flush();
    if (!f.good()) {
      discard();
      throw OutputError(path, "cannot write " + path.string());
    }
  }
  try {
    sync_file(tmp);
  } catch (const std::system_error& e) {
    discard();
    throw OutputError(path, e.what());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    discard();
    throw OutputError(path, "cannot write " + path.string() + ": " + ec.message());
  }
}

}  // namespace wafersim::analysis
