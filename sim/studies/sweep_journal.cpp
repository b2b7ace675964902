#include "sim/studies/sweep_journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

namespace wafersim::sim {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kFormat = "wafersim-sweep-journal";
constexpr int kVersion = 1;

Json header_line(const Json& sweep, const SweepShard& shard) {
  Json h = Json::object();
  h["format"] = kFormat;
  h["version"] = kVersion;
  h["sweep"] = sweep;
  h["shard"] = Json{{"rank", shard.rank}, {"count", shard.count}};
  return h;
}

[[noreturn]] void fail(const fs::path& path, std::size_t line, const std::string& what) {
  if (line == 0) throw SweepJournalError(fmt::format("{}: {}", path.string(), what));
  throw SweepJournalError(fmt::format("{}:{}: {}", path.string(), line, what));
}

bool is_int(const Json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number_integer();
}

void check_record(const fs::path& path, std::size_t line, const Json& r, int total,
                  const SweepShard& shard) {
  if (!r.is_object() || !is_int(r, "index") || !is_int(r, "exit_code") ||
      !r.contains("overrides") || !r.at("overrides").is_object())
    fail(path, line, "not a sweep point (expected an object with index, overrides, exit_code)");
  const int i = r.at("index").get<int>();
  if (i < 0 || i >= total || i % shard.count != shard.rank)
    fail(path, line,
         fmt::format("point {} is not in this journal's sweep (points 0..{} with index % {} == {})",
                     i, total - 1, shard.count, shard.rank));
  const int code = r.at("exit_code").get<int>();
  if (code == 0 && r.contains("error")) fail(path, line, "a point that ran has an error");
  if (code != 0 && !(r.contains("error") && r.at("error").is_string()))
    fail(path, line, "a point that did not run has no error");
}

// Byte offset just past the last '\n' of the file's text.
std::size_t complete_length(const std::string& text) {
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? 0 : nl + 1;
}

std::string read_whole(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(path, 0, "is a directory, not a sweep journal");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, 0, std::string("cannot read: ") + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

JournalContents parse(const fs::path& path, const std::string& text) {
  JournalContents c;
  const std::size_t whole = complete_length(text);
  c.torn_tail = whole < text.size();
  std::istringstream in(text.substr(0, whole));
  std::string line;
  std::size_t n = 0;
  std::map<int, std::size_t> seen;
  int total = 0;
  while (std::getline(in, line)) {
    ++n;
    Json j;
    try {
      j = Json::parse(line);
    } catch (const Json::exception& e) {
      fail(path, n,
           std::string("not JSON (a sweep journal has one JSON object per line): ") + e.what());
    }
    if (n == 1) {
      if (!j.is_object() || j.value("format", std::string()) != kFormat)
        fail(path, n,
             fmt::format("not a sweep journal (its first line should say format \"{}\")", kFormat));
      if (j.value("version", 0) != kVersion)
        fail(path, n,
             fmt::format("journal version {} (this wafersim reads version {})",
                         j.value("version", 0), kVersion));
      if (!j.contains("sweep") || !j.at("sweep").is_object() ||
          !is_int(j.at("sweep"), "points_total") || !j.contains("shard") ||
          !is_int(j.at("shard"), "rank") || !is_int(j.at("shard"), "count"))
        fail(path, n, "the header lacks sweep.points_total or shard.rank/count");
      c.sweep = j.at("sweep");
      c.shard = {j.at("shard").at("rank").get<int>(), j.at("shard").at("count").get<int>()};
      total = c.sweep.at("points_total").get<int>();
      if (total < 1 || c.shard.count < 1 || c.shard.rank < 0 || c.shard.rank >= c.shard.count)
        fail(path, n, "the header's points_total or shard is impossible");
      continue;
    }
    check_record(path, n, j, total, c.shard);
    const int i = j.at("index").get<int>();
    if (const auto it = seen.find(i); it != seen.end())
      fail(path, n, fmt::format("point {} twice (also on line {})", i, it->second));
    seen[i] = n;
    c.records.push_back(std::move(j));
  }
  if (n == 0) fail(path, 0, "empty: not a sweep journal");
  return c;
}

void write_all(int fd, const std::string& s, const fs::path& path) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(path, 0, std::string("cannot write: ") + std::strerror(errno));
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 && errno != EINVAL)
    fail(path, 0, std::string("cannot sync to disk: ") + std::strerror(errno));
}

}  // namespace

Json sweep_identity(const std::string& scenario, const SweepAxes& axes,
                    std::optional<bool> functional, const std::string& grid_sha256,
                    int points_total) {
  Json a = Json::object();
  for (std::size_t i = 0; i < kSweepAxisCount; ++i) {
    Json& values = a[std::string(kSweepAxes[i].name)] = Json::array();
    for (const std::string& v : axes.values[i]) values.push_back(axis_value_json(kSweepAxes[i], v));
  }
  Json s = Json::object();
  s["scenario"] = scenario;
  s["grid_sha256"] = grid_sha256;
  s["points_total"] = points_total;
  s["mode"] = functional ? (*functional ? "functional" : "timing-only") : "scenario";
  s["axes"] = std::move(a);
  return s;
}

std::string journal_text(const Json& sweep, const SweepShard& shard,
                         const std::vector<SweepRecord>& records) {
  std::string text = header_line(sweep, shard).dump() + "\n";
  for (const SweepRecord& r : records) text += r.dump() + "\n";
  return text;
}

JournalContents read_journal(const fs::path& path) {
  return parse(path, read_whole(path));
}

SweepJournal::SweepJournal(const fs::path& path, const Json& sweep, const SweepShard& shard)
    : path_(path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(path, 0, "is a directory; --out names the journal file");
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const std::string why = std::strerror(errno);
    const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    if (!fs::is_directory(dir, ec))
      fail(path, 0, fmt::format("cannot create: the folder {} does not exist", dir.string()));
    fail(path, 0, "cannot open for writing: " + why);
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    fail(path, 0,
         "in use by another sweep (it holds the file's lock); wait for it or use "
         "another --out");
  }
  try {
    const std::string text = read_whole(path);
    if (text.empty()) {
      write_all(fd_, header_line(sweep, shard).dump() + "\n", path);
      return;
    }
    JournalContents c = parse(path, text);
    if (c.sweep.value("grid_sha256", std::string()) != sweep.value("grid_sha256", std::string()) ||
        c.sweep.value("points_total", -1) != sweep.value("points_total", -2) ||
        c.sweep.value("mode", std::string()) != sweep.value("mode", std::string()))
      fail(path, 1,
           fmt::format("holds another sweep (scenario {}, {} points, mode {}): this one is "
                       "scenario {}, {} points, mode {}{}; remove the file or choose another --out",
                       c.sweep.value("scenario", std::string("?")),
                       c.sweep.value("points_total", 0), c.sweep.value("mode", std::string("?")),
                       sweep.value("scenario", std::string("?")), sweep.value("points_total", 0),
                       sweep.value("mode", std::string("?")),
                       c.sweep.value("points_total", -1) == sweep.value("points_total", -2)
                           ? " (the same grid size, but a scenario, preset or axis changed)"
                           : ""));
    if (c.shard.rank != shard.rank || c.shard.count != shard.count)
      fail(path, 1,
           fmt::format("holds shard {}/{} of this sweep, not {}/{}", c.shard.rank, c.shard.count,
                       shard.rank, shard.count));
    if (c.torn_tail && ::ftruncate(fd_, static_cast<off_t>(complete_length(text))) != 0)
      fail(path, 0, std::string("cannot cut off the torn last line: ") + std::strerror(errno));
    resumed_ = std::move(c.records);
    ::lseek(fd_, 0, SEEK_END);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SweepJournal::~SweepJournal() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

void SweepJournal::append(const SweepRecord& record) {
  ::lseek(fd_, 0, SEEK_END);
  write_all(fd_, record.dump() + "\n", path_);
}

MergedSweep merge_journals(const std::vector<fs::path>& paths) {
  if (paths.empty()) throw SweepJournalError("merge: no journals given");
  MergedSweep m;
  std::map<int, std::pair<Json, fs::path>> points;
  fs::path first;
  for (const fs::path& p : paths) {
    JournalContents c = read_journal(p);
    if (first.empty()) {
      m.sweep = c.sweep;
      first = p;
    } else if (c.sweep.value("grid_sha256", std::string()) !=
                   m.sweep.value("grid_sha256", std::string()) ||
               c.sweep.value("points_total", -1) != m.sweep.value("points_total", -2) ||
               c.sweep.value("mode", std::string()) != m.sweep.value("mode", std::string())) {
      fail(p, 1,
           fmt::format("is a journal of another sweep than {} (scenario {} vs {}, {} vs {} "
                       "points, or a changed scenario, preset, axis or mode)",
                       first.string(), c.sweep.value("scenario", std::string("?")),
                       m.sweep.value("scenario", std::string("?")),
                       c.sweep.value("points_total", 0), m.sweep.value("points_total", 0)));
    }
    for (Json& r : c.records) {
      const int i = r.at("index").get<int>();
      const auto it = points.find(i);
      if (it == points.end()) {
        points.emplace(i, std::make_pair(std::move(r), p));
      } else if (it->second.first != r) {
        fail(p, 0,
             fmt::format("point {} differs from the same point in {} (results are "
                         "deterministic: were they made by different wafersim builds?)",
                         i, it->second.second.string()));
      }
    }
  }
  for (auto& [i, rp] : points) m.records.push_back(std::move(rp.first));
  const int total = m.sweep.at("points_total").get<int>();
  for (int i = 0; i < total; ++i)
    if (!points.count(i)) m.missing.push_back(i);
  return m;
}

}  // namespace wafersim::sim
