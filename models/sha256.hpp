// SHA-256 (FIPS 180-4) of a byte range, as lowercase hex: the digest Hugging
// Face lists for every LFS file of a model repository, so a checkpoint's
// files can be matched against their published hashes.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace wafersim::models {

// `progress(bytes_done)` is called every 256 MiB or so (never with more than
// `bytes`), from the calling thread.
std::string sha256_hex(const void* data, std::size_t bytes,
                       const std::function<void(std::size_t)>& progress = {});

}  // namespace wafersim::models
