// The seal of a results file: a SHA-256 of everything HDF5 wrote, kept in the
// file's first 512 bytes (an HDF5 user block, which libhdf5 and h5py skip).
//
// Why a user block and not a root attribute: an attribute can only be checked
// through libhdf5, after it has parsed the very structures a damaged file
// breaks (libhdf5 1.10 reads out of bounds or loops forever on some damaged
// files). The seal is checked with plain reads before libhdf5 sees the file,
// so a file that changed by one byte since it was written never reaches it.
//
// Layout of the block: "WAFERSIM-SHA256\n", 64 lowercase hex digits (the
// digest of bytes [512, end of file)), "\n", then zeros up to byte 512.
#pragma once

#include <cstddef>
#include <filesystem>

namespace wafersim::analysis {

inline constexpr std::size_t kSealBytes = 512;  // HDF5 user block: a power of two >= 512

// Writes the seal into the first kSealBytes of `file`, an HDF5 file created
// with a user block of kSealBytes and already closed. Throws std::runtime_error.
void seal_results_file(const std::filesystem::path& file);

enum class SealState {
  verified,  // the seal is there and matches the contents
  unsealed,  // an HDF5 file from before results were sealed: nothing to check
};

// Checks `file` without libhdf5. Throws ResultReadError when it is not a
// regular readable file, not HDF5, or sealed and damaged (a changed byte, a
// truncation, a broken seal).
SealState check_results_seal(const std::filesystem::path& file);

}  // namespace wafersim::analysis
