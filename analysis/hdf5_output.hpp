// The complete, self-describing record of a run: results.h5. gem5-style
// layout: identification in root attributes, headline figures as scalar
// datasets, per-core arrays shaped like the mesh ([y][x]), per-token arrays on
// a token axis; every dataset carries `units` and `description` attributes.
// Layout: docs/results-format.md.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/metrics.hpp"
#include "analysis/run_result.hpp"

namespace wafersim::analysis {

// Bumped whenever a path is renamed, removed or changes meaning (adding does not).
inline constexpr int kHdf5FormatVersion = 1;

// A results file could not be written. Nothing is left at the path then: a
// file already there is untouched, and no partial file remains.
class OutputError : public std::runtime_error {
 public:
  OutputError(std::filesystem::path path, const std::string& message);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A results file could not be read: missing, not HDF5, not ours, or a newer format.
class ResultReadError : public std::runtime_error {
 public:
  ResultReadError(std::filesystem::path path, const std::string& message);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes atomically: to `<path>.tmp.<pid>` in the same directory, then renames
// over `path`. Throws OutputError (after removing the temporary file) on any
// I/O or HDF5 failure.
void write_hdf5(const std::filesystem::path& path, const RunResult& result, const Metrics& metrics);

// Reads back what write_hdf5 wrote: identification, hardware, fit and timeline
// figures, the per-core and per-link arrays, the prompt and (functional) the
// generated and reference tokens, the token records and the resolved scenario.
// compute_metrics() on the returned result gives the metrics of the original run.
// Per-core arrays are always mesh-shaped: a run that recorded none reads back zeros.
// The file's seal (result_seal.hpp) is checked first, before libhdf5 reads
// it; then every dataset's type and shape, and the figures' consistency.
// Throws ResultReadError for anything it cannot read; nothing a file holds
// crashes or hangs the reader when the file is sealed.
RunResult read_hdf5(const std::filesystem::path& path);
// As above; a file without a seal (older) is read, with a warning added to
// `warnings` (when not null).
RunResult read_hdf5(const std::filesystem::path& path, std::vector<std::string>* warnings);

}  // namespace wafersim::analysis
