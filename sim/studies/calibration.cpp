#include "sim/studies/calibration.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/sram.hpp"
#include "models/gpu/cluster_model.hpp"
#include "models/sha256.hpp"
#include "sim/engine/system.hpp"
#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;

namespace {

// The scenario with the deployment's reservation and a one-token workload:
// what the planner is asked for `users` sequences of `context` positions.
Scenario reserved(const Scenario& sc, int users, long long context, int wafers) {
  Scenario t = sc;
  t.traffic.reset();
  t.placement.reserve_users = users;
  t.placement.reserve_context_tokens = static_cast<int>(context);
  t.workload = Workload{};
  t.workload.prompt_ids = {0};
  t.workload.generate_tokens = 1;
  t.workload.users = 1;
  if (wafers > 0) {
    t.wafers = wafers;
    t.wafers_auto = false;
  }
  return t;
}

std::optional<Placement> try_plan(const Scenario& sc, int users, long long context, int wafers) {
  const Scenario t = reserved(sc, users, context, wafers);
  try {
    return plan_system(t, placement_request(t));
  } catch (const fabric::FitError&) {
    return std::nullopt;
  }
}

// Powers of two below `top`, then `top`.
std::vector<int> users_axis(int top) {
  std::vector<int> a;
  for (int u = 1; u < top; u *= 2) a.push_back(u);
  a.push_back(top);
  return a;
}

template <class T>
std::vector<T> distinct(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string binary_digest(const fs::path& binary) {
  std::ifstream in(binary, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string s = bytes.str();
  return models::sha256_hex(s.data(), s.size());
}

nlohmann::json points_json(const std::vector<serving::GridPoint>& points) {
  nlohmann::json a = nlohmann::json::array();
  for (const serving::GridPoint& p : points)
    a.push_back({p.users, p.context, p.tokens, p.step_s, p.first_s});
  return a;
}

std::vector<serving::GridPoint> points_from(const nlohmann::json& a) {
  std::vector<serving::GridPoint> out;
  for (const auto& row : a)
    out.push_back({row.at(0).get<int>(), row.at(1).get<long long>(), row.at(2).get<long long>(),
                   row.at(3).get<double>(), row.at(4).get<double>()});
  return out;
}

}  // namespace

CalibrationPlan plan_calibration(const Scenario& sc, long long traffic_max_context,
                                 long long traffic_max_prompt) {
  CalibrationPlan plan;
  plan.max_context =
      sc.deployment.max_context > 0 ? sc.deployment.max_context : traffic_max_context;
  plan.prefill_block = sc.deployment.wafer_prefill_block;
  if (plan.max_context > sc.model.max_position)
    throw ScenarioError(
        sc.source_file, 0, 0, "deployment.max_context",
        fmt::format("is {} tokens (the traffic's longest prompt + output when auto), beyond "
                    "model {}'s max_position {}; shorten the traffic or give a model with a "
                    "longer context",
                    plan.max_context, sc.model.name, sc.model.max_position));
  // With wafers: auto, the fewest wafers that hold one sequence of max_context.
  const std::optional<Placement> one = try_plan(sc, 1, plan.max_context, 0);
  if (!one) {
    // Planned again to let the FitError say why.
    const Scenario t = reserved(sc, 1, plan.max_context, 0);
    (void)plan_system(t, placement_request(t));
  }
  plan.wafers = one->wafers;
  int batch = sc.deployment.wafer.max_batch;
  if (batch == 0) {
    // The most sequences of max_context that fit: doubling, then bisection.
    int lo = 1, hi = 2;
    while (hi <= 65536 && try_plan(sc, hi, plan.max_context, plan.wafers)) {
      lo = hi;
      hi *= 2;
    }
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (try_plan(sc, mid, plan.max_context, plan.wafers) ? lo : hi) = mid;
    }
    batch = lo;
  } else if (!try_plan(sc, batch, plan.max_context, plan.wafers)) {
    const Scenario t = reserved(sc, batch, plan.max_context, plan.wafers);
    (void)plan_system(t, placement_request(t));  // throws the FitError naming the figures
  }
  plan.max_batch = batch;
  plan.slot_tokens = try_plan(sc, batch, plan.max_context, plan.wafers)->max_context_tokens;
  plan.users = users_axis(batch);
  // Decode points: cached positions such that cached + 1 prompt token +
  // generate_tokens fit the reservation.
  const long long top = plan.max_context - plan.generate_tokens - 1;
  plan.contexts = distinct<long long>({0, top / 4, top / 2, std::max(0LL, top)});
  // Prefill points: blocks x 4^k up to half the context, after 0 and half
  // the context cached.
  const long long half = std::max<long long>(1, plan.max_context / 2 - 1);
  for (long long n = plan.prefill_block; n <= half; n *= 4) plan.prefill_tokens.push_back(n);
  if (plan.prefill_tokens.size() < 2) plan.prefill_tokens = distinct<long long>({1, half});
  // The traffic's longest prompt, where the grid stops short of it: a
  // prompt's prefill grows faster than linearly (attention over the prompt).
  const long long longest = std::min(traffic_max_prompt, plan.max_context - 1);
  if (longest > plan.prefill_tokens.back()) plan.long_prompt_tokens = longest;
  // Prompts in flight together: the decode grid's batch sizes above one.
  plan.stream_users.assign(plan.users.begin() + 1, plan.users.end());
  plan.prefill_contexts =
      distinct<long long>({0, std::max(0LL, plan.max_context - 2 - plan.prefill_tokens.back())});
  return plan;
}

namespace {

// The keys a calibration run sets on top of the study's scenario (and its
// own --set keys): no serving study, no comparison, the deployment's wafers
// and reservation, and the point's workload.
std::vector<std::pair<std::string, std::string>> point_sets(const CalibrationOptions& o,
                                                            const CalibrationPlan& plan, int users,
                                                            long long context, long long tokens) {
  // The study's own --set keys, but none under a section the run removes:
  // they change nothing the run simulates, so they neither reach it nor the
  // cache key (a serve-time choice such as deployment.wafer.stage_order
  // keeps the grid).
  static constexpr std::array<std::string_view, 6> kRemoved = {
      "traffic", "deployment", "slo", "serving", "speculative_decoding", "compare_with"};
  std::vector<std::pair<std::string, std::string>> sets;
  for (const auto& set : o.extra_sets) {
    const std::string_view key = set.first;
    const bool removed = std::any_of(kRemoved.begin(), kRemoved.end(), [key](std::string_view r) {
      return key == r || (key.starts_with(r) && key.size() > r.size() && key[r.size()] == '.');
    });
    if (!removed) sets.push_back(set);
  }
  for (const std::string_view key : kRemoved)
    sets.emplace_back(std::string(key), key == "compare_with" ? "[]" : "null");
  sets.emplace_back("wafers", std::to_string(plan.wafers));
  sets.emplace_back("placement.reserve", fmt::format("{{users: {}, context_tokens: {}}}",
                                                     plan.max_batch, plan.max_context));
  sets.emplace_back(
      "workload",
      tokens == 0
          ? fmt::format("{{prompt_tokens: 1, generate_tokens: {}, users: {}, cached_tokens: {}, "
                        "seed: 1}}",
                        plan.generate_tokens, users, context)
          : fmt::format("{{prompt_tokens: {}, generate_tokens: 1, users: {}, cached_tokens: {}, "
                        "prefill_block: {}, seed: 1}}",
                        tokens, users, context, plan.prefill_block));
  return sets;
}

}  // namespace

CalibrationOptions self_calibration(const std::string& scenario, const fs::path& presets, int jobs,
                                    const fs::path& cache_dir) {
  CalibrationOptions c;
  c.binary = fs::read_symlink("/proc/self/exe");
  c.scenario = scenario;
  c.presets = presets.string();
  const unsigned hw = std::thread::hardware_concurrency();
  c.jobs = jobs > 0 ? jobs : static_cast<int>(hw > 0 ? hw : 1);
  c.cache_dir = cache_dir;
  return c;
}

long long point_work(const CalibrationPlan& plan, int users, long long context, long long tokens) {
  constexpr long long kMessage = 16;  // units per message beside its rows
  long long per_user = 0;
  if (tokens == 0) {
    per_user = plan.generate_tokens * (kMessage + 1);  // the prompt's token, then the steps
  } else {
    const long long block = std::max(1, plan.prefill_block);
    per_user = (tokens + block - 1) / block * kMessage + tokens;
  }
  const long long work = std::max(1, users) * per_user;
  return work + work * std::max(0LL, context) / 8192;
}

std::vector<long long> measured_prompt_lengths(const CalibrationPlan& plan) {
  std::vector<long long> n = plan.prefill_tokens;
  if (plan.long_prompt_tokens > 0) n.push_back(plan.long_prompt_tokens);
  return n;
}

std::vector<std::pair<int, long long>> stream_points(const CalibrationPlan& plan) {
  std::vector<std::pair<int, long long>> out;
  const std::vector<long long> lengths = measured_prompt_lengths(plan);
  for (const int u : plan.stream_users)
    for (const long long n : lengths)
      if (u == plan.stream_users.front() || u * n <= plan.stream_token_budget)
        out.emplace_back(u, n);
  return out;
}

namespace {

// Each sequence's prefill in a run (by user): prefill_s is the mean over
// sequences of the cycle their prompt's last block ended less the prompts'
// input I/O, so a sequence's is the mean plus how much later than the mean
// its prompt ended.
std::vector<double> prefill_by_user(const nlohmann::json& run) {
  const double mean = run.at("prefill_s").get<double>();
  std::vector<double> ends;
  for (const auto& t : run.at("token_records")) {
    if (!t.at("prefill").get<bool>()) continue;
    const auto u = t.at("user").get<std::size_t>();
    if (u >= ends.size()) ends.resize(u + 1, 0.0);
    ends[u] = std::max(ends[u], t.at("end_cycle").get<double>());
  }
  if (ends.empty()) return {mean};
  double sum = 0.0;
  for (const double e : ends) sum += e;
  const double mean_end = sum / static_cast<double>(ends.size());
  const double clock = run.at("clock_hz").get<double>();
  std::vector<double> out;
  for (const double e : ends) out.push_back(mean + (e - mean_end) / clock);
  return out;
}

}  // namespace

double measured_prefill_s(const nlohmann::json& run, int users) {
  if (users <= 1) return run.at("prefill_s").get<double>();
  const std::vector<double> each = prefill_by_user(run);
  return *std::max_element(each.begin(), each.end());
}

double measured_first_prefill_s(const nlohmann::json& run) {
  return prefill_by_user(run).front();
}

std::vector<std::string> calibration_run_arguments(const CalibrationOptions& o,
                                                   const CalibrationPlan& plan, int users,
                                                   long long context, long long tokens) {
  std::vector<std::string> argv = {o.binary.string()};
  if (!o.presets.empty()) {
    argv.push_back("--presets");
    argv.push_back(o.presets);
  }
  for (const char* a : {"run", "", "--json", "--timing-only", "--threads", "1"})
    argv.push_back(*a ? a : o.scenario);
  for (const auto& [key, value] : point_sets(o, plan, users, context, tokens)) {
    argv.push_back("--set");
    argv.push_back(key + "=" + value);
  }
  return argv;
}

Calibration calibrate(const Scenario& sc, const CalibrationPlan& plan,
                      const CalibrationOptions& o) {
  Calibration cal;
  cal.plan = plan;
  // The points, decode first.
  struct Job {
    int users;
    long long context, tokens;
  };
  std::vector<Job> jobs;
  for (const int u : plan.users)
    for (const long long c : plan.contexts) jobs.push_back({u, c, 0});
  for (const long long n : plan.prefill_tokens)
    for (const long long c : plan.prefill_contexts) jobs.push_back({1, c, n});
  if (plan.long_prompt_tokens > 0) jobs.push_back({1, 0, plan.long_prompt_tokens});
  for (const auto& [u, n] : stream_points(plan)) jobs.push_back({u, 0, n});

  // The cache key: the binary, the scenario a calibration run resolves to
  // (without its workload, which the points' keys below give) and every
  // point's keys. A change of traffic, SLO or GPU systems keeps the grid.
  ScenarioOverrides child;
  child.set = point_sets(o, plan, 1, 0, 0);
  child.set.back().second = "{prompt_tokens: 1, generate_tokens: 2}";
  std::string key_text = binary_digest(o.binary) + "\n";
  // The resolved YAML without its comments (they name the file it came from).
  std::istringstream resolved(
      load_scenario(o.scenario, o.presets.empty() ? default_preset_dir() : fs::path(o.presets),
                    child)
          .resolved_yaml);
  for (std::string line; std::getline(resolved, line);)
    if (!line.starts_with("#")) key_text += line + "\n";
  for (const Job& j : jobs)
    for (const auto& [k, v] : point_sets(o, plan, j.users, j.context, j.tokens))
      key_text += k + "=" + v + "\n";
  const std::string key = models::sha256_hex(key_text.data(), key_text.size());
  if (!o.cache_dir.empty()) {
    cal.cache_file = o.cache_dir / ("steps-" + key.substr(0, 32) + ".json");
    std::ifstream in(cal.cache_file);
    if (in) {
      try {
        const nlohmann::json j = nlohmann::json::parse(in);
        if (j.at("key").get<std::string>() == key &&
            j.at("format_version").get<int>() == kStepGridFormatVersion) {
          cal.decode = points_from(j.at("decode"));
          cal.prefill = points_from(j.at("prefill"));
          cal.from_cache = true;
          return cal;
        }
      } catch (const std::exception&) {
        // A damaged cache file is measured again and replaced.
      }
    }
  }

  std::vector<double> step(jobs.size(), 0.0), first(jobs.size(), 0.0);
  std::vector<std::string> errors(jobs.size());
  std::vector<long long> work(jobs.size());
  CalibrationProgress progress;
  progress.runs_total = static_cast<int>(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    work[i] = point_work(plan, jobs[i].users, jobs[i].context, jobs[i].tokens);
    progress.work_total += work[i];
  }
  // The dearest runs first (by their estimated work; ties in grid order), so
  // that the last ones to finish are short and no run is left alone at the
  // end while the other workers idle. Each run is its own process: the
  // order changes no result.
  std::vector<std::size_t> order(jobs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&work](std::size_t a, std::size_t b) { return work[a] > work[b]; });
  std::atomic<std::size_t> next{0};
  std::mutex progress_mutex;
  if (o.progress) o.progress(progress);  // shown from the start: the first runs are long
  auto worker = [&] {
    for (std::size_t k = next++; k < jobs.size(); k = next++) {
      const std::size_t i = order[k];
      const Job& j = jobs[i];
      const ProcessOutput out =
          run_process(calibration_run_arguments(o, plan, j.users, j.context, j.tokens));
      if (out.exit_code != 0) {
        errors[i] = first_error_line(out.err);
        if (errors[i].empty()) errors[i] = fmt::format("exit code {}", out.exit_code);
      } else {
        try {
          const nlohmann::json r = nlohmann::json::parse(out.out);
          step[i] = j.tokens == 0 ? r.at("inter_token_latency_s").get<double>()
                                  : measured_prefill_s(r, j.users);
          if (j.tokens > 0 && j.users > 1) first[i] = measured_first_prefill_s(r);
        } catch (const std::exception& e) {
          errors[i] = std::string("unreadable result: ") + e.what();
        }
      }
      const std::lock_guard<std::mutex> lock(progress_mutex);
      ++progress.runs_done;
      progress.work_done += work[i];
      if (o.progress) o.progress(progress);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, o.jobs); ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!errors[i].empty())
      throw std::runtime_error(
          fmt::format("calibration point ({} users, {} cached, {} prompt tokens) failed: {}",
                      jobs[i].users, jobs[i].context, jobs[i].tokens, errors[i]));
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    if (j.tokens == 0) {
      // The decode steps measured run at cached + 1 .. cached + generate - 1:
      // their mean context.
      const long long mean = j.context + 1 + (plan.generate_tokens - 1) / 2;
      cal.decode.push_back({j.users, mean, 0, step[i]});
    } else {
      cal.prefill.push_back({j.users, j.context, j.tokens, step[i], first[i]});
    }
  }
  if (!cal.cache_file.empty()) {
    nlohmann::ordered_json j;
    j["format"] = "wafersim-step-grid";
    j["format_version"] = kStepGridFormatVersion;
    j["key"] = key;
    j["scenario"] = sc.name;
    j["max_batch"] = plan.max_batch;
    j["max_context"] = plan.max_context;
    j["slot_tokens"] = plan.slot_tokens;
    j["wafers"] = plan.wafers;
    j["decode_columns"] = {"users", "context", "tokens", "step_s", "first_s"};
    j["decode"] = points_json(cal.decode);
    j["prefill"] = points_json(cal.prefill);
    std::error_code ec;
    fs::create_directories(o.cache_dir, ec);
    write_text_atomically(cal.cache_file, j.dump(1) + "\n");
  }
  return cal;
}

std::unique_ptr<serving::WaferSteps> wafer_steps(const Scenario& sc, const Calibration& cal) {
  serving::KvCapacity kv;
  kv.slots = cal.plan.max_batch;
  kv.slot_tokens = cal.plan.slot_tokens;
  return std::make_unique<serving::WaferSteps>(
      cal.decode, cal.prefill, kv,
      models::gpu::kv_bytes_per_token(sc.model, models::dtype_bits(sc.precision)),
      sc.hardware.io_bandwidth_bytes_per_s);
}

fs::path default_cache_dir() {
  if (const char* d = std::getenv("WAFERSIM_CACHE"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
    return fs::path(x) / "wafersim";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    return fs::path(h) / ".cache" / "wafersim";
  return {};
}

}  // namespace wafersim::sim
