#include "models/sha256.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>

namespace wafersim::models {

std::string sha256_hex(const void* data, std::size_t bytes,
                       const std::function<void(std::size_t)>& progress) {
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                    &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256: cannot start a digest (OpenSSL)");
  constexpr std::size_t kChunk = std::size_t{256} << 20;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(kChunk, bytes - done);
    if (EVP_DigestUpdate(ctx.get(), p + done, n) != 1)
      throw std::runtime_error("SHA-256: digest update failed (OpenSSL)");
    done += n;
    if (progress) progress(done);
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md.data(), &len) != 1)
    throw std::runtime_error("SHA-256: digest final failed (OpenSSL)");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[md[i] >> 4]);
    hex.push_back(kHex[md[i] & 15]);
  }
  return hex;
}

}  // namespace wafersim::models
