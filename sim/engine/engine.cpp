#include "sim/engine/engine.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>

#include <systemc>

#include "fabric/fabric.hpp"
#include "models/kernels.hpp"
#include "models/reference.hpp"
#include "models/rng.hpp"
#include "models/weights.hpp"
#include "models/work_team.hpp"
#include "sim/exec/executor.hpp"
#include "sim/placement/placement.hpp"
#include "sim/program/program.hpp"
#include "sim/exec/record_recycler.hpp"
#include "sim/engine/system.hpp"
#include "sim/exec/value_lane.hpp"

namespace wafersim::sim {

namespace {

// Wafers' worth of link and ramp records the pool of a recycling run makes
// (and has faulted in) before the simulation starts: a token crossing a
// pipeline holds about this many at a time.
constexpr int kStockedWafers = 3;

// SystemC time base: one fabric clock cycle is represented as 1 ns of
// sc_time, so cycle counts stay exact integers; seconds come from clock_hz.
sc_core::sc_time to_sc(Cycles c) {
  return sc_core::sc_time(static_cast<double>(c.value), sc_core::SC_NS);
}
Cycles now_cycles() {
  return Cycles{static_cast<std::uint64_t>(sc_core::sc_time_stamp().to_seconds() * 1e9 + 0.5)};
}

// ---------------------------------------------------------------- SystemC --

// `ids` token ids (4 bytes each) over a wafer's edge I/O: its latency plus
// their serialization, in cycles (the prompt to the wafer; speculative ids
// between the draft and the target).
Cycles id_transfer_cycles(const fabric::WaferSpec& hw, std::size_t ids) {
  const double s = hw.io_latency_s + 4.0 * static_cast<double>(ids) / hw.io_bandwidth_bytes_per_s;
  return Cycles{static_cast<std::uint64_t>(std::ceil(s * hw.clock_hz))};
}

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

// A placed model the host feeds: its executor and lowered program. A
// functional run with the lane (sim/exec/value_lane.hpp) has `ex` timing only and
// `values` computing the numbers on `lane`, each stage posted as the
// simulation reaches it.
struct Pipeline {
  Executor* ex = nullptr;
  const Program* program = nullptr;
  Executor* values = nullptr;
  ValueLane* lane = nullptr;
  // Tracks the tokens in flight to give idle wafers' link records back
  // (sim/exec/record_recycler.hpp); shared by the target and the draft.
  RecordRecycler* recycler = nullptr;

  // Posts `work(values executor, mirror)` for token `m` (none without a
  // lane); the mirror gets m's header first.
  template <class Work>
  void post(TokenMessage& m, Work&& work) const {
    if (!lane) return;
    if (!m.values) m.values = std::make_shared<TokenMessage>();
    TokenMessage header;
    m.copy_header_to(header);
    m.lane_ticket =
        lane->post([ex = values, v = m.values, header, work = std::forward<Work>(work)]() mutable {
          header.copy_header_to(*v);
          work(*ex, *v);
        });
  }
  // The token the values chose and its logits, once the lane has them.
  void settle(TokenMessage& m) const {
    if (!m.values) return;
    lane->wait(m.lane_ticket);
    m.next_token = m.values->next_token;
    m.logits = std::move(m.values->logits);
    m.values.reset();
  }
};

// One pipeline stage (a decoder layer or the head): takes a token, runs its
// phases in simulated time, passes the token on.
SC_MODULE(StageModule) {
  sc_core::sc_port<sc_core::sc_fifo_in_if<TokenMessage*>> in;
  sc_core::sc_port<sc_core::sc_fifo_out_if<TokenMessage*>> out;

  StageModule(sc_core::sc_module_name name, const Pipeline& p, const StageProgram& program)
      : sc_module(name), p_(p), ex_(*p.ex), program_(program) {
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
      if (p_.recycler) p_.recycler->entered(*m);
      p_.post(*m, [sp = &program_](Executor& ex, TokenMessage& v) {
        run_stage(ex, *sp, v, [](const std::string&, const Timed&) {});
      });
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
        static_cast<unsigned long long>((b.compute + b.sram).value),
        static_cast<unsigned long long>(b.hops.value),
        static_cast<unsigned long long>(b.serialization.value),
        static_cast<unsigned long long>(b.contention.value));
  }

  const Pipeline p_;
  Executor& ex_;
  const StageProgram& program_;
  int trace_position_ =
      std::getenv("WAFERSIM_TRACE") ? std::atoi(std::getenv("WAFERSIM_TRACE")) : -1;
};

// Speculative decoding on the wafer (scenario `speculative_decoding`): the
// draft model, placed on wafers of its own, proposes up to `draft_tokens`
// tokens, one decode step after another. The target starts on the newest
// emitted token at once, and each proposal crosses the wafer I/O to the
// target as soon as it is ready, so the target verifies the round's tokens
// one after another through its layer pipeline (a block of T tokens would
// cost each core T times its tile; pipelined, the tokens overlap). When every
// token of the round is back, the longest prefix of proposals the target
// agrees with is accepted, followed by the target's own next token; both KV
// caches forget the rejected positions. Functional runs accept by comparing
// greedy choices, so the tokens are exactly the target's greedy tokens;
// timing-only runs accept each proposal with the scenario's acceptance rate,
// drawn from the workload seed. The host counts what happened in the run's
// analysis::SpeculativeRun.

// Where one user's speculative round stands.
struct Round {
  int position = 0;       // position of `last` in the sequence
  std::int32_t last = 0;  // newest emitted token: the round's first token on the target
  int draft_count = 0;    // proposals this round (fewer near the end of the workload)
  std::vector<std::int32_t> drafts;
  // The target's result for the round's token at position + i: its greedy
  // choice and (functional) logits; `returned` of draft_count + 1 are back.
  std::vector<std::int32_t> choices;
  std::vector<std::vector<float>> logits;
  int returned = 0;
  std::uint64_t started = 0;         // cycle `last` was ready
  std::uint64_t proposals_done = 0;  // cycle the last proposal was ready
};

// The host: sends the prompt in over the wafer's I/O, collects each step's
// token, and feeds generated tokens back until the workload is done. With
// speculative decoding it also drives the draft's pipeline.
SC_MODULE(HostModule) {
  using InPort = sc_core::sc_port<sc_core::sc_fifo_in_if<TokenMessage*>>;
  using OutPort = sc_core::sc_port<sc_core::sc_fifo_out_if<TokenMessage*>>;
  using OptionalIn =
      sc_core::sc_port<sc_core::sc_fifo_in_if<TokenMessage*>, 1, sc_core::SC_ZERO_OR_MORE_BOUND>;
  using OptionalOut =
      sc_core::sc_port<sc_core::sc_fifo_out_if<TokenMessage*>, 1, sc_core::SC_ZERO_OR_MORE_BOUND>;
  OutPort to_wafer;
  InPort from_wafer;
  OptionalOut to_draft;  // bound with speculative decoding only
  OptionalIn from_draft;

  HostModule(sc_core::sc_module_name name, Pipeline target, const Scenario& sc, Cycles io_cycles,
             analysis::RunResult& result, HostLog& log, const RunOptions& options,
             Pipeline draft = {}, analysis::SpeculativeRun* speculation = nullptr)
      : sc_module(name),
        target_(target),
        draft_(draft),
        spec_(speculation),
        sc_(sc),
        io_(io_cycles),
        result_(result),
        log_(log),
        options_(options),
        rounds_(log.size()),
        acceptance_rng_(sc.workload.seed ^ 0x5bd1e995a1b2c3d4ull) {
    SC_THREAD(process);
    if (spec_) SC_THREAD(draft_process);
  }
  SC_HAS_PROCESS(HostModule);

  std::vector<std::unique_ptr<TokenMessage>> messages;

 private:
  bool functional() const {
    return options_.functional;
  }

  TokenMessage* make(const Pipeline& p, int user, int position, std::int32_t token, bool prefill,
                     const Timed& id_ready, bool from_host) {
    messages.push_back(std::make_unique<TokenMessage>());
    TokenMessage* m = messages.back().get();
    m->user = user;
    m->position = position;
    m->token = token;
    m->prefill = prefill;
    m->start_cycle = from_host ? 0 : id_ready.at.value;
    slot(*m, Slot::x) = p.ex->embed(token, position, id_ready, from_host);
    p.post(*m, [=](Executor& ex, TokenMessage& v) {
      slot(v, Slot::x) = ex.embed(token, position, Timed{}, from_host);
    });
    if (p.recycler) p.recycler->track(*m);
    return m;
  }

  // A block of tokens from the host (prompt blocks, workload.prefill_block
  // > 1, and speculative verification): every token's embedding row moves
  // onto layer 0's input, where they travel on as one block
  // (Executor::stack).
  TokenMessage* make_block(const Pipeline& p, int user, int first,
                           std::span<const std::int32_t> ids, const Timed& arrived) {
    if (ids.size() == 1) return make(p, user, first, ids[0], true, arrived, true);
    messages.push_back(std::make_unique<TokenMessage>());
    TokenMessage* m = messages.back().get();
    m->user = user;
    m->position = first;
    m->tokens = static_cast<int>(ids.size());
    m->token = ids[0];
    m->prefill = true;
    const StageProgram& entry = p.program->stages.front();
    const auto embed_block = [&entry, first](Executor& ex, std::span<const std::int32_t> ids,
                                             const Timed& arrived) {
      std::vector<Vec> parts;
      for (std::size_t t = 0; t < ids.size(); ++t)
        parts.push_back(ex.move(ex.embed(ids[t], first + static_cast<int>(t), arrived, true),
                                entry.input, entry.input_spread));
      return Executor::stack(parts);
    };
    slot(*m, Slot::x) = embed_block(*p.ex, ids, arrived);
    p.post(*m, [embed_block, ids = std::vector<std::int32_t>(ids.begin(), ids.end())](
                   Executor& ex, TokenMessage& v) {
      slot(v, Slot::x) = embed_block(ex, ids, Timed{});
    });
    if (p.recycler) p.recycler->track(*m);
    return m;
  }

  // Into the target's (to_wafer) or the draft's (to_draft) pipeline.
  template <class Port>
  void send(Port & port, TokenMessage * m) {
    m->handed_at = now_cycles().value;
    port->write(m);
  }

  void record(const TokenMessage& m) {
    analysis::TokenRecord r;
    r.user = m.user;
    r.position = m.position;
    r.prefill = m.prefill;
    r.start_cycle = Cycles{m.start_cycle};
    r.end_cycle = m.done.at;
    r.token_in = m.token;
    r.critical_path = m.done.path;
    result_.token_records.push_back(r);
  }

  // Token ids leaving one system for another over the wafers' edge I/O
  // (target -> draft, draft -> target), ready at `at`.
  Timed io_hop(const Timed& at, std::size_t ids) const {
    return Timed{at.at, {}}.plus(Resource::io, id_transfer_cycles(sc_.hardware, ids));
  }

  // Emits a generated token of `user`, ready at `cycle`; true when the user
  // has all the tokens the workload asks for.
  bool emit(int u, std::int32_t token, std::uint64_t cycle, std::vector<float> logits) {
    UserLog& user = log_[static_cast<std::size_t>(u)];
    user.tokens.push_back(token);
    user.ready_cycles.push_back(cycle);
    if (functional()) user.logits.push_back(std::move(logits));
    return static_cast<int>(user.tokens.size()) == sc_.workload.generate_tokens;
  }
  // Timing-only runs have no logits: decode goes on with a stand-in id (the
  // last prompt id), which only changes which embedding row is read.
  std::int32_t chosen(const TokenMessage& m) const {
    return functional() ? m.next_token : log_[static_cast<std::size_t>(m.user)].prompt.back();
  }

  void process() {
    const int users = static_cast<int>(log_.size());
    const int n_prompt = static_cast<int>(sc_.workload.prompt_ids.size());
    const int block = sc_.workload.prefill_block;
    const int blocks = (n_prompt + block - 1) / block;
    const int total = users * (blocks + sc_.workload.generate_tokens - 1);
    // Every user's prompt arrives over the wafer I/O at once; the prompts
    // stream through the pipeline one user after another, in blocks of
    // prefill_block tokens (1: token by token). The draft reads the prompt
    // too, into its own cache, at the same time.
    const Timed arrived = Timed{}.plus(Resource::io, io_);
    for (int u = 0; u < users; ++u)
      for (int i = 0; i < n_prompt; i += block) {
        const int n = std::min(block, n_prompt - i);
        const auto ids = std::span<const std::int32_t>(log_[static_cast<std::size_t>(u)].prompt)
                             .subspan(static_cast<std::size_t>(i), static_cast<std::size_t>(n));
        TokenMessage* m = make_block(target_, u, i, ids, arrived);
        m->needs_logits = (i + n == n_prompt);
        send(to_wafer, m);
        if (spec_) send(to_draft, make_block(draft_, u, i, ids, arrived));
      }
    int processed = 0, finished = 0;
    while (finished < users) {
      TokenMessage* m = from_wafer->read();
      if (target_.recycler) target_.recycler->untrack(*m);
      if (m->needs_logits) target_.settle(*m);
      record(*m);
      ++processed;
      if (options_.progress) options_.progress(processed, total);
      if (!m->needs_logits) continue;
      if (m->verifies) {
        if (verified(*m)) ++finished;
        continue;
      }
      const std::int32_t next = chosen(*m);
      if (emit(m->user, next, m->done.at.value, std::move(m->logits))) {
        ++finished;
        continue;
      }
      const int position = m->position + m->tokens;
      if (spec_) {
        // The prompt's first token: the first speculative round.
        start_round(m->user, position, next, {next}, m->done);
        continue;
      }
      TokenMessage* nm =
          make(target_, m->user, position, next, false, Timed{m->done.at, {}}, false);
      nm->needs_logits = true;
      send(to_wafer, nm);
    }
    // Nothing is left to do: every stage waits on an empty fifo, so the
    // simulation ends by itself when this thread returns.
  }

  // ---- Speculative decoding ------------------------------------------------

  // A round starts from `last` at `position`, emitted by the target at `at`:
  // the target takes `last` at once, on-wafer; the draft first reads `feed`
  // (the ids its cache lacks, ending with `last`, over the I/O), then
  // proposes.
  void start_round(int u, int position, std::int32_t last, std::vector<std::int32_t> feed,
                   const Timed& at) {
    Round& r = rounds_[static_cast<std::size_t>(u)];
    const int remaining = sc_.workload.generate_tokens -
                          static_cast<int>(log_[static_cast<std::size_t>(u)].tokens.size());
    r.position = position;
    r.last = last;
    r.drafts.clear();
    // A round yields at least one token: propose no more than the workload
    // still needs beyond it.
    r.draft_count = std::min(sc_.speculative->decoding.draft_tokens, remaining - 1);
    r.choices.assign(static_cast<std::size_t>(r.draft_count) + 1, 0);
    r.logits.assign(static_cast<std::size_t>(r.draft_count) + 1, {});
    r.returned = 0;
    r.started = r.proposals_done = at.at.value;
    TokenMessage* t = make(target_, u, position, last, false, Timed{at.at, {}}, false);
    t->needs_logits = true;
    t->verifies = true;
    send(to_wafer, t);
    if (r.draft_count == 0) return;
    const int first = position + 1 - static_cast<int>(feed.size());
    TokenMessage* m = make_block(draft_, u, first, feed, io_hop(at, feed.size()));
    m->prefill = false;
    m->needs_logits = true;
    m->start_cycle = at.at.value;
    send(to_draft, m);
  }

  // The draft's pipeline returns: its prefill (nothing to do) or a proposal,
  // which goes to the target at once; the draft goes on until it has
  // proposed the round's tokens.
  void draft_process() {
    for (;;) {
      TokenMessage* m = from_draft->read();
      if (draft_.recycler) draft_.recycler->untrack(*m);
      if (m->needs_logits) draft_.settle(*m);
      ++spec_->draft_passes;
      if (!m->needs_logits) continue;
      spec_->draft_cycles += Cycles{m->done.at.value - m->start_cycle};
      Round& r = rounds_[static_cast<std::size_t>(m->user)];
      const std::int32_t d = chosen(*m);
      r.drafts.push_back(d);
      r.proposals_done = m->done.at.value;
      const int position = r.position + static_cast<int>(r.drafts.size());
      TokenMessage* v = make(target_, m->user, position, d, false, io_hop(m->done, 1), true);
      v->start_cycle = m->done.at.value;
      v->needs_logits = true;
      v->verifies = true;
      send(to_wafer, v);
      if (static_cast<int>(r.drafts.size()) < r.draft_count) {
        TokenMessage* nm = make(draft_, m->user, position, d, false, Timed{m->done.at, {}}, false);
        nm->needs_logits = true;
        send(to_draft, nm);
      }
    }
  }

  // A token of a round is back from the target. When the whole round is:
  // accept, emit, roll back, start the next round. True when the user is
  // done.
  bool verified(TokenMessage & m) {
    const int u = m.user;
    Round& r = rounds_[static_cast<std::size_t>(u)];
    const auto i = static_cast<std::size_t>(m.position - r.position);
    r.choices[i] = chosen(m);
    r.logits[i] = std::move(m.logits);
    if (++r.returned < r.draft_count + 1) return false;
    const int k = r.draft_count;
    int n = 0;
    if (functional())
      while (n < k &&
             r.drafts[static_cast<std::size_t>(n)] == r.choices[static_cast<std::size_t>(n)])
        ++n;
    else
      while (n < k && acceptance_rng_.uniform01() < sc_.speculative->decoding.acceptance_rate) ++n;
    analysis::SpeculativeRun& st = *spec_;
    ++st.rounds;
    st.proposed += static_cast<std::uint64_t>(k);
    st.accepted += static_cast<std::uint64_t>(n);
    if (n < k) ++st.rejected;
    st.verify_cycles += Cycles{m.done.at.value - r.proposals_done};
    st.round_cycles += Cycles{m.done.at.value - r.started};
    // Emitted: the n accepted proposals, then the target's own choice after
    // them; the target's result at position + j carries token j's logits.
    for (int j = 0; j < n; ++j)
      if (emit(u, r.drafts[static_cast<std::size_t>(j)], m.done.at.value,
               std::move(r.logits[static_cast<std::size_t>(j)])))
        return true;
    const std::int32_t own = r.choices[static_cast<std::size_t>(n)];
    if (emit(u, own, m.done.at.value, std::move(r.logits[static_cast<std::size_t>(n)])))
      return true;
    // Positions up to r.position + n hold the sequence (last, then the
    // accepted proposals); the draft has read up to r.position + k - 1.
    const int target_keep = r.position + n + 1;
    const int draft_keep = r.position + std::min(n, k - 1) + 1;
    for (const auto& [p, keep] :
         {std::pair{&target_, target_keep}, std::pair{&draft_, draft_keep}}) {
      p->ex->truncate_kv(u, keep);
      if (p->lane) p->lane->post([ex = p->values, u, keep = keep] { ex->truncate_kv(u, keep); });
    }
    // The ids the draft's cache lacks, up to `own`.
    std::vector<std::int32_t> feed;
    for (int p = draft_keep; p < target_keep; ++p)
      feed.push_back(p == r.position ? r.last
                                     : r.drafts[static_cast<std::size_t>(p - r.position - 1)]);
    feed.push_back(own);
    start_round(u, target_keep, own, std::move(feed), m.done);
    return false;
  }

  Pipeline target_, draft_;
  analysis::SpeculativeRun* spec_;  // with speculative decoding: its counters
  const Scenario& sc_;
  Cycles io_;
  analysis::RunResult& result_;
  HostLog& log_;
  const RunOptions& options_;
  std::vector<Round> rounds_;
  models::Xoshiro256StarStar acceptance_rng_;
};

// The stage modules of one placed model joined by fifos: in() feeds its
// first stage, out() is what its head hands back.
class StageChain {
 public:
  StageChain(const std::string& prefix, const Pipeline& p, int depth) {
    const Program& program = *p.program;
    const std::size_t n = program.stages.size();
    for (std::size_t i = 0; i <= n; ++i)
      fifos_.push_back(
          std::make_unique<MessageFifo>((prefix + "link_" + std::to_string(i)).c_str(), depth));
    for (std::size_t i = 0; i < n; ++i) {
      std::string name =
          prefix + program.stages[i].name;  // "layer 3 attention" -> "layer_3_attention"
      std::replace(name.begin(), name.end(), ' ', '_');
      stages_.push_back(std::make_unique<StageModule>(name.c_str(), p, program.stages[i]));
      stages_.back()->in(*fifos_[i]);
      stages_.back()->out(*fifos_[i + 1]);
    }
  }
  MessageFifo& in() { return *fifos_.front(); }
  MessageFifo& out() { return *fifos_.back(); }

 private:
  std::vector<std::unique_ptr<MessageFifo>> fifos_;
  std::vector<std::unique_ptr<StageModule>> stages_;
};

// The scenario the draft model is placed by: the target's hardware,
// precision, strategy and workload (so its cache holds the same context), on
// the fewest wafers that hold it; a placement file or per-matrix overrides
// name the target's matrices and do not apply.
Scenario draft_scenario(const Scenario& sc) {
  Scenario d = sc;
  d.model = sc.speculative->decoding.draft;
  d.model_preset = sc.speculative->draft_preset;
  d.wafers_auto = true;
  d.placement.file.clear();
  d.placement.matrices.clear();
  d.speculative.reset();
  return d;
}

// The executors of one placed model: `timing` runs in simulated time; with
// the functional lane, `values` computes the numbers on it (the timing one
// then has no weights) and the two share the experts a MoE token chose.
struct PipelineExecutors {
  std::unique_ptr<Executor> timing, values;
  std::unique_ptr<ExpertExchange> experts;
  ValueLane* lane = nullptr;

  PipelineExecutors(const PlacedSystem& s, fabric::WaferIo* io, const models::ModelConfig& model,
                    const models::Weights* weights, int bits, std::uint64_t seed, int threads,
                    ValueLane* value_lane)
      : lane(weights ? value_lane : nullptr) {
    timing = std::make_unique<Executor>(s.wafer_ptrs, io, model, s.placement, s.program,
                                        lane ? nullptr : weights, bits);
    timing->set_routing_seed(seed);  // MoE expert choice in timing-only runs
    if (!lane) {
      if (weights) timing->set_threads(threads);
      return;
    }
    // The lane's thread and threads - 2 helpers for the GEMVs (this thread
    // runs the simulation).
    values = std::make_unique<Executor>(s.wafer_ptrs, nullptr, model, s.placement, s.program,
                                        weights, bits);
    values->set_values_only();
    // This thread, waiting for the lane (a step's token), takes row bands
    // of the lane's GEMVs as a guest.
    values->set_threads(std::max(1, threads - 1), [l = lane] { l->ring(); });
    lane->add_helper([v = values.get()] { return v->assist(); });
    experts = std::make_unique<ExpertExchange>();
    timing->set_expert_exchange(experts.get());
    values->set_expert_exchange(experts.get());
    lane->on_error([x = experts.get()] { x->abandon(); });
  }
  Pipeline pipeline(const Program& program, RecordRecycler* recycler) const {
    return Pipeline{timing.get(), &program, values.get(), lane, recycler};
  }
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
  r.link_bytes_per_cycle = sc.hardware.link_bytes_per_cycle;
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
  const std::unique_ptr<PlacedSystem> sys = place_system(sc, options.placement_progress);
  host_times.place_s = host_since(t_host);
  const auto& wafers = sys->wafers;
  const Placement& placement = sys->placement;
  const Program& program = sys->program;
  fabric::WaferIo io(sc.hardware, static_cast<int>(wafers.size()));

  // Speculative decoding: the draft on wafers of its own.
  std::unique_ptr<PlacedSystem> draft_sys;
  if (sc.speculative) {
    t_host = HostClock::now();
    try {
      draft_sys = place_system(draft_scenario(sc), options.placement_progress);
    } catch (const fabric::FitError& e) {
      throw fabric::FitError("the speculative draft " + sc.speculative->decoding.draft.name +
                             " (placed on wafers of its own, " +
                             "as many as it needs up to one per layer): " + e.what());
    }
    host_times.place_s += host_since(t_host);
  }

  // With more than one wafer, the link and ramp records of wafers a token
  // has left go back to a pool for the wafers it reaches next
  // (sim/exec/record_recycler.hpp): same results, a few wafers' records in
  // memory instead of every wafer's.
  fabric::PagePool record_pool;
  RecordRecycler recycler;
  {
    std::vector<fabric::FlowModel*> flows;
    for (const auto& f : sys->wafers) flows.push_back(&f->flow());
    if (draft_sys)
      for (const auto& f : draft_sys->wafers) flows.push_back(&f->flow());
    if (flows.size() > 1 && options.recycle_link_records) recycler.recycle(flows, record_pool);
  }

  // The host's other cores fault in the wafers' link and ramp records ahead
  // of the simulation (fabric::PagePrefaulter), the target's wafers first:
  // in functional runs while this thread makes the weights, so that the
  // first token pass finds them present. With recycling the wafers hold
  // only their byte counters until a token reaches them; the pool's first
  // blocks are faulted in instead. Stopped when the simulation ends.
  const int threads = options.threads > 0 ? options.threads : models::WorkTeam::host_threads();
  std::vector<std::unique_ptr<fabric::PagePrefaulter>> prefaulters;
  if (threads > 1) {
    std::vector<fabric::PageRange> pages;
    if (recycler.active()) {
      const std::size_t wafer_count =
          sys->wafers.size() + (draft_sys ? draft_sys->wafers.size() : 0);
      pages = fabric::FlowModel::stock_records(
          record_pool, sys->wafers.front()->mesh(),
          static_cast<int>(std::min<std::size_t>(kStockedWafers, wafer_count)));
    }
    for (const PlacedSystem* s : {sys.get(), draft_sys.get()})
      if (s)
        for (const auto& f : s->wafers)
          for (const fabric::PageRange& range : f->flow().record_pages()) pages.push_back(range);
    prefaulters.push_back(std::make_unique<fabric::PagePrefaulter>(std::move(pages)));
  }

  std::optional<models::Weights> weights;
  t_host = HostClock::now();
  if (options.functional)
    weights =
        models::Weights::synthetic(sc.model, sc.precision, sc.workload.seed,
                                   models::HostStorage::compact, threads, options.weights_progress);
  host_times.weights_s = host_since(t_host);
  // A functional run with more than one thread computes its numbers on the
  // functional lane (sim/exec/value_lane.hpp) behind the timing; with one, both
  // in the same executor on this thread.
  std::unique_ptr<ValueLane> lane;
  if (options.functional && threads > 1) lane = std::make_unique<ValueLane>();
  PipelineExecutors target(*sys, &io, sc.model, weights ? &*weights : nullptr, bits,
                           sc.workload.seed, threads, lane.get());

  // The prompt's token ids reach the wafer over its edge I/O.
  const Cycles io_cycles = id_transfer_cycles(sc.hardware, static_cast<std::size_t>(n_prompt));

  // Elaborate: host -> layer 0 -> ... -> layer L-1 -> head -> host.
  const int users = sc.workload.users;
  const int depth = users * (n_prompt + sc.workload.generate_tokens) + 2;
  RecordRecycler* recycling = recycler.active() ? &recycler : nullptr;
  StageChain chain("", target.pipeline(program, recycling), depth);
  HostLog log(static_cast<std::size_t>(users));
  for (int u = 0; u < users; ++u)
    log[static_cast<std::size_t>(u)].prompt = user_prompt(sc.workload, u, sc.model.vocab_size);

  // Speculative decoding: the draft's own stage chain (host -> draft
  // layers -> draft head -> host).
  std::optional<models::Weights> draft_weights;
  std::unique_ptr<fabric::WaferIo> draft_io;
  std::unique_ptr<PipelineExecutors> draft;
  std::unique_ptr<StageChain> draft_chain;
  std::optional<analysis::SpeculativeRun> speculation;
  if (sc.speculative) {
    const models::gpu::SpeculativeDecoding& sd = sc.speculative->decoding;
    if (options.functional)
      draft_weights = models::Weights::synthetic(sd.draft, sc.precision, sc.workload.seed,
                                                 models::HostStorage::compact, threads,
                                                 options.weights_progress);
    draft_io =
        std::make_unique<fabric::WaferIo>(sc.hardware, static_cast<int>(draft_sys->wafers.size()));
    draft = std::make_unique<PipelineExecutors>(*draft_sys, draft_io.get(), sd.draft,
                                                draft_weights ? &*draft_weights : nullptr, bits,
                                                sc.workload.seed, threads, lane.get());
    draft_chain = std::make_unique<StageChain>(
        "draft_", draft->pipeline(draft_sys->program, recycling), depth + users * sd.draft_tokens);
    speculation.emplace();  // what the run is; the host counts how it went
    speculation->draft_model = sd.draft.name;
    speculation->draft_wafers = static_cast<int>(draft_sys->wafers.size());
    speculation->draft_tokens = sd.draft_tokens;
    speculation->acceptance_rate = sd.acceptance_rate;
    speculation->accepted_by_comparison = options.functional;
  }
  HostModule host("host", target.pipeline(program, recycling), sc, io_cycles, r, log, options,
                  draft ? draft->pipeline(draft_sys->program, recycling) : Pipeline{},
                  speculation ? &*speculation : nullptr);
  // Whatever way this function ends, the lane stops before what its work
  // refers to (executors, weights, programs) goes.
  struct StopLane {
    ValueLane* lane;
    ~StopLane() {
      if (lane) lane->stop();
    }
  } stop_lane{lane.get()};
  host.to_wafer(chain.in());
  host.from_wafer(chain.out());
  if (draft_chain) {
    host.to_draft(draft_chain->in());
    host.from_draft(draft_chain->out());
  }
  t_host = HostClock::now();
  sc_core::sc_start();
  if (lane) lane->drain();  // the last numbers (and any error of the lane's)
  prefaulters.clear();      // before any wafer is released below
  host_times.simulate_s = host_since(t_host);
  host_times.token_passes = users * (n_prompt + sc.workload.generate_tokens - 1);
  host_times.record_releases = recycler.releases();
  host_times.record_blocks_made = record_pool.blocks_made();
  host_times.record_blocks_reused = record_pool.blocks_reused();

  // Counters, wafer after wafer (stacked in y); a speculative draft's wafers
  // follow the target's. Nothing uses a wafer's fabric after the simulation,
  // so each is released once read: its memory then holds the counters
  // instead of adding to them (26 wafers of Llama-3.1-405B: ~1.1 GB of
  // counters beside ~5 GB of fabrics).
  std::vector<std::unique_ptr<fabric::Fabric>*> all_wafers;
  for (std::unique_ptr<fabric::Fabric>& f : sys->wafers) all_wafers.push_back(&f);
  if (draft_sys)
    for (std::unique_ptr<fabric::Fabric>& f : draft_sys->wafers) all_wafers.push_back(&f);
  r.wafers = static_cast<int>(all_wafers.size());
  const std::size_t cores = sys->wafers.front()->mesh().core_count();
  const std::size_t links = sys->wafers.front()->mesh().link_count();
  r.core_busy_cycles.reserve(cores * all_wafers.size());
  r.core_sram_bytes.reserve(cores * all_wafers.size());
  r.link_bytes.reserve(links * all_wafers.size());
  for (std::unique_ptr<fabric::Fabric>* wafer : all_wafers) {
    std::unique_ptr<fabric::Fabric>& f = *wafer;
    const std::vector<std::uint64_t> busy = f->cores().busy_cycles_by_core();
    const auto& sram = f->sram().all_used();
    r.core_busy_cycles.insert(r.core_busy_cycles.end(), busy.begin(), busy.end());
    r.core_sram_bytes.insert(r.core_sram_bytes.end(), sram.begin(), sram.end());
    r.link_bytes.resize(r.link_bytes.size() + links);
    f->flow().write_link_bytes_by_core(std::span(r.link_bytes).last(links));
    r.cores_used += f->sram().cores_used();
    r.sram_bytes_used += f->sram().total_used();
    f.reset();
  }
  r.sram_bytes_capacity = sc.hardware.sram_capacity() * static_cast<std::uint64_t>(r.wafers);
  r.total_cycles = now_cycles();

  // Latencies, per user: the first token is ready when the last prompt
  // token's logits have been reduced, and reaches the user over the I/O link;
  // every later token costs one decode step. TTFT is the mean over users.
  const Cycles io_out{
      static_cast<std::uint64_t>(std::ceil(sc.hardware.io_latency_s * sc.hardware.clock_hz))};
  r.users = users;
  r.max_context_tokens = static_cast<std::uint64_t>(placement.max_context_tokens);
  std::uint64_t ttft_sum = 0, prefill_sum = 0;
  for (const UserLog& u : log) {
    ttft_sum += u.ready_cycles.front() + io_out.value;
    prefill_sum += u.ready_cycles.front() - io_cycles.value;
    const std::uint64_t step =
        u.ready_cycles.size() > 1
            ? (u.ready_cycles.back() - u.ready_cycles.front()) / (u.ready_cycles.size() - 1)
            : 0;
    r.user_decode_cycles_per_token.push_back(Cycles{step});
  }
  r.ttft_cycles = Cycles{ttft_sum / static_cast<std::uint64_t>(users)};
  r.prefill_cycles = Cycles{prefill_sum / static_cast<std::uint64_t>(users)};
  std::uint64_t step_sum = 0;
  for (Cycles c : r.user_decode_cycles_per_token) step_sum += c.value;
  r.decode_cycles_per_token = Cycles{step_sum / static_cast<std::uint64_t>(users)};
  if (r.decode_cycles_per_token == Cycles{0})  // one generated token: its prefill pass is all
    r.decode_cycles_per_token =
        r.token_records.back().end_cycle - r.token_records.back().start_cycle;

  r.speculative = speculation;

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
