// The request-level serving simulation against hand computation (a lone
// request, a static batch, the serving stack, sessions reusing their KV
// cache, disaggregated prefill) and against laws that must hold whatever the
// traffic: tokens out = tokens asked for, the batch and KV limits never
// exceeded, Little's law on the measured queue, the same input giving the
// same bits.
#include "sim/serving/simulator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace wafersim::sim::serving {
namespace {

// Decode: 1 ms + 0.1 ms per sequence + 1 ns per position attended; prefill:
// 0.5 ms + 10 us per prompt token. Transfers: 1 us per token.
class LinearSteps final : public StepModel {
 public:
  explicit LinearSteps(KvCapacity kv) : kv_(kv) {}
  static double decode(int users, double context_sum) {
    return 1e-3 + 1e-4 * users + 1e-9 * context_sum;
  }
  static double prefill(double tokens) { return 0.5e-3 + 10e-6 * tokens; }
  double iteration_s(const Iteration& it) const override {
    double s = 0.0;
    if (it.decode_sequences > 0) s += decode(it.decode_sequences, it.decode_context);
    if (it.prefill_tokens > 0) s += prefill(it.prefill_tokens);
    return s;
  }
  KvCapacity kv_capacity() const override { return kv_; }
  double kv_transfer_s(long long tokens) const override { return 1e-6 * tokens; }

 private:
  KvCapacity kv_;
};

Session one_request(int id, double at, int prompt, int output) {
  Session s;
  s.id = id;
  s.turns.push_back(Turn{at, prompt, output});
  return s;
}

SimulationOptions options(PrefillPolicy policy) {
  SimulationOptions o;
  o.system = "test";
  o.prefill = policy;
  o.chunk_tokens = 512;
  return o;
}

TEST(ServingSimulation, LoneRequestTakesPrefillThenItsDecodeSteps) {
  const LinearSteps model(KvCapacity{8, 0, 0});
  const auto r =
      simulate({one_request(0, 1.0, 1000, 4)}, model, options(PrefillPolicy::prefill_first));
  ASSERT_EQ(r.requests.size(), 1u);
  const auto& q = r.requests[0];
  const double ttft = LinearSteps::prefill(1000);
  EXPECT_NEAR(q.ttft_s, ttft, 1e-12);
  // Three decode steps after the first token, at contexts 1001, 1002, 1003.
  const double decode =
      LinearSteps::decode(1, 1001) + LinearSteps::decode(1, 1002) + LinearSteps::decode(1, 1003);
  EXPECT_NEAR(q.end_to_end_s, ttft + decode, 1e-12);
  EXPECT_NEAR(q.tbt_mean_s, decode / 3.0, 1e-9);
  EXPECT_EQ(q.output_tokens, 4);
  EXPECT_DOUBLE_EQ(q.arrival_s, 1.0);
  EXPECT_DOUBLE_EQ(q.admitted_s, 1.0);
}

TEST(ServingSimulation, ChunkedPrefillSplitsThePromptIntoBudgetedChunks) {
  const LinearSteps model(KvCapacity{8, 0, 0});
  const auto r = simulate({one_request(0, 0.0, 1200, 1)}, model, options(PrefillPolicy::chunked));
  // 512 + 512 + 176 tokens in three iterations.
  EXPECT_NEAR(r.requests[0].ttft_s, LinearSteps::prefill(512) * 2 + LinearSteps::prefill(176),
              1e-12);
  EXPECT_EQ(r.iterations, 3u);
}

TEST(ServingSimulation, StaticBatchDecodesTogether) {
  const LinearSteps model(KvCapacity{16, 0, 0});
  std::vector<Session> batch;
  for (int i = 0; i < 16; ++i) batch.push_back(one_request(i, 0.0, 100, 10));
  const auto r = simulate(batch, model, options(PrefillPolicy::prefill_first));
  // One prefill iteration of all 16 prompts, then 9 decode steps of 16.
  double t = LinearSteps::prefill(1600);
  for (int k = 1; k < 10; ++k) t += LinearSteps::decode(16, 16.0 * (100 + k));
  for (const auto& q : r.requests) {
    EXPECT_NEAR(q.ttft_s, LinearSteps::prefill(1600), 1e-12);
    EXPECT_NEAR(q.end_to_end_s, t, 1e-12);
  }
  EXPECT_DOUBLE_EQ(r.mean_batch, 16.0);
}

// Poisson-like arrivals from a fixed little generator (the test's own).
std::vector<Session> poisson(int n, double rate, std::uint64_t seed, int prompt, int output) {
  std::vector<Session> out;
  double t = 0.0;
  std::uint64_t x = seed;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (static_cast<double>(x >> 11) + 0.5) / 9007199254740992.0;
    t += -std::log(u) / rate;
    out.push_back(one_request(i, t, prompt + static_cast<int>(x % 200),
                              output + static_cast<int>((x >> 20) % 50)));
  }
  return out;
}

TEST(ServingSimulation, ConservesTokensAndHoldsTheBatchAndKvLimits) {
  // Room for 6 sequences in 4,000 positions: the pool, not the slots, binds.
  const LinearSteps model(KvCapacity{0, 0, 4000});
  for (const PrefillPolicy p : {PrefillPolicy::prefill_first, PrefillPolicy::chunked}) {
    SimulationOptions o = options(p);
    o.max_batch = 6;
    o.replicas = 2;
    const auto sessions = poisson(400, 150.0, 7, 500, 40);
    const auto r = simulate(sessions, model, o);
    EXPECT_EQ(r.served, 400);
    EXPECT_EQ(r.tokens_generated, r.tokens_asked);
    long long asked = 0;
    for (const Session& s : sessions) asked += s.turns[0].output_tokens;
    EXPECT_EQ(r.tokens_asked, asked);
    // At every admission, what that replica holds fits its limits.
    for (const auto& a : r.requests) {
      int batch = 0;
      long long positions = 0;
      for (const auto& b : r.requests) {
        if (b.replica != a.replica || b.admitted_s > a.admitted_s || b.last_token_s <= a.admitted_s)
          continue;
        ++batch;
        positions += b.prompt_tokens + b.output_tokens;
      }
      EXPECT_LE(batch, 6);
      EXPECT_LE(positions, 4000);
    }
    EXPECT_GT(r.queue_s.max, 0.0);  // the load was high enough to queue
  }
}

TEST(ServingSimulation, LittlesLawHoldsOnTheMeasuredQueue) {
  const LinearSteps model(KvCapacity{32, 0, 0});
  const auto r = simulate(poisson(3000, 60.0, 11, 800, 60), model, options(PrefillPolicy::chunked));
  EXPECT_GT(r.littles_l, 1.0);
  EXPECT_NEAR(r.littles_l / r.littles_lambda_w, 1.0, 1e-9);
  EXPECT_GT(r.utilisation, 0.0);
  EXPECT_LE(r.utilisation, 1.0 + 1e-12);
}

// A one-token request's token can come out part way through an iteration
// (its prompt passes before the iteration's later prompts), but it holds its
// slot until the iteration ends: its time in the system runs to its release,
// so Little's law still holds exactly (until s20 it ran to the token, and
// the two sides differed by ~1% on such traffic).
TEST(ServingSimulation, LittlesLawHoldsWhenOneTokenRequestsLeaveWithTheirIteration) {
  // LinearSteps' times, but an iteration's prompts pass one after another
  // (the last at its end), as on a wafer's pipeline, and each first token
  // comes 0.1 ms after its prompt passed.
  class Pipelined final : public StepModel {
   public:
    double iteration_s(const Iteration& it) const override { return steps_.iteration_s(it); }
    KvCapacity kv_capacity() const override { return steps_.kv_capacity(); }
    double kv_transfer_s(long long tokens) const override { return steps_.kv_transfer_s(tokens); }
    double fill_latency_s(double) const override { return 1e-4; }
    std::vector<double> chunk_ends_s(const Iteration& it,
                                     const std::vector<PromptChunk>& chunks) const override {
      std::vector<double> ends;
      for (std::size_t k = 0; k < chunks.size(); ++k)
        ends.push_back(iteration_s(it) * static_cast<double>(k + 1) /
                       static_cast<double>(chunks.size()));
      return ends;
    }

   private:
    LinearSteps steps_{KvCapacity{8, 0, 0}};
  };
  const Pipelined model;
  std::vector<Session> burst;
  for (int i = 0; i < 200; ++i) burst.push_back(one_request(i, 0.001 * (i / 8), 50 + i % 7, 1));
  for (const PrefillPolicy p :
       {PrefillPolicy::prefill_first, PrefillPolicy::chunked, PrefillPolicy::disaggregated}) {
    const auto r = simulate(burst, model, options(p));
    EXPECT_EQ(r.served, 200);
    EXPECT_NEAR(r.littles_l / r.littles_lambda_w, 1.0, 1e-9) << static_cast<int>(p);
  }
}

TEST(ServingSimulation, SameInputSameBits) {
  const LinearSteps model(KvCapacity{8, 0, 0});
  const auto sessions = poisson(500, 80.0, 3, 300, 30);
  const auto a = simulate(sessions, model, options(PrefillPolicy::chunked));
  const auto b = simulate(sessions, model, options(PrefillPolicy::chunked));
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].last_token_s, b.requests[i].last_token_s);
    EXPECT_EQ(a.requests[i].replica, b.requests[i].replica);
  }
  EXPECT_EQ(a.ttft_s.p99, b.ttft_s.p99);
}

TEST(ServingSimulation, ServingStackAddsSetupRoundTripAndPerTokenCosts) {
  const LinearSteps model(KvCapacity{8, 0, 0});
  SimulationOptions o = options(PrefillPolicy::prefill_first);
  o.stack.present = true;
  o.stack.overhead = {0.050, 0.002, 0.200};  // round trip, per token, set-up
  const auto fresh = simulate({one_request(0, 0.0, 1000, 5)}, model, o);
  o.stack.persistent = true;
  const auto kept = simulate({one_request(0, 0.0, 1000, 5)}, model, o);
  const auto raw =
      simulate({one_request(0, 0.0, 1000, 5)}, model, options(PrefillPolicy::prefill_first));
  EXPECT_NEAR(fresh.requests[0].ttft_s - raw.requests[0].ttft_s, 0.250, 1e-12);
  EXPECT_NEAR(fresh.requests[0].tbt_mean_s - raw.requests[0].tbt_mean_s, 0.002, 1e-9);
  // Persistent: 80% less round trip, 50% less set-up, 30% less per token.
  EXPECT_NEAR(kept.requests[0].ttft_s - raw.requests[0].ttft_s, 0.010 + 0.100, 1e-12);
  EXPECT_NEAR(kept.requests[0].tbt_mean_s - raw.requests[0].tbt_mean_s, 0.0014, 1e-9);
  EXPECT_NEAR(fresh.requests[0].end_to_end_s - raw.requests[0].end_to_end_s, 0.250 + 4 * 0.002,
              1e-9);
}

TEST(ServingSimulation, ClosedLoopSessionReusesItsCacheAndWaitsItsThinkTime) {
  const LinearSteps model(KvCapacity{4, 100000, 0});
  Session s;
  s.id = 0;
  s.closed_loop = true;
  s.turns = {Turn{0.0, 1000, 10}, Turn{2.0, 200, 10}, Turn{2.0, 200, 10}};
  const auto r = simulate({s}, model, options(PrefillPolicy::prefill_first));
  ASSERT_EQ(r.requests.size(), 3u);
  EXPECT_EQ(r.requests[1].prompt_tokens, 1210);
  EXPECT_EQ(r.requests[1].cached_tokens, 1010);
  EXPECT_EQ(r.requests[2].prompt_tokens, 1420);
  EXPECT_EQ(r.requests[2].cached_tokens, 1220);
  // The second turn prefills only its 200 new tokens.
  EXPECT_NEAR(r.requests[1].ttft_s, LinearSteps::prefill(200), 1e-12);
  // It is sent 2 s after the first turn's last token.
  EXPECT_NEAR(r.requests[1].arrival_s, r.requests[0].end_to_end_s + 2.0, 1e-12);
  ASSERT_EQ(r.sessions.size(), 1u);
  double busy = 0.0;
  for (const auto& q : r.requests) busy += q.end_to_end_s;
  EXPECT_NEAR(r.sessions[0].task_s, busy + 4.0, 1e-9);
  EXPECT_NEAR(r.sessions[0].waiting_s, busy, 1e-9);
}

TEST(ServingSimulation, WithoutKeptCacheEveryTurnPrefillsItsWholeContext) {
  const LinearSteps model(KvCapacity{4, 100000, 0});
  Session s;
  s.closed_loop = true;
  s.turns = {Turn{0.0, 1000, 10}, Turn{1.0, 200, 10}};
  SimulationOptions o = options(PrefillPolicy::prefill_first);
  o.keep_kv_between_turns = false;
  const auto r = simulate({s}, model, o);
  EXPECT_EQ(r.requests[1].cached_tokens, 0);
  EXPECT_NEAR(r.requests[1].ttft_s, LinearSteps::prefill(1210), 1e-12);
}

TEST(ServingSimulation, RequestsLongerThanAKvSlotAreRejected) {
  const LinearSteps model(KvCapacity{4, 1000, 0});
  const auto r = simulate({one_request(0, 0.0, 990, 20), one_request(1, 0.0, 100, 20)}, model,
                          options(PrefillPolicy::chunked));
  EXPECT_EQ(r.rejected, 1);
  EXPECT_EQ(r.served, 1);
  EXPECT_TRUE(r.requests[0].rejected);
}

TEST(ServingSimulation, DisaggregatedPrefillHandsTheCacheToADecodeReplica) {
  const LinearSteps model(KvCapacity{8, 0, 0});
  SimulationOptions o = options(PrefillPolicy::disaggregated);
  o.prefill_replicas = 1;
  const auto r = simulate({one_request(0, 0.0, 1000, 3)}, model, o);
  const auto& q = r.requests[0];
  EXPECT_NEAR(q.ttft_s, LinearSteps::prefill(1000), 1e-12);
  EXPECT_EQ(q.replica, 0);  // decoded on the decode replica (index 0); prefill is index 1
  const double transfer = 1e-6 * 1001;
  EXPECT_NEAR(q.end_to_end_s,
              LinearSteps::prefill(1000) + transfer + LinearSteps::decode(1, 1001) +
                  LinearSteps::decode(1, 1002),
              1e-12);
  EXPECT_EQ(r.chips, 2);
}

TEST(ServingSimulation, SloAttainmentAndGoodput) {
  const LinearSteps model(KvCapacity{8, 0, 0});
  SimulationOptions o = options(PrefillPolicy::chunked);
  o.slo.ttft_s = 0.02;
  o.slo.tokens_per_s = 200.0;
  const auto r = simulate(poisson(1000, 120.0, 5, 600, 50), model, o);
  int meet = 0;
  for (const auto& q : r.requests) {
    const bool ok = q.ttft_s <= 0.02 && (q.output_tokens < 2 || 1.0 / q.tbt_mean_s >= 200.0 - 1e-9);
    EXPECT_EQ(q.meets_slo, ok) << q.id;
    meet += q.meets_slo;
  }
  EXPECT_NEAR(r.goodput_rps, meet / r.span_s, 1e-9);
  EXPECT_NEAR(r.slo_attainment, meet / 1000.0, 1e-12);
}

TEST(Percentile, InterpolatesBetweenClosestRanks) {
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  std::vector<double> none;
  EXPECT_DOUBLE_EQ(percentile(none, 99), 0.0);
}

}  // namespace
}  // namespace wafersim::sim::serving

namespace wafersim::sim::serving {
namespace {

// A pipeline (the wafer's grid model): 1 ms per decode step, 20 ms to fill
// the pipeline, 10 us per prompt token.
WaferSteps pipeline_steps() {
  std::vector<GridPoint> decode = {
      {1, 0, 0, 1e-3}, {1, 4096, 0, 1e-3}, {8, 0, 0, 1e-3}, {8, 4096, 0, 1e-3}};
  std::vector<GridPoint> prefill = {{1, 0, 64, 20e-3 + 64 * 10e-6},
                                    {1, 0, 1024, 20e-3 + 1024 * 10e-6}};
  return WaferSteps(decode, prefill, KvCapacity{8, 4096, 0}, 1000.0, 1e9);
}

// On a pipeline a lone request's TTFT is the engine's prefill of its whole
// prompt whatever the chunking, and the chunks cost the iterations only their
// occupancy.
TEST(ServingSimulation, PipelinedPrefillGivesALoneRequestTheEnginesPrefill) {
  const WaferSteps model = pipeline_steps();
  EXPECT_NEAR(model.fill_latency_s(0), 20e-3, 1e-12);
  for (const PrefillPolicy p : {PrefillPolicy::prefill_first, PrefillPolicy::chunked}) {
    const auto r = simulate({one_request(0, 0.0, 1200, 3)}, model, options(p));
    EXPECT_NEAR(r.requests[0].ttft_s, 20e-3 + 1200 * 10e-6, 1e-12);
    EXPECT_NEAR(r.requests[0].end_to_end_s, 20e-3 + 1200 * 10e-6 + 2e-3, 1e-12);
  }
}

// Four prompts of one prefill-first iteration on a pipeline: each has its
// first token a fill after its own pass (the first after 1.5 occupancies,
// the others 2.5 / 3 later each, the last at the iteration's end), as the
// engine's come one after another; all decode from the last one's first
// token on (a decode token cannot pass the prompt blocks ahead of it), so
// the batch ends where it did when every first token came with the last.
// A GPU-style step model (one pass) gives them all at the iteration's end.
TEST(ServingSimulation, PromptsOfAPrefillIterationHaveTheirFirstTokensInTurn) {
  std::vector<GridPoint> decode = {
      {1, 0, 0, 1e-3}, {1, 4096, 0, 1e-3}, {8, 0, 0, 1e-3}, {8, 4096, 0, 1e-3}};
  const double fill = 20e-3, occupancy = 1024 * 10e-6;
  std::vector<GridPoint> prefill = {{1, 0, 64, fill + 64 * 10e-6},
                                    {1, 0, 1024, fill + occupancy},
                                    {4, 0, 64, fill + 64 * 10e-6 * 4, fill + 64 * 10e-6 * 1.5},
                                    {4, 0, 1024, fill + occupancy * 4, fill + occupancy * 1.5}};
  const WaferSteps model(decode, prefill, KvCapacity{8, 4096, 0}, 1000.0, 1e9);
  std::vector<Session> batch;
  for (int i = 0; i < 4; ++i) batch.push_back(one_request(i, 0.0, 1024, 3));
  const auto r = simulate(batch, model, options(PrefillPolicy::prefill_first));
  ASSERT_EQ(r.requests.size(), 4u);
  const double last = fill + occupancy * 4;
  for (int k = 0; k < 4; ++k) {
    const auto& q = r.requests[static_cast<std::size_t>(k)];
    const double ttft = fill + occupancy * (1.5 + 2.5 / 3.0 * k);
    EXPECT_NEAR(q.ttft_s, ttft, 1e-12) << k;
    EXPECT_NEAR(q.end_to_end_s, last + 2e-3, 1e-12) << k;
    EXPECT_NEAR(q.tbt_mean_s, (last + 2e-3 - ttft) / 2.0, 1e-9) << k;
  }
  EXPECT_NEAR(r.ttft_s.max, last, 1e-12);
  const LinearSteps gpu(KvCapacity{8, 0, 0});
  const auto g = simulate(batch, gpu, options(PrefillPolicy::prefill_first));
  for (const auto& q : g.requests) EXPECT_NEAR(q.ttft_s, LinearSteps::prefill(4 * 1024), 1e-12);
}

// First-in-first-out stages (deployment.wafer.stage_order: fifo): a decode
// token sent behind another request's prompt block leaves no sooner than the
// block does. Chunked prefill on a pipeline (20 ms fill, 10 us per prompt
// token, 1 ms per decode step). A (64-token prompt, 4 tokens) at 0: its
// block passes in 0.64 ms, its first token 20 ms later (20.64), its second
// at 21.64. B (400 tokens) arrives at 21 ms; the iteration from 21.64 holds
// A's decode (first) and B's block: 1 + 4 ms, A's third token at 26.64, B's
// block leaves 20 ms after that iteration (B's first token at 46.64).
// Decode-first: A's fourth token one step later, 27.64. FIFO: A's fourth
// token was sent behind B's block, so it comes when B's first token does.
TEST(ServingSimulation, FifoStagesHoldDecodeTokensBehindEarlierPromptBlocks) {
  const WaferSteps model = pipeline_steps();
  const std::vector<Session> two = {one_request(0, 0.0, 64, 4), one_request(1, 21e-3, 400, 2)};
  SimulationOptions o = options(PrefillPolicy::chunked);
  const auto first = simulate(two, model, o);
  o.fifo_stages = true;
  const auto fifo = simulate(two, model, o);
  ASSERT_EQ(first.requests.size(), 2u);
  ASSERT_EQ(fifo.requests.size(), 2u);
  const double b_first_token = 21.64e-3 + 5e-3 + 20e-3;
  for (const auto* r : {&first, &fifo}) {
    EXPECT_NEAR(r->requests[0].ttft_s, 20.64e-3, 1e-12);
    EXPECT_NEAR(r->requests[1].arrival_s + r->requests[1].ttft_s, b_first_token, 1e-12);
  }
  EXPECT_NEAR(first.requests[0].end_to_end_s, 27.64e-3, 1e-12);
  EXPECT_NEAR(fifo.requests[0].end_to_end_s, b_first_token, 1e-12);
  // Without another request's block in the way, both orders are the same.
  const std::vector<Session> lone = {one_request(0, 0.0, 64, 4)};
  EXPECT_NEAR(simulate(lone, model, o).requests[0].end_to_end_s, 20.64e-3 + 3e-3, 1e-12);
}

// With fifo stages a prompt split over two iterations by the chunk budget
// decodes from its first token on, however long its last iteration was held
// behind its own first chunk. Budget 300 tokens; A (64 tokens, 40 out) at 0,
// its second token at 21.64 ms; B (400 tokens, 3 out) at 21 ms. From 21.64:
// A's decode and 299 of B's tokens, 1 + 2.99 ms (to 25.63; that chunk leaves
// at 45.63). From 25.63: A's decode and B's last 101 tokens, 1 + 1.01 ms,
// held to 45.63 (A's token trails the first chunk); B's last chunk passed at
// 27.64, so its first token is at 47.64. A decodes alone from 45.63, held to
// 47.64 by B's last chunk; then A and B together, a step each: B's second
// and third tokens at 48.64 and 49.64. (Decoding from the held iteration's
// end plus the fill put B's second token after 66 ms.)
TEST(ServingSimulation, FifoStagesLetASplitPromptDecodeFromItsFirstToken) {
  const WaferSteps model = pipeline_steps();
  const std::vector<Session> two = {one_request(0, 0.0, 64, 40), one_request(1, 21e-3, 400, 3)};
  SimulationOptions o = options(PrefillPolicy::chunked);
  o.chunk_tokens = 300;
  o.fifo_stages = true;
  const auto r = simulate(two, model, o);
  ASSERT_EQ(r.requests.size(), 2u);
  const auto& b = r.requests[1];
  EXPECT_NEAR(b.arrival_s + b.ttft_s, 47.64e-3, 1e-9);
  EXPECT_NEAR(b.arrival_s + b.end_to_end_s, 49.64e-3, 1e-9);
  EXPECT_NEAR(b.tbt_mean_s, 1e-3, 1e-9);
}

}  // namespace
}  // namespace wafersim::sim::serving
