#include "analysis/system_figures.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <H5Cpp.h>
#include <gtest/gtest.h>

#include "analysis/hdf5_output.hpp"
#include "analysis/json_output.hpp"
#include "hdf5_attributes.hpp"
#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

using fixtures::sample_result;
using SystemFiguresOutput = fixtures::ScratchDir;
using SystemFigureList = std::span<const SystemFigure* const>;

// A GPU row with every figure away from its default.
SystemFigures gpu_row(std::string name, double power_kw) {
  SystemFigures g;
  g.system = std::move(name);
  g.chips = 16;
  g.tp = 8;
  g.pp = 2;
  g.parallelism_auto = true;
  g.replicas = 3;
  g.kv_limited = true;
  g.decode_tokens_per_s_per_user = 123.5;
  g.aggregate_tokens_per_s = 4567.25;
  g.ttft_s = 0.125;
  g.power_kw = power_kw;
  g.tokens_per_s_per_kw = power_kw > 0.0 ? 4567.25 / power_kw : 0.0;
  g.bottleneck = "HBM bandwidth";
  return g;
}

// The sample run beside two GPU systems, one of them without a power figure.
RunResult result_with_baselines() {
  RunResult r = sample_result(false);
  Baselines b;
  b.wafer.system = "wse3";
  b.wafer.chips = 2;
  b.wafer.decode_tokens_per_s_per_user = 2500.5;
  b.wafer.aggregate_tokens_per_s = 7501.5;
  b.wafer.ttft_s = 0.0625;
  b.wafer.power_kw = 23.0;
  b.wafer.tokens_per_s_per_kw = 7501.5 / 23.0;
  b.wafer.bottleneck = "hops";
  b.gpus = {gpu_row("dgx-h100", 10.2), gpu_row("custom", 0.0)};
  b.gpus[1].parallelism_auto = false;
  b.gpus[1].kv_limited = false;
  r.baselines = b;
  return r;
}

std::vector<SystemFigureList> outputs() {
  return {kJsonWaferSystem, kJsonGpuSystem, kHdf5GpuBaselines, kHdf5GpuBaselinesWrittenOnly,
          kHdf5WaferSystemAttributes, kHdf5WaferSystem};
}

bool contains(SystemFigureList list, const SystemFigure* f) {
  return std::find(list.begin(), list.end(), f) != list.end();
}


TEST(SystemFigureTable, NamesAreUniqueAndEveryFigureHasAUnitADescriptionAndAccessors) {
  std::set<std::string_view> names;
  for (const SystemFigure* f : kAllSystemFigures) {
    EXPECT_FALSE(f->name.empty());
    EXPECT_TRUE(names.insert(f->name).second) << "two figures named " << f->name;
    EXPECT_FALSE(f->unit.empty()) << f->name;
    EXPECT_FALSE(f->description.empty()) << f->name;
    EXPECT_FALSE(f->wafer_described().empty()) << f->name;
    EXPECT_NE(f->value, nullptr) << f->name;
    EXPECT_NE(f->restore, nullptr) << f->name;
    if (f->type == SystemFigureType::text) {
      EXPECT_EQ(f->unit, "text") << f->name;
    }
  }
}

TEST(SystemFigureTable, EveryFigureIsInAnOutputAndNoOutputNamesOneTwice) {
  for (const SystemFigure* f : kAllSystemFigures) {
    bool somewhere = false;
    for (SystemFigureList out : outputs()) somewhere = somewhere || contains(out, f);
    EXPECT_TRUE(somewhere) << f->name << " is in no output";
  }
  for (SystemFigureList out : outputs()) {
    std::set<const SystemFigure*> seen;
    for (const SystemFigure* f : out) {
      EXPECT_TRUE(contains(kAllSystemFigures, f)) << f->name << " is missing from the table";
      EXPECT_TRUE(seen.insert(f).second) << f->name << " twice in one output";
    }
  }
  // /wafer_system: text as the group's attributes, the rest as datasets.
  for (const SystemFigure* f : kHdf5WaferSystemAttributes)
    EXPECT_EQ(f->type, SystemFigureType::text) << f->name;
  for (const SystemFigure* f : kHdf5WaferSystem) {
    EXPECT_NE(f->type, SystemFigureType::text) << f->name;
    EXPECT_FALSE(contains(kHdf5WaferSystemAttributes, f)) << f->name;
  }
}

TEST(SystemFigureTable, ValuesHaveTheirDeclaredTypeAndRestoreGivesThemBack) {
  const RunResult r = result_with_baselines();
  for (bool gpu : {false, true}) {
    const SystemFigures& row = gpu ? r.baselines->gpus[0] : r.baselines->wafer;
    for (const SystemFigure* f : kAllSystemFigures) {
      const SystemValue v = f->value(row);
      EXPECT_EQ(v.index(), static_cast<std::size_t>(f->type)) << f->name;
      SystemFigures blank;
      // Guards the round trips below: a figure at its default would read back
      // equal even if the reader skipped it.
      if (gpu) {
        EXPECT_NE(f->value(blank), v) << f->name << ": the fixture leaves it at its default";
      }
      f->restore(blank, v);
      EXPECT_EQ(f->value(blank), v) << f->name;
    }
  }
}

// The dataset's values, one per entry (one for a scalar), as the figure's type.
std::vector<SystemValue> dataset_values(const H5::DataSet& ds, const SystemFigure& f) {
  const hsize_t n = ds.getSpace().getSimpleExtentNpoints();
  std::vector<SystemValue> out;
  switch (f.type) {
    case SystemFigureType::text: {
      EXPECT_EQ(ds.getDataType().getClass(), H5T_STRING) << f.name;
      std::vector<char*> p(n);
      if (n > 0) ds.read(p.data(), ds.getStrType());
      for (char* s : p) out.emplace_back(std::string(s));
      if (n > 0)
        H5Dvlen_reclaim(ds.getStrType().getId(), ds.getSpace().getId(), H5P_DEFAULT, p.data());
      break;
    }
    case SystemFigureType::count: {
      EXPECT_EQ(ds.getDataType(), H5::PredType::STD_I32LE) << f.name;
      std::vector<std::int32_t> v(n);
      if (n > 0) ds.read(v.data(), H5::PredType::NATIVE_INT32);
      for (std::int32_t x : v) out.emplace_back(x);
      break;
    }
    case SystemFigureType::real: {
      EXPECT_EQ(ds.getDataType(), H5::PredType::IEEE_F64LE) << f.name;
      std::vector<double> v(n);
      if (n > 0) ds.read(v.data(), H5::PredType::NATIVE_DOUBLE);
      for (double x : v) out.emplace_back(x);
      break;
    }
    case SystemFigureType::flag: {
      EXPECT_EQ(ds.getDataType(), H5::PredType::STD_U8LE) << f.name;
      std::vector<std::uint8_t> v(n);
      if (n > 0) ds.read(v.data(), H5::PredType::NATIVE_UINT8);
      for (std::uint8_t x : v) out.emplace_back(x != 0);
      break;
    }
  }
  return out;
}

TEST_F(SystemFiguresOutput, EveryHdf5FigureIsWrittenWithItsUnitsAndReadBack) {
  const RunResult r = result_with_baselines();
  const Baselines& b = *r.baselines;
  const auto path = dir() / "baselines.h5";
  write_hdf5(path, r, compute_metrics(r));

  const H5::H5File file(path.string(), H5F_ACC_RDONLY);
  const H5::Group g = file.openGroup("gpu_baselines");
  EXPECT_EQ(g.getNumObjs(), kHdf5GpuBaselines.size() + kHdf5GpuBaselinesWrittenOnly.size())
      << "datasets no figure declares";
  std::vector<const SystemFigure*> written(kHdf5GpuBaselines.begin(), kHdf5GpuBaselines.end());
  written.insert(written.end(), kHdf5GpuBaselinesWrittenOnly.begin(),
                 kHdf5GpuBaselinesWrittenOnly.end());
  for (const SystemFigure* written_figure : written) {
    const SystemFigure& f = *written_figure;
    const std::string name(f.name);
    ASSERT_TRUE(g.nameExists(name)) << name;
    const H5::DataSet ds = g.openDataSet(name);
    EXPECT_EQ(string_attr(ds, "units"), f.unit) << name;
    EXPECT_EQ(string_attr(ds, "description"), f.description) << name;
    const std::vector<SystemValue> values = dataset_values(ds, f);
    ASSERT_EQ(values.size(), b.gpus.size()) << name;
    for (std::size_t k = 0; k < values.size(); ++k)
      EXPECT_EQ(values[k], f.value(b.gpus[k])) << name;
  }

  const H5::Group w = file.openGroup("wafer_system");
  EXPECT_EQ(w.getNumObjs(), kHdf5WaferSystem.size()) << "datasets no figure declares";
  EXPECT_EQ(w.getNumAttrs(), static_cast<int>(kHdf5WaferSystemAttributes.size()));
  for (const SystemFigure* f : kHdf5WaferSystemAttributes) {
    EXPECT_EQ(SystemValue(string_attr(w, std::string(f->name).c_str())), f->value(b.wafer))
        << f->name;
  }
  for (const SystemFigure* f : kHdf5WaferSystem) {
    const std::string name(f->name);
    ASSERT_TRUE(w.nameExists(name)) << name;
    const H5::DataSet ds = w.openDataSet(name);
    EXPECT_EQ(ds.getSpace().getSimpleExtentType(), H5S_SCALAR) << name;
    EXPECT_EQ(string_attr(ds, "units"), f->unit) << name;
    EXPECT_EQ(string_attr(ds, "description"), f->wafer_described()) << name;
    const std::vector<SystemValue> values = dataset_values(ds, *f);
    ASSERT_EQ(values.size(), 1u) << name;
    EXPECT_EQ(values[0], f->value(b.wafer)) << name;
  }

  // Read back: every figure the file carries is what it was; the others keep
  // their defaults.
  const RunResult back = read_hdf5(path);
  ASSERT_TRUE(back.baselines.has_value());
  ASSERT_EQ(back.baselines->gpus.size(), b.gpus.size());
  for (std::size_t k = 0; k < b.gpus.size(); ++k) {
    for (const SystemFigure* f : kHdf5GpuBaselines)
      EXPECT_EQ(f->value(back.baselines->gpus[k]), f->value(b.gpus[k])) << f->name;
    EXPECT_EQ(back.baselines->gpus[k].replicas, SystemFigures{}.replicas);
  }
  for (const SystemFigure* f : kHdf5WaferSystemAttributes)
    EXPECT_EQ(f->value(back.baselines->wafer), f->value(b.wafer)) << f->name;
  for (const SystemFigure* f : kHdf5WaferSystem)
    EXPECT_EQ(f->value(back.baselines->wafer), f->value(b.wafer)) << f->name;
}

TEST_F(SystemFiguresOutput, AFileWithoutBaselinesReadsWithoutThem) {
  const RunResult r = sample_result(false);
  const auto path = dir() / "none.h5";
  write_hdf5(path, r, compute_metrics(r));
  EXPECT_FALSE(read_hdf5(path).baselines.has_value());
}

// The object's keys are the part's figures, in order, with their values (null
// for a power figure of a row without power), then only the end-to-end objects.
void expect_json_row(const nlohmann::ordered_json& j, SystemFigureList part,
                     const SystemFigures& row) {
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  ASSERT_GE(keys.size(), part.size());
  for (std::size_t i = 0; i < part.size(); ++i) {
    const SystemFigure& f = *part[i];
    const std::string key(f.name);
    EXPECT_EQ(keys[i], key) << "out of order";
    if (f.unknown_without_power && !(row.power_kw > 0.0)) {
      EXPECT_TRUE(j[key].is_null()) << key;
      continue;
    }
    std::visit([&](const auto& v) { EXPECT_EQ(j[key].get<std::decay_t<decltype(v)>>(), v) << key; },
               f.value(row));
  }
  for (std::size_t i = part.size(); i < keys.size(); ++i)
    EXPECT_TRUE(keys[i] == "end_to_end" || keys[i] == "end_to_end_persistent") << keys[i];
}

TEST(SystemFigureJson, EveryJsonFigureIsWrittenWithItsValueInOrder) {
  const RunResult r = result_with_baselines();
  const nlohmann::ordered_json j = to_json(r, compute_metrics(r));
  ASSERT_TRUE(j.contains("wafer_system"));
  expect_json_row(j["wafer_system"], kJsonWaferSystem, r.baselines->wafer);
  ASSERT_EQ(j["gpu_baselines"].size(), r.baselines->gpus.size());
  for (std::size_t k = 0; k < r.baselines->gpus.size(); ++k)
    expect_json_row(j["gpu_baselines"][k], kJsonGpuSystem, r.baselines->gpus[k]);
  EXPECT_TRUE(j["gpu_baselines"][1]["power_kw"].is_null());
}

// docs/results-format.md lists every figure of both outputs.
TEST(SystemFigureDocs, ResultsFormatListsEveryFigure) {
  std::ifstream in(std::string(WAFERSIM_SOURCE_DIR) + "/docs/results-format.md");
  const std::string doc{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ASSERT_FALSE(doc.empty());
  const auto row_of = [&](const std::string& start) {
    const std::size_t at = doc.find("\n" + start);
    if (at == std::string::npos) return std::string();
    return doc.substr(at + 1, doc.find('\n', at + 1) - at - 1);
  };
  // JSON: named in the object's row, or a row of its own (`….<name>`).
  const std::string wafer_row = row_of("| `wafer_system` |");
  const std::string gpu_row = row_of("| `gpu_baselines` |");
  ASSERT_FALSE(wafer_row.empty());
  ASSERT_FALSE(gpu_row.empty());
  for (const auto& [part, row] : {std::pair{SystemFigureList(kJsonWaferSystem), wafer_row},
                                  std::pair{SystemFigureList(kJsonGpuSystem), gpu_row}}) {
    for (const SystemFigure* f : part) {
      const std::string name = "`" + std::string(f->name) + "`";
      const bool listed = row.find(name) != std::string::npos ||
                          doc.find("`…." + std::string(f->name) + "`") != std::string::npos;
      EXPECT_TRUE(listed) << f->name << " is not in the JSON table";
    }
  }
  // HDF5: each dataset by its path; /wafer_system's attributes in its row.
  std::vector<const SystemFigure*> gpu_columns(kHdf5GpuBaselines.begin(), kHdf5GpuBaselines.end());
  gpu_columns.insert(gpu_columns.end(), kHdf5GpuBaselinesWrittenOnly.begin(),
                     kHdf5GpuBaselinesWrittenOnly.end());
  for (const SystemFigure* f : gpu_columns) {
    const std::string path = "`/gpu_baselines/" + std::string(f->name) + "`";
    EXPECT_NE(doc.find(path), std::string::npos) << path;
  }
  for (const SystemFigure* f : kHdf5WaferSystem) {
    const std::string path = "`/wafer_system/" + std::string(f->name) + "`";
    EXPECT_NE(doc.find(path), std::string::npos) << path;
  }
  const std::string wafer_hdf5_row = row_of("| `/wafer_system/");
  ASSERT_FALSE(wafer_hdf5_row.empty());
  for (const SystemFigure* f : kHdf5WaferSystemAttributes) {
    EXPECT_NE(wafer_hdf5_row.find("`" + std::string(f->name) + "`"), std::string::npos) << f->name;
  }
}

}  // namespace
}  // namespace wafersim::analysis
