#include "sim/engine.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>

#include <systemc>

#include "fabric/fabric.hpp"
#include "models/kernels.hpp"
#include "models/reference.hpp"
#include "models/weights.hpp"
#include "sim/executor.hpp"
#include "sim/placement.hpp"
#include "sim/program.hpp"
#include "sim/system.hpp"

namespace wafersim::sim {

namespace {

// SystemC time base: one fabric clock cycle is represented as 1 ns of
// sc_time, so cycle counts stay exact integers; seconds come from clock_hz.
sc_core::sc_time to_sc(Cycles c) {
  return sc_core::sc_time(static_cast<double>(c.value), sc_core::SC_NS);
}
Cycles now_cycles() {
  return Cycles{static_cast<std::uint64_t>(sc_core::sc_time_stamp().to_seconds() * 1e9 + 0.5)};
}

// ---------------------------------------------------------------- SystemC --

using MessageFifo = sc_core::sc_fifo<TokenMessage*>;

// What the host saw of one user: each generated token, when it was ready,
// its logits (functional mode).
struct UserLog {
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> tokens;
  std::vector<std::uint64_t> ready_cycles;
  std::vector<std::vector<float>> logits;
};
using HostLog = std::vector<UserLog>;

// One pipeline stage (a decoder layer or the head): takes a token, runs its
// phases in simulated time, passes the token on.
SC_MODULE(StageModule) {
  sc_core::sc_port<sc_core::sc_fifo_in_if<TokenMessage*>> in;
  sc_core::sc_port<sc_core::sc_fifo_out_if<TokenMessage*>> out;

  StageModule(sc_core::sc_module_name name, Executor & ex, const StageProgram& program)
      : sc_module(name), ex_(ex), program_(program) {
    SC_THREAD(process);
  }

  SC_HAS_PROCESS(StageModule);

 private:
  void wait_until(const Timed& t) {
    const Cycles now = now_cycles();
    if (t.at > now) wait(to_sc(t.at - now));
  }

  void process() {
    for (;;) {
      TokenMessage* m = in->read();
      // A token that arrived while the stage was busy has waited in the
      // fifo (pipelining): none of its vectors is usable here before the
      // stage takes it. A token taken as it arrives keeps its ready times
      // (a stage continuing a layer may use a vector ready earlier).
      if (now_cycles().value > m->handed_at)
        for (Vec& v : m->slots)
          for (Timed& r : v.ready) r = r.not_before(now_cycles(), Resource::queueing);
      run_stage(ex_, program_, *m, [&](const std::string& label, const Timed& t) {
        trace(*m, label, t);
        wait_until(t);
      });
      m->handed_at = now_cycles().value;
      out->write(m);
    }
  }

  // WAFERSIM_TRACE=POSITION prints, for that token, when each phase's output
  // is complete and the critical path so far (cycles by resource).
  void trace(const TokenMessage& m, const std::string& label, const Timed& t) const {
    if (trace_position_ != m.position) return;
    const CycleBreakdown& b = t.path;
    std::fprintf(
        stderr,
        "trace pos %d %-28s at %10llu  compute %8llu hops %7llu ser %7llu contention %8llu\n",
        m.position, label.c_str(), static_cast<unsigned long long>(t.at.value),
        static_cast<unsigned long long>(b.compute + b.sram),
        static_cast<unsigned long long>(b.hops), static_cast<unsigned long long>(b.serialization),
        static_cast<unsigned long long>(b.contention));
  }

  Executor& ex_;
  const StageProgram& program_;
  int trace_position_ =
      std::getenv("WAFERSIM_TRACE") ? std::atoi(std::getenv("WAFERSIM_TRACE")) : -1;
};

// The host: sends the prompt in over the wafer's I/O, collects each step's
// token, and feeds generated tokens back until the workload is done.
SC_MODULE(HostModule) {
  sc_core::sc_port<sc_core::sc_fifo_out_if<TokenMessage*>> to_wafer;
  sc_core::sc_port<sc_core::sc_fifo_in_if<TokenMessage*>> from_wafer;

  HostModule(sc_core::sc_module_name name, Executor & ex, const Program& program,
             const Scenario& sc, Cycles io_cycles, analysis::RunResult& result, HostLog& log,
             const RunOptions& options)
      : sc_module(name),
        ex_(ex),
        program_(program),
        sc_(sc),
        io_(io_cycles),
        result_(result),
        log_(log),
        options_(options) {
    SC_THREAD(process);
  }
  SC_HAS_PROCESS(HostModule);

  std::vector<std::unique_ptr<TokenMessage>> messages;

 private:
  TokenMessage* make(int user, int position, std::int32_t token, bool prefill,
                     const Timed& id_ready, bool from_host) {
    messages.push_back(std::make_unique<TokenMessage>());
    TokenMessage* m = messages.back().get();
    m->user = user;
    m->position = position;
    m->token = token;
    m->prefill = prefill;
    m->start_cycle = from_host ? 0 : id_ready.at.value;
    slot(*m, Slot::x) = ex_.embed(token, position, id_ready, from_host);
    return m;
  }

  // A block of prompt tokens (workload.prefill_block > 1): every token's
  // embedding row moves onto layer 0's input, where they travel on as one
  // block (Executor::stack).
  TokenMessage* make_block(int user, int first, std::span<const std::int32_t> ids,
                           const Timed& arrived) {
    if (ids.size() == 1) return make(user, first, ids[0], true, arrived, true);
    messages.push_back(std::make_unique<TokenMessage>());
    TokenMessage* m = messages.back().get();
    m->user = user;
    m->position = first;
    m->tokens = static_cast<int>(ids.size());
    m->token = ids[0];
    m->prefill = true;
    const StageProgram& entry = program_.stages.front();
    std::vector<Vec> parts;
    for (std::size_t t = 0; t < ids.size(); ++t)
      parts.push_back(ex_.move(ex_.embed(ids[t], first + static_cast<int>(t), arrived, true),
                               entry.input, entry.input_spread));
    slot(*m, Slot::x) = Executor::stack(parts);
    return m;
  }

  void record(const TokenMessage& m) {
    analysis::TokenRecord r;
    r.user = m.user;
    r.position = m.position;
    r.prefill = m.prefill;
    r.start_cycle = m.start_cycle;
    r.end_cycle = m.done.at.value;
    r.token_in = m.token;
    r.critical_path = m.done.path;
    result_.token_records.push_back(r);
  }

  void process() {
    const int users = static_cast<int>(log_.size());
    const int n_prompt = static_cast<int>(sc_.workload.prompt_ids.size());
    const int block = sc_.workload.prefill_block;
    const int blocks = (n_prompt + block - 1) / block;
    const int total = users * (blocks + sc_.workload.generate_tokens - 1);
    // Every user's prompt arrives over the wafer I/O at once; the prompts
    // stream through the pipeline one user after another, in blocks of
    // prefill_block tokens (1: token by token).
    const Timed arrived = Timed{}.plus(Resource::io, io_);
    for (int u = 0; u < users; ++u)
      for (int i = 0; i < n_prompt; i += block) {
        const int n = std::min(block, n_prompt - i);
        TokenMessage* m =
            make_block(u, i,
                       std::span<const std::int32_t>(log_[static_cast<std::size_t>(u)].prompt)
                           .subspan(static_cast<std::size_t>(i), static_cast<std::size_t>(n)),
                       arrived);
        m->needs_logits = (i + n == n_prompt);
        m->handed_at = now_cycles().value;
        to_wafer->write(m);
      }
    int processed = 0, finished = 0;
    while (finished < users) {
      TokenMessage* m = from_wafer->read();
      record(*m);
      ++processed;
      if (options_.progress) options_.progress(processed, total);
      if (!m->needs_logits) continue;
      UserLog& user = log_[static_cast<std::size_t>(m->user)];
      // Timing-only runs have no logits: decode goes on with a stand-in id
      // (the last prompt id), which only changes which embedding row is read.
      const std::int32_t next = ex_.functional() ? m->next_token : user.prompt.back();
      user.tokens.push_back(next);
      user.ready_cycles.push_back(m->done.at.value);
      if (ex_.functional()) user.logits.push_back(std::move(m->logits));
      if (static_cast<int>(user.tokens.size()) == sc_.workload.generate_tokens) {
        ++finished;
        continue;
      }
      TokenMessage* nm =
          make(m->user, m->position + m->tokens, next, false, Timed{m->done.at, {}}, false);
      nm->needs_logits = true;
      nm->handed_at = now_cycles().value;
      to_wafer->write(nm);
    }
    // Nothing is left to do: every stage waits on an empty fifo, so the
    // simulation ends by itself when this thread returns.
  }

  Executor& ex_;
  const Program& program_;
  const Scenario& sc_;
  Cycles io_;
  analysis::RunResult& result_;
  HostLog& log_;
  const RunOptions& options_;
};

}  // namespace

analysis::RunResult run_scenario(const Scenario& sc, const RunOptions& options) {
  // The SystemC banner would corrupt --json output on stdout.
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  analysis::RunResult r;
  r.scenario_name = sc.name;
  r.scenario_file = sc.source_file;
  r.hardware_name = sc.hardware.name;
  r.model_name = sc.model.name;
  r.precision = models::dtype_name(sc.precision);
  r.placement_strategy = sc.placement.strategy;
  r.seed = sc.workload.seed;
  r.functional = options.functional;
  r.mesh_width = sc.hardware.mesh_width;
  r.mesh_height = sc.hardware.mesh_height;
  r.clock_hz = sc.hardware.clock_hz;
  r.link_bytes_per_cycle = sc.hardware.link_bytes_per_cycle.value;
  r.parameter_count = sc.model.parameter_count();
  r.prompt_ids = sc.workload.prompt_ids;
  r.resolved_scenario_yaml = sc.resolved_yaml;

  const int bits = models::dtype_bits(sc.precision);
  const int n_prompt = static_cast<int>(sc.workload.prompt_ids.size());
  using HostClock = std::chrono::steady_clock;
  const auto host_since = [](HostClock::time_point t0) {
    return std::chrono::duration<double>(HostClock::now() - t0).count();
  };
  HostTimes host_times;
  auto t_host = HostClock::now();
  const std::unique_ptr<PlacedSystem> sys = place_system(sc);
  host_times.place_s = host_since(t_host);
  const auto& wafers = sys->wafers;
  const auto& wafer_ptrs = sys->wafer_ptrs;
  const Placement& placement = sys->placement;
  const Program& program = sys->program;
  fabric::WaferIo io(sc.hardware, static_cast<int>(wafers.size()));

  std::optional<models::Weights> weights;
  t_host = HostClock::now();
  if (options.functional)
    weights = models::Weights::synthetic(sc.model, sc.precision, sc.workload.seed);
  host_times.weights_s = host_since(t_host);
  Executor ex(wafer_ptrs, &io, sc.model, placement, program, weights ? &*weights : nullptr, bits);
  ex.set_routing_seed(sc.workload.seed);  // MoE expert choice in timing-only runs

  // The prompt's token ids reach the wafer over its edge I/O.
  const double io_s =
      sc.hardware.io_latency_s + 4.0 * n_prompt / sc.hardware.io_bandwidth_bytes_per_s;
  const Cycles io_cycles{static_cast<std::uint64_t>(std::ceil(io_s * sc.hardware.clock_hz))};

  // Elaborate: host -> layer 0 -> ... -> layer L-1 -> head -> host.
  const int users = sc.workload.users;
  const int depth = users * (n_prompt + sc.workload.generate_tokens) + 2;
  const std::size_t n_stages = program.stages.size();
  std::vector<std::unique_ptr<MessageFifo>> fifos;
  for (std::size_t i = 0; i <= n_stages; ++i)
    fifos.push_back(std::make_unique<MessageFifo>(("link_" + std::to_string(i)).c_str(), depth));
  std::vector<std::unique_ptr<StageModule>> stages;
  for (std::size_t i = 0; i < n_stages; ++i) {
    const StageProgram& sp = program.stages[i];
    std::string name = sp.name;  // "layer 3 attention" -> module "layer_3_attention"
    std::replace(name.begin(), name.end(), ' ', '_');
    stages.push_back(std::make_unique<StageModule>(name.c_str(), ex, sp));
    stages.back()->in(*fifos[i]);
    stages.back()->out(*fifos[i + 1]);
  }
  HostLog log(static_cast<std::size_t>(users));
  for (int u = 0; u < users; ++u)
    log[static_cast<std::size_t>(u)].prompt = user_prompt(sc.workload, u, sc.model.vocab_size);
  HostModule host("host", ex, program, sc, io_cycles, r, log, options);
  host.to_wafer(*fifos[0]);
  host.from_wafer(*fifos[n_stages]);
  t_host = HostClock::now();
  sc_core::sc_start();
  host_times.simulate_s = host_since(t_host);
  host_times.token_passes = users * (n_prompt + sc.workload.generate_tokens - 1);

  // Counters, wafer after wafer (stacked in y). Nothing uses a wafer's
  // fabric after the simulation, so each is released once read: its memory
  // then holds the counters instead of adding to them (26 wafers of
  // Llama-3.1-405B: ~1.1 GB of counters beside ~5 GB of fabrics).
  r.wafers = static_cast<int>(wafers.size());
  const std::size_t cores = wafers.front()->mesh().core_count();
  const std::size_t links = wafers.front()->mesh().link_count();
  r.core_busy_cycles.reserve(cores * wafers.size());
  r.core_sram_bytes.reserve(cores * wafers.size());
  r.link_bytes.reserve(links * wafers.size());
  for (std::unique_ptr<fabric::Fabric>& f : sys->wafers) {
    const auto& busy = f->cores().all_busy_cycles();
    const auto& sram = f->sram().all_used();
    r.core_busy_cycles.insert(r.core_busy_cycles.end(), busy.begin(), busy.end());
    r.core_sram_bytes.insert(r.core_sram_bytes.end(), sram.begin(), sram.end());
    r.link_bytes.resize(r.link_bytes.size() + links);
    f->flow().write_link_bytes_by_core(std::span(r.link_bytes).last(links));
    r.cores_used += f->sram().cores_used();
    r.sram_bytes_used += f->sram().total_used().value;
    f.reset();
  }
  r.sram_bytes_capacity = sc.hardware.sram_capacity().value * static_cast<std::uint64_t>(r.wafers);
  r.total_cycles = now_cycles().value;

  // Latencies, per user: the first token is ready when the last prompt
  // token's logits have been reduced, and reaches the user over the I/O link;
  // every later token costs one decode step. TTFT is the mean over users.
  const Cycles io_out{
      static_cast<std::uint64_t>(std::ceil(sc.hardware.io_latency_s * sc.hardware.clock_hz))};
  r.users = users;
  r.max_context_tokens = static_cast<std::uint64_t>(placement.max_context_tokens);
  std::uint64_t ttft_sum = 0;
  for (const UserLog& u : log) {
    ttft_sum += u.ready_cycles.front() + io_out.value;
    const std::uint64_t step =
        u.ready_cycles.size() > 1
            ? (u.ready_cycles.back() - u.ready_cycles.front()) / (u.ready_cycles.size() - 1)
            : 0;
    r.user_decode_cycles_per_token.push_back(step);
  }
  r.ttft_cycles = ttft_sum / static_cast<std::uint64_t>(users);
  std::uint64_t step_sum = 0;
  for (std::uint64_t c : r.user_decode_cycles_per_token) step_sum += c;
  r.decode_cycles_per_token = step_sum / static_cast<std::uint64_t>(users);
  if (r.decode_cycles_per_token == 0)  // one generated token: the prefill pass is all there is
    r.decode_cycles_per_token =
        r.token_records.back().end_cycle - r.token_records.back().start_cycle;

  t_host = HostClock::now();
  if (options.functional) {
    // Tokens of all users, user after user; each user's against its own
    // reference generation.
    double err = 0.0;
    for (const UserLog& u : log) {
      r.tokens.insert(r.tokens.end(), u.tokens.begin(), u.tokens.end());
      const models::Generation ref =
          models::greedy_generate(*weights, u.prompt, sc.workload.generate_tokens);
      r.reference_tokens.insert(r.reference_tokens.end(), ref.tokens.begin(), ref.tokens.end());
      for (std::size_t t = 0; t < std::min(ref.logits.size(), u.logits.size()); ++t)
        for (std::size_t i = 0; i < ref.logits[t].size(); ++i)
          err = std::max(err, static_cast<double>(std::fabs(ref.logits[t][i] - u.logits[t][i])));
    }
    r.max_logit_abs_error = err;
  }
  host_times.reference_s = host_since(t_host);
  if (options.host_times) *options.host_times = host_times;
  return r;
}

}  // namespace wafersim::sim
