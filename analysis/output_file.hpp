// Files written whole or not at all, for every writer of results and reports.
#pragma once

#include <filesystem>
#include <string>

namespace wafersim::analysis {

// Writes `text` to `path`: a temporary file beside it, synced to disk, then
// renamed over it. Throws OutputError (naming `path`) on failure, leaving any
// older file at `path` as it was and no temporary behind.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

// Throws OutputError (naming `path`) unless a file can be created at `path`
// (its folder exists and is writable): commands check their output paths
// before spending minutes simulating. Leaves nothing behind.
void check_writable(const std::filesystem::path& path);

// Data reaches the disk before a rename makes it visible under its real name.
// Throws std::system_error.
void sync_file(const std::filesystem::path& path);

}  // namespace wafersim::analysis
