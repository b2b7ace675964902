// A small hand-built RunResult whose figures are easy to compute by hand.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "analysis/run_result.hpp"

namespace wafersim::analysis::fixtures {

// 4 x 3 mesh at 1.1 GHz, 4 bytes/cycle links, 10,000 cycles.
// Used cores (SRAM > 0): (0,0) (1,0) (2,0) (1,1). Core (3,2) is busy but holds
// nothing, so it does not count towards utilisation.
// Busiest link: (2,1) S with 20,000 bytes = half of 10,000 cycles * 4 B.
// Three prompt tokens dominated by compute, two generated tokens by serialization
// (decode sums: compute 600, sram 400, hops 200, serialization 700, contention 80,
// io 27, queueing 40; total 2047).
inline RunResult sample_result(bool functional) {
  RunResult r;
  r.scenario_name = "tiny-decode";
  r.scenario_file = "scenarios/tiny-decode.yaml";
  r.hardware_name = "mini-wafer";
  r.model_name = "tiny-llama";
  r.precision = "bf16";
  r.placement_strategy = "row-chain";
  r.seed = 0xFEEDFACECAFEBEEFull;  // above 2^63: catches signed round trips
  r.functional = functional;
  r.mesh_width = 4;
  r.mesh_height = 3;
  r.clock_hz = 1.1e9;
  r.link_bytes_per_cycle = Bytes{4};
  r.cores_used = 4;
  r.dead_cores = 3;
  r.repaired_links = 4;
  r.repair_extra_hops = 5;
  r.max_route_colors = 11;
  r.sram_bytes_used = Bytes{1000 + 2000 + 3000 + 4000};
  r.sram_bytes_capacity = Bytes{12 * 48 * 1024};
  r.parameter_count = 1'234'567;

  const int cores = r.mesh_width * r.mesh_height;
  r.core_busy_cycles.assign(cores, 0);
  r.core_sram_bytes.assign(cores, 0);
  auto at = [&](int x, int y) { return static_cast<std::size_t>(y * r.mesh_width + x); };
  r.core_sram_bytes[at(0, 0)] = 1000;
  r.core_sram_bytes[at(1, 0)] = 2000;
  r.core_sram_bytes[at(2, 0)] = 3000;
  r.core_sram_bytes[at(1, 1)] = 4000;
  r.core_busy_cycles[at(0, 0)] = 5000;
  r.core_busy_cycles[at(1, 0)] = 2500;
  r.core_busy_cycles[at(2, 0)] = 1000;
  r.core_busy_cycles[at(1, 1)] = 3500;
  r.core_busy_cycles[at(3, 2)] = 9999;  // no SRAM: excluded

  r.link_bytes.assign(static_cast<std::size_t>(cores) * 4, 0);
  r.link_bytes[at(0, 0) * 4 + 0] = 800;    // (0,0) E
  r.link_bytes[at(1, 0) * 4 + 2] = 1200;   // (1,0) S
  r.link_bytes[at(2, 1) * 4 + 2] = 20000;  // (2,1) S: the busiest
  r.link_bytes[at(3, 2) * 4 + 3] = 7;      // (3,2) N

  r.prompt_ids = {101, 7, 42};
  if (functional) {
    r.tokens = {9, 8};
    r.reference_tokens = {9, 8};
    r.max_logit_abs_error = 3.0517578125e-05;
  }
  Cycles cycle{0};
  for (int pos = 0; pos < 5; ++pos) {
    TokenRecord t;
    t.position = pos;
    t.prefill = pos < 3;
    t.token_in = pos < 3 ? r.prompt_ids[static_cast<std::size_t>(pos)] : 9 - (pos - 3);
    if (t.prefill) {
      t.critical_path = {.compute = Cycles{600},
                         .sram = Cycles{100},
                         .hops = Cycles{50},
                         .serialization = Cycles{30},
                         .contention = Cycles{10},
                         .io = Cycles{10}};
    } else {
      t.critical_path = {.compute = Cycles{300},
                         .sram = Cycles{200},
                         .hops = Cycles{100},
                         .serialization = Cycles{350},
                         .contention = Cycles{40},
                         .io = Cycles{10 + static_cast<std::uint64_t>(pos)},
                         .queueing = Cycles{20}};
    }
    t.start_cycle = cycle;
    cycle += t.critical_path.total();
    t.end_cycle = cycle;
    r.token_records.push_back(t);
  }
  r.total_cycles = Cycles{10000};
  r.ttft_cycles = r.token_records[3].end_cycle;
  r.decode_cycles_per_token = Cycles{1000};
  r.resolved_scenario_yaml = "name: tiny-decode\nhardware: mini-wafer\nmodel: tiny-llama\n";
  return r;
}

// A fresh, empty directory for one test, removed afterwards.
class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("wafersim-analysis-") + info->test_suite_name() + "-" + info->name() + "-" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace wafersim::analysis::fixtures
