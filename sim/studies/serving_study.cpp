#include "sim/studies/serving_study.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "sim/placement/request.hpp"
#include "sim/serving/simulator.hpp"

namespace wafersim::sim {

TrafficSummary summarise_traffic(const std::vector<serving::Session>& sessions) {
  TrafficSummary t;
  t.sessions = static_cast<int>(sessions.size());
  double prompt = 0.0, fresh = 0.0, output = 0.0;
  double first = 0.0, last = 0.0;
  bool any_open = false;
  for (const serving::Session& s : sessions) {
    long long context = 0;
    t.closed_loop |= s.closed_loop;
    for (const serving::Turn& turn : s.turns) {
      const long long p = (turn.extends_context ? context : 0) + turn.new_prompt_tokens;
      prompt += static_cast<double>(p);
      fresh += turn.new_prompt_tokens;
      output += turn.output_tokens;
      context = p + turn.output_tokens;
      t.max_context = std::max(t.max_context, context);
      t.max_prompt = std::max(t.max_prompt, p);
      ++t.requests;
      if (!s.closed_loop) {
        first = any_open ? std::min(first, turn.at_s) : turn.at_s;
        last = any_open ? std::max(last, turn.at_s) : turn.at_s;
        any_open = true;
      }
    }
  }
  if (t.requests > 0) {
    const auto n = static_cast<double>(t.requests);
    t.mean_prompt_tokens = prompt / n;
    t.mean_new_prompt_tokens = fresh / n;
    t.mean_output_tokens = output / n;
  }
  t.duration_s = last - first;
  return t;
}

namespace {

// One system as the simulation steps it.
struct SystemModel {
  std::unique_ptr<serving::StepModel> steps;
  serving::SimulationOptions options;
};

serving::SimulationOptions base_options(const Scenario& sc) {
  serving::SimulationOptions o;
  o.prefill = sc.deployment.prefill;
  o.chunk_tokens = sc.deployment.chunk_tokens;
  o.prefill_replicas = sc.deployment.prefill_replicas;
  o.router = sc.deployment.router;
  o.keep_kv_between_turns = sc.deployment.keep_kv_between_turns;
  o.slo = sc.slo;
  return o;
}

struct Split {
  int tp = 1, pp = 1;
};

// A GPU replica's split for serving: gpu_parallelism where it fixes one, else
// the fewest GPUs (tensor parallel before pipeline at equal count) whose KV
// cache holds the batch at the traffic's mean prompt + output; the split with
// the most KV room when none does. Throws GpuFitError when no split holds
// the weights.
Split serving_split(const Scenario& sc, const models::gpu::ClusterSpec& c, int batch,
                    const TrafficSummary& traffic) {
  const int bits = models::dtype_bits(sc.precision);
  const double need = batch * (traffic.mean_prompt_tokens + traffic.mean_output_tokens);
  std::vector<Split> candidates;
  for (int tp = 1; tp <= c.gpus_per_node; tp *= 2)
    for (int pp = 1; pp <= std::min(sc.model.num_layers, c.gpus_per_node * c.max_nodes); ++pp)
      if ((sc.gpu.tp == 0 || tp == sc.gpu.tp) && (sc.gpu.pp == 0 || pp == sc.gpu.pp))
        candidates.push_back({tp, pp});
  std::stable_sort(candidates.begin(), candidates.end(), [](const Split& a, const Split& b) {
    return a.tp * a.pp != b.tp * b.pp ? a.tp * a.pp < b.tp * b.pp : a.tp > b.tp;
  });
  std::optional<Split> roomiest;
  double most = -1.0;
  for (const Split& sp : candidates) {
    const int nodes = (sp.tp * sp.pp + c.gpus_per_node - 1) / c.gpus_per_node;
    if (nodes > c.max_nodes) continue;
    try {
      const models::gpu::ReplicaTiming t(c, sc.model, bits, sp.tp, sp.pp);
      if (t.kv_capacity_tokens() >= need) return sp;
      if (t.kv_capacity_tokens() > most) {
        most = t.kv_capacity_tokens();
        roomiest = sp;
      }
    } catch (const models::gpu::GpuFitError&) {
    }
  }
  if (!roomiest)
    throw models::gpu::GpuFitError(fmt::format("{}: no split of up to {} GPUs holds {}", c.name,
                                               c.gpus_per_node * c.max_nodes, sc.model.name));
  return *roomiest;
}

std::vector<SystemModel> system_models(const Scenario& sc,
                                       const std::optional<Calibration>& calibration,
                                       const TrafficSummary& traffic) {
  if (sc.speculative)
    throw ScenarioError(sc.source_file, 0, 0, "speculative_decoding",
                        "is not modelled in serving studies yet (wafersim run times it for one "
                        "batch); leave it out of a scenario with traffic:");
  std::vector<SystemModel> out;
  const int bits = models::dtype_bits(sc.precision);
  if (sc.has_wafer() && calibration) {
    SystemModel m;
    m.steps = wafer_steps(sc, *calibration);
    m.options = base_options(sc);
    m.options.system = "wafer";
    m.options.fifo_stages = sc.deployment.wafer_stage_order == serving::StageOrder::fifo;
    m.options.replicas = sc.deployment.wafer.replicas;
    m.options.max_batch = calibration->plan.max_batch;
    m.options.chips_per_replica = calibration->plan.wafers;
    m.options.power_w_per_replica = sc.hardware.system_power_w * calibration->plan.wafers;
    m.options.description = fmt::format(
        "{} x {} {} ({}, batch {}, {} positions per sequence{})", sc.deployment.wafer.replicas,
        calibration->plan.wafers, sc.hardware.name, strategy_name(sc.placement.strategy),
        calibration->plan.max_batch, calibration->plan.slot_tokens,
        m.options.fifo_stages ? "" : ", decode tokens pass prompt blocks");
    out.push_back(std::move(m));
  }
  for (const models::gpu::ClusterSpec& c : sc.gpu.systems) {
    const int batch = sc.deployment.gpu.max_batch > 0 ? sc.deployment.gpu.max_batch : 256;
    const Split e = serving_split(sc, c, batch, traffic);
    SystemModel m;
    m.steps = std::make_unique<serving::GpuSteps>(c, sc.model, bits, e.tp, e.pp, batch);
    m.options = base_options(sc);
    m.options.system = c.name;
    m.options.replicas = sc.deployment.gpu.replicas;
    m.options.max_batch = batch;
    m.options.chips_per_replica = e.tp * e.pp;
    m.options.power_w_per_replica =
        c.node_power_w * static_cast<double>(e.tp * e.pp) / c.gpus_per_node;
    m.options.description = fmt::format("{} x (tp {} pp {}) {}, batch {}",
                                        sc.deployment.gpu.replicas, e.tp, e.pp, c.gpu.name, batch);
    out.push_back(std::move(m));
  }
  return out;
}

// The connections a study simulates: none without a serving stack, else
// per request and persistent (or persistent alone).
std::vector<serving::StackOptions> stacks(const Scenario& sc, bool persistent_only) {
  if (!sc.serving) return {serving::StackOptions{}};
  std::vector<serving::StackOptions> out;
  for (const bool persistent : {false, true}) {
    if (persistent_only && !persistent) continue;
    serving::StackOptions s;
    s.overhead = *sc.serving;
    s.persistent = persistent;
    s.present = true;
    out.push_back(s);
  }
  return out;
}

// Open-loop sessions with every arrival time divided by `speedup`.
std::vector<serving::Session> scaled(std::vector<serving::Session> sessions, double speedup) {
  for (serving::Session& s : sessions)
    for (serving::Turn& t : s.turns) t.at_s /= speedup;
  return sessions;
}

}  // namespace

std::vector<analysis::ServingResult> serve_sessions(
    const Scenario& sc, const std::vector<serving::Session>& sessions,
    const std::optional<Calibration>& calibration, bool persistent_only,
    const std::function<void(const std::string&, long long, long long)>& progress) {
  const TrafficSummary traffic = summarise_traffic(sessions);
  std::vector<analysis::ServingResult> out;
  for (SystemModel& m : system_models(sc, calibration, traffic)) {
    for (const serving::StackOptions& stack : stacks(sc, persistent_only)) {
      m.options.stack = stack;
      if (progress) {
        const std::string what = "serving on " + m.options.system;
        m.options.progress = [&progress, what](long long d, long long n) { progress(what, d, n); };
      }
      out.push_back(serving::simulate(sessions, *m.steps, m.options));
    }
  }
  return out;
}

ServingStudy run_serving_study(const Scenario& sc, const ServingStudyOptions& o) {
  ServingStudy study;
  const std::vector<serving::Session> sessions = serving::generate_sessions(*sc.traffic);
  study.traffic = summarise_traffic(sessions);
  if (sc.has_wafer()) {
    const CalibrationPlan plan =
        plan_calibration(sc, study.traffic.max_context, study.traffic.max_prompt);
    study.calibration = calibrate(sc, plan, o.calibration);
  }
  study.results = serve_sessions(sc, sessions, study.calibration, false, o.progress);
  return study;
}

std::vector<CapacityRow> capacity_search(const Scenario& sc,
                                         const std::optional<Calibration>& calibration,
                                         const CapacityOptions& o) {
  const std::vector<serving::Session> base = serving::generate_sessions(*sc.traffic);
  const TrafficSummary traffic = summarise_traffic(base);
  // The load searched: the request rate of open-loop traffic (its arrival
  // times scaled), or the number of closed-loop sessions (drawn again).
  const bool closed = sc.traffic->kind == serving::TrafficSpec::Kind::sessions;
  if (!closed && (traffic.requests < 2 || traffic.duration_s <= 0.0))
    throw ScenarioError(sc.source_file, 0, 0, "traffic",
                        "capacity scales the request rate of open-loop traffic: it needs at least "
                        "two requests at different times");
  const double base_rate =
      closed ? 0.0 : static_cast<double>(traffic.requests - 1) / traffic.duration_s;
  auto traffic_at = [&](double load) {
    if (!closed) return scaled(base, load / base_rate);
    serving::TrafficSpec t = *sc.traffic;
    t.sessions = static_cast<int>(std::lround(load));
    return serving::generate_sessions(t);
  };
  Scenario one = sc;
  one.deployment.wafer.replicas = 1;
  one.deployment.gpu.replicas = 1;
  std::vector<CapacityRow> rows;
  const std::vector<SystemModel> probe = system_models(one, calibration, traffic);
  for (std::size_t k = 0; k < probe.size(); ++k) {
    // One system at a time: a scenario whose comparison holds only it.
    Scenario only = one;
    const bool wafer = probe[k].options.system == "wafer";
    if (!wafer) {
      only.gpu.systems = {sc.gpu.systems[k - (sc.has_wafer() && calibration ? 1 : 0)]};
    } else {
      only.gpu.systems.clear();
    }
    const std::optional<Calibration> cal = wafer ? calibration : std::nullopt;
    auto serve_at = [&](const Scenario& s, double load) {
      return serve_sessions(s, traffic_at(load), cal, true).front();
    };
    CapacityRow row;
    row.system = probe[k].options.system;
    row.description = probe[k].options.description;
    const auto ok = [&](const analysis::ServingResult& r) { return r.slo_met && r.rejected == 0; };
    // One replica at `load`, kept among the row's probes.
    const auto probe_at = [&](double load) {
      analysis::ServingResult r = serve_at(only, load);
      row.probes.push_back({load, ok(r), r.rejected, r.slo_attainment, r.slo_ttft_s,
                            r.slo_tokens_per_s, r.output_tokens_per_s});
      return r;
    };
    double lo = closed ? 1.0 : o.rate_low, hi = closed ? o.max_sessions : o.rate_high;
    analysis::ServingResult at_lo = probe_at(lo);
    if (ok(at_lo)) {
      for (int i = 0; i < o.iterations && (!closed || hi - lo > 1.0); ++i) {
        const double mid = closed ? std::floor(0.5 * (lo + hi)) : std::sqrt(lo * hi);
        analysis::ServingResult r = probe_at(mid);
        if (ok(r)) {
          lo = mid;
          at_lo = std::move(r);
        } else {
          hi = mid;
        }
        if (o.progress) o.progress("searching " + row.system, i + 1, o.iterations);
      }
      row.max_rate_per_replica = lo;
    }
    row.at_max = std::move(at_lo);
    if (o.target_rate > 0.0 && row.max_rate_per_replica > 0.0) {
      row.target_rate = o.target_rate;
      int n = std::max(1, static_cast<int>(std::ceil(o.target_rate / row.max_rate_per_replica)));
      // Checked by simulating the whole deployment at the target rate; the
      // router's imbalance can need one replica more.
      for (int tries = 0; tries < 4; ++tries, ++n) {
        Scenario many = only;
        many.deployment.wafer.replicas = n;
        many.deployment.gpu.replicas = n;
        const analysis::ServingResult r = serve_at(many, o.target_rate);
        row.target_checks.push_back({n, ok(r)});
        if (ok(r)) {
          row.target_checked = true;
          row.replicas_needed = n;
          row.chips_needed = r.chips;
          row.power_w_needed = r.power_w;
          break;
        }
      }
      if (!row.target_checked) {
        row.replicas_needed = n - 1;
        row.chips_needed =
            static_cast<int>(std::lround(probe[k].options.chips_per_replica)) * (n - 1);
        row.power_w_needed = probe[k].options.power_w_per_replica * (n - 1);
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace wafersim::sim
