#include "analysis/figures.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <H5Cpp.h>
#include <gtest/gtest.h>

#include "analysis/compare.hpp"
#include "analysis/hdf5_output.hpp"
#include "analysis/result_seal.hpp"
#include "analysis/json_output.hpp"
#include "hdf5_attributes.hpp"
#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

using fixtures::sample_result;
using Figures = fixtures::ScratchDir;
using FigureList = std::span<const Figure* const>;

// The sample run with every figure the RunResult holds away from its default,
// so that a figure the reader forgot would not read back equal by chance.
RunResult full_result(bool functional) {
  RunResult r = sample_result(functional);
  r.prefill_cycles = Cycles{1234};
  r.users = 3;
  r.user_decode_cycles_per_token = {Cycles{1000}, Cycles{900}, Cycles{1100}};
  r.max_context_tokens = 4096;
  return r;
}

std::vector<FigureList> outputs() {
  return {kHdf5Summary,     kHdf5FunctionalSummary, kJsonFigures,
          kJsonLinkFigures, kJsonFunctionalFigures, kComparedFigures};
}

bool contains(FigureList list, const Figure* f) {
  return std::find(list.begin(), list.end(), f) != list.end();
}


TEST(FigureTable, NamesAreUniqueAndEveryFigureHasAUnitAndADescription) {
  std::set<std::string_view> names, datasets;
  for (const Figure* f : kAllFigures) {
    EXPECT_FALSE(f->name.empty());
    EXPECT_TRUE(names.insert(f->name).second) << "two figures named " << f->name;
    EXPECT_TRUE(datasets.insert(f->hdf5_dataset()).second) << "two datasets " << f->hdf5_dataset();
    EXPECT_FALSE(f->unit.empty()) << f->name;
    EXPECT_FALSE(f->compared_unit().empty()) << f->name;
    EXPECT_FALSE(f->description.empty()) << f->name;
    EXPECT_NE(f->value, nullptr) << f->name;
  }
  EXPECT_EQ(names.size(), kAllFigures.size());
}

TEST(FigureTable, EveryFigureIsInAnOutputAndNoOutputNamesOneTwice) {
  for (const Figure* f : kAllFigures) {
    bool somewhere = false;
    for (FigureList out : outputs()) somewhere = somewhere || contains(out, f);
    EXPECT_TRUE(somewhere) << f->name << " is in no output";
  }
  for (FigureList out : outputs()) {
    std::set<const Figure*> seen;
    for (const Figure* f : out) {
      EXPECT_TRUE(contains(kAllFigures, f)) << f->name << " is missing from kAllFigures";
      EXPECT_TRUE(seen.insert(f).second) << f->name << " twice in one output";
    }
  }
  // An output's functional part never repeats a figure of its main part.
  for (const Figure* f : kHdf5FunctionalSummary) EXPECT_FALSE(contains(kHdf5Summary, f));
  for (const Figure* f : kJsonFunctionalFigures) {
    EXPECT_FALSE(contains(kJsonFigures, f));
    EXPECT_FALSE(contains(kJsonLinkFigures, f));
  }
}

TEST(FigureTable, ValuesHaveTheirDeclaredType) {
  for (bool functional : {false, true}) {
    const RunResult r = full_result(functional);
    const Metrics m = compute_metrics(r);
    for (const Figure* f : kAllFigures) {
      EXPECT_EQ(f->value(r, m).index(), static_cast<std::size_t>(f->type)) << f->name;
    }
  }
}

TEST(FigureTable, TheFixtureSetsEveryStoredFigure) {
  // Guards the round-trip tests below: a stored figure left at its default
  // would read back equal even if the reader skipped it.
  const RunResult blank;
  const Metrics blank_metrics = compute_metrics(blank);
  const RunResult r = full_result(true);
  const Metrics m = compute_metrics(r);
  for (const Figure* f : kAllFigures) {
    if (f->restore == nullptr) continue;
    EXPECT_NE(f->value(r, m), f->value(blank, blank_metrics)) << f->name;
  }
}

TEST_F(Figures, EveryHdf5FigureIsWrittenWithItsUnitsAndReadBack) {
  for (bool functional : {false, true}) {
    const RunResult r = full_result(functional);
    const Metrics m = compute_metrics(r);
    const auto path = dir() / (functional ? "functional.h5" : "timing.h5");
    write_hdf5(path, r, m);

    const H5::H5File file(path.string(), H5F_ACC_RDONLY);
    const H5::Group summary = file.openGroup("summary");
    std::vector<const Figure*> expected(kHdf5Summary.begin(), kHdf5Summary.end());
    if (functional)
      expected.insert(expected.end(), kHdf5FunctionalSummary.begin(), kHdf5FunctionalSummary.end());
    EXPECT_EQ(summary.getNumObjs(), expected.size()) << "datasets no figure declares";
    for (const Figure* f : kHdf5FunctionalSummary) {
      EXPECT_EQ(summary.nameExists(std::string(f->hdf5_dataset())), functional) << f->name;
    }
    for (const Figure* f : expected) {
      const std::string name(f->hdf5_dataset());
      ASSERT_TRUE(summary.nameExists(name)) << name;
      const H5::DataSet ds = summary.openDataSet(name);
      EXPECT_EQ(string_attr(ds, "units"), f->unit) << name;
      EXPECT_EQ(string_attr(ds, "description"), f->description) << name;
      FigureValue stored;
      switch (f->type) {
        case FigureType::count: {
          EXPECT_EQ(ds.getDataType(), H5::PredType::STD_U64LE) << name;
          std::uint64_t v = 0;
          ds.read(&v, H5::PredType::NATIVE_UINT64);
          stored = v;
          break;
        }
        case FigureType::real: {
          EXPECT_EQ(ds.getDataType(), H5::PredType::IEEE_F64LE) << name;
          double v = 0;
          ds.read(&v, H5::PredType::NATIVE_DOUBLE);
          stored = v;
          break;
        }
        case FigureType::flag: {
          EXPECT_EQ(ds.getDataType(), H5::PredType::STD_U8LE) << name;
          std::uint8_t v = 0;
          ds.read(&v, H5::PredType::NATIVE_UINT8);
          stored = v != 0;
          break;
        }
      }
      EXPECT_EQ(stored, f->value(r, m)) << name;
    }

    // Read back: every figure, stored or derived, is what it was.
    const RunResult back = read_hdf5(path);
    const Metrics back_metrics = compute_metrics(back);
    for (const Figure* f : expected) {
      EXPECT_EQ(f->value(back, back_metrics), f->value(r, m)) << f->name;
    }
  }
}

TEST_F(Figures, AFileWithoutALaterFigureReadsWithItsDefault) {
  const RunResult r = full_result(false);
  const auto path = dir() / "old.h5";
  write_hdf5(path, r, compute_metrics(r));
  {
    const H5::H5File file(path.string(), H5F_ACC_RDWR);
    H5::Group summary = file.openGroup("summary");
    summary.unlink(std::string(figure::prefill_cycles.hdf5_dataset()));
  }
  seal_results_file(path);  // sealed again: only the missing figure differs from a whole file
  ASSERT_TRUE(figure::prefill_cycles.absent_in_older_files);
  const RunResult back = read_hdf5(path);
  EXPECT_EQ(back.prefill_cycles, RunResult{}.prefill_cycles);
  EXPECT_EQ(back.total_cycles, r.total_cycles);
}

TEST_F(Figures, AFileWithoutARequiredFigureIsAReadError) {
  const RunResult r = full_result(false);
  const auto path = dir() / "broken.h5";
  write_hdf5(path, r, compute_metrics(r));
  {
    const H5::H5File file(path.string(), H5F_ACC_RDWR);
    H5::Group summary = file.openGroup("summary");
    summary.unlink(std::string(figure::cycles_per_token.hdf5_dataset()));
  }
  seal_results_file(path);  // sealed again: only the missing figure differs from a whole file
  EXPECT_THROW(read_hdf5(path), ResultReadError);
}

// Each figure of a JSON part under its key, with its value, in the part's order.
void expect_json_part(const std::string& text, const nlohmann::json& j, FigureList part,
                      const RunResult& r, const Metrics& m) {
  std::size_t last = 0;
  for (const Figure* f : part) {
    const std::string key(f->name);
    ASSERT_TRUE(j.contains(key)) << key;
    std::visit([&](auto v) { EXPECT_EQ(j[key].get<decltype(v)>(), v) << key; }, f->value(r, m));
    const std::size_t at = text.find("\n  \"" + key + "\": ");
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_GT(at, last) << key << " out of order";
    last = at;
  }
}

TEST(FigureJson, EveryJsonFigureIsWrittenWithItsValueInOrder) {
  for (bool functional : {false, true}) {
    const RunResult r = full_result(functional);
    const Metrics m = compute_metrics(r);
    const std::string text = to_json_text(r, m);
    const nlohmann::json j = nlohmann::json::parse(text);
    expect_json_part(text, j, kJsonFigures, r, m);
    expect_json_part(text, j, kJsonLinkFigures, r, m);
    // The parts keep their places around the busiest link and the tokens.
    EXPECT_LT(text.find("\"" + std::string(kJsonFigures.back()->name) + "\""),
              text.find("\"busiest_link\""));
    EXPECT_GT(text.find("\"" + std::string(kJsonLinkFigures.front()->name) + "\""),
              text.find("\"busiest_link\""));
    if (functional) {
      expect_json_part(text, j, kJsonFunctionalFigures, r, m);
      EXPECT_GT(text.find("\"" + std::string(kJsonFunctionalFigures.front()->name) + "\""),
                text.find("\"reference_tokens\""));
    } else {
      for (const Figure* f : kJsonFunctionalFigures) EXPECT_FALSE(j.contains(f->name)) << f->name;
    }
  }
}

TEST(FigureCompare, HeadlineFiguresAreTheComparedFiguresWithTheirValues) {
  const RunResult r = full_result(false);
  const Metrics m = compute_metrics(r);
  const std::vector<FigureChange> h = headline_figures(r, m);
  ASSERT_EQ(h.size(), kComparedFigures.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Figure& f = *kComparedFigures[i];
    EXPECT_EQ(h[i].name, f.name);
    EXPECT_EQ(h[i].unit, f.compared_unit());
    EXPECT_EQ(h[i].higher_is_better, f.higher_is_better) << f.name;
    EXPECT_EQ(h[i].a, as_double(f.value(r, m))) << f.name;
  }
  // The sample's figures, by hand: 20,000 bytes on the busiest link of 4 B/cycle
  // for 10,000 cycles; 22,007 link bytes over 5 tokens; 48 KiB less 4,000 B.
  EXPECT_EQ(as_double(figure::busiest_link_bytes.value(r, m)), 20000.0);
  EXPECT_EQ(as_double(figure::busiest_link_load.value(r, m)), 0.5);
  EXPECT_EQ(as_double(figure::hop_bytes_per_token.value(r, m)), 22007.0 / 5.0);
  EXPECT_EQ(as_double(figure::sram_headroom_bytes.value(r, m)), 48.0 * 1024 - 4000.0);
}

// docs/results-format.md lists every figure its outputs carry.
TEST(FigureDocs, ResultsFormatListsEveryFigure) {
  std::ifstream in(std::string(WAFERSIM_SOURCE_DIR) + "/docs/results-format.md");
  const std::string doc{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ASSERT_FALSE(doc.empty());
  for (FigureList part : {FigureList(kHdf5Summary), FigureList(kHdf5FunctionalSummary)}) {
    for (const Figure* f : part) {
      const std::string row = "| `/summary/" + std::string(f->hdf5_dataset()) + "` |";
      EXPECT_NE(doc.find(row), std::string::npos) << row;
    }
  }
  for (FigureList part : {FigureList(kJsonFigures), FigureList(kJsonLinkFigures),
                          FigureList(kJsonFunctionalFigures)}) {
    for (const Figure* f : part) {
      const std::string row = "| `" + std::string(f->name) + "` |";
      EXPECT_NE(doc.find(row), std::string::npos) << row;
    }
  }
}

}  // namespace
}  // namespace wafersim::analysis
