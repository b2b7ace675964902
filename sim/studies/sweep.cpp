#include "sim/studies/sweep.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <set>
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

// The figures a capacity plan reads, in the CSV's column order: those of
// the wafer's run (from its JSON; power_kw from its wafer_system) and those of
// each GPU cluster on the same point (from its gpu_baselines row, beside its
// `system`).
struct Figure {
  const char* name;
  bool wafer, gpu;
};
constexpr std::array<Figure, 15> kFigures = {{{"model", true, false},
                                              {"hardware", true, false},
                                              {"precision", true, false},
                                              {"wafers_used", true, false},
                                              {"gpus", false, true},
                                              {"tp", false, true},
                                              {"pp", false, true},
                                              {"users", true, false},
                                              {"decode_tokens_per_s_per_user", true, true},
                                              {"aggregate_tokens_per_s", true, true},
                                              {"ttft_s", true, true},
                                              {"inter_token_latency_s", true, false},
                                              {"max_context_tokens", true, false},
                                              {"bottleneck", true, true},
                                              {"power_kw", true, true}}};
}  // namespace

namespace {

Json point_overrides(const SweepPoint& p) {
  Json j = Json::object();
  for (std::size_t i = 0; i < kSweepAxisCount; ++i)
    if (p.values[i])
      j[std::string(kSweepAxes[i].name)] = axis_value_json(kSweepAxes[i], *p.values[i]);
  return j;
}

// A CSV cell at full precision: doubles in their shortest round-trip form.
std::string cell(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_unsigned()) return std::to_string(v.get<unsigned long long>());
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format("{}", v.get<double>());
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void sort_by_index(std::vector<SweepRecord>& records) {
  std::stable_sort(records.begin(), records.end(), [](const Json& a, const Json& b) {
    return a.at("index").get<int>() < b.at("index").get<int>();
  });
}

std::string text_or(const Json& r, const char* key, const std::string& fallback) {
  const auto it = r.find(key);
  if (it == r.end() || it->is_null()) return fallback;
  return cell(*it);
}

std::string number_or(const Json& r, const char* key, const char* format, double scale = 1.0) {
  const auto it = r.find(key);
  if (it == r.end() || !it->is_number()) return "-";
  return fmt::format(fmt::runtime(format), scale * it->get<double>());
}

}  // namespace

SweepShard parse_shard(const std::string& text) {
  SweepShard s;
  if (text == "mpi")
    throw std::invalid_argument(
        "--shard mpi is no longer needed: started by mpirun or srun, a sweep spreads its points "
        "over the ranks and rank 0 writes every output; drop --shard");
  const auto slash = text.find('/');
  if (slash == std::string::npos)
    throw std::invalid_argument("--shard: expected K/N (this is shard K of N, 0 <= K < N)");
  s.rank = parse_int(text.substr(0, slash), "--shard K");
  s.count = parse_int(text.substr(slash + 1), "--shard N");
  if (s.count < 1 || s.rank < 0 || s.rank >= s.count)
    throw std::invalid_argument(fmt::format("--shard {}/{}: need 0 <= K < N", s.rank, s.count));
  return s;
}

int sweep_size(const SweepAxes& axes) {
  long long n = 1;
  for (const std::vector<std::string>& values : axes.values) {
    n *= static_cast<long long>(std::max<std::size_t>(values.size(), 1));
    if (n > 1000000)
      throw std::invalid_argument(
          "the sweep's grid has over 1,000,000 points: split it into several sweeps");
  }
  return static_cast<int>(n);
}

std::vector<SweepPoint> sweep_points(const SweepAxes& axes, const SweepShard& shard) {
  // Row-major over the axes, the first outermost; an empty axis contributes
  // one "unset" value. sweep_size refuses a grid too large to enumerate.
  const long long total = sweep_size(axes);
  std::vector<SweepPoint> points;
  for (long long index = shard.rank; index < total; index += shard.count) {
    SweepPoint pt;
    pt.index = static_cast<int>(index);
    long long rest = index;
    for (std::size_t i = kSweepAxisCount; i-- > 0;) {
      const std::vector<std::string>& values = axes.values[i];
      if (values.empty()) continue;
      pt.values[i] = values[static_cast<std::size_t>(rest % static_cast<long long>(values.size()))];
      rest /= static_cast<long long>(values.size());
    }
    points.push_back(std::move(pt));
  }
  return points;
}

std::vector<std::string> sweep_run_arguments(
    const fs::path& binary, const std::string& scenario, const std::string& presets,
    std::optional<bool> functional, const SweepPoint& p,
    const std::vector<std::pair<std::string, std::string>>& sets) {
  std::vector<std::string> a{binary.string()};
  if (!presets.empty()) a.insert(a.end(), {"--presets", presets});
  a.insert(a.end(), {"run", scenario, "--json"});
  if (functional) a.push_back(*functional ? "--functional" : "--timing-only");
  for (const std::string& set : point_sets(p)) a.insert(a.end(), {"--set", set});
  for (const auto& [key, value] : sets) a.insert(a.end(), {"--set", key + "=" + value});
  return a;
}

SweepRecord sweep_record(const SweepPoint& point, int exit_code, const std::string& out,
                         const std::string& err) {
  Json p = Json::object();
  p["index"] = point.index;
  p["overrides"] = point_overrides(point);
  Json result;
  std::string error;
  if (exit_code == 0) {
    try {
      result = Json::parse(out);
      if (!result.is_object()) throw std::runtime_error("not a JSON object");
    } catch (const std::exception& e) {
      exit_code = 3;
      error = std::string("unreadable JSON from the run: ") + e.what();
    }
  } else {
    error = first_error_line(err);
    if (error.empty()) error = fmt::format("the run exited with {}", exit_code);
  }
  p["exit_code"] = exit_code;
  if (exit_code != 0) {
    p["error"] = error;
    return p;
  }
  for (const Figure& f : kFigures)
    if (f.wafer && result.contains(f.name)) p[f.name] = result.at(f.name);
  p["power_kw"] = result.contains("wafer_system") && result.at("wafer_system").is_object()
                      ? result.at("wafer_system").value("power_kw", Json())
                      : Json();
  // The GPU clusters on the same point, when the scenario compares.
  if (result.contains("gpu_baselines") && result.at("gpu_baselines").is_array()) {
    Json gpus = Json::array();
    for (const Json& g : result.at("gpu_baselines")) {
      Json row = Json::object();
      if (g.contains("system")) row["system"] = g.at("system");
      for (const Figure& f : kFigures)
        if (f.gpu && g.contains(f.name)) row[f.name] = g.at(f.name);
      gpus.push_back(std::move(row));
    }
    p["gpu_baselines"] = std::move(gpus);
  }
  return p;
}

std::optional<SweepRecord> run_sweep_point(const SweepOptions& o, const SweepPoint& point) {
  const ProcessOutput p = run_process(
      sweep_run_arguments(o.binary, o.scenario, o.presets, o.functional, point, o.sets), o.cancel);
  if (p.cancelled) return std::nullopt;
  return sweep_record(point, p.exit_code, p.out, p.err);
}

void run_sweep(const std::vector<SweepPoint>& points, const SweepOptions& options,
               const std::function<void(const SweepRecord&)>& finished) {
  std::atomic<std::size_t> next{0};
  std::mutex finished_mutex;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto cancelled = [&] { return options.cancel && options.cancel->load(); };
  auto worker = [&] {
    for (;;) {
      if (cancelled()) return;
      const std::size_t i = next.fetch_add(1);
      if (i >= points.size()) return;
      try {
        const std::optional<SweepRecord> r = run_sweep_point(options, points[i]);
        if (!r) return;  // cancelled while it ran
        const std::lock_guard<std::mutex> lock(finished_mutex);
        finished(*r);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = points.size();  // stop handing out points
        return;
      }
    }
  };
  const int jobs = std::max(1, std::min<int>(options.jobs, static_cast<int>(points.size())));
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<int> missing_points(const SweepSummary& s, const std::vector<SweepRecord>& records) {
  std::set<int> have;
  for (const SweepRecord& r : records) have.insert(r.at("index").get<int>());
  std::vector<int> missing;
  for (int i = s.shard.rank; i < s.points_total; i += s.shard.count)
    if (!have.count(i)) missing.push_back(i);
  return missing;
}

Json sweep_json(const SweepSummary& s, std::vector<SweepRecord> records) {
  sort_by_index(records);
  Json j = Json::object();
  j["format"] = "wafersim-sweep";
  j["scenario"] = s.scenario;
  j["shard"] = Json{{"rank", s.shard.rank}, {"count", s.shard.count}};
  j["points_total"] = s.points_total;
  const std::vector<int> missing = missing_points(s, records);
  j["complete"] = missing.empty();
  j["interrupted"] = s.interrupted;
  j["missing"] = missing;
  j["axes"] = sweep_axis_names();
  j["points"] = std::move(records);
  return j;
}

std::string sweep_table(std::vector<SweepRecord> records) {
  sort_by_index(records);
  // The table always has a column for each of the first six axes (model to
  // users, most of them as the run reports them); a later axis gets one
  // after users when some point sets it.
  constexpr std::size_t kFixedAxes = 6;
  struct Column {
    std::string name;
    std::string_view heading;
    std::size_t width;
  };
  std::vector<Column> extra;
  for (std::size_t i = kFixedAxes; i < kSweepAxisCount; ++i) {
    Column c{std::string(kSweepAxes[i].name), kSweepAxes[i].heading, kSweepAxes[i].heading.size()};
    bool set = false;
    for (const SweepRecord& r : records)
      if (const Json& o = r.at("overrides"); o.contains(c.name)) {
        set = true;
        c.width = std::max(c.width, cell(o.at(c.name)).size());
      }
    if (set) extra.push_back(std::move(c));
  }
  auto extra_cells = [&](const Json* o) {
    std::string cells;
    for (const Column& c : extra)
      cells += fmt::format(" {:>{}}", o ? text_or(*o, c.name.c_str(), "-") : std::string(c.heading),
                           c.width);
    return cells;
  };
  std::string s = fmt::format(
      "{:>5}  {:<18} {:<14} {:<9} {:>6} {:>6} {:>5}{} {:>12} {:>12} {:>10} {:>10} {:>8}  {}\n",
      "point", "model", "hardware", "precision", "wafers", "groups", "users", extra_cells(nullptr),
      "tok/s/user", "aggregate", "TTFT", "max ctx", "kW", "bottleneck");
  for (const SweepRecord& r : records) {
    const Json& o = r.at("overrides");
    const std::string groups = text_or(o, "layer_groups", "-");
    if (r.at("exit_code").get<int>() != 0) {
      s += fmt::format("{:>5}  {:<18} {:<14} {:<9} {:>6} {:>6} {:>5}{}  {}\n",
                       r.at("index").get<int>(), text_or(o, "model", "-"),
                       text_or(o, "hardware", "-"), text_or(o, "precision", "-"),
                       text_or(o, "wafers", "-"), groups, text_or(o, "users", "-"), extra_cells(&o),
                       r.value("error", std::string()));
      continue;
    }
    s += fmt::format(
        "{:>5}  {:<18} {:<14} {:<9} {:>6} {:>6} {:>5}{} {:>12} {:>12} {:>10} {:>10} {:>8}  {}\n",
        r.at("index").get<int>(), text_or(r, "model", "-"), text_or(r, "hardware", "-"),
        text_or(r, "precision", "-"), text_or(r, "wafers_used", "-"), groups,
        text_or(r, "users", "-"), extra_cells(&o),
        number_or(r, "decode_tokens_per_s_per_user", "{:.1f}"),
        number_or(r, "aggregate_tokens_per_s", "{:.1f}"), number_or(r, "ttft_s", "{:.3f}ms", 1e3),
        text_or(r, "max_context_tokens", "-"), number_or(r, "power_kw", "{:.1f}"),
        text_or(r, "bottleneck", ""));
    // The GPU clusters on the same workload, beneath the wafer's row.
    if (r.contains("gpu_baselines"))
      for (const Json& g : r.at("gpu_baselines"))
        s += fmt::format("{:>5}    {:<30} {:>12} {:>5} {:>12} {:>12} {:>10} {:>10} {:>8}  {}\n", "",
                         text_or(g, "system", "?"), fmt::format("{} GPUs", text_or(g, "gpus", "?")),
                         fmt::format("tp{}", text_or(g, "tp", "?")),
                         number_or(g, "decode_tokens_per_s_per_user", "{:.1f}"),
                         number_or(g, "aggregate_tokens_per_s", "{:.1f}"),
                         number_or(g, "ttft_s", "{:.3f}ms", 1e3), "",
                         number_or(g, "power_kw", "{:.1f}"), text_or(g, "bottleneck", ""));
  }
  return s;
}

std::string sweep_csv(std::vector<SweepRecord> records) {
  sort_by_index(records);
  // One row per point and system, every figure of the JSON, then the error.
  std::vector<const char*> columns;
  for (const Figure& f : kFigures) columns.push_back(f.name);
  columns.push_back("error");
  std::string s = "index,exit_code,system";
  for (const SweepAxis& a : kSweepAxes) s += fmt::format(",override_{}", a.name);
  for (const char* k : columns) s += std::string(",") + k;
  s += '\n';
  auto row = [&](const SweepRecord& r, const std::string& system, const Json& figures) {
    s += fmt::format("{},{},{}", r.at("index").get<int>(), r.at("exit_code").get<int>(),
                     csv_field(system));
    const Json& o = r.at("overrides");
    for (const SweepAxis& a : kSweepAxes) {
      const std::string name(a.name);
      s += ',' + csv_field(o.contains(name) ? cell(o.at(name)) : "");
    }
    for (const char* k : columns) {
      std::string v;
      if (figures.contains(k))
        v = cell(figures.at(k));
      else if (system != "wafer" && r.contains(k) &&
               (std::string(k) == "model" || std::string(k) == "precision" ||
                std::string(k) == "users"))
        v = cell(r.at(k));  // the workload the GPU cluster runs is the point's
      s += ',' + csv_field(v);
    }
    s += '\n';
  };
  for (const SweepRecord& r : records) {
    row(r, "wafer", r);
    if (r.contains("gpu_baselines"))
      for (const Json& g : r.at("gpu_baselines")) {
        Json f = g;
        f["hardware"] = g.value("system", std::string());
        row(r, g.value("system", std::string("gpu")), f);
      }
  }
  return s;
}

bool sweep_has_internal_failures(const std::vector<SweepRecord>& records) {
  // A point that does not fit (exit 1) is an answer; a crashed or internally
  // failing point fails the sweep.
  return std::any_of(records.begin(), records.end(),
                     [](const SweepRecord& r) { return r.at("exit_code").get<int>() > 1; });
}

}  // namespace wafersim::sim
