// docs/validation.md, "GPU model vs published measurements": the model's
// prediction for each published setup, recomputed here so that the table
// cannot drift from the code. Each row asserts the error the document states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "models/gpu/cluster_model.hpp"
#include "sim/config/scenario.hpp"

namespace wafersim {
namespace {

const std::filesystem::path kPresets = std::filesystem::path(WAFERSIM_SOURCE_DIR) / "scenarios";

struct Row {
  const char* label;
  const char* system;
  const char* model;
  int bits;
  int prompt;
  int generate;
  int users;
  int tp;
  int pp;
  int gpus_per_node;  // 0: the preset's; else a node of this many GPUs (single-GPU runs)
  double hbm_gb;      // 0: the preset's
  double hbm_tb_s;    // 0: the preset's
  bool batch;         // compare batch tokens/s (prefill included) instead of per-user
  double published;
  double max_error;  // |prediction / published - 1| this row is documented within
};

double predict(const Row& r, double& got) {
  models::gpu::ClusterSpec c = sim::load_gpu_preset(r.system, kPresets);
  if (r.gpus_per_node > 0) c.gpus_per_node = r.gpus_per_node;
  if (r.hbm_gb > 0) c.gpu.hbm_bytes = r.hbm_gb * 1e9;
  if (r.hbm_tb_s > 0) c.gpu.hbm_bandwidth = r.hbm_tb_s * 1e12;
  const models::ModelConfig m = sim::load_model_preset(r.model, kPresets);
  models::gpu::InferenceWorkload w;
  w.prompt_tokens = r.prompt;
  w.generate_tokens = r.generate;
  w.users = r.users;
  w.weight_bits = r.bits;
  w.tp = r.tp;
  w.pp = r.pp;
  const models::gpu::GpuEstimate e = models::gpu::estimate(c, m, w);
  got = r.batch ? e.batch_tokens_per_s : e.decode_tokens_per_s_per_user;
  return got / r.published - 1.0;
}

TEST(GpuValidation, PredictionsStayWithinTheDocumentedErrors) {
  const Row rows[] = {
      // [A100-VLLM] A100 40 GB, Llama 3.1 8B bf16, vLLM, one request, 1024 in / 128 out: ~75 tok/s.
      {"A100-40GB 8B bf16 1 user", "dgx-a100", "llama-3.1-8b", 16, 1024, 128, 1, 1, 1, 1, 40, 1.555,
       false, 75.0, 0.10},
      // [MEDUSA-H200] H200 x8 TP8, Llama 3.1 70B fp8, 1 user, without Medusa: 268 / 1.5 (derived;
      // the blog says "over 1.5x", so the published baseline is at most this). Calibrates alpha.
      {"H200x8 70B fp8 1 user", "dgx-h200", "llama-3.1-70b", 8, 1024, 256, 1, 8, 1, 0, 0, 0, false,
       268.0 / 1.5, 0.10},
      // [MEDUSA-H200] H200 x8 TP8, Llama 3.1 405B fp8, 1 user, without Medusa: 108 / 1.9 (derived
      // from "up to 1.9x"). Independent of the calibration.
      {"H200x8 405B fp8 1 user", "dgx-h200", "llama-3.1-405b", 8, 1024, 256, 1, 8, 1, 0, 0, 0,
       false, 108.0 / 1.9, 0.20},
      // [REDHAT-MLPERF] MLPerf Inference v5.1 Offline, Llama 3.1 8B fp8, one H100, vLLM: 5,777
      // tok/s.
      {"H100x1 8B fp8 offline", "dgx-h100", "llama-3.1-8b", 8, 1024, 128, 4096, 1, 1, 1, 0, 0, true,
       5777.0, 0.25},
      // [CODESOTA] MI300X, Llama 3.1 8B fp16, single stream: 320 tok/s (third-party, unverified).
      {"MI300Xx1 8B bf16 1 user", "mi300x-8", "llama-3.1-8b", 16, 1024, 128, 1, 1, 1, 1, 0, 0,
       false, 320.0, 0.30},
  };
  for (const Row& r : rows) {
    double got = 0.0;
    const double err = predict(r, got);
    std::printf("  %-28s published %10.1f  model %10.1f  error %+6.1f%%\n", r.label, r.published,
                got, 100.0 * err);
    EXPECT_LE(std::fabs(err), r.max_error) << r.label;
  }
}

// The table of docs/validation.md, "Predictions": Llama 3.1 8B and 70B in
// bf16 on every shipped system, 1 and 64 users, 1024 prompt + 256 generated
// tokens. Printed for the document; asserts only that every system fits them.
TEST(GpuValidation, PredictionTableForTheDocs) {
  for (const char* model : {"llama-3.1-8b", "llama-3.1-70b"}) {
    const models::ModelConfig m = sim::load_model_preset(model, kPresets);
    for (const char* system :
         {"dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "mi300x-8"}) {
      const models::gpu::ClusterSpec c = sim::load_gpu_preset(system, kPresets);
      for (int users : {1, 64}) {
        models::gpu::InferenceWorkload w;
        w.prompt_tokens = 1024;
        w.generate_tokens = 256;
        w.users = users;
        w.weight_bits = 16;
        const models::gpu::GpuEstimate e = models::gpu::estimate(c, m, w);
        std::printf("  | %s | %s | %d | %dx%d | %.0f | %.0f | %.1f | %.0f | %s |\n", model, system,
                    users, e.tp, e.pp, e.decode_tokens_per_s_per_user, e.aggregate_tokens_per_s,
                    e.ttft_s * 1e3, e.tokens_per_s_per_kw, e.bottleneck.c_str());
        EXPECT_GT(e.decode_tokens_per_s_per_user, 0.0);
      }
    }
  }
}

}  // namespace
}  // namespace wafersim
