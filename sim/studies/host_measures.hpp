// What the benchmarks measure of the host itself: wall time between two
// points or since one, and fields of /proc/self/status (resident memory now
// and at its peak).
#pragma once

#include <chrono>
#include <fstream>
#include <string>

namespace wafersim::sim {

using HostClock = std::chrono::steady_clock;

inline double seconds_between(HostClock::time_point t0, HostClock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

inline double seconds_since(HostClock::time_point t0) {
  return seconds_between(t0, HostClock::now());
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
