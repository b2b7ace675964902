#include "sim/engine/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <unordered_map>

#include <systemc>

#include "fabric/fabric.hpp"
#include "models/kernels.hpp"
#include "models/reference.hpp"
#include "models/safetensors.hpp"
#include "models/tokenizer.hpp"
#include "models/weights.hpp"
#include "models/work_team.hpp"
#include "sim/engine/speculative_rounds.hpp"
#include "sim/engine/step_clock.hpp"
#include "sim/engine/system.hpp"
#include "sim/exec/executor.hpp"
#include "sim/exec/layer_replay.hpp"
#include "sim/exec/pipeline_replay.hpp"
#include "sim/exec/record_recycler.hpp"
#include "sim/exec/value_lane.hpp"
#include "sim/placement/placement.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

namespace {

// Wafers' worth of link and ramp records the pool of a recycling run makes
// (and has faulted in) before the simulation starts: a token crossing a
// pipeline holds about this many at a time.
constexpr int kStockedWafers = 3;

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
  Cycles arrival;    // when its prompt reached the host (workload.arrivals_s)
  Cycles io;         // its prompt's ids over the wafer I/O
  int generate = 0;  // tokens it asks for (workload.generate_tokens)
  int cached = 0;    // positions cached before its prompt (workload.cached_tokens)
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
  // Replays layers that repeat one just simulated (sim/exec/layer_replay.hpp);
  // null: every layer is simulated.
  LayerReplay* replay = nullptr;
  // Replays the steps of several messages in flight where the whole
  // pipeline repeats a layer on (sim/exec/pipeline_replay.hpp); null: none.
  PipelineReplay* pipeline_replay = nullptr;
  // Called after each stage pass with the message's weight in the progress
  // report (RunProgress; at 1 group a token spends seconds of host time on
  // the wafer); null: none.
  const std::function<void(int)>* pass_done = nullptr;
  // Wakes the stages' threads in a fixed order (sim/engine/step_clock.hpp),
  // and this pipeline's place in it: among stages due in one cycle, the
  // target's before the draft's, each pipeline's furthest down first.
  StepClock* clock = nullptr;
  int rank = 0;

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
    m.next_tokens = std::move(m.values->next_tokens);
    m.logits = std::move(m.values->logits);
    m.values.reset();
  }
};

// What `run --trace` records (analysis::RunTrace) as the stages run: the
// trace, the numbers it gives the messages, and the byte counts of the
// wafers' links (those of the target's wafers, then the draft's).
class TraceTap {
 public:
  explicit TraceTap(analysis::RunTrace& trace) : trace_(trace) {}

  analysis::RunTrace& trace() { return trace_; }
  // Adds the wafers of one placed model; returns the index of its first.
  int add_wafers(const std::vector<fabric::Fabric*>& wafers, const std::string& prefix,
                 Bytes capacity) {
    const int first = static_cast<int>(flows_.size());
    for (std::size_t w = 0; w < wafers.size(); ++w) {
      flows_.push_back(&wafers[w]->flow());
      trace_.wafers.push_back({prefix + "wafer " + std::to_string(w),
                               wafers[w]->sram().total_used().value, capacity.value});
    }
    return first;
  }
  // Bytes carried so far by the links of wafers [first, first + count).
  std::uint64_t carried(int first, int count) const {
    std::uint64_t sum = 0;
    for (int w = first; w < first + count; ++w)
      sum += flows_[static_cast<std::size_t>(w)]->carried_bytes();
    return sum;
  }
  // The number of message `m` (in the order messages first enter a stage).
  std::uint32_t message(const TokenMessage* m) {
    return message_ids_.try_emplace(m, static_cast<std::uint32_t>(message_ids_.size()))
        .first->second;
  }

 private:
  analysis::RunTrace& trace_;
  std::vector<const fabric::FlowModel*> flows_;
  std::unordered_map<const TokenMessage*, std::uint32_t> message_ids_;
};

// Where a stage chain records (with --trace): the tap, the chain's wafers
// in the tap's numbering and the prefix of its stages' names.
struct ChainTrace {
  TraceTap* tap = nullptr;
  int first_wafer = 0;
  int wafers = 0;
  std::string prefix;
};

// One pipeline stage (a decoder layer or the head): takes a token, runs its
// phases in simulated time, passes the token on.
SC_MODULE(StageModule) {
  sc_core::sc_port<sc_core::sc_fifo_in_if<TokenMessage*>> in;
  sc_core::sc_port<sc_core::sc_fifo_out_if<TokenMessage*>> out;

  StageModule(sc_core::sc_module_name name, const Pipeline& p, const StageProgram& program,
              const ChainTrace& chain_trace)
      : sc_module(name),
        p_(p),
        ex_(*p.ex),
        program_(program),
        chain_trace_(chain_trace),
        rank_(clock_rank(p, program)) {
    if (chain_trace_.tap) {
      const Layout& where = program.input.empty() ? program.output : program.input;
      stage_wafer_ = chain_trace_.first_wafer + (where.empty() ? 0 : where.front().wafer);
      analysis::RunTrace& t = chain_trace_.tap->trace();
      trace_stage_ = static_cast<std::uint32_t>(t.stages.size());
      t.stages.push_back({chain_trace_.prefix + program.name, stage_wafer_});
    }
    SC_THREAD(process);
  }

  SC_HAS_PROCESS(StageModule);

 private:
  void wait_until(const Timed& t) {
    if (t.at > now_cycles()) p_.clock->wait_until(t.at, rank_, wake_);
  }

  // The stage's rank among those the clock wakes in one cycle (the host's
  // is 0): the target's stages before the draft's, further down first.
  static std::uint64_t clock_rank(const Pipeline& p, const StageProgram& program) {
    const auto stage = static_cast<std::uint64_t>(&program - p.program->stages.data());
    return (static_cast<std::uint64_t>(p.rank) + 1) << 32 | (0xffffffffu - stage);
  }

  void process() {
    for (;;) {
      TokenMessage* m = in->read();
      // A token that arrived while the stage was busy has waited in the
      // fifo (pipelining): none of its vectors is usable here before the
      // stage takes it. A token taken as it arrives keeps its ready times
      // (a stage continuing a layer may use a vector ready earlier).
      if (now_cycles() > m->handed_at)
        for (Vec& v : m->slots)
          for (Timed& r : v.ready) r = r.not_before(now_cycles(), Resource::queueing);
      if (p_.recycler) p_.recycler->entered(*m);
      p_.post(*m, [sp = &program_](Executor& ex, TokenMessage& v) {
        run_stage(ex, *sp, v, [](const std::string&, const Timed&) {});
      });
      Cycles until;
      if (p_.replay && p_.replay->enter(program_, *m, Cycles{now_cycles()}, until)) {
        wait_until(Timed{until, {}});
      } else if (!chain_trace_.tap) {
        run_steps(*m);
      } else {
        run_traced(*m);
      }
      m->handed_at = now_cycles();
      if (p_.replay) p_.replay->left(program_, *m, m->handed_at);
      if (chain_trace_.tap) record_pass(*m);
      if (p_.pass_done) (*p_.pass_done)(m->user_count());
      out->write(m);
    }
  }

  // run_stage, each step offered to the pipeline replay first (when there
  // is one) and told to it when simulated.
  void run_steps(TokenMessage & m) {
    PipelineReplay* replay = p_.pipeline_replay;
    int step = 0;
    bool replayed = false;
    Cycles began;
    run_stage(
        ex_, program_, m,
        [&](const std::string& label, const Timed& t) {
          trace(m, label, t);
          if (replay && !replayed) replay->stepped(program_, step, m, began, t.at);
          ++step;
          wait_until(t);
        },
        [&](Timed& t) {
          began = Cycles{now_cycles()};
          if (!replay) return false;
          Cycles done;
          replayed = replay->replayed(program_, step, m, began, done);
          if (replayed) t = Timed{done, {}};
          return replayed;
        });
  }

  // run_stage as above, each phase recorded for --trace: from when this
  // process started it to when its output was complete, with the bytes it
  // put on the links (counted before waiting: other stages run meanwhile).
  void run_traced(TokenMessage & m) {
    TraceTap& tap = *chain_trace_.tap;
    phases_.clear();
    pass_enter_ = now_cycles();
    pass_message_ = tap.message(&m);
    Cycles begin = pass_enter_;
    std::uint64_t mark = tap.carried(chain_trace_.first_wafer, chain_trace_.wafers);
    run_stage(ex_, program_, m, [&](const std::string& label, const Timed& t) {
      trace(m, label, t);
      const std::uint64_t bytes = tap.carried(chain_trace_.first_wafer, chain_trace_.wafers) - mark;
      wait_until(t);
      const Cycles end = now_cycles();
      phases_.push_back({tap.trace().label(label), begin, end, bytes});
      begin = end;
      mark = tap.carried(chain_trace_.first_wafer, chain_trace_.wafers);
    });
  }

  void record_pass(const TokenMessage& m) {
    TraceTap& tap = *chain_trace_.tap;
    analysis::TracePass pass;
    pass.stage = trace_stage_;
    pass.message = pass_message_;
    pass.user = m.user;
    pass.position = m.position;
    pass.tokens = m.tokens;
    pass.prefill = m.prefill;
    pass.enter = pass_enter_;
    pass.leave = m.handed_at;
    pass.wafer_link_bytes = tap.carried(stage_wafer_, 1);
    tap.trace().add_pass(pass, phases_);
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
  ChainTrace chain_trace_;  // tap null: --trace is off
  std::uint32_t trace_stage_ = 0;
  int stage_wafer_ = 0;
  Cycles pass_enter_;
  std::uint32_t pass_message_ = 0;
  std::vector<analysis::TracePhase> phases_;
  int trace_position_ =
      std::getenv("WAFERSIM_TRACE") ? std::atoi(std::getenv("WAFERSIM_TRACE")) : -1;
  std::uint64_t rank_;
  sc_core::sc_event wake_;
};

// Speculative decoding on the wafer (scenario `speculative_decoding`): the
// draft model, placed on wafers of its own, proposes one decode step after
// another. The target starts on the newest emitted token at once, and each
// proposal crosses the wafer I/O to the target as soon as it is ready, so
// the target verifies the round's tokens one after another through its
// layer pipeline (a block of T tokens would cost each core T times its
// tile; pipelined, the tokens overlap). What a round is, what it accepts and
// what it counts is SpeculativeRounds' (sim/engine/speculative_rounds.hpp);
// the host makes and sends the tokens in simulated time.

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

  HostModule(sc_core::sc_module_name name, Pipeline target, const Scenario& sc,
             analysis::RunResult& result, HostLog& log, const RunOptions& options,
             Pipeline draft = {}, SpeculativeRounds* speculation = nullptr)
      : sc_module(name),
        target_(target),
        draft_(draft),
        spec_(speculation),
        sc_(sc),
        result_(result),
        log_(log),
        options_(options) {
    SC_THREAD(process);
    if (spec_) SC_THREAD(draft_process);
  }
  SC_HAS_PROCESS(HostModule);

  std::vector<std::unique_ptr<TokenMessage>> messages;

  // Reports progress to RunOptions::progress: at the start, after each token
  // back, and after each stage pass of the target's pipeline (`weight`: the
  // message's in the token count).
  void beat() const {
    if (!options_.progress || progress_.tokens_total <= 0) return;
    RunProgress p = progress_;
    if (spec_) {
      // Rounds verify tokens that are not kept: the passes are not known
      // ahead, so they follow the tokens.
      p.passes_done = p.tokens_done * stages();
    } else if (p.tokens_done < p.tokens_total) {
      // The passes reach their total with the last token back, not with its
      // last stage pass just before.
      p.passes_done = std::min(p.passes_done, p.passes_total - 1);
    }
    options_.progress(p);
  }
  void passed(int weight) {
    progress_.passes_done += weight;
    beat();
  }

 private:
  RunProgress progress_;
  long long stages() const {
    return static_cast<long long>(target_.program->stages.size());
  }
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
    m->start_cycle = id_ready.at;  // a host message's caller sets when it left the host
    slot(*m, Slot::x) = p.ex->embed(token, position, id_ready, from_host);
    p.post(*m, [=](Executor& ex, TokenMessage& v) {
      slot(v, Slot::x) = ex.embed(token, position, Timed{}, from_host);
    });
    if (p.recycler) p.recycler->track(*m);
    return m;
  }

  // Rows of several tokens in one message: every row's embedding (its token
  // at its position, the ids ready at `ready`, from the host or on-wafer)
  // moves onto layer 0's input, where the rows travel on as one block
  // (Executor::stack); the values mirror does the same.
  void embed_rows(const Pipeline& p, TokenMessage& m, std::vector<RowTag> rows, const Timed& ready,
                  bool from_host) {
    const StageProgram& entry = p.program->stages.front();
    const auto embed = [&entry, rows = std::move(rows), from_host](Executor& ex,
                                                                   const Timed& ready) {
      std::vector<Vec> parts;
      for (const RowTag& r : rows)
        parts.push_back(ex.move(ex.embed(r.token, r.position, ready, from_host), entry.input,
                                entry.input_spread));
      return Executor::stack(parts);
    };
    slot(m, Slot::x) = embed(*p.ex, ready);
    p.post(m, [embed](Executor& ex, TokenMessage& v) { slot(v, Slot::x) = embed(ex, Timed{}); });
    if (p.recycler) p.recycler->track(m);
  }

  // A block of tokens from the host (prompt blocks, workload.prefill_block
  // > 1, and speculative verification), its ids on the wafer at `arrived`;
  // its record starts at `start`.
  TokenMessage* make_block(const Pipeline& p, int user, int first,
                           std::span<const std::int32_t> ids, const Timed& arrived, Cycles start) {
    if (ids.size() == 1) {
      TokenMessage* m = make(p, user, first, ids[0], true, arrived, true);
      m->start_cycle = start;
      return m;
    }
    messages.push_back(std::make_unique<TokenMessage>());
    TokenMessage* m = messages.back().get();
    m->start_cycle = start;
    m->user = user;
    m->position = first;
    m->tokens = static_cast<int>(ids.size());
    m->token = ids[0];
    m->prefill = true;
    std::vector<RowTag> rows = block_rows(user, first, m->tokens);
    for (std::size_t t = 0; t < ids.size(); ++t) rows[t].token = ids[t];
    embed_rows(p, *m, std::move(rows), arrived, true);
    return m;
  }

  // A decode batch (workload.decode_batch > 1): the next token of each of
  // `rows`' users in one message, sent once the batch's last token is known
  // (`ready`); the ids on the wafer already, or (from_host: a batch of
  // prompt blocks) from the host.
  TokenMessage* make_batch(const Pipeline& p, const std::vector<RowTag>& rows, const Timed& ready,
                           bool from_host = false) {
    messages.push_back(std::make_unique<TokenMessage>());
    TokenMessage* m = messages.back().get();
    m->user = rows.front().user;
    m->position = rows.front().position;
    m->tokens = static_cast<int>(rows.size());
    m->token = rows.front().token;
    m->batch = rows;
    m->needs_logits = true;
    m->start_cycle = ready.at;
    embed_rows(p, *m, rows, ready, from_host);
    return m;
  }

  // Into the target's (to_wafer) or the draft's (to_draft) pipeline.
  template <class Port>
  void send(Port & port, TokenMessage * m) {
    m->handed_at = now_cycles();
    port->write(m);
  }
  void send_to_wafer(TokenMessage * m) {
    if (target_.replay) target_.replay->sent();
    if (target_.pipeline_replay) target_.pipeline_replay->sent();
    send(to_wafer, m);
  }

  // One record per message; a decode batch's, one per row.
  void record(const TokenMessage& m) {
    analysis::TokenRecord r;
    r.user = m.user;
    r.position = m.position;
    r.prefill = m.prefill;
    r.start_cycle = m.start_cycle;
    r.end_cycle = m.done.at;
    r.token_in = m.token;
    r.critical_path = m.done.path;
    if (!m.is_batch()) {
      result_.token_records.push_back(std::move(r));
      return;
    }
    for (std::size_t t = 0; t < m.batch.size(); ++t) {
      // One record per user of the batch (its row of a decode step; its
      // block of a batch of prompt blocks, as its own block message would
      // have, starting at the arrival of the member the batch waited for:
      // an earlier member's wait is in its TTFT, not in its records).
      if (t > 0 && m.batch[t].user == m.batch[t - 1].user) continue;
      r.user = m.batch[t].user;
      r.position = m.batch[t].position;
      r.token_in = m.batch[t].token;
      result_.token_records.push_back(r);
    }
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
    // The first comes with the prompt's last block (counted with it).
    if (user.tokens.size() > 1) {
      ++progress_.tokens_done;
      beat();
    }
    return static_cast<int>(user.tokens.size()) == user.generate;
  }
  // The token the head's row `t` of `m` chose, for user `u`. Timing-only
  // runs have no logits: decode goes on with a stand-in id (the user's last
  // prompt id), which only changes which embedding row is read.
  std::int32_t chosen(const TokenMessage& m, std::size_t t, int u) const {
    if (functional()) return m.next_tokens.at(t);
    return log_[static_cast<std::size_t>(u)].prompt.back();
  }
  std::int32_t chosen(const TokenMessage& m) const {
    return chosen(m, 0, m.user);
  }

  // User `u` chose `token` for `position` at `done`: emits it and, unless
  // the user is done (then 1 is returned), sends its next decode token, on
  // its own or (workload.decode_batch > 1) with its batch once the batch's
  // last member has its token.
  int decode_next(int u, int position, std::int32_t token, const Timed& done,
                  std::vector<float>& logits) {
    const int b = sc_.workload.decode_batch;
    auto& waiting = waiting_[static_cast<std::size_t>(u / b)];
    int& members = members_[static_cast<std::size_t>(u / b)];
    const bool last = emit(u, token, done.at.value, std::move(logits));
    if (last)
      --members;
    else
      waiting.push_back({u, position, token});
    if (waiting.empty() || static_cast<int>(waiting.size()) < members) return last ? 1 : 0;
    if (b == 1) {
      TokenMessage* nm = make(target_, u, position, token, false, Timed{done.at, {}}, false);
      nm->needs_logits = true;
      send_to_wafer(nm);
    } else {
      // Its last member's token is the latest: the batch leaves now.
      send_to_wafer(make_batch(target_, waiting, Timed{done.at, {}}));
    }
    waiting.clear();
    return last ? 1 : 0;
  }

  // User u's prompt, sent now (its arrival) over the wafer I/O: it streams
  // through the pipeline in blocks of prefill_block tokens (1: token by
  // token), behind whatever the host sent before. The draft reads the
  // prompt too, into its own cache, at the same time.
  void send_prompt(int u) {
    const UserLog& user = log_[static_cast<std::size_t>(u)];
    const int n_prompt = static_cast<int>(user.prompt.size());
    const int block = sc_.workload.prefill_block;
    const Timed arrived = Timed{user.arrival, {}}.plus(Resource::io, user.io);
    for (int i = 0; i < n_prompt; i += block) {
      const int n = std::min(block, n_prompt - i);
      const auto ids = std::span<const std::int32_t>(user.prompt)
                           .subspan(static_cast<std::size_t>(i), static_cast<std::size_t>(n));
      // After the user's cached positions (workload.cached_tokens).
      const int first = user.cached + i;
      TokenMessage* m = make_block(target_, u, first, ids, arrived, user.arrival);
      m->needs_logits = (i + n == n_prompt);
      send_to_wafer(m);
      if (spec_) send(to_draft, make_block(draft_, u, first, ids, arrived, user.arrival));
    }
  }

  // Decode batch b's users [first, last) (workload.decode_batch, in user
  // order; the last batch may be smaller).
  std::pair<int, int> batch_members(int b) const {
    const int first = b * sc_.workload.decode_batch;
    return {first, std::min(static_cast<int>(log_.size()), first + sc_.workload.decode_batch)};
  }

  // User u's prompt has arrived: it goes now, or (workload.batch_prompts)
  // with its decode batch's once the batch's last member has arrived.
  void arrived(int u) {
    if (!sc_.workload.batch_prompts) {
      send_prompt(u);
      return;
    }
    const int b = u / sc_.workload.decode_batch;
    const auto [first, last] = batch_members(b);
    if (++arrived_[static_cast<std::size_t>(b)] == last - first) send_batch_prompts(b);
  }

  // Decode batch b's prompts, every member arrived: block i of each member
  // whose prompt has one goes in one message (member after member, a GEMM
  // of all their rows through every matrix), ready when the last member's
  // ids are on the wafer; the head takes each member's last prompt token
  // where its prompt ends.
  void send_batch_prompts(int b) {
    const int block = sc_.workload.prefill_block;
    const auto [first, last] = batch_members(b);
    // Ready when the member whose ids reach the wafer last has them there;
    // its records start at that member's arrival (as its own prompt's would).
    Timed ready;
    Cycles start;
    int longest = 0;
    for (int u = first; u < last; ++u) {
      const UserLog& user = log_[static_cast<std::size_t>(u)];
      const Timed on_wafer = Timed{user.arrival, {}}.plus(Resource::io, user.io);
      if (u == first || on_wafer.at > ready.at) ready = on_wafer, start = user.arrival;
      longest = std::max(longest, static_cast<int>(user.prompt.size()));
    }
    for (int i = 0; i < longest; i += block) {
      std::vector<RowTag> rows;
      std::vector<int> logit_rows;
      for (int u = first; u < last; ++u) {
        const UserLog& user = log_[static_cast<std::size_t>(u)];
        const int n_prompt = static_cast<int>(user.prompt.size());
        if (i >= n_prompt) continue;
        const int n = std::min(block, n_prompt - i);
        // After the user's cached positions (workload.cached_tokens).
        for (int t = i; t < i + n; ++t)
          rows.push_back({u, user.cached + t, user.prompt[static_cast<std::size_t>(t)]});
        if (i + n == n_prompt) logit_rows.push_back(static_cast<int>(rows.size()) - 1);
      }
      TokenMessage* m = make_batch(target_, rows, ready, true);
      m->prefill = true;
      m->logit_rows = std::move(logit_rows);
      m->needs_logits = !m->logit_rows.empty();
      m->start_cycle = start;
      send_to_wafer(m);
    }
  }

  // The next message back from the wafer; meanwhile every prompt due
  // before it arrives is sent at its arrival (`pending`: users by arrival,
  // the ones not yet sent from `next`).
  TokenMessage* next_from_wafer(const std::vector<int>& pending, std::size_t& next) {
    while (next < pending.size() && from_wafer->num_available() == 0) {
      const Cycles due = log_[static_cast<std::size_t>(pending[next])].arrival;
      const Cycles now = now_cycles();
      if (due > now) {
        // First among whatever is due then (rank 0): a prompt that arrives
        // in the cycle a step starts is sent before it.
        target_.clock->wait_until_or(due, 0, wake_, from_wafer->data_written_event());
        continue;
      }
      arrived(pending[next++]);
    }
    if (target_.pipeline_replay) target_.pipeline_replay->prompts_pending(next < pending.size());
    TokenMessage* m = from_wafer->read();
    if (target_.replay) target_.replay->returned();
    if (target_.pipeline_replay) target_.pipeline_replay->returned(*m);
    return m;
  }

  void process() {
    const int users = static_cast<int>(log_.size());
    const int block = sc_.workload.prefill_block;
    // Tokens back: a prompt's blocks as they come back, then each generated
    // token but the first (which ends the prompt); a decode batch counts its
    // users.
    int& total = progress_.tokens_total;
    for (const UserLog& user : log_)
      total += (static_cast<int>(user.prompt.size()) + block - 1) / block + user.generate - 1;
    progress_.passes_total = total * stages();
    // The clock of the progress report starts with the simulation, not with
    // the first token back.
    beat();
    for (int b = 0; b * sc_.workload.decode_batch < users; ++b) {
      const auto [first, last] = batch_members(b);
      members_.push_back(last - first);
    }
    waiting_.resize(members_.size());
    arrived_.assign(members_.size(), 0);
    // Prompts by arrival (ties in user order), each sent when its time
    // comes (those at 0 before the first read, one user after another).
    std::vector<int> pending(static_cast<std::size_t>(users));
    for (int u = 0; u < users; ++u) pending[static_cast<std::size_t>(u)] = u;
    std::stable_sort(pending.begin(), pending.end(), [this](int a, int b) {
      return log_[static_cast<std::size_t>(a)].arrival < log_[static_cast<std::size_t>(b)].arrival;
    });
    std::size_t next = 0;
    int finished = 0;
    while (finished < users) {
      TokenMessage* m = next_from_wafer(pending, next);
      if (target_.recycler) target_.recycler->untrack(*m);
      if (m->needs_logits) target_.settle(*m);
      record(*m);
      if (m->prefill) {
        progress_.tokens_done += m->user_count();
        beat();
      }
      if (!m->needs_logits) continue;
      if (m->verifies) {
        if (verified(*m)) ++finished;
        continue;
      }
      if (m->is_batch()) {
        // The head's rows: every row of a decode batch, the listed ones of
        // a batch of prompt blocks.
        std::vector<int> heads = m->logit_rows;
        if (heads.empty())
          for (int t = 0; t < m->tokens; ++t) heads.push_back(t);
        const std::size_t vocab = m->logits.size() / heads.size();
        for (std::size_t t = 0; t < heads.size(); ++t) {
          const RowTag& r = m->batch[static_cast<std::size_t>(heads[t])];
          std::vector<float> logits;
          if (functional())
            logits.assign(m->logits.begin() + static_cast<std::ptrdiff_t>(t * vocab),
                          m->logits.begin() + static_cast<std::ptrdiff_t>((t + 1) * vocab));
          finished += decode_next(r.user, r.position + 1, chosen(*m, t, r.user), m->done, logits);
        }
        continue;
      }
      const std::int32_t next = chosen(*m);
      const int position = m->position + m->tokens;
      if (spec_) {
        if (emit(m->user, next, m->done.at.value, std::move(m->logits))) {
          ++finished;
          continue;
        }
        // The prompt's first token: the first speculative round.
        start_round(m->user, position, next, {next}, m->done);
        continue;
      }
      finished += decode_next(m->user, position, next, m->done, m->logits);
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
    const UserLog& user = log_[static_cast<std::size_t>(u)];
    const int remaining = user.generate - static_cast<int>(user.tokens.size());
    const int proposals = spec_->start(u, position, last, remaining, at.at);
    TokenMessage* t = make(target_, u, position, last, false, Timed{at.at, {}}, false);
    t->needs_logits = true;
    t->verifies = true;
    send_to_wafer(t);
    if (proposals == 0) return;
    const int first = position + 1 - static_cast<int>(feed.size());
    TokenMessage* m = make_block(draft_, u, first, feed, io_hop(at, feed.size()), at.at);
    m->prefill = false;
    m->needs_logits = true;
    m->start_cycle = at.at;
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
      spec_->draft_pass();
      if (!m->needs_logits) continue;
      const std::int32_t d = chosen(*m);
      const SpeculativeRounds::Proposal proposal =
          spec_->propose(m->user, d, m->start_cycle, m->done.at);
      TokenMessage* v =
          make(target_, m->user, proposal.position, d, false, io_hop(m->done, 1), true);
      v->start_cycle = m->done.at;
      v->needs_logits = true;
      v->verifies = true;
      send_to_wafer(v);
      if (proposal.more) {
        TokenMessage* nm =
            make(draft_, m->user, proposal.position, d, false, Timed{m->done.at, {}}, false);
        nm->needs_logits = true;
        send(to_draft, nm);
      }
    }
  }

  // A token of a round is back from the target. When the whole round is:
  // emit what it accepted and the target's own token, roll both KV caches
  // back, start the next round. True when the user is done.
  bool verified(TokenMessage & m) {
    const int u = m.user;
    std::optional<SpeculativeRounds::Verdict> v =
        spec_->verify(u, m.position, chosen(m), std::move(m.logits), m.done.at);
    if (!v) return false;
    for (std::size_t j = 0; j < v->emitted.size(); ++j)
      if (emit(u, v->emitted[j], m.done.at.value, std::move(v->logits[j]))) return true;
    for (const auto& [p, keep] :
         {std::pair{&target_, v->target_keep}, std::pair{&draft_, v->draft_keep}}) {
      p->ex->truncate_kv(u, keep);
      if (p->lane) p->lane->post([ex = p->values, u, keep = keep] { ex->truncate_kv(u, keep); });
    }
    start_round(u, v->target_keep, v->emitted.back(), std::move(v->feed), m.done);
    return false;
  }

  Pipeline target_, draft_;
  // Decode batches (workload.decode_batch users each, in user order): the
  // rows waiting for the batch's last member, and the members not yet done.
  std::vector<std::vector<RowTag>> waiting_;
  std::vector<int> members_;
  // With workload.batch_prompts: each batch's members whose prompts have
  // arrived.
  std::vector<int> arrived_;
  SpeculativeRounds* spec_;  // with speculative decoding: its rounds
  const Scenario& sc_;
  analysis::RunResult& result_;
  HostLog& log_;
  const RunOptions& options_;
  sc_core::sc_event wake_;  // the clock's, for prompts' arrivals
};

// The stage modules of one placed model joined by fifos: in() feeds its
// first stage, out() is what its head hands back.
class StageChain {
 public:
  StageChain(const std::string& prefix, const Pipeline& p, int depth,
             const ChainTrace& chain_trace) {
    const Program& program = *p.program;
    const std::size_t n = program.stages.size();
    for (std::size_t i = 0; i <= n; ++i)
      fifos_.push_back(
          std::make_unique<MessageFifo>((prefix + "link_" + std::to_string(i)).c_str(), depth));
    for (std::size_t i = 0; i < n; ++i) {
      std::string name =
          prefix + program.stages[i].name;  // "layer 3 attention" -> "layer_3_attention"
      std::replace(name.begin(), name.end(), ' ', '_');
      stages_.push_back(
          std::make_unique<StageModule>(name.c_str(), p, program.stages[i], chain_trace));
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
      // Timing only: a second thread takes part of the GEMVs and attention
      // blocks, where the host time measured says it pays.
      if (!weights && threads > 1) timing->set_timing_helper(Executor::TimingHelper::measured);
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

// ---- The run, step by step ---------------------------------------------------

using HostClock = std::chrono::steady_clock;
double host_since(HostClock::time_point t0) {
  return std::chrono::duration<double>(HostClock::now() - t0).count();
}

// What the result says of the scenario and the run before it starts.
analysis::RunResult describe_run(const Scenario& sc, const RunOptions& options) {
  analysis::RunResult r;
  r.scenario_name = sc.name;
  r.scenario_file = sc.source_file;
  r.hardware_name = sc.hardware.name;
  r.model_name = sc.model.name;
  r.precision = models::dtype_name(sc.precision);
  r.seed = sc.workload.seed;
  r.functional = options.functional;
  r.mesh_width = sc.hardware.mesh_width;
  r.mesh_height = sc.hardware.mesh_height;
  r.clock_hz = sc.hardware.clock_hz;
  r.link_bytes_per_cycle = sc.hardware.link_bytes_per_cycle;
  r.parameter_count = sc.model.parameter_count();
  r.prompt_ids = user_prompt(sc.workload, 0, sc.model.vocab_size);
  r.resolved_scenario_yaml = sc.resolved_yaml;
  return r;
}

// The target placed on its wafers and, with speculative decoding, the draft
// on wafers of its own (after the target's).
struct PlacedModels {
  std::unique_ptr<PlacedSystem> target, draft;

  std::vector<const PlacedSystem*> all() const {
    std::vector<const PlacedSystem*> out{target.get()};
    if (draft) out.push_back(draft.get());
    return out;
  }
  std::size_t wafer_count() const {
    return target->wafers.size() + (draft ? draft->wafers.size() : 0);
  }
};

PlacedModels place_models(const Scenario& sc, const RunOptions& options, HostTimes& times) {
  PlacedModels placed;
  auto t_host = HostClock::now();
  placed.target = place_system(sc, options.placement_progress, options.search_progress);
  times.place_s = host_since(t_host);
  if (!sc.speculative) return placed;
  t_host = HostClock::now();
  placed.draft = place_draft(sc, options.placement_progress, options.search_progress);
  times.place_s += host_since(t_host);
  return placed;
}

// With more than one wafer, the link and ramp records of wafers a token
// has left go back to a pool for the wafers it reaches next
// (sim/exec/record_recycler.hpp): same results, a few wafers' records in
// memory instead of every wafer's.
void start_recycling(const PlacedModels& placed, fabric::PagePool& pool, RecordRecycler& recycler) {
  std::vector<fabric::FlowModel*> flows;
  for (const PlacedSystem* s : placed.all())
    for (const auto& f : s->wafers) flows.push_back(&f->flow());
  if (flows.size() > 1) recycler.recycle(flows, pool);
}

// The host's other cores fault in the wafers' link and ramp records ahead
// of the simulation (fabric::PagePrefaulter), the target's wafers first:
// in functional runs while this thread makes the weights, so that the
// first token pass finds them present. With recycling the wafers hold
// only their byte counters until a token reaches them; the pool's first
// blocks are faulted in instead. Stopped when the simulation ends.
std::unique_ptr<fabric::PagePrefaulter> start_prefaulting(const PlacedModels& placed,
                                                          const RecordRecycler& recycler,
                                                          fabric::PagePool& pool) {
  std::vector<fabric::PageRange> pages;
  if (recycler.active())
    pages = fabric::FlowModel::stock_records(
        pool, placed.target->wafers.front()->mesh(),
        static_cast<int>(std::min<std::size_t>(kStockedWafers, placed.wafer_count())));
  for (const PlacedSystem* s : placed.all())
    for (const auto& f : s->wafers)
      for (const fabric::PageRange& range : f->flow().record_pages()) pages.push_back(range);
  return std::make_unique<fabric::PagePrefaulter>(std::move(pages));
}

// A functional run's weights, as the scenario says: the checkpoint's (its
// content hash checked against weights.sha256 when given) or synthetic ones
// drawn from the seed; compact on the host either way.
models::Weights make_weights(const models::ModelConfig& model, const WeightsOptions& source,
                             models::DType precision, std::uint64_t seed, int threads,
                             const std::function<void(int, int)>& progress) {
  if (source.source == WeightsOptions::Source::synthetic)
    return models::Weights::synthetic(model, precision, seed, models::HostStorage::compact, threads,
                                      progress);
  models::LoadOptions load;
  load.storage = models::HostStorage::compact;
  load.threads = threads;
  load.progress = progress;
  models::Weights w = models::load_safetensors(source.path, model, precision, load);
  if (!source.sha256.empty() && source.sha256 != w.origin.content_hash) {
    throw models::WeightsError(w.origin.path, "",
                               "content hash (SHA-256) is " + w.origin.content_hash +
                                   ", but the scenario's sha256 says " + source.sha256 +
                                   ": the checkpoint is not the one the scenario names");
  }
  return w;
}

// The weights, executors and SystemC modules of one run: host -> layer 0
// -> ... -> layer L-1 -> head -> host, and with speculative decoding the
// draft's own chain (host -> draft layers -> draft head -> host). Made in
// the order the original elaboration made them (SystemC schedules its
// processes in creation order) and destroyed in reverse, after the lane has
// stopped: its work refers to the executors, weights and programs.
class Simulation {
 public:
  Simulation(const Scenario& sc, const RunOptions& options, const PlacedModels& placed,
             fabric::WaferIo& io, RecordRecycler* recycling, int threads, HostTimes& times,
             analysis::RunResult& r)
      : sc_(sc), options_(options) {
    const int bits = models::dtype_bits(sc.precision);
    const auto t_host = HostClock::now();
    if (options.functional)
      weights_ = make_weights(sc.model, sc.weights, sc.precision, sc.workload.seed, threads,
                              options.weights_progress);
    times.weights_s = host_since(t_host);
    // A functional run with more than one thread computes its numbers on the
    // functional lane (sim/exec/value_lane.hpp) behind the timing; with one,
    // both in the same executor on this thread.
    if (options.functional && threads > 1) lane_ = std::make_unique<ValueLane>();
    target_ = std::make_unique<PipelineExecutors>(*placed.target, &io, sc.model,
                                                  weights_ ? &*weights_ : nullptr, bits,
                                                  sc.workload.seed, threads, lane_.get());
    const int users = sc.workload.users;
    const int depth = static_cast<int>(workload_token_passes(sc.workload)) + users + 2;
    Pipeline target = target_->pipeline(placed.target->program, recycling);
    clock_ = std::make_unique<StepClock>("clock");
    target.clock = clock_.get();
    if (options.layer_replay != LayerReplayMode::off && !options.trace &&
        !std::getenv("WAFERSIM_TRACE") && !sc.speculative &&
        LayerReplay::usable(*target_->timing)) {
      replay_ =
          std::make_unique<LayerReplay>(*target_->timing, placed.target->program, sc.workload.users,
                                        options.layer_replay == LayerReplayMode::always, threads);
      target.replay = replay_.get();
      pipeline_replay_ =
          std::make_unique<PipelineReplay>(*target_->timing, placed.target->program, threads);
      target.pipeline_replay = pipeline_replay_.get();
    }
    if (options.trace) tap_.emplace(*options.trace);
    if (options.progress) target.pass_done = &pass_done_;
    chain_ = std::make_unique<StageChain>("", target, depth, chain_trace(*placed.target, ""));
    log_.resize(static_cast<std::size_t>(users));
    for (int u = 0; u < users; ++u) {
      UserLog& user = log_[static_cast<std::size_t>(u)];
      user.prompt = user_prompt(sc.workload, u, sc.model.vocab_size);
      user.io = id_transfer_cycles(sc.hardware, user.prompt.size());
      user.generate = user_generate_tokens(sc.workload, u);
      user.cached = user_cached_tokens(sc.workload, u);
      if (!sc.workload.arrivals_s.empty())
        user.arrival = Cycles{static_cast<std::uint64_t>(std::llround(
            sc.workload.arrivals_s[static_cast<std::size_t>(u)] * sc.hardware.clock_hz))};
    }
    Pipeline draft;
    if (sc.speculative) draft = make_draft(*placed.draft, recycling, threads, bits, depth);
    host_ = std::make_unique<HostModule>("host", target, sc, r, log_, options, draft,
                                         rounds_ ? &*rounds_ : nullptr);
    pass_done_ = [host = host_.get()](int weight) { host->passed(weight); };
    host_->to_wafer(chain_->in());
    host_->from_wafer(chain_->out());
    if (draft_chain_) {
      host_->to_draft(draft_chain_->in());
      host_->from_draft(draft_chain_->out());
    }
  }
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;
  ~Simulation() {
    if (lane_) lane_->stop();
  }

  // Runs the simulation to its end (the host's last token), then waits for
  // the lane's last numbers (and any error of the lane's).
  void run() {
    sc_core::sc_start();
    if (replay_) replay_->settle();
    if (lane_) lane_->drain();
  }

  const HostLog& log() const { return log_; }
  std::uint64_t replayed_layer_passes() const { return replay_ ? replay_->replayed() : 0; }
  std::uint64_t crowded_layer_passes() const { return replay_ ? replay_->crowded() : 0; }
  std::uint64_t pipeline_replayed_layer_passes() const {
    return pipeline_replay_ ? pipeline_replay_->replayed_layers() : 0;
  }
  // Timing works that could take a second host thread, on two (`two`) or
  // on one, over the target's and the draft's executors.
  std::uint64_t timing_works(bool two) const {
    std::uint64_t n = 0;
    for (const PipelineExecutors* e : {target_.get(), draft_.get()})
      if (e) n += e->timing->thread_choice().runs(two);
    return n;
  }
  const std::optional<models::Weights>& weights() const { return weights_; }
  const std::optional<analysis::SpeculativeRun>& speculation() const { return speculation_; }
  const std::optional<models::Weights>& draft_weights() const { return draft_weights_; }

 private:
  // With --trace, the wafers of `placed` join the tap, and its chain
  // records there; off, nothing.
  ChainTrace chain_trace(const PlacedSystem& placed, const std::string& prefix) {
    if (!tap_) return {};
    const int first = tap_->add_wafers(placed.wafer_ptrs, prefix, sc_.hardware.sram_capacity());
    return {&*tap_, first, static_cast<int>(placed.wafer_ptrs.size()), prefix};
  }

  // The draft's weights, executors and stage chain, and the rounds the host
  // drives it by.
  Pipeline make_draft(const PlacedSystem& placed, RecordRecycler* recycling, int threads, int bits,
                      int depth) {
    const models::gpu::SpeculativeDecoding& sd = sc_.speculative->decoding;
    if (options_.functional)
      draft_weights_ = make_weights(sd.draft, sc_.speculative->draft_weights, sc_.precision,
                                    sc_.workload.seed, threads, options_.weights_progress);
    draft_io_ =
        std::make_unique<fabric::WaferIo>(sc_.hardware, static_cast<int>(placed.wafers.size()));
    draft_ = std::make_unique<PipelineExecutors>(placed, draft_io_.get(), sd.draft,
                                                 draft_weights_ ? &*draft_weights_ : nullptr, bits,
                                                 sc_.workload.seed, threads, lane_.get());
    Pipeline draft = draft_->pipeline(placed.program, recycling);
    draft.clock = clock_.get();
    draft.rank = 1;
    draft_chain_ =
        std::make_unique<StageChain>("draft_", draft, depth + sc_.workload.users * sd.draft_tokens,
                                     chain_trace(placed, "draft "));
    speculation_.emplace();  // what the run is; the rounds count how it went
    speculation_->draft_model = sd.draft.name;
    speculation_->draft_wafers = static_cast<int>(placed.wafers.size());
    speculation_->draft_tokens = sd.draft_tokens;
    speculation_->acceptance_rate = sd.acceptance_rate;
    speculation_->accepted_by_comparison = options_.functional;
    rounds_.emplace(sc_.workload.users, sd.draft_tokens, options_.functional, sd.acceptance_rate,
                    sc_.workload.seed, *speculation_);
    return draft;
  }

  const Scenario& sc_;
  const RunOptions& options_;
  std::optional<models::Weights> weights_;
  std::unique_ptr<ValueLane> lane_;
  std::optional<TraceTap> tap_;  // --trace
  std::unique_ptr<PipelineExecutors> target_;
  std::unique_ptr<StepClock> clock_;
  std::unique_ptr<LayerReplay> replay_;              // null: every layer simulated
  std::unique_ptr<PipelineReplay> pipeline_replay_;  // null: with replay_
  std::function<void(int)> pass_done_;               // the target's stages' Pipeline::pass_done
  std::unique_ptr<StageChain> chain_;
  HostLog log_;
  std::optional<models::Weights> draft_weights_;
  std::unique_ptr<fabric::WaferIo> draft_io_;
  std::unique_ptr<PipelineExecutors> draft_;
  std::unique_ptr<StageChain> draft_chain_;
  std::optional<analysis::SpeculativeRun> speculation_;
  std::optional<SpeculativeRounds> rounds_;
  std::unique_ptr<HostModule> host_;
};

// Counters, wafer after wafer (stacked in y); a speculative draft's wafers
// follow the target's. Nothing uses a wafer's fabric after the simulation,
// so each is released once read: its memory then holds the counters
// instead of adding to them (26 wafers of Llama-3.1-405B: ~1.1 GB of
// counters beside ~5 GB of fabrics).
void read_wafer_counters(const Scenario& sc, PlacedModels& placed, analysis::RunResult& r) {
  std::vector<std::unique_ptr<fabric::Fabric>*> all_wafers;
  for (std::unique_ptr<fabric::Fabric>& f : placed.target->wafers) all_wafers.push_back(&f);
  if (placed.draft)
    for (std::unique_ptr<fabric::Fabric>& f : placed.draft->wafers) all_wafers.push_back(&f);
  r.wafers = static_cast<int>(all_wafers.size());
  for (const PlacedSystem* s : placed.all())
    r.max_route_colors = std::max(r.max_route_colors, s->routes.max_colors);
  const std::size_t cores = placed.target->wafers.front()->mesh().core_count();
  const std::size_t links = placed.target->wafers.front()->mesh().link_count();
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
    if (const fabric::Repair* repair = f->repair()) {
      r.dead_cores += repair->dead_cores();
      r.repaired_links += repair->repaired_links();
      r.repair_extra_hops += repair->total_extra_hops();
    } else {
      r.dead_cores += f->defects().dead_count();
    }
    r.sram_bytes_used += f->sram().total_used();
    f.reset();
  }
  r.sram_bytes_capacity = sc.hardware.sram_capacity() * static_cast<std::uint64_t>(r.wafers);
}

// Latencies, per user: the first token is ready when the last prompt
// token's logits have been reduced, and reaches the user over the I/O link;
// every later token costs one decode step. TTFT is the mean over users.
void read_latencies(const Scenario& sc, const HostLog& log, analysis::RunResult& r) {
  const Cycles io_out{
      static_cast<std::uint64_t>(std::ceil(sc.hardware.io_latency_s * sc.hardware.clock_hz))};
  const int users = sc.workload.users;
  r.users = users;
  std::uint64_t ttft_sum = 0, prefill_sum = 0;
  for (const UserLog& u : log) {
    ttft_sum += u.ready_cycles.front() + io_out.value - u.arrival.value;
    prefill_sum += u.ready_cycles.front() - u.io.value - u.arrival.value;
    const std::uint64_t step =
        u.ready_cycles.size() > 1
            ? (u.ready_cycles.back() - u.ready_cycles.front()) / (u.ready_cycles.size() - 1)
            : 0;
    r.user_decode_cycles_per_token.push_back(Cycles{step});
  }
  r.ttft_cycles = Cycles{ttft_sum / static_cast<std::uint64_t>(users)};
  r.prefill_cycles = Cycles{prefill_sum / static_cast<std::uint64_t>(users)};
  // The mean over the users that decoded more than one token (with per-user
  // generate_tokens, a user of one token has no step).
  std::uint64_t step_sum = 0, stepping = 0;
  for (std::size_t u = 0; u < log.size(); ++u) {
    if (log[u].ready_cycles.size() < 2) continue;
    step_sum += r.user_decode_cycles_per_token[u].value;
    ++stepping;
  }
  r.decode_cycles_per_token = Cycles{stepping > 0 ? step_sum / stepping : 0};
  if (r.decode_cycles_per_token == Cycles{0})  // one generated token: its prefill pass is all
    r.decode_cycles_per_token =
        r.token_records.back().end_cycle - r.token_records.back().start_cycle;
}

// Tokens of all users, user after user; each user's against its own
// reference generation (functional runs).
void compare_with_reference(const HostLog& log, const models::Weights& weights,
                            analysis::RunResult& r) {
  double err = 0.0;
  for (const UserLog& u : log) {
    r.tokens.insert(r.tokens.end(), u.tokens.begin(), u.tokens.end());
    const models::Generation ref = models::greedy_generate(weights, u.prompt, u.generate);
    r.reference_tokens.insert(r.reference_tokens.end(), ref.tokens.begin(), ref.tokens.end());
    // Step t's logits come from the prompt and tokens 0..t-1: compared while
    // those are the reference's (a run whose values differ from the
    // reference's, as 16-bit fabric values do, may go on another way).
    for (std::size_t t = 0; t < std::min(ref.logits.size(), u.logits.size()); ++t) {
      if (t > 0 && u.tokens[t - 1] != ref.tokens[t - 1]) break;
      for (std::size_t i = 0; i < ref.logits[t].size(); ++i)
        err = std::max(err, static_cast<double>(std::fabs(ref.logits[t][i] - u.logits[t][i])));
    }
  }
  r.max_logit_abs_error = err;
}

}  // namespace

namespace {

analysis::WeightsProvenance provenance(const models::WeightsOrigin& o) {
  analysis::WeightsProvenance p;
  if (o.kind == models::WeightsOrigin::Kind::synthetic) {
    p.source = "synthetic";
    p.seed = o.seed;
    return p;
  }
  p.source = "checkpoint";
  p.path = o.path;
  p.sha256 = o.content_hash;
  for (const auto& f : o.files) p.files.push_back({f.name, f.sha256, f.bytes});
  return p;
}

// Ids as text; an id the tokenizer does not know (a model's vocabulary is
// often padded beyond its tokenizer's) as "<id N>", the runs of known ids
// between them decoded together.
std::string ids_text(const models::Tokenizer& tok, std::span<const std::int32_t> ids) {
  std::string out;
  std::size_t run = 0;  // first id of the current run of known ones
  for (std::size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && tok.has_id(ids[i])) continue;
    out += tok.decode(ids.subspan(run, i - run));
    if (i < ids.size()) out += "<id " + std::to_string(ids[i]) + ">";
    run = i + 1;
  }
  return out;
}

// The prompt and user 0's generated tokens as text, with the workload's tokenizer.
void describe_text(const Scenario& sc, analysis::RunResult& r) {
  if (sc.workload.tokenizer.empty()) return;
  const models::Tokenizer tok = models::Tokenizer::from_file(sc.workload.tokenizer);
  r.prompt_text = ids_text(tok, user_prompt(sc.workload, 0, sc.model.vocab_size));
  if (!r.functional) return;
  const auto n = static_cast<std::size_t>(user_generate_tokens(sc.workload, 0));
  r.generated_text = ids_text(tok, std::span(r.tokens).first(std::min(n, r.tokens.size())));
}

}  // namespace

analysis::RunResult run_scenario(const Scenario& sc, const RunOptions& options) {
  // The SystemC banner would corrupt --json output on stdout.
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  check_run_mode(sc, options.functional);
  analysis::RunResult r = describe_run(sc, options);
  HostTimes host_times;
  PlacedModels placed = place_models(sc, options, host_times);
  r.layer_group_choice = placed.target->layer_group_choice;
  r.reduction_choices = placed.target->reduction_choices;
  // A placement file's: the strategy it records as its maker, not the
  // scenario's (which a file replaces).
  r.placement_strategy = placed.target->placement.strategy;
  fabric::WaferIo io(sc.hardware, static_cast<int>(placed.target->wafers.size()));
  fabric::PagePool record_pool;
  RecordRecycler recycler;
  if (options.recycle_link_records) start_recycling(placed, record_pool, recycler);
  const int threads = options.threads > 0 ? options.threads : models::WorkTeam::host_threads();
  std::unique_ptr<fabric::PagePrefaulter> prefaulter;
  if (threads > 1) prefaulter = start_prefaulting(placed, recycler, record_pool);

  Simulation simulation(sc, options, placed, io, recycler.active() ? &recycler : nullptr, threads,
                        host_times, r);
  auto t_host = HostClock::now();
  simulation.run();
  prefaulter.reset();  // before any wafer is released below
  host_times.simulate_s = host_since(t_host);
  host_times.token_passes = static_cast<int>(workload_token_passes(sc.workload));
  host_times.record_releases = recycler.releases();
  host_times.replayed_layer_passes = simulation.replayed_layer_passes();
  host_times.crowded_layer_passes = simulation.crowded_layer_passes();
  host_times.pipeline_replayed_layer_passes = simulation.pipeline_replayed_layer_passes();
  host_times.works_on_two_threads = simulation.timing_works(true);
  host_times.works_on_one_thread = simulation.timing_works(false);
  host_times.record_blocks_made = record_pool.blocks_made();
  host_times.record_blocks_reused = record_pool.blocks_reused();

  read_wafer_counters(sc, placed, r);
  r.total_cycles = now_cycles();
  r.max_context_tokens = static_cast<std::uint64_t>(placed.target->placement.max_context_tokens);
  read_latencies(sc, simulation.log(), r);
  r.speculative = simulation.speculation();

  t_host = HostClock::now();
  if (options.functional) {
    compare_with_reference(simulation.log(), *simulation.weights(), r);
    r.weights = provenance(simulation.weights()->origin);
    if (simulation.draft_weights())
      r.draft_weights = provenance(simulation.draft_weights()->origin);
  }
  host_times.reference_s = host_since(t_host);
  describe_text(sc, r);
  if (options.host_times) *options.host_times = host_times;
  return r;
}

}  // namespace wafersim::sim
