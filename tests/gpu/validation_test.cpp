// docs/validation.md, "GPU model vs published measurements": the model's
// prediction for each published setup, recomputed here so that the table
// cannot drift from the code. Each row asserts the error the document states;
// the "Predictions" table is read from the document and recomputed row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/gpu/cluster_model.hpp"
#include "models/gpu/serving_framework.hpp"
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
      {"A100-40GB 8B bf16 1 user", "dgx-a100-40gb", "llama-3.1-8b", 16, 1024, 128, 1, 1, 1, 1, 0, 0,
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

// 1234567.4 -> "1,234,567", as the document writes counts.
std::string grouped(double v) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%.0f", v);
  std::string s = digits, out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// A markdown table row's cells: "| a | b |" -> {"a", "b"}.
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::stringstream in(row.substr(1));
  for (std::string cell; std::getline(in, cell, '|');) out.push_back(trimmed(cell));
  return out;
}

// The table of docs/validation.md, "Predictions": Llama 3.1 8B and 70B in
// bf16 on the shipped systems, 1 and 64 users, 1024 prompt + 256 generated
// tokens. Every row of the document is recomputed here and must read the
// same, figure for figure as printed (the table cannot drift from the
// model); the rows are printed in the document's form.
TEST(GpuValidation, PredictionTableForTheDocs) {
  std::ifstream doc(std::filesystem::path(WAFERSIM_SOURCE_DIR) / "docs" / "validation.md");
  ASSERT_TRUE(doc) << "docs/validation.md";
  std::string line;
  while (std::getline(doc, line) && line.rfind("### Predictions", 0) != 0) {
  }
  int rows = 0;
  while (std::getline(doc, line)) {
    if (line.rfind("| Llama", 0) != 0) {
      if (rows > 0) break;  // the end of the table
      continue;             // the text and the header before it
    }
    const std::vector<std::string> c = cells(line);
    ASSERT_EQ(c.size(), 9u) << line;
    std::string preset = c[0];  // "Llama 3.1 8B" -> "llama-3.1-8b"
    std::transform(preset.begin(), preset.end(), preset.begin(),
                   [](char ch) { return ch == ' ' ? '-' : static_cast<char>(std::tolower(ch)); });
    const models::ModelConfig m = sim::load_model_preset(preset, kPresets);
    const models::gpu::ClusterSpec cluster = sim::load_gpu_preset(c[1], kPresets);
    models::gpu::InferenceWorkload w;
    w.prompt_tokens = 1024;
    w.generate_tokens = 256;
    w.users = std::stoi(c[2]);
    w.weight_bits = 16;
    const models::gpu::GpuEstimate e = models::gpu::estimate(cluster, m, w);
    char ttft[32];
    std::snprintf(ttft, sizeof ttft, "%.1f", e.ttft_s * 1e3);
    const std::vector<std::string> model_row = {c[0],
                                                c[1],
                                                c[2],
                                                std::to_string(e.tp) + "×" + std::to_string(e.pp),
                                                grouped(e.decode_tokens_per_s_per_user),
                                                grouped(e.aggregate_tokens_per_s),
                                                ttft,
                                                grouped(e.tokens_per_s_per_kw),
                                                e.bottleneck};
    std::string printed = "|";
    for (const std::string& cell : model_row) printed += " " + cell + " |";
    std::printf("  %s\n", printed.c_str());
    EXPECT_EQ(printed, line);
    ++rows;
  }
  EXPECT_EQ(rows, 16);  // the document's rows, all of them read
}

// One Llama 3.1 8B bf16 decode at `users` users on a fixed split, with the
// serving framework `framework` on the system `system` ("" keeps the preset's).
models::gpu::GpuEstimate llama8b(const std::string& system, const std::string& framework, int users,
                                 int tp, int gpus_per_node = 0) {
  models::gpu::ClusterSpec c = sim::load_gpu_preset(system, kPresets);
  if (!framework.empty()) c.framework = *models::gpu::framework_preset(framework);
  if (gpus_per_node > 0) c.gpus_per_node = gpus_per_node;
  const models::ModelConfig m = sim::load_model_preset("llama-3.1-8b", kPresets);
  models::gpu::InferenceWorkload w;
  w.prompt_tokens = 1024;
  w.generate_tokens = 128;
  w.users = users;
  w.weight_bits = 16;
  w.tp = tp;
  w.pp = 1;
  return models::gpu::estimate(c, m, w);
}

// docs/validation.md, "Tensor parallelism at batch 1": the SGLang study quoted
// in the serving issue measured Llama 3.1 8B decode at one request 3.3x faster
// on 8 A100s (TP 8) than on one. With SGLang's host time per iteration the
// model's ratio must be within 15% of it; without it (the bare hardware model)
// the ratio is 3.84x: a fixed cost per iteration that tensor parallelism does
// not divide is what the bare model lacks.
TEST(GpuValidation, TensorParallelSpeedUpAtBatchOneMatchesTheSglangStudy) {
  const double published = 3.3;
  auto ratio = [](const std::string& framework) {
    return llama8b("dgx-a100", framework, 1, 8).decode_tokens_per_s_per_user /
           llama8b("dgx-a100", framework, 1, 1).decode_tokens_per_s_per_user;
  };
  const double bare = ratio("none");
  const double sglang = ratio("sglang");
  std::printf("  TP8/TP1 Llama 3.1 8B dgx-a100: bare %.2fx, sglang %.2fx, published %.1fx\n", bare,
              sglang, published);
  EXPECT_NEAR(sglang / published, 1.0, 0.15);
  EXPECT_GT(bare, sglang);  // the host time is what makes the speed-up sublinear
}

// docs/validation.md, "Decode throughput vs batch": the published points of
// two throughput-latency sweeps of Llama 3.1 8B bf16 on one GPU with vLLM,
// each within the tolerance the document states for it.
TEST(GpuValidation, BatchCurveMatchesThePublishedVllmSweeps) {
  // [A100-VLLM] one A100 40 GB, 1024 in / 128 out: ~75 tok/s at one request.
  const models::gpu::GpuEstimate a1 = llama8b("dgx-a100-40gb", "vllm", 1, 1, 1);
  const models::gpu::GpuEstimate a8 = llama8b("dgx-a100-40gb", "vllm", 8, 1, 1);
  // [A100-VLLM] "a 6.6x gain" in throughput from one request to eight. The
  // sweep's throughput counts the prompts' prefill, which vLLM interleaves with
  // the decode of the others: the model's decode-only gain (prefill free) and
  // its batch gain (prompts prefilled one after another) bracket it.
  const double decode_gain = a8.aggregate_tokens_per_s / a1.aggregate_tokens_per_s;
  const double batch_gain = a8.batch_tokens_per_s / a1.batch_tokens_per_s;
  std::printf("  A100-40GB vllm: C=1 %.1f tok/s/user, C=8 gain decode-only %.2fx, batch %.2fx\n",
              a1.decode_tokens_per_s_per_user, decode_gain, batch_gain);
  EXPECT_NEAR(a1.decode_tokens_per_s_per_user / 75.0, 1.0, 0.10);
  EXPECT_LT(batch_gain, 6.6);
  EXPECT_GT(decode_gain, 6.6);
  EXPECT_NEAR(batch_gain / 6.6, 1.0, 0.15);
  EXPECT_NEAR(decode_gain / 6.6, 1.0, 0.15);
  // [YOBITEL-H100] one H100, vLLM 0.21: TPOT 6.48 ms at one request (calibrates vLLM's host
  // time), 6.59 ms at four.
  for (const auto& [users, tpot_ms] : {std::pair{1, 6.48}, std::pair{4, 6.59}}) {
    const models::gpu::GpuEstimate h = llama8b("dgx-h100", "vllm", users, 1, 1);
    const double model_ms = 1e3 / h.decode_tokens_per_s_per_user;
    std::printf("  H100 vllm: C=%d TPOT model %.2f ms, published %.2f ms\n", users, model_ms,
                tpot_ms);
    EXPECT_NEAR(model_ms / tpot_ms, 1.0, 0.10) << users;
  }
}

// The model's curve for the document's table: Llama 3.1 8B bf16 on one GPU,
// 1024 in / 128 out, batch 1..256 (KV-limited where the cache is full).
TEST(GpuValidation, BatchCurveForTheDocs) {
  for (const char* system : {"dgx-a100-40gb", "dgx-h100"}) {
    for (int users = 1; users <= 256; users *= 2) {
      const models::gpu::GpuEstimate e = llama8b(system, "vllm", users, 1, 1);
      std::printf("  | %s | %d | %d | %.2f | %.1f | %s |\n", system, users, e.users_per_replica,
                  1e3 / e.decode_tokens_per_s_per_user, e.aggregate_tokens_per_s,
                  e.bottleneck.c_str());
    }
  }
}

// A measurement of analysis/gpu_measurements (llama8b_decode_step.py's JSON
// for one GPU) and one GPU of the preset it was taken against.
struct LentGpu {
  const char* file;
  const char* system;
  const char* gpu;  // the name the measurement must carry
};
constexpr LentGpu kH200{"h200-2026-11-27.json", "dgx-h200", "NVIDIA H200"};
constexpr LentGpu kH100{"h100-2026-11-27.json", "dgx-h100", "NVIDIA H100 80GB HBM3"};

nlohmann::json read_measurement(const std::string& file, const LentGpu& g) {
  std::ifstream in(std::filesystem::path(WAFERSIM_SOURCE_DIR) / "analysis/gpu_measurements" / file);
  EXPECT_TRUE(in) << file;
  nlohmann::json meas = nlohmann::json::parse(in);
  EXPECT_EQ(meas.at("gpu").get<std::string>(), g.gpu);
  return meas;
}

models::gpu::ClusterSpec one_gpu_of(const LentGpu& g) {
  models::gpu::ClusterSpec c = sim::load_gpu_preset(g.system, kPresets);
  c.gpus_per_node = 1;  // one GPU: every user on it
  return c;
}

// docs/validation.md, "Measured on lent GPUs": Llama 3.1 8B's decode step
// timed on one H200 and one H100 (analysis/gpu_measurements/
// llama8b_decode_step.py, the figures in the JSON files beside it) against the
// bare model on one GPU of dgx-h200 and dgx-h100. The weights' streaming and
// the KV cache's, measured alone, check the model's HBM term
// (memory_efficiency); the whole step and the prefill are printed beside the
// model's for the document (the script's unfused kernels cost ~90 us a layer
// that a serving stack's fused kernels do not: not a check of the model).
TEST(GpuValidation, MeasuredDecodeStepsMatchTheHbmTerm) {
  for (const LentGpu& g : {kH200, kH100}) {
    SCOPED_TRACE(g.system);
    const nlohmann::json meas = read_measurement(g.file, g);
    const models::gpu::ClusterSpec c = one_gpu_of(g);
    const models::ModelConfig m = sim::load_model_preset("llama-3.1-8b", kPresets);
    std::printf("  %s (%s)\n", g.gpu, g.system);
    // The model's step for `users` sequences at a context of `context` (a
    // prompt of that length, one token generated: the mean context is
    // context + 0.5), on one GPU, no serving framework.
    auto estimate = [&](int users, int context) {
      models::gpu::InferenceWorkload w;
      w.prompt_tokens = context;
      w.generate_tokens = 1;
      w.users = users;
      w.weight_bits = 16;
      const auto e = models::gpu::estimate_split(c, m, w, 1, 1);
      EXPECT_TRUE(e.has_value()) << users << " x " << context;
      EXPECT_EQ(e->users_per_replica, users);
      return *e;
    };
    const double weights_s = estimate(1, 1).step.memory_s;  // one position's keys and values: ~0
    for (const auto& part : meas.at("parts")) {
      const std::string what = part.at("part").get<std::string>();
      const int b = part.at("batch").get<int>();
      const double measured = part.at("time_s").get<double>();
      if (what == "weights") {
        // HBM-bound at every batch measured (64 rows of a GEMM: still ~1% of
        // the tensor cores' time): the model streams the same bytes.
        std::printf("    weights only, batch %d: model %.3f ms, measured %.3f ms (%+.1f%%)\n", b,
                    weights_s * 1e3, measured * 1e3, (weights_s / measured - 1) * 100);
        if (b == 1) {
          EXPECT_NEAR(weights_s / measured, 1.0, 0.05);
        }
        EXPECT_NEAR(weights_s / measured, 1.0, 0.08) << b;
      } else {
        const int l = part.at("context").get<int>();
        const double kv_s = estimate(b, l).step.memory_s - weights_s;
        std::printf(
            "    attention only, batch %d, context %d: model %.3f ms, measured %.3f ms "
            "(%+.1f%%)\n",
            b, l, kv_s * 1e3, measured * 1e3, (kv_s / measured - 1) * 100);
        // A cache of 64K positions and more (256 MiB a layer) fills the GPU:
        // it streams at 81-90% of the peak, faster than the model's 77%, by
        // at most 20%. Smaller ones are a few microseconds a layer, launch
        // and tail bound, and one sequence's 8 kv heads leave PyTorch's
        // attention kernel without the split over the context that decode
        // kernels use (0.32 TB/s at 4,096 positions): printed, not compared.
        if (static_cast<long>(b) * l >= 65536) {
          EXPECT_GT(kv_s, measured);
          EXPECT_LT(kv_s / measured, 1.20) << b << " x " << l;
        }
      }
    }
    for (const auto& d : meas.at("decode")) {
      const int b = d.at("batch").get<int>(), l = d.at("context").get<int>();
      const double model = estimate(b, l).step.total_s, measured = d.at("step_s").get<double>();
      std::printf("    | %d | %d | %.2f | %.2f | %+.0f%% |\n", b, l, measured * 1e3, model * 1e3,
                  (model / measured - 1) * 100);
    }
    for (const auto& p : meas.at("prefill")) {
      const int t = p.at("prompt").get<int>();
      const double ttft = estimate(1, t).ttft_s, measured = p.at("time_s").get<double>();
      std::printf("    prefill of %d tokens: model %.2f ms, measured %.2f ms (%+.0f%%)\n", t,
                  ttft * 1e3, measured * 1e3, (ttft / measured - 1) * 100);
    }
  }
}

// docs/validation.md, "Measured on lent GPUs": the same step with each
// layer's small kernels fused by torch.compile (FUSED=1), on the H200 and the
// H100, against the model with vLLM's host time per step (calibrated on a
// published H100 vLLM figure, which these measurements do not enter): what a
// fused serving stack adds to the GEMMs and attention, ~25 us a layer at
// batch 1 here, the model holds as its per-layer overhead and the
// framework's time.
TEST(GpuValidation, FusedDecodeStepsMatchTheModelWithVllmsHostTime) {
  for (const auto& [g, file] : {std::pair{kH200, "h200-fused-2026-11-27.json"},
                                std::pair{kH100, "h100-fused-2026-11-27.json"}}) {
    SCOPED_TRACE(g.system);
    const nlohmann::json meas = read_measurement(file, g);
    models::gpu::ClusterSpec c = one_gpu_of(g);
    c.framework = *models::gpu::framework_preset("vllm");
    const models::ModelConfig m = sim::load_model_preset("llama-3.1-8b", kPresets);
    std::printf("  %s (%s), fused\n", g.gpu, g.system);
    for (const auto& d : meas.at("fused_decode")) {
      const int b = d.at("batch").get<int>(), l = d.at("context").get<int>();
      models::gpu::InferenceWorkload w;
      w.prompt_tokens = l;
      w.generate_tokens = 1;
      w.users = b;
      w.weight_bits = 16;
      const double model = models::gpu::estimate_split(c, m, w, 1, 1)->step.total_s;
      const double measured = d.at("step_s").get<double>();
      std::printf("    | %d | %d | %.2f | %.2f | %+.0f%% |\n", b, l, measured * 1e3, model * 1e3,
                  (model / measured - 1) * 100);
      // Within 12%: the worst row, one sequence at 1,024 positions on the
      // H200 (-11%), is PyTorch's attention without the split over the
      // context (its step grows 0.36 ms from 128 to 1,024 positions, where
      // the cache's bytes need 0.03).
      EXPECT_NEAR(model / measured, 1.0, 0.12) << b << " x " << l;
    }
  }
}

}  // namespace
}  // namespace wafersim
