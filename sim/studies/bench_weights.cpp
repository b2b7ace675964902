#include "sim/studies/bench_weights.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include "models/hf_config.hpp"
#include "models/safetensors.hpp"
#include "models/work_team.hpp"
#include "sim/config/scenario.hpp"
#include "sim/studies/host_measures.hpp"

namespace wafersim::sim {

namespace {

namespace fs = std::filesystem;

// Host bytes the weights hold: every matrix as stored, every vector as fp32.
double host_bytes(const models::Weights& w) {
  double b = 0.0;
  auto vec = [&b](const std::vector<float>& v) { b += static_cast<double>(v.size()) * 4.0; };
  for (const models::Matrix* m : {&w.embedding, &w.lm_head, &w.position_embedding})
    b += static_cast<double>(m->storage_bytes());
  vec(w.final_norm);
  vec(w.final_norm_bias);
  for (const models::LayerWeights& L : w.layers) {
    for (const models::Matrix* m :
         {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router})
      b += static_cast<double>(m->storage_bytes());
    for (const models::ExpertWeights& e : L.experts)
      b += static_cast<double>(e.w_gate.storage_bytes() + e.w_up.storage_bytes() +
                               e.w_down.storage_bytes());
    for (const std::vector<float>* v :
         {&L.attn_norm, &L.ffn_norm, &L.bq, &L.bk, &L.bv, &L.bo, &L.b_up, &L.b_down,
          &L.attn_norm_bias, &L.ffn_norm_bias, &L.q_norm, &L.k_norm})
      vec(*v);
  }
  return b;
}

}  // namespace

int bench_weights(const BenchWeightsOptions& o) {
  const models::DType dtype = models::parse_dtype(o.precision);
  const int threads = o.threads > 0 ? o.threads : models::WorkTeam::host_threads();
  const bool checkpoint = names_checkpoint(o.model);
  const models::ModelConfig config =
      checkpoint ? models::load_hf_config(o.model) : load_model_preset(o.model, o.preset_dir);

  const double anon_before = proc_status_bytes("RssAnon");
  double anon_peak = anon_before;
  auto progress = [&](int done, int total) {
    anon_peak = std::max(anon_peak, proc_status_bytes("RssAnon"));
    if (!o.json) std::cerr << fmt::format("\r  {} / {}", done, total) << std::flush;
  };
  const auto t0 = HostClock::now();
  models::Weights w;
  if (checkpoint) {
    const fs::path folder = checkpoint_folder(o.model);
    models::LoadOptions load;
    load.storage = models::HostStorage::compact;
    load.threads = threads;
    load.progress = progress;
    w = models::load_safetensors(folder, config, dtype, load);
  } else {
    w = models::Weights::synthetic(config, dtype, 0, models::HostStorage::compact, threads,
                                   progress);
  }
  const double seconds = seconds_since(t0);
  if (!o.json) std::cerr << "\n";
  anon_peak = std::max(anon_peak, proc_status_bytes("RssAnon"));
  double file_bytes = 0.0;
  for (const auto& f : w.origin.files) file_bytes += static_cast<double>(f.bytes);
  const double held = host_bytes(w);
  const double anon_growth = anon_peak - anon_before;

  if (o.json) {
    nlohmann::json j = {{"model", config.name},
                        {"source", checkpoint ? "checkpoint" : "synthetic"},
                        {"precision", models::dtype_name(dtype)},
                        {"threads", threads},
                        {"parameters", config.parameter_count()},
                        {"file_bytes", file_bytes},
                        {"host_weight_bytes", held},
                        {"seconds", seconds},
                        {"peak_rss_anon_growth_bytes", anon_growth},
                        {"vm_hwm_bytes", proc_status_bytes("VmHWM")}};
    if (checkpoint) j["sha256"] = w.origin.content_hash;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::cout << fmt::format("weights of {} ({} parameters) as {}, {} host threads\n", config.name,
                           config.parameter_count(), models::dtype_name(dtype), threads);
  if (checkpoint)
    std::cout << fmt::format(
        "  read {:.2f} GiB of safetensors in {:.2f} s ({:.2f} GiB/s, "
        "hashed and converted)\n  sha256 {}\n",
        file_bytes / gib, seconds, file_bytes / gib / seconds, w.origin.content_hash);
  else
    std::cout << fmt::format("  drawn in {:.2f} s\n", seconds);
  std::cout << fmt::format(
      "  held on the host: {:.2f} GiB; anonymous memory grew by at most {:.2f} GiB ({:.3f}x "
      "the weights: {})\n",
      held / gib, anon_growth / gib, anon_growth / held,
      anon_growth <= held * 1.05 ? "no second copy" : "MORE than one copy");
  std::cout << fmt::format("  peak resident {:.2f} GiB (mapped file pages included)\n",
                           proc_status_bytes("VmHWM") / gib);
  return 0;
}

}  // namespace wafersim::sim
