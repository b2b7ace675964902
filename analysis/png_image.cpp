#include "analysis/png_image.hpp"

#include <algorithm>
#include <stdexcept>

namespace wafersim::analysis {

namespace {

std::uint32_t crc32(std::string_view bytes) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t adler32(std::string_view bytes) {
  std::uint32_t a = 1, b = 0;
  for (unsigned char x : bytes) {
    a = (a + x) % 65521u;
    b = (b + a) % 65521u;
  }
  return (b << 16) | a;
}

void put_u32(std::string& out, std::uint32_t v) {
  out += static_cast<char>((v >> 24) & 0xFF);
  out += static_cast<char>((v >> 16) & 0xFF);
  out += static_cast<char>((v >> 8) & 0xFF);
  out += static_cast<char>(v & 0xFF);
}

void put_chunk(std::string& out, std::string_view type, std::string_view data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  std::string body(type);
  body += data;
  out += body;
  put_u32(out, crc32(body));
}

// A zlib stream of stored (uncompressed) deflate blocks.
std::string zlib_stored(std::string_view raw) {
  std::string z = "\x78\x01";
  std::size_t at = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, raw.size() - at);
    const bool last = at + n == raw.size();
    z += static_cast<char>(last ? 1 : 0);
    z += static_cast<char>(n & 0xFF);
    z += static_cast<char>((n >> 8) & 0xFF);
    z += static_cast<char>(~n & 0xFF);
    z += static_cast<char>((~n >> 8) & 0xFF);
    z.append(raw.substr(at, n));
    at += n;
  } while (at < raw.size());
  put_u32(z, adler32(raw));
  return z;
}

}  // namespace

std::string png_bytes(const PaletteImage& im) {
  if (im.width <= 0 || im.height <= 0 ||
      im.pixels.size() != static_cast<std::size_t>(im.width) * static_cast<std::size_t>(im.height))
    throw std::invalid_argument("PNG: pixels do not match the image's size");
  if (im.palette.empty() || im.palette.size() > 256)
    throw std::invalid_argument("PNG: the palette needs 1 to 256 colours");
  if (std::any_of(im.pixels.begin(), im.pixels.end(),
                  [&](std::uint8_t p) { return p >= im.palette.size(); }))
    throw std::invalid_argument("PNG: a pixel's index is outside the palette");
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put_u32(ihdr, static_cast<std::uint32_t>(im.width));
  put_u32(ihdr, static_cast<std::uint32_t>(im.height));
  ihdr += std::string("\x08\x03\x00\x00\x00", 5);  // 8 bits, palette, deflate, no filter/interlace
  put_chunk(out, "IHDR", ihdr);
  std::string plte;
  for (const auto& c : im.palette)
    for (std::uint8_t v : c) plte += static_cast<char>(v);
  put_chunk(out, "PLTE", plte);
  std::string raw;
  raw.reserve(im.pixels.size() + static_cast<std::size_t>(im.height));
  for (int y = 0; y < im.height; ++y) {
    raw += '\0';  // filter: none
    const auto row = im.pixels.begin() + static_cast<std::ptrdiff_t>(y) * im.width;
    raw.append(row, row + im.width);
  }
  put_chunk(out, "IDAT", zlib_stored(raw));
  put_chunk(out, "IEND", "");
  return out;
}

std::string base64(std::string_view bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const std::uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                            (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                            static_cast<unsigned char>(bytes[i + 2]);
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += kDigits[(v >> 6) & 63];
    out += kDigits[v & 63];
  }
  if (i < bytes.size()) {
    std::uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string png_data_uri(const PaletteImage& image) {
  return "data:image/png;base64," + base64(png_bytes(image));
}

}  // namespace wafersim::analysis
