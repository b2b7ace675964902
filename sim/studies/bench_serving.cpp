#include "sim/studies/bench_serving.hpp"

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/serving/traffic.hpp"
#include "sim/studies/host_measures.hpp"
#include "sim/studies/serving_study.hpp"
#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace {

using Clock = HostClock;

CalibrationOptions calibration_options(const BenchServingOptions& o) {
  return self_calibration(o.scenario, o.preset_dir, o.jobs, o.cache_dir);
}

}  // namespace

int bench_serving(const BenchServingOptions& o) {
  const Scenario sc = load_scenario(o.scenario, o.preset_dir);
  if (!sc.traffic)
    throw ScenarioError(o.scenario, 0, 0, "traffic",
                        "bench serving needs a scenario with traffic:");
  const auto t0 = Clock::now();
  const std::vector<serving::Session> sessions = serving::generate_sessions(*sc.traffic);
  const TrafficSummary traffic = summarise_traffic(sessions);
  const double traffic_s = seconds_since(t0);
  std::optional<Calibration> cal;
  double calibrate_s = 0.0;
  if (sc.has_wafer()) {
    const auto t1 = Clock::now();
    cal = calibrate(sc, plan_calibration(sc, traffic.max_context, traffic.max_prompt),
                    calibration_options(o));
    calibrate_s = seconds_since(t1);
  }
  const auto t2 = Clock::now();
  const std::vector<analysis::ServingResult> results =
      serve_sessions(sc, sessions, cal, /*persistent_only=*/false);
  const double serve_s = seconds_since(t2);
  long long requests = 0;
  for (const auto& r : results) requests += static_cast<long long>(r.requests.size());
  const double rss = proc_status_bytes("VmHWM");
  if (o.json) {
    nlohmann::ordered_json j;
    j["scenario"] = sc.name;
    j["requests"] = traffic.requests;
    j["systems"] = results.size();
    j["traffic_s"] = traffic_s;
    j["calibration_s"] = calibrate_s;
    j["calibration_from_cache"] = cal && cal->from_cache;
    j["calibration_runs"] = cal ? cal->decode.size() + cal->prefill.size() : 0;
    j["serving_s"] = serve_s;
    j["requests_per_s_simulated"] = requests / std::max(serve_s, 1e-9);
    j["peak_rss_bytes"] = rss;
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  fmt::print("bench serving {}: {} requests ({} sessions) through {} system runs\n", sc.name,
             traffic.requests, traffic.sessions, results.size());
  fmt::print("  traffic drawn          {:8.2f} s\n", traffic_s);
  if (cal)
    fmt::print("  wafer step grid        {:8.2f} s ({} engine runs{})\n", calibrate_s,
               cal->decode.size() + cal->prefill.size(),
               cal->from_cache ? ", read from the cache" : "");
  fmt::print("  serving simulations    {:8.2f} s ({:.0f} requests/s simulated)\n", serve_s,
             requests / std::max(serve_s, 1e-9));
  fmt::print("  peak memory            {:8.2f} GiB\n", rss / (1024.0 * 1024.0 * 1024.0));
  return 0;
}

int bench_steps(const BenchServingOptions& o) {
  const Scenario sc = load_scenario(o.scenario, o.preset_dir);
  if (!sc.traffic || !sc.has_wafer())
    throw ScenarioError(o.scenario, 0, 0, "traffic",
                        "bench steps needs a scenario with traffic: and a wafer (hardware:)");
  const std::vector<serving::Session> sessions = serving::generate_sessions(*sc.traffic);
  const CalibrationOptions co = calibration_options(o);
  const TrafficSummary traffic = summarise_traffic(sessions);
  const Calibration cal =
      calibrate(sc, plan_calibration(sc, traffic.max_context, traffic.max_prompt), co);
  const std::unique_ptr<serving::WaferSteps> model = wafer_steps(sc, cal);
  const CalibrationPlan& p = cal.plan;
  // Held-out points: between grid values in every coordinate.
  struct Point {
    int users;
    long long context, tokens;
  };
  std::vector<Point> points;
  for (std::size_t i = 0; i + 1 < p.users.size(); i += 2) {
    const int u = (p.users[i] + p.users[i + 1] + 1) / 2;
    if (u == p.users[i] || u == p.users[i + 1]) continue;
    for (std::size_t j = 0; j + 1 < p.contexts.size(); j += 2)
      points.push_back({u, (p.contexts[j] + p.contexts[j + 1]) / 2, 0});
  }
  for (std::size_t i = 0; i + 1 < p.prefill_tokens.size(); ++i)
    points.push_back(
        {1, p.prefill_contexts.back() / 2, (p.prefill_tokens[i] + p.prefill_tokens[i + 1]) / 2});
  // Prompts sent together: between the grid's numbers in flight (every
  // other cell), at the first two prompt lengths' midpoint.
  const std::vector<long long> lengths = measured_prompt_lengths(p);
  if (lengths.size() > 1)
    for (std::size_t i = 0; i + 1 < p.stream_users.size(); i += 2) {
      const int u = (p.stream_users[i] + p.stream_users[i + 1] + 1) / 2;
      if (u == p.stream_users[i] || u == p.stream_users[i + 1]) continue;
      points.push_back({u, 0, (lengths[0] + lengths[1]) / 2});
    }
  fmt::print(
      "bench steps {}: the step grid ({} decode, {} prefill points) against {} direct "
      "engine runs off the grid\n\n",
      sc.name, cal.decode.size(), cal.prefill.size(), points.size());
  fmt::print("  {:<8} {:>6} {:>9} {:>8} {:>14} {:>14} {:>8}\n", "kind", "users", "context",
             "tokens", "grid ms", "engine ms", "error");
  double worst = 0.0;
  const auto row = [&](const char* kind, const Point& pt, double grid, double direct) {
    const double err = grid / direct - 1.0;
    worst = std::max(worst, std::fabs(err));
    fmt::print("  {:<8} {:>6} {:>9} {:>8} {:>14.4f} {:>14.4f} {:>+7.2f}%\n", kind, pt.users,
               pt.context, pt.tokens, grid * 1e3, direct * 1e3, 100.0 * err);
  };
  for (const Point& pt : points) {
    const ProcessOutput out =
        run_process(calibration_run_arguments(co, p, pt.users, pt.context, pt.tokens));
    if (out.exit_code != 0)
      throw std::runtime_error("held-out run failed: " + first_error_line(out.err));
    const nlohmann::json r = nlohmann::json::parse(out.out);
    double direct = 0.0, grid = 0.0;
    const auto n = static_cast<double>(pt.tokens);
    if (pt.tokens == 0) {
      direct = r.at("inter_token_latency_s").get<double>();
      grid = model->decode_step_s(
          pt.users, static_cast<double>(pt.context + 1 + (p.generate_tokens - 1) / 2));
    } else {
      // With several prompts: the last one's prefill.
      direct = measured_prefill_s(r, pt.users);
      grid = model->prefill_s(n, static_cast<double>(pt.context));
      if (pt.users > 1)
        grid +=
            model->prefill_occupancy_s(n, 0.0) * model->stream_share(pt.users, n) * (pt.users - 1);
    }
    row(pt.tokens == 0 ? "decode" : pt.users > 1 ? "stream" : "prefill", pt, grid, direct);
    // The first prompt of those sent together (its first token; the others'
    // come evenly between it and the last's).
    if (pt.tokens > 0 && pt.users > 1)
      row("first", pt, model->stream_prefill_s(pt.users, n, 0), measured_first_prefill_s(r));
  }
  fmt::print("\n  largest error {:.2f}% (target: within 5%): {}\n", 100.0 * worst,
             worst <= 0.05 ? "met" : "NOT met");
  return 0;
}

}  // namespace wafersim::sim
