// The placement pictures: PNG heatmaps that decode to the values drawn, one
// colour scale for every wafer, SRAM scaled to the data's range, visible
// labels, the token's path, well-formed SVG and a sensible size at full WSE-3.
#include "analysis/placement_picture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/png_image.hpp"
#include "support/xml_check.hpp"

namespace wafersim::analysis {
namespace {

std::uint32_t be32(const std::string& s, std::size_t at) {
  return (static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) << 24) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

std::string unbase64(const std::string& b) {
  const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : b) {
    if (c == '=') break;
    const std::size_t v = digits.find(c);
    if (v == std::string::npos) throw std::runtime_error("not base64");
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// Reads back what png_bytes writes (palette, stored deflate): the pixels'
// palette indices, row-major, checking the signature, chunk CRCs' presence
// and the stored blocks' lengths on the way.
struct Decoded {
  int width = 0, height = 0;
  std::vector<std::uint8_t> pixels;
  std::size_t palette_size = 0;
};
Decoded decode_png(const std::string& png) {
  Decoded d;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n"));
  std::size_t at = 8;
  std::string idat;
  while (at + 12 <= png.size()) {
    const std::uint32_t len = be32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, len);
    if (type == "IHDR") {
      d.width = static_cast<int>(be32(data, 0));
      d.height = static_cast<int>(be32(data, 4));
      EXPECT_EQ(data[8], 8);  // bits
      EXPECT_EQ(data[9], 3);  // palette
    } else if (type == "PLTE") {
      d.palette_size = len / 3;
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size());
  // zlib header, then stored blocks.
  std::string raw;
  std::size_t z = 2;
  for (;;) {
    const bool last = idat[z] & 1;
    const std::size_t n = static_cast<unsigned char>(idat[z + 1]) |
                          (static_cast<std::size_t>(static_cast<unsigned char>(idat[z + 2])) << 8);
    const std::size_t nn = static_cast<unsigned char>(idat[z + 3]) |
                           (static_cast<std::size_t>(static_cast<unsigned char>(idat[z + 4])) << 8);
    EXPECT_EQ(n ^ 0xFFFF, nn);
    raw += idat.substr(z + 5, n);
    z += 5 + n;
    if (last) break;
  }
  EXPECT_EQ(z + 4, idat.size());  // the Adler-32 follows
  for (int y = 0; y < d.height; ++y) {
    const std::size_t row = static_cast<std::size_t>(y) * (d.width + 1);
    EXPECT_EQ(raw[row], 0);  // filter byte
    for (int x = 0; x < d.width; ++x)
      d.pixels.push_back(static_cast<std::uint8_t>(raw[row + 1 + x]));
  }
  return d;
}

// The heatmaps of an SVG, in order (per wafer: SRAM, links), decoded.
std::vector<Decoded> heatmaps(const std::string& svg) {
  std::vector<Decoded> out;
  const std::string key = "href=\"data:image/png;base64,";
  for (std::size_t at = svg.find(key); at != std::string::npos; at = svg.find(key, at + 1)) {
    const std::size_t from = at + key.size();
    out.push_back(decode_png(unbase64(svg.substr(from, svg.find('"', from) - from))));
  }
  return out;
}

TEST(PngImage, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
}

TEST(PngImage, RoundTripsPixelsAndEndsWithTheStandardIendChunk) {
  PaletteImage im;
  im.width = 300;  // 75,250 bytes with the filter bytes: two stored blocks
  im.height = 250;
  im.palette = {{0, 0, 0}, {255, 0, 0}, {0, 0, 255}};
  for (int i = 0; i < im.width * im.height; ++i)
    im.pixels.push_back(static_cast<std::uint8_t>(i % 3));
  const std::string png = png_bytes(im);
  // IEND with no data has the CRC AE 42 60 82 in every PNG.
  EXPECT_EQ(png.substr(png.size() - 12), std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12));
  const Decoded d = decode_png(png);
  EXPECT_EQ(d.width, 300);
  EXPECT_EQ(d.height, 250);
  EXPECT_EQ(d.palette_size, 3u);
  EXPECT_EQ(d.pixels, im.pixels);
  im.pixels[5] = 3;
  EXPECT_THROW(png_bytes(im), std::invalid_argument);
}

// Two wafers of 8 x 6 cores, two layers on wafer 0, one on wafer 1 and the head.
PlacementPicture two_wafers() {
  PlacementPicture p;
  p.mesh_width = 8;
  p.mesh_height = 6;
  p.wafers = 2;
  p.layers = 3;
  p.sram_capacity_per_core = 48 * 1024;
  p.regions = {{"layer 0 qkv", 0, 0, {0, 0, 4, 3}, false},
               {"layer 0 attention", 0, 0, {4, 0, 4, 3}, false},
               {"layer 1 qkv", 1, 0, {0, 3, 8, 3}, true},
               {"layer 2 qkv", 2, 1, {0, 0, 8, 3}, false},
               {"lm_head", -1, 1, {0, 3, 8, 3}, false}};
  const std::size_t cores = 8 * 6 * 2;
  p.core_sram.assign(cores, 0);
  p.link_bytes.assign(cores * 4, 0);
  for (std::size_t c = 0; c < cores; ++c)
    if ((c % 48) % 7 != 3) p.core_sram[c] = 1000 + 10 * (c % 48);  // same on both wafers
  p.link_bytes[0 * 4 + 0] = 400;                                   // wafer 0, core (0,0) E
  p.link_bytes[(48 + 9) * 4 + 2] = 1600;                           // wafer 1, core (1,1) S
  return p;
}

TEST(PlacementPicture, IsWellFormedSvgWithVisibleLabelsAxesAndTheTokensPath) {
  const std::string svg = placement_svg(two_wafers());
  EXPECT_EQ(test_support::xml_problem(svg), "");
  EXPECT_TRUE(test_support::external_references(svg).empty());
  // Labels as text, not only tooltips.
  EXPECT_NE(svg.find(">L0 qkv</text>"), std::string::npos);
  EXPECT_NE(svg.find(">lm_head</text>"), std::string::npos);
  // Axes in core coordinates, colour bars with units.
  EXPECT_NE(svg.find("x (core column)"), std::string::npos);
  EXPECT_NE(svg.find("bytes per core; capacity 48 KiB"), std::string::npos);
  // The token's path: lm_head (a tied embedding, on wafer 1) -> layer 0 on
  // wafer 0 (an arrow out of wafer 1 and one into wafer 0), layer 0 -> layer
  // 1, layer 1 -> layer 2 across wafers again (two), layer 2 -> lm_head.
  const auto arrows = [&](const std::string& s) {
    std::size_t n = 0;
    for (std::size_t at = s.find("marker-end"); at != std::string::npos;
         at = s.find("marker-end", at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(arrows(svg), 2u + 1u + 2u + 1u);
  EXPECT_NE(svg.find(">to wafer 0<"), std::string::npos);
  EXPECT_NE(svg.find(">from wafer 1<"), std::string::npos);
  EXPECT_NE(svg.find(">to wafer 1<"), std::string::npos);
  EXPECT_NE(svg.find(">from wafer 0<"), std::string::npos);
}

TEST(PlacementPicture, OneColourScaleForEveryWaferAndSramScaledToTheDataRange) {
  PlacementPicture p = two_wafers();
  const std::vector<Decoded> maps = heatmaps(placement_svg(p));
  ASSERT_EQ(maps.size(), 4u);  // wafer 0 SRAM, links; wafer 1 SRAM, links
  // The same SRAM on both wafers: the same colours.
  EXPECT_EQ(maps[0].pixels, maps[2].pixels);
  // Scaled to the used cores' range (1000..1470 B of 48 KiB): the emptiest
  // used core is the bottom colour (1), the fullest the top (255), empty cores 0.
  const auto [lo, hi] = std::minmax_element(maps[0].pixels.begin(), maps[0].pixels.end());
  EXPECT_EQ(*lo, 0);
  EXPECT_EQ(*hi, 255);
  EXPECT_EQ(maps[0].pixels[0], 1);  // core 0 holds 1000 B, the least
  // Links: wafer 1's 1600 B is the top of the shared scale, wafer 0's 400 B
  // half of it on a square-root scale.
  EXPECT_EQ(maps[3].pixels[9], 255);
  EXPECT_EQ(maps[1].pixels[0], 1 + 127);
  // Doubling wafer 1's SRAM changes wafer 0's colours: the scale is shared.
  for (std::size_t c = 48; c < 96; ++c) p.core_sram[c] *= 2;
  const std::vector<Decoded> again = heatmaps(placement_svg(p));
  EXPECT_NE(again[0].pixels, maps[0].pixels);
}

TEST(PlacementPicture, FullWse3StaysSmallAndAggregatesCoresIntoPixels) {
  PlacementPicture p;
  p.mesh_width = 762;
  p.mesh_height = 1176;
  p.layers = 32;
  p.sram_capacity_per_core = 48 * 1024;
  const std::size_t cores = 762u * 1176u;
  p.core_sram.resize(cores);
  p.link_bytes.assign(cores * 4, 0);
  for (std::size_t c = 0; c < cores; ++c) {
    p.core_sram[c] = 20000 + (c * 2654435761u) % 20000;  // noise: the worst case for size
    p.link_bytes[c * 4 + c % 4] = (c * 40503u) % 5000;
  }
  for (int l = 0; l < 32; ++l) {
    const int y0 = l * 1176 / 32, h = (l + 1) * 1176 / 32 - y0;
    p.regions.push_back({"layer " + std::to_string(l) + " qkv", l, 0, {0, y0, 381, h}, false});
    p.regions.push_back(
        {"layer " + std::to_string(l) + " attention", l, 0, {381, y0, 381, h}, false});
  }
  p.regions.push_back({"lm_head", -1, 0, {0, 0, 10, 10}, false});
  const PictureGrid g = picture_grid(762, 1176);
  EXPECT_EQ(g.cores_per_pixel, 5);
  EXPECT_EQ(g.rows, 236);
  EXPECT_EQ(g.columns, 153);
  EXPECT_EQ(g.scale, 2);
  const std::string svg = placement_svg(p);
  EXPECT_EQ(test_support::xml_problem(svg), "");
  EXPECT_LT(svg.size(), 200'000u) << "a full WSE-3 picture should stay small";
  const std::vector<Decoded> maps = heatmaps(svg);
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].width, 153);
  EXPECT_EQ(maps[0].height, 236);
}

TEST(PlacementPicture, LayersSharingOneRegionAreDrawnOnceAndNamedTogether) {
  PlacementPicture p = two_wafers();
  // Whole-region: layers 0 and 1 share the top half of wafer 0.
  p.regions = {{"layer 0 (whole region)", 0, 0, {0, 0, 8, 3}, false},
               {"layer 1 (whole region)", 1, 0, {0, 0, 8, 3}, false},
               {"layer 2 (whole region)", 2, 1, {0, 0, 8, 3}, false},
               {"lm_head", -1, 1, {0, 3, 8, 3}, false}};
  const std::string svg = placement_svg(p);
  EXPECT_EQ(test_support::xml_problem(svg), "");
  EXPECT_NE(svg.find(">L0-1 shared</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>layers 0-1 share this region: layer 0 (whole region), layer 1 "
                     "(whole region) at (0, 0), 8 x 3 cores</title>"),
            std::string::npos);
  EXPECT_EQ(svg.find("<title>layer 1 (whole region)"), std::string::npos);  // not drawn again
}

TEST(PlacementPicture, ArraysNotShapedLikeTheMeshAreRefused) {
  PlacementPicture p = two_wafers();
  p.core_sram.pop_back();
  EXPECT_THROW(placement_svg(p), std::invalid_argument);
}

}  // namespace
}  // namespace wafersim::analysis
