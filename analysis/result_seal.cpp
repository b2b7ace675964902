#include "analysis/result_seal.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "analysis/hdf5_output.hpp"

namespace wafersim::analysis {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "WAFERSIM-SHA256\n";
constexpr std::size_t kHexDigits = 64;
// The HDF5 format signature (HDF5 File Format Specification, "Superblock").
constexpr std::array<unsigned char, 8> kHdf5Signature = {0x89, 'H',  'D',  'F',
                                                         '\r', '\n', 0x1a, '\n'};

// SHA-256 of bytes [from, end) of `in`, as lowercase hex; false on a read error.
bool digest_from(std::ifstream& in, std::uint64_t from, std::string& hex) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return false;
  in.clear();
  in.seekg(static_cast<std::streamoff>(from));
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    if (got > 0 && EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(got)) != 1)
      return false;
  }
  if (in.bad()) return false;
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md.data(), &length) != 1) return false;
  hex.clear();
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", md[i]);
  return true;
}

bool starts_with_signature(const std::vector<char>& bytes, std::size_t at) {
  return bytes.size() >= at + kHdf5Signature.size() &&
         std::memcmp(bytes.data() + at, kHdf5Signature.data(), kHdf5Signature.size()) == 0;
}

}  // namespace

void seal_results_file(const fs::path& file) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  if (!io) throw std::runtime_error("cannot reopen " + file.string() + " to seal it");
  std::ifstream in(file, std::ios::binary);
  std::string hex;
  if (!in || !digest_from(in, kSealBytes, hex))
    throw std::runtime_error("cannot read " + file.string() + " back to seal it");
  std::array<char, kSealBytes> block{};
  std::memcpy(block.data(), kMagic.data(), kMagic.size());
  std::memcpy(block.data() + kMagic.size(), hex.data(), kHexDigits);
  block[kMagic.size() + kHexDigits] = '\n';
  io.seekp(0);
  io.write(block.data(), static_cast<std::streamsize>(block.size()));
  io.flush();
  if (!io) throw std::runtime_error("cannot write the seal of " + file.string());
}

SealState check_results_seal(const fs::path& file) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (ec || status.type() == fs::file_type::not_found) throw ResultReadError(file, "no such file");
  if (status.type() == fs::file_type::directory)
    throw ResultReadError(
        file, "is a folder; expected a results file (.h5) written by wafersim run --out");
  if (status.type() != fs::file_type::regular)
    throw ResultReadError(
        file, "is not a regular file (a device, pipe or socket); expected a results file");
  const std::uintmax_t size = fs::file_size(file, ec);
  std::ifstream in(file, std::ios::binary);
  if (ec || !in) throw ResultReadError(file, fmt::format("cannot open: {}", std::strerror(errno)));

  std::vector<char> head(kSealBytes + kHdf5Signature.size(), 0);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (starts_with_signature(head, 0)) return SealState::unsealed;

  const bool magic =
      head.size() >= kMagic.size() && std::string_view(head.data(), kMagic.size()) == kMagic;
  if (!magic) {
    if (starts_with_signature(head, kSealBytes))
      throw ResultReadError(
          file, "its checksum block is damaged (the file changed after it was written)");
    throw ResultReadError(file,
                          "not an HDF5 file (no HDF5 signature); expected a results file written "
                          "by wafersim run --out");
  }
  if (size < kSealBytes + kHdf5Signature.size() || !starts_with_signature(head, kSealBytes))
    throw ResultReadError(
        file,
        fmt::format("truncated or damaged: {} bytes, no HDF5 data after its checksum block", size));
  const std::string stored(head.data() + kMagic.size(), kHexDigits);
  const bool hex_ok = std::all_of(stored.begin(), stored.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  const auto rest = head.begin() + static_cast<std::ptrdiff_t>(kMagic.size() + kHexDigits);
  const bool padding_ok = *rest == '\n' && std::all_of(rest + 1, head.begin() + kSealBytes,
                                                       [](char c) { return c == '\0'; });
  if (!hex_ok || !padding_ok)
    throw ResultReadError(file,
                          "its checksum block is damaged (the file changed after it was written)");
  std::string actual;
  if (!digest_from(in, kSealBytes, actual))
    throw ResultReadError(file, fmt::format("cannot read: {}", std::strerror(errno)));
  if (actual != stored) {
    throw ResultReadError(
        file, fmt::format("checksum mismatch: the contents changed after wafersim wrote "
                          "them (SHA-256 {} stored, {} now); the file is damaged "
                          "or was edited",
                          stored.substr(0, 12), actual.substr(0, 12)));
  }
  return SealState::verified;
}

}  // namespace wafersim::analysis
