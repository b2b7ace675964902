#include "sim/config/defect_map_file.hpp"

#include <cctype>
#include <charconv>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "models/sha256.hpp"
#include "sim/config/scenario.hpp"

namespace wafersim::sim {

namespace {

// Far beyond a wafer's map (a WSE-3 at a 1% defect rate lists ~10,000 cores
// in ~100 KB), small enough to read whole.
constexpr std::uintmax_t kMostBytes = 64ull << 20;

constexpr const char* kValidLine =
    "each line is one dead core as x,y (two whole numbers, e.g. 12,40), a comment from '#', or "
    "blank";

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

}  // namespace

DefectMapFile parse_defect_map(const std::string& text, const std::string& shown, int width,
                               int height, const std::string& array, const std::string& key_path) {
  DefectMapFile out;
  out.sha256 = models::sha256_hex(text.data(), text.size());
  std::map<std::pair<int, int>, int> first_line;  // core -> the line that listed it
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    auto fail = [&](std::size_t column, const std::string& what) {
      throw ScenarioError(shown, line_no, static_cast<int>(column) + 1, key_path, what);
    };
    // One whole number at i (after spaces); its column and value.
    std::size_t i = 0;
    auto skip = [&] {
      while (i < line.size() && is_space(line[i])) ++i;
    };
    auto number = [&](const char* which) {
      skip();
      const std::size_t col = i;
      long long v = 0;
      const auto r = std::from_chars(line.data() + i, line.data() + line.size(), v);
      if (r.ec == std::errc::result_out_of_range || (r.ec == std::errc{} && v > 4'000'000))
        fail(col, fmt::format("{} is far beyond any wafer ({} up to 4,000,000)", which, which));
      const char* stop = r.ptr;
      if (r.ec != std::errc{}) stop = line.data() + i;
      // A number that runs on into letters, digits or a point ("1.5", "3x")
      // is not a whole number; any other character is left to the caller.
      const bool runs_on = stop != line.data() + line.size() &&
                           (std::isalnum(static_cast<unsigned char>(*stop)) || *stop == '.');
      if (r.ec != std::errc{} || runs_on) {
        // The token as written: up to the next space or comma (at most 20 characters).
        std::size_t e = i;
        while (e < line.size() && e < i + 20 && !is_space(line[e]) && line[e] != ',') ++e;
        const std::string got(line.substr(i, e - i));
        fail(col, fmt::format("expected {} as a whole number >= 0, got '{}'; {}", which, got,
                              kValidLine));
      }
      if (v < 0) fail(col, fmt::format("{} = {} is negative; {}", which, v, kValidLine));
      i = static_cast<std::size_t>(r.ptr - line.data());
      return std::pair<std::size_t, int>(col, static_cast<int>(v));
    };
    skip();
    if (i == line.size()) continue;  // blank or a comment
    const auto [x_col, x] = number("x");
    skip();
    if (i == line.size() || line[i] != ',')
      fail(i, fmt::format("expected ',' between x and y; {}", kValidLine));
    ++i;
    const auto [y_col, y] = number("y");
    skip();
    if (i != line.size())
      fail(i, fmt::format("unexpected '{}' after the core's y; {}",
                          std::string(line.substr(i, std::min<std::size_t>(line.size() - i, 20))),
                          kValidLine));
    if (width > 0 && x >= width)
      fail(x_col, fmt::format("x = {} lies outside the {} x {} {} (x in 0..{})", x, width, height,
                              array, width - 1));
    if (height > 0 && y >= height)
      fail(y_col, fmt::format("y = {} lies outside the {} x {} {} (y in 0..{})", y, width, height,
                              array, height - 1));
    const auto [it, fresh] = first_line.emplace(std::pair<int, int>(x, y), line_no);
    if (!fresh)
      fail(x_col, fmt::format("core {},{} is listed twice (first on line {}); list each dead core "
                              "once",
                              x, y, it->second));
    out.cores.push_back(Coord{x, y});
  }
  return out;
}

DefectMapFile read_defect_map_file(const std::filesystem::path& path, int width, int height,
                                   const std::string& array, const std::string& key_path) {
  const std::string shown = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ScenarioError(shown, 0, 0, key_path,
                        std::filesystem::exists(path, ec)
                            ? "is a folder or a device; expected a defect map file (x,y lines)"
                            : "no such file; expected a defect map file (x,y lines)");
  if (std::filesystem::file_size(path, ec) > kMostBytes)
    throw ScenarioError(shown, 0, 0, key_path,
                        "is larger than 64 MiB; a defect map lists one dead core a line");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(shown, 0, 0, key_path, "cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_defect_map(text.str(), shown, width, height, array, key_path);
}

}  // namespace wafersim::sim
