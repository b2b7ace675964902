// A sweep's journal: the file a sweep streams its finished points to, one JSON
// line each, synced to disk as each point ends, so a crash, a kill or a lost
// MPI rank loses at most the points that were running, and a rerun with the
// same journal resumes where it stopped. Shards of one sweep (batch jobs) each
// keep their own journal; merge_journals() gathers them.
//
// Line 1: {"format": "wafersim-sweep-journal", "version": 1,
//          "sweep": {identity: scenario, grid_sha256, points_total, mode, axes},
//          "shard": {"rank": K, "count": N}}
// then one SweepRecord per line, in the order the points finished.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/studies/sweep.hpp"

namespace wafersim::sim {

// A journal that cannot be used: unreadable, corrupt, another sweep's, or
// in use by another process. The message names the file (and line).
class SweepJournalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What makes two sweeps the same sweep: the grid (axes), the mode, and a
// digest of every point's fully resolved scenario (so a changed scenario or
// preset file is a different sweep, not a resume).
nlohmann::ordered_json sweep_identity(const std::string& scenario, const SweepAxes& axes,
                                      std::optional<bool> functional,
                                      const std::string& grid_sha256, int points_total);

struct JournalContents {
  nlohmann::ordered_json sweep;  // the identity in its header
  SweepShard shard;
  std::vector<SweepRecord> records;
  bool torn_tail = false;  // the last line was cut short (a crash while writing it)
};

// Reads and checks a journal: header, and every record's index in its shard.
JournalContents read_journal(const std::filesystem::path& path);

// A journal open for appending, held exclusively (a second sweep on the same
// file is refused).
class SweepJournal {
 public:
  // A new file gets the header; an existing one must be the same sweep and
  // shard, and its records are kept (a torn last line is cut off).
  SweepJournal(const std::filesystem::path& path, const nlohmann::ordered_json& sweep,
               const SweepShard& shard);
  ~SweepJournal();
  SweepJournal(const SweepJournal&) = delete;
  SweepJournal& operator=(const SweepJournal&) = delete;

  // The records the file held when it was opened (the points already done).
  const std::vector<SweepRecord>& resumed() const { return resumed_; }
  // Writes one record as a line and syncs it to disk.
  void append(const SweepRecord& record);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<SweepRecord> resumed_;
};

// A whole journal's text: the header, then the records one per line.
std::string journal_text(const nlohmann::ordered_json& sweep, const SweepShard& shard,
                         const std::vector<SweepRecord>& records);

struct MergedSweep {
  nlohmann::ordered_json sweep;
  std::vector<SweepRecord> records;  // each point once, in index order
  std::vector<int> missing;          // points no journal has
};

// Gathers the journals of one sweep's shards (or of interrupted runs):
// refuses journals of different sweeps and two different records of one
// point; the same record twice is kept once.
MergedSweep merge_journals(const std::vector<std::filesystem::path>& paths);

}  // namespace wafersim::sim
