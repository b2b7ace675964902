#include "sim/studies/sweep.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

int parse_int(const std::string& s, const std::string& what) {
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty())
    throw std::invalid_argument(fmt::format("{}: '{}' is not an integer", what, s));
  return v;
}

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return parse_int(v, name);
}

SweepOutcome run_point(const SweepOptions& o, const SweepPoint& point) {
  SweepOutcome out;
  out.point = point;
  const ProcessOutput p =
      run_process(sweep_run_arguments(o.binary, o.scenario, o.presets, o.functional, point));
  out.exit_code = p.exit_code;
  if (out.exit_code == 0) {
    try {
      out.result = Json::parse(p.out);
    } catch (const Json::exception& e) {
      out.exit_code = 3;
      out.error = std::string("unreadable JSON from the run: ") + e.what();
    }
  } else {
    out.error = first_error_line(p.err);
    if (out.error.empty()) out.error = fmt::format("the run exited with {}", out.exit_code);
  }
  return out;
}

// The figures a capacity plan reads, from a run's JSON.
const std::array<const char*, 11> kFigures = {"model",
                                              "hardware",
                                              "precision",
                                              "wafers_used",
                                              "users",
                                              "decode_tokens_per_s_per_user",
                                              "aggregate_tokens_per_s",
                                              "ttft_s",
                                              "inter_token_latency_s",
                                              "max_context_tokens",
                                              "bottleneck"};

Json point_overrides(const SweepPoint& p) {
  Json j = Json::object();
  if (p.model) j["model"] = *p.model;
  if (p.hardware) j["hardware"] = *p.hardware;
  if (p.precision) j["precision"] = *p.precision;
  if (p.wafers) j["wafers"] = *p.wafers;
  if (p.layer_groups) j["layer_groups"] = *p.layer_groups;
  if (p.users) j["users"] = *p.users;
  return j;
}

std::string cell(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format("{:.6g}", v.get<double>());
  if (v.is_null()) return "";
  return v.dump();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

SweepShard parse_shard(const std::string& text) {
  SweepShard s;
  if (text == "mpi") {
    std::optional<int> rank = env_int("OMPI_COMM_WORLD_RANK");
    std::optional<int> size = env_int("OMPI_COMM_WORLD_SIZE");
    if (!rank) rank = env_int("PMI_RANK");
    if (!size) size = env_int("PMI_SIZE");
    if (!rank) rank = env_int("PMIX_RANK");
    if (!rank || !size)
      throw std::invalid_argument(
          "--shard mpi: no MPI rank and size in the environment (OMPI_COMM_WORLD_RANK and "
          "OMPI_COMM_WORLD_SIZE, or PMI_RANK and PMI_SIZE); start it with mpirun, or give K/N");
    s.rank = *rank;
    s.count = *size;
  } else {
    const auto slash = text.find('/');
    if (slash == std::string::npos)
      throw std::invalid_argument(
          "--shard: expected K/N (this is shard K of N, 0 <= K < N) or mpi");
    s.rank = parse_int(text.substr(0, slash), "--shard K");
    s.count = parse_int(text.substr(slash + 1), "--shard N");
  }
  if (s.count < 1 || s.rank < 0 || s.rank >= s.count)
    throw std::invalid_argument(fmt::format("--shard {}/{}: need 0 <= K < N", s.rank, s.count));
  return s;
}

std::vector<SweepPoint> sweep_points(const SweepAxes& axes, const SweepShard& shard) {
  // An empty axis contributes one "unset" value.
  auto axis = [](const std::vector<std::string>& v) {
    std::vector<std::optional<std::string>> out(v.begin(), v.end());
    if (out.empty()) out.emplace_back();
    return out;
  };
  auto counts = [](const std::vector<int>& v) {
    std::vector<std::optional<int>> out(v.begin(), v.end());
    if (out.empty()) out.emplace_back();
    return out;
  };
  std::vector<SweepPoint> points;
  int index = 0;
  for (const auto& m : axis(axes.models))
    for (const auto& h : axis(axes.hardware))
      for (const auto& p : axis(axes.precisions))
        for (const auto& w : axis(axes.wafers))
          for (const auto& g : counts(axes.layer_groups))
            for (const auto& u : counts(axes.users)) {
              SweepPoint pt{index, m, h, p, w, g, u};
              if (index % shard.count == shard.rank) points.push_back(pt);
              ++index;
            }
  return points;
}

std::vector<std::string> sweep_run_arguments(const fs::path& binary, const std::string& scenario,
                                             const std::string& presets,
                                             std::optional<bool> functional, const SweepPoint& p) {
  std::vector<std::string> a{binary.string()};
  if (!presets.empty()) a.insert(a.end(), {"--presets", presets});
  a.insert(a.end(), {"run", scenario, "--json"});
  if (functional) a.push_back(*functional ? "--functional" : "--timing-only");
  if (p.model) a.insert(a.end(), {"--model", *p.model});
  if (p.hardware) a.insert(a.end(), {"--hardware", *p.hardware});
  if (p.precision) a.insert(a.end(), {"--precision", *p.precision});
  if (p.wafers) a.insert(a.end(), {"--wafers", *p.wafers});
  if (p.layer_groups) a.insert(a.end(), {"--layer-groups", std::to_string(*p.layer_groups)});
  if (p.users) a.insert(a.end(), {"--users", std::to_string(*p.users)});
  return a;
}

std::vector<SweepOutcome> run_sweep(const std::vector<SweepPoint>& points,
                                    const SweepOptions& options) {
  std::vector<SweepOutcome> outcomes(points.size());
  std::atomic<std::size_t> next{0};
  std::atomic<int> done{0};
  std::mutex progress_mutex;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    for (;;) {
      const std::size_t i = next.fetch_add(1);
      if (i >= points.size()) return;
      try {
        outcomes[i] = run_point(options, points[i]);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = points.size();  // stop handing out points
        return;
      }
      const int d = ++done;
      if (options.progress) {
        const std::lock_guard<std::mutex> lock(progress_mutex);
        options.progress(d, static_cast<int>(points.size()));
      }
    }
  };
  const int jobs = std::max(1, std::min<int>(options.jobs, static_cast<int>(points.size())));
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return outcomes;
}

Json sweep_json(const std::string& scenario, const SweepShard& shard,
                const std::vector<SweepOutcome>& outcomes) {
  Json j = Json::object();
  j["format"] = "wafersim-sweep";
  j["scenario"] = scenario;
  j["shard"] = Json{{"rank", shard.rank}, {"count", shard.count}};
  Json points = Json::array();
  for (const SweepOutcome& o : outcomes) {
    Json p = Json::object();
    p["index"] = o.point.index;
    p["overrides"] = point_overrides(o.point);
    p["exit_code"] = o.exit_code;
    if (o.exit_code == 0) {
      for (const char* k : kFigures)
        if (o.result.contains(k)) p[k] = o.result.at(k);
      if (o.result.contains("wafer_system"))
        p["power_kw"] = o.result.at("wafer_system").value("power_kw", Json());
      // The GPU clusters on the same point, when the scenario compares.
      if (o.result.contains("gpu_baselines")) {
        Json gpus = Json::array();
        for (const Json& g : o.result.at("gpu_baselines")) {
          Json row = Json::object();
          for (const char* k : {"system", "gpus", "tp", "pp", "decode_tokens_per_s_per_user",
                                "aggregate_tokens_per_s", "ttft_s", "power_kw", "bottleneck"})
            if (g.contains(k)) row[k] = g.at(k);
          gpus.push_back(std::move(row));
        }
        p["gpu_baselines"] = std::move(gpus);
      }
    } else {
      p["error"] = o.error;
    }
    points.push_back(std::move(p));
  }
  j["points"] = std::move(points);
  return j;
}

std::string sweep_table(const std::vector<SweepOutcome>& outcomes) {
  std::string s =
      fmt::format("{:>5}  {:<18} {:<8} {:<9} {:>6} {:>6} {:>5} {:>12} {:>12} {:>10} {:>10}  {}\n",
                  "point", "model", "hardware", "precision", "wafers", "groups", "users",
                  "tok/s/user", "aggregate", "TTFT", "max ctx", "bottleneck");
  for (const SweepOutcome& o : outcomes) {
    const SweepPoint& p = o.point;
    const std::string groups = p.layer_groups ? std::to_string(*p.layer_groups) : "-";
    if (o.exit_code != 0) {
      s += fmt::format("{:>5}  {:<18} {:<8} {:<9} {:>6} {:>6} {:>5}  {}\n", p.index,
                       p.model.value_or("-"), p.hardware.value_or("-"), p.precision.value_or("-"),
                       p.wafers.value_or("-"), groups, p.users ? std::to_string(*p.users) : "-",
                       o.error);
      continue;
    }
    const Json& r = o.result;
    s += fmt::format(
        "{:>5}  {:<18} {:<8} {:<9} {:>6} {:>6} {:>5} {:>12.1f} {:>12.1f} {:>8.3f}ms {:>10}  {}\n",
        p.index, r.value("model", ""), r.value("hardware", ""), r.value("precision", ""),
        r.value("wafers_used", 0), groups, r.value("users", 0),
        r.value("decode_tokens_per_s_per_user", 0.0), r.value("aggregate_tokens_per_s", 0.0),
        1e3 * r.value("ttft_s", 0.0), r.value("max_context_tokens", 0ull),
        r.value("bottleneck", ""));
  }
  return s;
}

std::string sweep_csv(const std::vector<SweepOutcome>& outcomes) {
  std::string s = "index,exit_code";
  for (const char* k : kFigures) s += std::string(",") + k;
  s += ",error\n";
  for (const SweepOutcome& o : outcomes) {
    s += fmt::format("{},{}", o.point.index, o.exit_code);
    for (const char* k : kFigures) {
      std::string v;
      if (o.exit_code == 0 && o.result.contains(k))
        v = cell(o.result.at(k));
      else if (o.exit_code != 0) {
        const Json over = point_overrides(o.point);
        const std::string key = std::string(k) == "wafers_used" ? "wafers" : k;
        if (over.contains(key)) v = cell(over.at(key));
      }
      s += ',';
      s += csv_field(v);
    }
    s += ',';
    s += csv_field(o.error);
    s += '\n';
  }
  return s;
}

}  // namespace wafersim::sim
