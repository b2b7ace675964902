// A small, fully specified wafer for hand-computed timing tests.
#pragma once

#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric::testing {

inline WaferSpec small_spec(int width = 8, int height = 8) {
  WaferSpec s;
  s.name = "test";
  s.mesh_width = width;
  s.mesh_height = height;
  s.clock_hz = 1e9;
  s.sram_per_core = Bytes{48 * 1024};
  s.simd_lanes_16bit = 8;
  s.simd_lanes_32bit = 4;
  s.sram_read_bytes_per_cycle = Bytes{16};
  s.task_overhead = Cycles{10};
  s.hop_latency = Cycles{1};
  s.link_bytes_per_cycle = Bytes{4};
  s.virtual_channels = 24;
  s.reduce_hop_overhead = Cycles{2};
  s.io_bandwidth_bytes_per_s = 150e9;
  s.io_latency_s = 1e-6;
  return s;
}

}  // namespace wafersim::fabric::testing
