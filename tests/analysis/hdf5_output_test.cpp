#include "analysis/hdf5_output.hpp"

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <H5Cpp.h>
#include <gtest/gtest.h>

#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

using fixtures::sample_result;
using Hdf5Output = fixtures::ScratchDir;

void expect_same_run(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(a.scenario_name, b.scenario_name);
  EXPECT_EQ(a.scenario_file, b.scenario_file);
  EXPECT_EQ(a.hardware_name, b.hardware_name);
  EXPECT_EQ(a.model_name, b.model_name);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.placement_strategy, b.placement_strategy);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.functional, b.functional);
  EXPECT_EQ(a.mesh_width, b.mesh_width);
  EXPECT_EQ(a.mesh_height, b.mesh_height);
  EXPECT_EQ(a.clock_hz, b.clock_hz);
  EXPECT_EQ(a.link_bytes_per_cycle, b.link_bytes_per_cycle);
  EXPECT_EQ(a.cores_used, b.cores_used);
  EXPECT_EQ(a.sram_bytes_used, b.sram_bytes_used);
  EXPECT_EQ(a.sram_bytes_capacity, b.sram_bytes_capacity);
  EXPECT_EQ(a.parameter_count, b.parameter_count);
  EXPECT_EQ(a.core_busy_cycles, b.core_busy_cycles);
  EXPECT_EQ(a.core_sram_bytes, b.core_sram_bytes);
  EXPECT_EQ(a.link_bytes, b.link_bytes);
  EXPECT_EQ(a.prompt_ids, b.prompt_ids);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.reference_tokens, b.reference_tokens);
  EXPECT_EQ(a.max_logit_abs_error, b.max_logit_abs_error);
  ASSERT_EQ(a.token_records.size(), b.token_records.size());
  for (std::size_t i = 0; i < a.token_records.size(); ++i) {
    const TokenRecord& x = a.token_records[i];
    const TokenRecord& y = b.token_records[i];
    EXPECT_EQ(x.position, y.position) << i;
    EXPECT_EQ(x.prefill, y.prefill) << i;
    EXPECT_EQ(x.start_cycle, y.start_cycle) << i;
    EXPECT_EQ(x.end_cycle, y.end_cycle) << i;
    EXPECT_EQ(x.token_in, y.token_in) << i;
    for (Resource c : kPathCategories) {
      EXPECT_EQ(cycles_in(x.critical_path, c), cycles_in(y.critical_path, c))
          << i << " " << category_key(c);
    }
  }
  EXPECT_EQ(a.total_cycles, b.total_cycles);
  EXPECT_EQ(a.ttft_cycles, b.ttft_cycles);
  EXPECT_EQ(a.decode_cycles_per_token, b.decode_cycles_per_token);
  EXPECT_EQ(a.resolved_scenario_yaml, b.resolved_scenario_yaml);
}

void expect_same_metrics(const Metrics& a, const Metrics& b) {
  EXPECT_EQ(a.decode_tokens_per_s_per_user, b.decode_tokens_per_s_per_user);
  EXPECT_EQ(a.inter_token_latency_s, b.inter_token_latency_s);
  EXPECT_EQ(a.ttft_s, b.ttft_s);
  EXPECT_EQ(a.core_utilisation, b.core_utilisation);
  EXPECT_EQ(a.sram_utilisation, b.sram_utilisation);
  EXPECT_EQ(a.bottleneck, b.bottleneck);
  EXPECT_EQ(a.busiest_link.has_value(), b.busiest_link.has_value());
  if (a.busiest_link && b.busiest_link) {
    EXPECT_EQ(a.busiest_link->x, b.busiest_link->x);
    EXPECT_EQ(a.busiest_link->y, b.busiest_link->y);
    EXPECT_EQ(a.busiest_link->dir, b.busiest_link->dir);
    EXPECT_EQ(a.busiest_link->load, b.busiest_link->load);
  }
  EXPECT_EQ(a.tokens_match_reference, b.tokens_match_reference);
}

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::filesystem::path> entries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(e.path());
  return v;
}

void write(const std::filesystem::path& p, const RunResult& r) {
  write_hdf5(p, r, compute_metrics(r));
}

TEST_F(Hdf5Output, FunctionalRunRoundTripsEveryField) {
  const RunResult r = sample_result(true);
  write(dir() / "run.h5", r);
  const RunResult back = read_hdf5(dir() / "run.h5");
  expect_same_run(r, back);
  expect_same_metrics(compute_metrics(r), compute_metrics(back));
}

TEST_F(Hdf5Output, TimingRunRoundTripsWithoutFunctionalData) {
  const RunResult r = sample_result(false);
  write(dir() / "run.h5", r);
  const RunResult back = read_hdf5(dir() / "run.h5");
  expect_same_run(r, back);
  const H5::H5File f((dir() / "run.h5").string(), H5F_ACC_RDONLY);
  EXPECT_FALSE(f.nameExists("tokens/generated"));
  EXPECT_FALSE(f.nameExists("tokens/reference"));
  EXPECT_FALSE(f.nameExists("summary/max_logit_abs_error"));
}

TEST_F(Hdf5Output, FullSizeMeshArraysRoundTripThroughCompression) {
  RunResult r = sample_result(false);
  r.mesh_width = 300;  // 60,000 cores: chunked and deflated
  r.mesh_height = 200;
  const std::size_t cores = 300 * 200;
  r.core_busy_cycles.assign(cores, 0);
  r.core_sram_bytes.assign(cores, 0);
  r.link_bytes.assign(cores * 4, 0);
  for (std::size_t i = 0; i < cores; i += 7) {
    r.core_sram_bytes[i] = 1000 + i;
    r.core_busy_cycles[i] = i % r.total_cycles.value;
    r.link_bytes[i * 4 + i % 4] = (i * 13) % 40000;
  }
  r.sram_bytes_capacity = Bytes{cores * 48 * 1024};
  write(dir() / "big.h5", r);
  expect_same_run(r, read_hdf5(dir() / "big.h5"));
}

TEST_F(Hdf5Output, ArraysAreShapedLikeTheMesh) {
  write(dir() / "run.h5", sample_result(true));
  const H5::H5File f((dir() / "run.h5").string(), H5F_ACC_RDONLY);
  auto dims = [&](const char* name) {
    const H5::DataSpace s = f.openDataSet(name).getSpace();
    std::vector<hsize_t> d(static_cast<std::size_t>(s.getSimpleExtentNdims()));
    s.getSimpleExtentDims(d.data());
    return d;
  };
  EXPECT_EQ(dims("cores/busy_cycles"), (std::vector<hsize_t>{3, 4}));
  EXPECT_EQ(dims("cores/sram_bytes"), (std::vector<hsize_t>{3, 4}));
  EXPECT_EQ(dims("links/bytes"), (std::vector<hsize_t>{3, 4, 4}));
  EXPECT_EQ(dims("tokens/position"), (std::vector<hsize_t>{5}));
  EXPECT_EQ(dims("tokens/critical_path/serialization"), (std::vector<hsize_t>{5}));
  EXPECT_EQ(dims("tokens/generated"), (std::vector<hsize_t>{2}));

  std::string directions;
  const H5::Attribute a = f.openDataSet("links/bytes").openAttribute("directions");
  a.read(a.getStrType(), directions);
  EXPECT_EQ(directions, "E,W,S,N");
  // [y][x]: core (x=1, y=1) holds 4000 bytes.
  std::vector<std::uint64_t> sram(12);
  f.openDataSet("cores/sram_bytes").read(sram.data(), H5::PredType::NATIVE_UINT64);
  EXPECT_EQ(sram[1 * 4 + 1], 4000u);
}

TEST_F(Hdf5Output, EveryDatasetCarriesUnitsAndDescription) {
  write(dir() / "run.h5", sample_result(true));
  const H5::H5File f((dir() / "run.h5").string(), H5F_ACC_RDONLY);
  std::vector<std::string> missing;
  std::size_t datasets = 0;
  struct Walk {
    std::vector<std::string>* missing;
    std::size_t* datasets;
  } walk{&missing, &datasets};
  H5Ovisit(
      f.getId(), H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t root, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        if (info->type != H5O_TYPE_DATASET) return 0;
        auto* w = static_cast<Walk*>(data);
        ++*w->datasets;
        for (const char* attr : {"units", "description"}) {
          if (H5Aexists_by_name(root, name, attr, H5P_DEFAULT) <= 0) {
            w->missing->push_back(std::string(name) + "@" + attr);
          }
        }
        return 0;
      },
      &walk);
  EXPECT_GT(datasets, 30u);
  EXPECT_TRUE(missing.empty()) << ::testing::PrintToString(missing);
}

TEST_F(Hdf5Output, HeadlineFiguresAreReadableWithTheirUnits) {
  const RunResult r = sample_result(true);
  const Metrics m = compute_metrics(r);
  write_hdf5(dir() / "run.h5", r, m);
  const H5::H5File f((dir() / "run.h5").string(), H5F_ACC_RDONLY);
  const H5::DataSet ds = f.openDataSet("summary/decode_tokens_per_s_per_user");
  double rate = 0;
  ds.read(&rate, H5::PredType::NATIVE_DOUBLE);
  EXPECT_EQ(rate, m.decode_tokens_per_s_per_user);
  std::string units;
  const H5::Attribute a = ds.openAttribute("units");
  a.read(a.getStrType(), units);
  EXPECT_EQ(units, "tokens/s");
  std::string bottleneck;
  const H5::Attribute b = f.openAttribute("bottleneck");
  b.read(b.getStrType(), bottleneck);
  EXPECT_EQ(bottleneck, "mesh link bandwidth");
}

TEST_F(Hdf5Output, IdenticalRunsGiveByteIdenticalFiles) {
  write(dir() / "a.h5", sample_result(true));
  write(dir() / "b.h5", sample_result(true));
  const std::string a = file_bytes(dir() / "a.h5");
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == file_bytes(dir() / "b.h5"));
}

TEST_F(Hdf5Output, NoHdf5HandlesLeftOpen) {
  const auto open_objects = [] {
    return std::vector<ssize_t>{H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE),
                                H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_GROUP),
                                H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_DATASET),
                                H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_DATATYPE),
                                H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ATTR)};
  };
  // The C++ API keeps its predefined datatypes open for the life of the process.
  const std::vector<ssize_t> before = open_objects();
  EXPECT_EQ(before[0], 0);
  write(dir() / "run.h5", sample_result(true));
  EXPECT_EQ(open_objects(), before) << "after write";
  (void)read_hdf5(dir() / "run.h5");
  EXPECT_EQ(open_objects(), before) << "after read";
}

TEST_F(Hdf5Output, MissingDirectoryThrowsAndLeavesNoFile) {
  const std::filesystem::path target = dir() / "no-such-dir" / "run.h5";
  try {
    write(target, sample_result(true));
    FAIL() << "expected OutputError";
  } catch (const OutputError& e) {
    EXPECT_EQ(e.path(), target);
    EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(target));
  EXPECT_FALSE(std::filesystem::exists(target.parent_path()));
  EXPECT_TRUE(entries(dir()).empty());
}

TEST_F(Hdf5Output, ExistingFileIsReplacedOnSuccess) {
  const std::filesystem::path target = dir() / "run.h5";
  std::ofstream(target) << "an older result";
  write(target, sample_result(true));
  EXPECT_EQ(read_hdf5(target).scenario_name, "tiny-decode");
  EXPECT_EQ(entries(dir()), std::vector<std::filesystem::path>{target});  // no temp file left
}

TEST_F(Hdf5Output, ExistingFileIsKeptWhenTheWriteFails) {
  const std::filesystem::path target = dir() / "run.h5";
  std::ofstream(target) << "an older result";
  RunResult r = sample_result(true);
  const Metrics m = compute_metrics(r);
  r.core_busy_cycles.pop_back();  // fails half-way through the file
  EXPECT_THROW(write_hdf5(target, r, m), OutputError);
  EXPECT_EQ(file_bytes(target), "an older result");
  EXPECT_EQ(entries(dir()), std::vector<std::filesystem::path>{target});
}

TEST_F(Hdf5Output, RenameFailureRemovesTheTemporaryFile) {
  const std::filesystem::path target = dir() / "run.h5";
  std::filesystem::create_directories(target / "occupied");  // a non-empty directory is in the way
  EXPECT_THROW(write(target, sample_result(true)), OutputError);
  EXPECT_EQ(entries(dir()), std::vector<std::filesystem::path>{target});
  EXPECT_TRUE(std::filesystem::is_directory(target / "occupied"));
}

TEST_F(Hdf5Output, ReadingSomethingElseIsAReadError) {
  EXPECT_THROW(read_hdf5(dir() / "absent.h5"), ResultReadError);
  std::ofstream(dir() / "text.h5") << "not hdf5";
  EXPECT_THROW(read_hdf5(dir() / "text.h5"), ResultReadError);
  {
    H5::H5File other((dir() / "other.h5").string(), H5F_ACC_TRUNC);  // HDF5, but not ours
  }
  EXPECT_THROW(read_hdf5(dir() / "other.h5"), ResultReadError);
}

}  // namespace
}  // namespace wafersim::analysis
