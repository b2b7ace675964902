// Files written whole or not at all, for every writer of results and reports.
#pragma once

#include <filesystem>
#include <string>

namespace wafersim::analysis {

// Writes `text` to `path`: a temporary file beside it, synced to disk, then
// renamed over it. Throws OutputError (naming `path`) on failure, leaving any
// older file at `path` as it was and no temporary behind.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

// Fails early, before a long simulation, where `path` could not be written
// at the end: its folder missing or not a folder, no permission, a read-only
// file system, or `path` itself a folder or a device. Checked by creating and
// removing a temporary file beside it (what the atomic writers do). Throws
// OutputError naming `path` and the reason.
void check_writable(const std::filesystem::path& path);

// A temporary file of an atomic write, registered while it exists: SIGINT or
// SIGTERM removes every registered file, then ends the process by the same
// signal (exit status 128 + signal; nothing is left behind).
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::filesystem::path& path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

 private:
  int slot_ = -1;  // -1: not registered (all slots taken; the file is still removed on errors)
};

// Data reaches the disk before a rename makes it visible under its real name.
// Throws std::system_error.
void sync_file(const std::filesystem::path& path);

}  // namespace wafersim::analysis
