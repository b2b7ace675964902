// What the benchmarks measure of the host itself: wall time since a point,
// and fields of /proc/self/status (resident memory now and at its peak).
#pragma once

#include <chrono>
#include <fstream>
#include <string>

namespace wafersim::sim {

using HostClock = std::chrono::steady_clock;

inline double seconds_since(HostClock::time_point t0) {
  return std::chrono::duration<double>(HostClock::now() - t0).count();
}

// A field of /proc/self/status in bytes (VmHWM: peak resident; RssAnon:
// anonymous memory resident now); 0 where there is none.
inline double proc_status_bytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) * 1024.0;
  return 0.0;
}

}  // namespace wafersim::sim
