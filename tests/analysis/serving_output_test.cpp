// A serving study's outputs: the HDF5 file holds every request's figures with
// units and descriptions, the CSV one row per request, both written whole or
// not at all; the report names each system and connection.
#include "analysis/serving_output.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "analysis/hdf5_output.hpp"
#include "hdf5_attributes.hpp"

namespace wafersim::analysis {
namespace {

namespace fs = std::filesystem;

ServingResult sample() {
  ServingResult r;
  r.system = "wafer";
  r.description = "1 x 1 wse3";
  r.stack.connection = "persistent";
  for (int i = 0; i < 3; ++i) {
    RequestRecord q;
    q.id = i;
    q.session = i;
    q.arrival_s = 0.5 * i;
    q.ttft_s = 0.1 + 0.01 * i;
    q.output_tokens = 10 + i;
    q.prompt_tokens = 100;
    q.meets_slo = i != 2;
    r.requests.push_back(q);
  }
  r.served = 3;
  r.ttft_s.p99 = 0.12;
  r.timeline.push_back({0.0, 1.0, 2.0, 0.5});
  return r;
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() /
                     ("wafersim_serving_out_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(ServingOutput, Hdf5HoldsEveryRequestWithUnits) {
  const fs::path d = scratch("h5");
  ServingHeader h;
  h.scenario = "s";
  write_serving_hdf5(d / "r.h5", h, {sample()}, "name: s\n");
  H5::H5File f((d / "r.h5").string(), H5F_ACC_RDONLY);
  EXPECT_EQ(string_attr(f, "format"), "wafersim-serving");
  H5::Group g = f.openGroup("/serving/0");
  EXPECT_EQ(string_attr(g, "system"), "wafer");
  EXPECT_EQ(string_attr(g, "connection"), "persistent");
  H5::DataSet ttft = g.openDataSet("requests/ttft_s");
  EXPECT_EQ(string_attr(ttft, "units"), "s");
  std::vector<double> v(3);
  ttft.read(v.data(), H5::PredType::NATIVE_DOUBLE);
  EXPECT_DOUBLE_EQ(v[2], 0.12);
  H5::DataSet meets = g.openDataSet("requests/meets_slo");
  std::vector<std::uint8_t> m(3);
  meets.read(m.data(), H5::PredType::NATIVE_UINT8);
  EXPECT_EQ(m, (std::vector<std::uint8_t>{1, 1, 0}));
  double p99 = 0.0;
  g.openDataSet("ttft_s/p99").read(&p99, H5::PredType::NATIVE_DOUBLE);
  EXPECT_DOUBLE_EQ(p99, 0.12);
  // No temporary file is left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
}

TEST(ServingOutput, CsvHasOneRowPerRequestAndFailsWhole) {
  const fs::path d = scratch("csv");
  write_requests_csv(d / "r.csv", {sample(), sample()});
  std::ifstream in(d / "r.csv");
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("system,connection,id,session,turn,replica,arrival_s", 0), 0u);
  int rows = 0;
  for (std::string line; std::getline(in, line);) ++rows;
  EXPECT_EQ(rows, 6);
  EXPECT_THROW(write_requests_csv(d / "missing" / "r.csv", {sample()}), OutputError);
  EXPECT_FALSE(fs::exists(d / "missing"));
}

TEST(ServingOutput, ReportNamesSystemAndConnection) {
  std::ostringstream out;
  write_serving_report(out, ServingHeader{"s", "m", "t", "", ""}, {sample()});
  EXPECT_NE(out.str().find("wafer (persistent)"), std::string::npos) << out.str();
  const auto j = serving_json(ServingHeader{"s", "m", "t", "", ""}, {sample()});
  EXPECT_EQ(j["systems"][0]["connection"], "persistent");
  EXPECT_EQ(j["systems"][0]["timeline"][0][2], 2.0);
}

}  // namespace
}  // namespace wafersim::analysis
