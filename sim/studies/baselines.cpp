#include "sim/studies/baselines.hpp"

#include <algorithm>
#include <string>

namespace wafersim::sim {

namespace {

void apply_serving(analysis::SystemFigures& f,
                   const std::optional<models::gpu::ServingOverhead>& o) {
  if (!o) return;
  const auto fresh = models::gpu::user_seen(f.decode_tokens_per_s_per_user, f.ttft_s, *o, false);
  const auto kept = models::gpu::user_seen(f.decode_tokens_per_s_per_user, f.ttft_s, *o, true);
  f.end_to_end = analysis::EndToEndFigures{fresh.decode_tokens_per_s_per_user, fresh.ttft_s};
  f.end_to_end_persistent =
      analysis::EndToEndFigures{kept.decode_tokens_per_s_per_user, kept.ttft_s};
}

}  // namespace

std::optional<analysis::Baselines> compare_with_gpus(const Scenario& sc,
                                                     const analysis::RunResult& r,
                                                     const analysis::Metrics& m) {
  if (sc.gpu.systems.empty() && !sc.speculative && !sc.serving) return std::nullopt;
  analysis::Baselines b;

  // The wafer, from the simulation.
  analysis::SystemFigures& w = b.wafer;
  w.system = r.hardware_name;
  w.chips = r.wafers;
  w.decode_tokens_per_s_per_user = m.decode_tokens_per_s_per_user;
  w.aggregate_tokens_per_s = m.aggregate_tokens_per_s;
  w.ttft_s = m.ttft_s;
  w.bottleneck = m.bottleneck;
  w.power_kw = sc.hardware.system_power_w * r.wafers / 1000.0;
  if (w.power_kw > 0.0) w.tokens_per_s_per_kw = w.aggregate_tokens_per_s / w.power_kw;
  apply_serving(w, sc.serving);

  // The GPU clusters, analytical.
  models::gpu::InferenceWorkload load;
  // The GPU model's batch is uniform: with per-user lengths, the users' means.
  long long prompt_sum = 0, generate_sum = 0;
  for (int u = 0; u < sc.workload.users; ++u) {
    prompt_sum += user_prompt_tokens(sc.workload, u);
    generate_sum += user_generate_tokens(sc.workload, u);
  }
  const auto mean = [users = sc.workload.users](long long sum) {
    return static_cast<int>(std::max<long long>(1, (sum + users / 2) / users));
  };
  load.prompt_tokens = mean(prompt_sum);
  load.generate_tokens = mean(generate_sum);
  load.users = sc.workload.users;
  load.weight_bits = models::dtype_bits(sc.precision);
  load.tp = sc.gpu.tp;
  load.pp = sc.gpu.pp;
  if (sc.speculative) load.speculative = sc.speculative->decoding;
  for (const models::gpu::ClusterSpec& c : sc.gpu.systems) {
    analysis::SystemFigures f;
    f.system = c.name;
    try {
      const models::gpu::GpuEstimate e = models::gpu::estimate(c, sc.model, load);
      f.chips = e.gpus;
      f.tp = e.tp;
      f.pp = e.pp;
      f.parallelism_auto = e.parallelism_auto;
      f.replicas = e.replicas;
      f.kv_limited = e.kv_limited;
      f.decode_tokens_per_s_per_user = e.decode_tokens_per_s_per_user;
      f.aggregate_tokens_per_s = e.aggregate_tokens_per_s;
      f.ttft_s = e.ttft_s;
      f.power_kw = e.power_w / 1000.0;
      f.tokens_per_s_per_kw = e.tokens_per_s_per_kw;
      f.bottleneck = e.bottleneck;
    } catch (const models::gpu::GpuFitError& e) {
      f.bottleneck = std::string("does not fit: ") + e.what();
    }
    apply_serving(f, sc.serving);
    b.gpus.push_back(std::move(f));
  }

  if (sc.speculative) {
    const auto& sd = sc.speculative->decoding;
    analysis::SpeculativeSummary s;
    s.draft_model = sd.draft.name;
    s.draft_tokens = sd.draft_tokens;
    s.acceptance_rate = sd.acceptance_rate;
    s.expected_tokens_per_step =
        models::gpu::expected_tokens_per_step(sd.acceptance_rate, sd.draft_tokens);
    if (r.speculative) {
      const analysis::SpeculativeRun& run = *r.speculative;
      const double hz = r.clock_hz;
      s.wafer_draft_wafers = run.draft_wafers;
      s.wafer_accepted_by_comparison = run.accepted_by_comparison;
      s.wafer_acceptance = run.measured_acceptance();
      s.wafer_tokens_per_round = run.tokens_per_round();
      if (run.proposed)
        s.wafer_draft_step_s =
            static_cast<double>(run.draft_cycles.value) / static_cast<double>(run.proposed) / hz;
      if (run.rounds)
        s.wafer_verify_s =
            static_cast<double>(run.verify_cycles.value) / static_cast<double>(run.rounds) / hz;
    }
    b.speculative = s;
  }
  if (sc.serving) {
    b.serving = analysis::ServingSummary{sc.serving->round_trip_s, sc.serving->per_token_overhead_s,
                                         sc.serving->connection_setup_s};
  }
  return b;
}

}  // namespace wafersim::sim
