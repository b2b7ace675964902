// The sweep's HDF5 file (analysis/sweep_output.hpp): every point a row,
// every GPU cluster of a point a row, figures with units, NaN where none.
#include "analysis/sweep_output.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <H5Cpp.h>

#include "analysis/hdf5_output.hpp"
#include "hdf5_attributes.hpp"

namespace wafersim::analysis {
namespace {

using Json = nlohmann::ordered_json;

Json two_points() {
  return Json::parse(R"({
    "format": "wafersim-sweep", "scenario": "s.yaml", "shard": {"rank": 0, "count": 1},
    "points_total": 3, "complete": false, "interrupted": true, "missing": [2],
    "axes": ["model", "users", "reduction"],
    "points": [
      {"index": 0, "overrides": {"users": 1}, "exit_code": 0, "model": "tiny-llama",
       "hardware": "tiny-64", "precision": "fp32", "wafers_used": 1, "users": 1,
       "decode_tokens_per_s_per_user": 1234.5678901234567, "aggregate_tokens_per_s": 1234.5,
       "ttft_s": 0.001, "inter_token_latency_s": 0.0008, "max_context_tokens": 512,
       "bottleneck": "core compute", "power_kw": null,
       "gpu_baselines": [{"system": "dgx-h100", "gpus": 8, "tp": 8, "pp": 1,
                          "decode_tokens_per_s_per_user": 200.0, "aggregate_tokens_per_s": 200.0,
                          "ttft_s": 0.02, "power_kw": 10.2, "bottleneck": "HBM bandwidth"},
                         {"system": "dgx-b200", "gpus": 8, "tp": 8, "pp": 1,
                          "decode_tokens_per_s_per_user": 300.0, "aggregate_tokens_per_s": 300.0,
                          "ttft_s": 0.01, "power_kw": 14.3, "bottleneck": "HBM bandwidth"}]},
      {"index": 1, "overrides": {"users": 2, "model": "llama-3.1-8b"}, "exit_code": 1,
       "error": "the model does not fit"}
    ]})");
}

template <class T>
std::vector<T> read_vector(const H5::Group& g, const char* name, const H5::PredType& type) {
  const H5::DataSet ds = g.openDataSet(name);
  hsize_t n = 0;
  ds.getSpace().getSimpleExtentDims(&n);
  std::vector<T> v(n);
  if (n) ds.read(v.data(), type);
  return v;
}

std::vector<std::string> read_strings(const H5::Group& g, const char* name) {
  const H5::DataSet ds = g.openDataSet(name);
  hsize_t n = 0;
  ds.getSpace().getSimpleExtentDims(&n);
  std::vector<char*> raw(n);
  const H5::StrType t = ds.getStrType();
  if (n) ds.read(raw.data(), t);
  std::vector<std::string> out(raw.begin(), raw.end());
  H5Dvlen_reclaim(t.getId(), ds.getSpace().getId(), H5P_DEFAULT, raw.data());
  return out;
}

TEST(SweepHdf5, PointsAndGpuRowsAreColumnsWithUnits) {
  const std::filesystem::path f = std::filesystem::temp_directory_path() /
                                  ("sweep_output_test_" + std::to_string(::getpid()) + ".h5");
  write_sweep_hdf5(f, two_points());
  const H5::H5File h(f.string(), H5F_ACC_RDONLY);
  EXPECT_EQ(string_attr(h, "format"), "wafersim-sweep");
  const H5::Group p = h.openGroup("points");
  EXPECT_EQ(read_vector<int>(p, "index", H5::PredType::NATIVE_INT), (std::vector<int>{0, 1}));
  EXPECT_EQ(read_vector<int>(p, "exit_code", H5::PredType::NATIVE_INT), (std::vector<int>{0, 1}));
  const auto rate =
      read_vector<double>(p, "decode_tokens_per_s_per_user", H5::PredType::NATIVE_DOUBLE);
  ASSERT_EQ(rate.size(), 2u);
  EXPECT_EQ(rate[0], 1234.5678901234567);  // full precision
  EXPECT_TRUE(std::isnan(rate[1]));        // the point did not run
  EXPECT_TRUE(std::isnan(read_vector<double>(p, "power_kw", H5::PredType::NATIVE_DOUBLE)[0]));
  EXPECT_EQ(string_attr(p.openDataSet("decode_tokens_per_s_per_user"), "units"), "tokens/s");
  EXPECT_EQ(read_strings(p, "error"), (std::vector<std::string>{"", "the model does not fit"}));
  EXPECT_EQ(read_strings(p, "override_model"), (std::vector<std::string>{"", "llama-3.1-8b"}));
  EXPECT_EQ(read_strings(p, "override_users"), (std::vector<std::string>{"1", "2"}));
  // A dataset per axis the sweep lists, set by no point or not.
  EXPECT_EQ(read_strings(p, "override_reduction"), (std::vector<std::string>{"", ""}));
  EXPECT_FALSE(p.nameExists("override_hardware"));
  const H5::Group g = h.openGroup("gpu_baselines");
  EXPECT_EQ(read_vector<int>(g, "point_index", H5::PredType::NATIVE_INT), (std::vector<int>{0, 0}));
  EXPECT_EQ(read_strings(g, "system"), (std::vector<std::string>{"dgx-h100", "dgx-b200"}));
  EXPECT_EQ(read_vector<double>(g, "power_kw", H5::PredType::NATIVE_DOUBLE),
            (std::vector<double>{10.2, 14.3}));
  EXPECT_EQ(read_vector<int>(h, "missing", H5::PredType::NATIVE_INT), (std::vector<int>{2}));
  std::filesystem::remove(f);
}

TEST(SweepHdf5, AFileThatCannotBeWrittenIsAnOutputErrorAndLeavesNothing) {
  EXPECT_THROW(write_sweep_hdf5("/nonexistent-folder/s.h5", two_points()), OutputError);
}

}  // namespace
}  // namespace wafersim::analysis
