#include "analysis/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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

void check_writable(const std::filesystem::path& path) {
  const std::filesystem::path probe = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(probe, std::ios::binary);
    if (!f.good())
      throw OutputError(path,
                        "its folder does not exist or is not writable; give a path in an "
                        "existing folder you can write to");
  }
  std::error_code ignored;
  std::filesystem::remove(probe, ignored);
}

void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
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
