#include "sim/serving/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <stdexcept>

#include <fmt/format.h>

namespace wafersim::sim::serving {

const char* router_name(Router r) {
  switch (r) {
    case Router::least_loaded:
      return "least-loaded";
    case Router::round_robin:
      return "round-robin";
  }
  return "?";
}

const char* stage_order_name(StageOrder o) {
  return o == StageOrder::fifo ? "fifo" : "decode-first";
}

const char* prefill_policy_name(PrefillPolicy p) {
  switch (p) {
    case PrefillPolicy::prefill_first:
      return "prefill-first";
    case PrefillPolicy::chunked:
      return "chunked";
    case PrefillPolicy::disaggregated:
      return "disaggregated";
  }
  return "?";
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

namespace {

analysis::Percentiles summarise(std::vector<double> v) {
  analysis::Percentiles p;
  if (v.empty()) return p;
  double sum = 0.0;
  for (const double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  p.p50 = percentile(v, 50.0);
  p.p90 = percentile(v, 90.0);
  p.p99 = percentile(v, 99.0);
  p.max = v.back();
  return p;
}

// filling: the prompt is through, its first token still crossing a pipeline.
enum class Phase { waiting, prefilling, filling, decoding, done };
enum class Role { mixed, prefill, decode };

struct Request {
  int id = 0;
  int session = 0;
  int turn = 0;
  double sent_s = 0.0;     // by the client
  double arrival_s = 0.0;  // at the server
  long long prompt = 0;    // whole prompt (earlier turns' context included)
  long long cached = 0;    // positions reused from the session's kept KV cache
  long long output = 0;
  long long prefilled = 0;  // prompt positions in the KV cache
  long long generated = 0;
  long long reserved = 0;  // KV positions reserved on its replica
  int replica = -1;
  bool reuse = true;  // its prompt starts with the session's context (kept KV usable)
  Phase phase = Phase::waiting;
  double admitted_s = 0.0, first_token_s = 0.0, last_token_s = 0.0;
  // When it left the server (its replica released it; at the end of the
  // iteration that gave its last token, which may have come out earlier).
  double released_s = 0.0;
  std::vector<float> gaps;  // server-side times between tokens
  bool rejected = false;
};

struct SessionState {
  const Session* spec = nullptr;
  int next_turn = 0;
  long long context = 0;  // prompt + output of its turns so far
  int kv_replica = -1;    // the replica keeping its KV cache between turns
  long long kv_tokens = 0;
  double kv_last_used = 0.0;
  double start_s = 0.0;
  double end_s = 0.0;
  double waiting_s = 0.0;  // on the model, as the client sees it
  long long output_tokens = 0;
  int turns_done = 0;
};

struct Replica {
  Role role = Role::mixed;
  int slots_used = 0;
  long long pool_used = 0;
  std::deque<int> waiting;         // request ids
  std::vector<int> running;        // admitted (prefilling or decoding), in admission order
  std::vector<int> idle_sessions;  // sessions whose KV is kept here between turns
  bool busy = false;
  bool wake_pending = false;
  double load = 0.0;  // tokens left to prefill and generate of its requests
  // The iteration in flight: what each request does in it.
  std::vector<std::pair<int, long long>> in_flight;  // (request, prefill chunk; 0 = decode)
  // Seconds from the iteration's start until each of its prefill chunks has
  // passed, in in_flight's order (StepModel::chunk_ends_s).
  std::vector<double> chunk_ends;
  double started_s = 0.0;
  // With first-in-first-out stages (SimulationOptions::fifo_stages): when the
  // last prompt block sent so far leaves the pipeline (its pass plus the fill
  // latency); no decode token sent after it leaves sooner.
  double blocks_leave_s = 0.0;
  double busy_s = 0.0;
  std::uint64_t iterations = 0;
  double batch_sum = 0.0;
};

// `wake` lets a replica start its next iteration once every other event of
// the same instant has happened (requests arriving together are batched together).
enum class EventKind { arrival, iteration_end, transfer_done, next_turn, wake, first_token };

struct Event {
  double t;
  std::uint64_t seq;  // insertion order: ties are processed first in, first out
  EventKind kind;
  int a;  // request, replica or session
  int b;  // replica (transfer_done)
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Time averages of the queue and the batch over bins that double in width as
// the simulation runs past their end (so the timeline has a bounded size).
class Timeline {
 public:
  explicit Timeline(int bins) : bins_(std::max(2, bins)), acc_(static_cast<std::size_t>(bins_)) {}
  void advance(double to, double waiting, double running, double busy) {
    while (last_ < to) {
      while (last_ >= width_ * bins_) grow();
      auto i = static_cast<std::size_t>(last_ / width_);
      // Rounding can put last_ on the end of bin i: then it is in the next.
      if ((static_cast<double>(i) + 1.0) * width_ <= last_) ++i;
      if (i >= acc_.size()) {
        grow();
        continue;
      }
      const double end = std::min(to, (static_cast<double>(i) + 1.0) * width_);
      const double dt = end - last_;
      acc_[i].waiting += dt * waiting;
      acc_[i].running += dt * running;
      acc_[i].busy += dt * busy;
      last_ = end;
    }
  }
  std::vector<analysis::TimelineBin> bins(double end) const {
    std::vector<analysis::TimelineBin> out;
    for (std::size_t i = 0; i < acc_.size(); ++i) {
      const double start = static_cast<double>(i) * width_;
      if (start >= end) break;
      const double span = std::min(width_, end - start);
      if (span <= 0.0) break;
      analysis::TimelineBin b;
      b.start_s = start;
      b.waiting = acc_[i].waiting / span;
      b.running = acc_[i].running / span;
      b.busy = acc_[i].busy / span;
      out.push_back(b);
    }
    return out;
  }

 private:
  void grow() {
    for (std::size_t i = 0; i < acc_.size() / 2; ++i) {
      acc_[i].waiting = acc_[2 * i].waiting + acc_[2 * i + 1].waiting;
      acc_[i].running = acc_[2 * i].running + acc_[2 * i + 1].running;
      acc_[i].busy = acc_[2 * i].busy + acc_[2 * i + 1].busy;
    }
    for (std::size_t i = acc_.size() / 2; i < acc_.size(); ++i) acc_[i] = {};
    width_ *= 2.0;
  }
  struct Acc {
    double waiting = 0.0, running = 0.0, busy = 0.0;
  };
  int bins_;
  std::vector<Acc> acc_;
  double width_ = 0.01;
  double last_ = 0.0;
};

class Simulation {
 public:
  Simulation(const std::vector<Session>& sessions, const StepModel& model,
             const SimulationOptions& o)
      : model_(model), o_(o), kv_(model.kv_capacity()), timeline_(o.timeline_bins) {
    if (o.replicas < 1) throw std::invalid_argument("a deployment needs at least one replica");
    max_batch_ = o.max_batch > 0 ? o.max_batch : (kv_.slots > 0 ? kv_.slots : 256);
    if (kv_.slots > 0) max_batch_ = std::min(max_batch_, kv_.slots);
    const bool disaggregated = o.prefill == PrefillPolicy::disaggregated;
    for (int i = 0; i < o.replicas; ++i)
      replicas_.emplace_back().role = disaggregated ? Role::decode : Role::mixed;
    if (disaggregated) {
      if (o.prefill_replicas < 1)
        throw std::invalid_argument("disaggregated prefill needs at least one prefill replica");
      for (int i = 0; i < o.prefill_replicas; ++i) replicas_.emplace_back().role = Role::prefill;
    }
    for (const Session& s : sessions) {
      SessionState st;
      st.spec = &s;
      sessions_.push_back(st);
    }
    for (std::size_t i = 0; i < sessions_.size(); ++i) {
      const Session& s = *sessions_[i].spec;
      if (s.turns.empty()) continue;
      sessions_[i].start_s = s.turns.front().at_s;
      if (s.closed_loop) {
        push(s.turns.front().at_s, EventKind::next_turn, static_cast<int>(i), 0);
      } else {
        for (std::size_t k = 0; k < s.turns.size(); ++k)
          push(s.turns[k].at_s, EventKind::next_turn, static_cast<int>(i), static_cast<int>(k));
      }
      total_turns_ += static_cast<long long>(s.turns.size());
    }
    const double p = o.stack.persistent ? 1.0 : 0.0;
    const models::gpu::PersistentConnectionFactors f;
    if (o.stack.present) {
      setup_s_ = o.stack.overhead.connection_setup_s * (p ? f.setup : 1.0);
      round_trip_s_ = o.stack.overhead.round_trip_s * (p ? f.round_trip : 1.0);
      per_token_s_ = o.stack.overhead.per_token_overhead_s * (p ? f.per_token : 1.0);
    }
  }

  analysis::ServingResult run() {
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      advance(e.t);
      switch (e.kind) {
        case EventKind::next_turn:
          start_turn(e.a, e.b);
          break;
        case EventKind::arrival:
          arrive(e.a);
          break;
        case EventKind::iteration_end:
          end_iteration(e.a);
          break;
        case EventKind::transfer_done:
          transferred(e.a, e.b);
          break;
        case EventKind::first_token:
          first_token(e.b, requests_[static_cast<std::size_t>(e.a)]);
          wake(e.b);
          break;
        case EventKind::wake:
          replicas_[static_cast<std::size_t>(e.a)].wake_pending = false;
          schedule(e.a);
          break;
      }
    }
    return result();
  }

 private:
  void push(double t, EventKind k, int a, int b) { events_.push(Event{t, seq_++, k, a, b}); }

  void advance(double t) {
    double busy = 0.0;
    for (const Replica& r : replicas_) busy += r.busy ? 1.0 : 0.0;
    const double dt = t - now_;
    in_system_integral_ += dt * static_cast<double>(waiting_ + running_);
    timeline_.advance(t, waiting_, running_, busy / static_cast<double>(replicas_.size()));
    now_ = t;
  }

  // A session's turn is sent by the client: it reaches the server after the
  // connection set-up and half the round trip.
  void start_turn(int s, int k) {
    SessionState& st = sessions_[static_cast<std::size_t>(s)];
    const Turn& turn = st.spec->turns[static_cast<std::size_t>(k)];
    Request r;
    r.id = static_cast<int>(requests_.size());
    r.session = s;
    r.turn = k;
    r.sent_s = now_;
    r.arrival_s = now_ + setup_s_ + 0.5 * round_trip_s_;
    r.prompt = (turn.extends_context ? st.context : 0) + turn.new_prompt_tokens;
    r.reuse = turn.extends_context;
    r.output = turn.output_tokens;
    st.next_turn = k + 1;
    // Open-loop turns of one session follow each other in arrival order; the
    // context they build is what this turn's prompt starts with.
    st.context = r.prompt + r.output;
    requests_.push_back(std::move(r));
    push(requests_.back().arrival_s, EventKind::arrival, requests_.back().id, 0);
  }

  bool fits_at_all(const Request& r) const {
    const long long need = r.prompt + r.output;
    if (kv_.slot_tokens > 0 && need > kv_.slot_tokens) return false;
    if (kv_.pool_tokens > 0 && need > kv_.pool_tokens) return false;
    return true;
  }

  // The replicas a new request may go to: decode-capable ones, or with
  // disaggregated prefill the prefill replicas.
  int route(const Request& r, Role role) {
    const SessionState& st = sessions_[static_cast<std::size_t>(r.session)];
    if (role != Role::prefill && st.kv_replica >= 0 &&
        replicas_[static_cast<std::size_t>(st.kv_replica)].role == role)
      return st.kv_replica;  // where its earlier turns' KV cache is kept
    std::vector<int> pool;
    for (std::size_t i = 0; i < replicas_.size(); ++i)
      if (replicas_[i].role == role) pool.push_back(static_cast<int>(i));
    if (o_.router == Router::round_robin) {
      int& next = role == Role::prefill ? next_prefill_ : next_decode_;
      const int chosen = pool[static_cast<std::size_t>(next) % pool.size()];
      ++next;
      return chosen;
    }
    int best = pool.front();
    for (const int i : pool)
      if (replicas_[static_cast<std::size_t>(i)].load <
          replicas_[static_cast<std::size_t>(best)].load)
        best = i;
    return best;
  }

  void arrive(int id) {
    Request& r = requests_[static_cast<std::size_t>(id)];
    if (!fits_at_all(r)) {
      r.rejected = true;
      r.phase = Phase::done;
      finish_session_turn(r, now_);
      return;
    }
    const Role role = o_.prefill == PrefillPolicy::disaggregated ? Role::prefill : Role::mixed;
    r.replica = route(r, role);
    Replica& rep = replicas_[static_cast<std::size_t>(r.replica)];
    rep.waiting.push_back(id);
    rep.load += static_cast<double>(r.prompt + r.output);
    ++waiting_;
    wake(r.replica);
  }

  void wake(int ri) {
    Replica& rep = replicas_[static_cast<std::size_t>(ri)];
    if (rep.busy || rep.wake_pending) return;
    rep.wake_pending = true;
    push(now_, EventKind::wake, ri, 0);
  }

  // Gives a session's kept KV cache back to its replica's free room.
  void evict(int s) {
    SessionState& st = sessions_[static_cast<std::size_t>(s)];
    Replica& rep = replicas_[static_cast<std::size_t>(st.kv_replica)];
    rep.slots_used -= 1;
    rep.pool_used -= st.kv_tokens;
    rep.idle_sessions.erase(std::find(rep.idle_sessions.begin(), rep.idle_sessions.end(), s));
    st.kv_replica = -1;
    st.kv_tokens = 0;
  }

  // Admits waiting requests, first come first served, while a batch slot and
  // KV room are free (evicting kept caches of idle sessions, least recently
  // used first, when that makes room).
  void admit(int ri) {
    Replica& rep = replicas_[static_cast<std::size_t>(ri)];
    while (!rep.waiting.empty()) {
      Request& r = requests_[static_cast<std::size_t>(rep.waiting.front())];
      if (static_cast<int>(rep.running.size()) >= max_batch_) return;
      SessionState& st = sessions_[static_cast<std::size_t>(r.session)];
      const bool own = st.kv_replica == ri && rep.role != Role::decode && r.reuse;
      const long long kept = own ? std::min(st.kv_tokens, r.prompt) : 0;
      // A request handed over after prefill brings its prompt's cache with it.
      const long long need = r.prompt + r.output - (own ? st.kv_tokens : 0);
      const int slots_needed = own ? 0 : 1;
      // A cache kept elsewhere, or one this prompt does not start with, is of no use.
      if (!own && st.kv_replica >= 0 && rep.role != Role::decode) evict(r.session);
      auto room = [&] {
        const bool slot_ok = kv_.slots <= 0 || rep.slots_used + slots_needed <= kv_.slots;
        const bool pool_ok = kv_.pool_tokens <= 0 || rep.pool_used + need <= kv_.pool_tokens;
        return slot_ok && pool_ok;
      };
      while (!room()) {
        int lru = -1;
        for (const int s : rep.idle_sessions) {
          if (s == r.session) continue;
          if (lru < 0 || sessions_[static_cast<std::size_t>(s)].kv_last_used <
                             sessions_[static_cast<std::size_t>(lru)].kv_last_used)
            lru = s;
        }
        if (lru < 0) return;  // head of line waits for room
        evict(lru);
      }
      if (own) {
        rep.idle_sessions.erase(
            std::find(rep.idle_sessions.begin(), rep.idle_sessions.end(), r.session));
        st.kv_replica = -1;
        st.kv_tokens = 0;
        r.cached = kept;
        rep.load -= static_cast<double>(kept);
      }
      rep.slots_used += slots_needed;
      rep.pool_used += need;
      r.reserved = (own ? kept : 0) + need;
      if (r.phase == Phase::waiting) {
        r.prefilled = r.cached;
        r.phase = Phase::prefilling;
        r.admitted_s = now_;
      }
      rep.waiting.pop_front();
      rep.running.push_back(r.id);
      --waiting_;
      ++running_;
    }
  }

  void schedule(int ri) {
    Replica& rep = replicas_[static_cast<std::size_t>(ri)];
    if (rep.busy) return;
    admit(ri);
    Iteration it;
    rep.in_flight.clear();
    const bool prefill_first = o_.prefill != PrefillPolicy::chunked;
    bool any_prefill = false;
    for (const int id : rep.running)
      any_prefill |= requests_[static_cast<std::size_t>(id)].phase == Phase::prefilling;
    long long budget = o_.chunk_tokens;
    // Decode first (prefill-first runs it only when nothing waits to prefill).
    if (!(prefill_first && any_prefill) && rep.role != Role::prefill) {
      for (const int id : rep.running) {
        const Request& r = requests_[static_cast<std::size_t>(id)];
        if (r.phase != Phase::decoding) continue;
        it.decode_sequences += 1;
        it.decode_context += static_cast<double>(r.prompt + r.generated);
        rep.in_flight.emplace_back(id, 0);
        --budget;
      }
    }
    if (any_prefill && (prefill_first || budget > 0)) {
      for (const int id : rep.running) {
        const Request& r = requests_[static_cast<std::size_t>(id)];
        if (r.phase != Phase::prefilling) continue;
        long long chunk = r.prompt - r.prefilled;
        if (!prefill_first) chunk = std::min(chunk, budget);
        if (chunk <= 0) break;
        it.prefill_sequences += 1;
        it.prefill_tokens += static_cast<double>(chunk);
        it.prefill_context += static_cast<double>(r.prefilled + chunk);
        it.prefill_attention_pairs +=
            static_cast<double>(chunk) * (static_cast<double>(r.prefilled) + 0.5 * chunk);
        rep.in_flight.emplace_back(id, chunk);
        if (!prefill_first) budget -= chunk;
      }
    }
    if (rep.in_flight.empty()) return;
    const double dt = model_.iteration_s(it);
    std::vector<PromptChunk> chunks;
    for (const auto& [id, chunk] : rep.in_flight)
      if (chunk > 0)
        chunks.push_back({static_cast<double>(chunk),
                          static_cast<double>(requests_[static_cast<std::size_t>(id)].prefilled)});
    rep.chunk_ends = model_.chunk_ends_s(it, chunks);
    rep.started_s = now_;
    // The iteration's decode tokens go first; with first-in-first-out stages
    // they trail the blocks of earlier iterations still in the pipeline.
    double end = now_ + dt;
    if (o_.fifo_stages) {
      if (it.decode_sequences > 0) end = std::max(end, rep.blocks_leave_s);
      for (std::size_t k = 0; k < chunks.size(); ++k)
        rep.blocks_leave_s =
            std::max(rep.blocks_leave_s,
                     now_ + rep.chunk_ends[k] + model_.fill_latency_s(chunks[k].cached));
    }
    rep.busy = true;
    rep.busy_s += end - now_;
    rep.iterations += 1;
    rep.batch_sum += static_cast<double>(rep.in_flight.size());
    push(end, EventKind::iteration_end, ri, 0);
  }

  // r's next token, at `at` (now, or a first token that came earlier).
  void token(Request& r, double at) {
    if (r.generated > 0)
      r.gaps.push_back(static_cast<float>(at - r.last_token_s));
    else
      r.first_token_s = at;
    r.last_token_s = at;
    r.generated += 1;
  }

  void release(Replica& rep, Request& r) {
    rep.running.erase(std::find(rep.running.begin(), rep.running.end(), r.id));
    --running_;
    rep.slots_used -= 1;
    rep.pool_used -= r.reserved;
    r.reserved = 0;
  }

  void end_iteration(int ri) {
    Replica& rep = replicas_[static_cast<std::size_t>(ri)];
    rep.busy = false;
    std::vector<std::pair<int, long long>> done = std::move(rep.in_flight);
    rep.in_flight.clear();
    std::size_t k = 0;  // the prefill chunk's index in the iteration
    for (const auto& [id, chunk] : done) {
      Request& r = requests_[static_cast<std::size_t>(id)];
      if (chunk > 0) {
        const double passed = rep.started_s + rep.chunk_ends[k++];
        r.prefilled += chunk;
        rep.load -= static_cast<double>(chunk);
        if (r.prefilled < r.prompt) continue;
        // The prompt's last chunk gives the first token a pipeline fill after
        // it passed (its own place in the iteration). With first-in-first-out
        // stages it decodes from that first token on: its decode tokens are
        // held behind every prompt block still in the pipeline by the
        // replica's blocks_leave_s, however long this iteration was held.
        // Otherwise from the iteration's end plus that fill: a decode token
        // sent behind the iteration's later prompt blocks passes no sooner
        // than they do.
        const double fill = model_.fill_latency_s(static_cast<double>(r.prompt - chunk));
        r.first_token_s = passed + fill;
        const double decodes_from = o_.fifo_stages ? r.first_token_s : now_ + fill;
        if (decodes_from > now_) {
          r.phase = Phase::filling;
          push(decodes_from, EventKind::first_token, id, ri);
        } else {
          first_token(ri, r);
        }
        continue;
      }
      token(r, now_);
      rep.load -= 1.0;
      if (r.generated >= r.output) complete(ri, r);
    }
    schedule(ri);
  }

  // r's first token, at r.first_token_s (at most now): it decodes from here
  // on (or, on a prefill replica, moves to a decode replica; or, asked for
  // one token, is done).
  void first_token(int ri, Request& r) {
    Replica& rep = replicas_[static_cast<std::size_t>(ri)];
    token(r, r.first_token_s);
    rep.load -= 1.0;
    r.phase = Phase::decoding;
    if (rep.role == Role::prefill && r.generated < r.output) {
      release(rep, r);
      ++running_;  // in transit to its decode replica
      rep.load -= static_cast<double>(r.output - r.generated);
      const int to = route(r, Role::decode);
      r.replica = to;
      replicas_[static_cast<std::size_t>(to)].load += static_cast<double>(r.output - r.generated);
      push(now_ + model_.kv_transfer_s(r.prompt + 1), EventKind::transfer_done, r.id, to);
      return;
    }
    if (r.generated >= r.output) complete(ri, r);
  }

  // A prefilled request's cache reached its decode replica: it queues there
  // for a batch slot and KV room like any request.
  void transferred(int id, int ri) {
    replicas_[static_cast<std::size_t>(ri)].waiting.push_back(id);
    --running_;  // counted as running while in transit; waiting again now
    ++waiting_;
    wake(ri);
  }

  void complete(int ri, Request& r) {
    Replica& rep = replicas_[static_cast<std::size_t>(ri)];
    r.phase = Phase::done;
    SessionState& st = sessions_[static_cast<std::size_t>(r.session)];
    const bool more =
        st.next_turn < static_cast<int>(st.spec->turns.size()) ||
        (!st.spec->closed_loop && r.turn + 1 < static_cast<int>(st.spec->turns.size()));
    const long long reserved = r.reserved;
    release(rep, r);
    r.released_s = now_;
    if (more && o_.keep_kv_between_turns && rep.role != Role::prefill) {
      // Keep the session's cache here (its slot and positions) for its next turn.
      rep.slots_used += 1;
      rep.pool_used += reserved;
      st.kv_replica = ri;
      st.kv_tokens = reserved;
      st.kv_last_used = now_;
      rep.idle_sessions.push_back(r.session);
    }
    finish_session_turn(r, client_last(r));
    ++finished_;
    if (o_.progress && (finished_ % 500 == 0 || finished_ == total_turns_))
      o_.progress(finished_, total_turns_);
  }

  // When the client sees r's first and last tokens: the server's time, half
  // the round trip back, and the streaming overhead of every token up to it.
  double client_first(const Request& r) const { return r.first_token_s + 0.5 * round_trip_s_; }
  double client_last(const Request& r) const {
    return r.last_token_s + 0.5 * round_trip_s_ +
           static_cast<double>(std::max(0LL, r.generated - 1)) * per_token_s_;
  }

  void finish_session_turn(const Request& r, double client_end) {
    SessionState& st = sessions_[static_cast<std::size_t>(r.session)];
    st.turns_done += 1;
    st.end_s = std::max(st.end_s, client_end);
    if (!r.rejected) {
      st.waiting_s += client_end - r.sent_s;
      st.output_tokens += r.output;
    }
    if (st.spec->closed_loop && st.next_turn < static_cast<int>(st.spec->turns.size())) {
      const double think = st.spec->turns[static_cast<std::size_t>(st.next_turn)].at_s;
      push(std::max(client_end, now_) + think, EventKind::next_turn, r.session, st.next_turn);
    }
  }

  analysis::ServingResult result() {
    analysis::ServingResult out;
    out.system = o_.system;
    out.description = o_.description;
    out.replicas = o_.replicas;
    const int all = static_cast<int>(replicas_.size());
    out.chips = static_cast<int>(std::lround(o_.chips_per_replica * all));
    out.power_w = o_.power_w_per_replica * all;
    out.prefill_policy = prefill_policy_name(o_.prefill);
    out.max_batch = max_batch_;
    out.kv_slot_tokens = kv_.slot_tokens;
    out.kv_pool_tokens = kv_.pool_tokens;
    if (o_.stack.present) {
      out.stack.connection = o_.stack.persistent ? "persistent" : "per-request";
      out.stack.connection_setup_s = setup_s_;
      out.stack.round_trip_s = round_trip_s_;
      out.stack.per_token_s = per_token_s_;
    }
    std::vector<double> ttft, tbt, e2e, queue, speed, server_time;
    double first_arrival = std::numeric_limits<double>::infinity(), last_end = 0.0;
    int meet = 0;
    for (const Request& r : requests_) {
      analysis::RequestRecord rec;
      rec.id = r.id;
      rec.session = sessions_[static_cast<std::size_t>(r.session)].spec->id;
      rec.turn = r.turn;
      rec.replica = r.rejected ? -1 : r.replica;
      rec.arrival_s = r.sent_s;
      rec.prompt_tokens = static_cast<int>(r.prompt);
      rec.output_tokens = static_cast<int>(r.output);
      rec.rejected = r.rejected;
      first_arrival = std::min(first_arrival, r.sent_s);
      if (r.rejected) {
        ++out.rejected;
        out.requests.push_back(rec);
        continue;
      }
      rec.admitted_s = r.admitted_s;
      rec.first_token_s = r.first_token_s;
      rec.last_token_s = r.last_token_s;
      rec.cached_tokens = static_cast<int>(r.cached);
      const double first_client = client_first(r);
      const double last_client = client_last(r);
      rec.ttft_s = first_client - r.sent_s;
      rec.end_to_end_s = last_client - r.sent_s;
      std::vector<double> gaps;
      for (const float g : r.gaps) {
        gaps.push_back(static_cast<double>(g) + per_token_s_);
        tbt.push_back(gaps.back());
      }
      double sum = 0.0;
      for (const double g : gaps) sum += g;
      rec.tbt_mean_s = gaps.empty() ? 0.0 : sum / static_cast<double>(gaps.size());
      rec.tbt_p99_s = percentile(gaps, 99.0);
      const double rate = gaps.empty() ? 0.0 : static_cast<double>(gaps.size()) / sum;
      const bool ttft_ok = o_.slo.ttft_s <= 0.0 || rec.ttft_s <= o_.slo.ttft_s;
      const bool rate_ok =
          o_.slo.tokens_per_s <= 0.0 || gaps.empty() || rate >= o_.slo.tokens_per_s;
      rec.meets_slo = ttft_ok && rate_ok;
      meet += rec.meets_slo ? 1 : 0;
      ttft.push_back(rec.ttft_s);
      e2e.push_back(rec.end_to_end_s);
      queue.push_back(r.admitted_s - r.arrival_s);
      if (!gaps.empty()) speed.push_back(rate);
      // In the system from its arrival at the server to its release: what
      // the time-average count integrates (Little's law below).
      server_time.push_back(r.released_s - r.arrival_s);
      ++out.served;
      out.tokens_asked += r.output;
      out.tokens_generated += r.generated;
      last_end = std::max(last_end, last_client);
      out.requests.push_back(rec);
    }
    for (const SessionState& st : sessions_) {
      if (!st.spec->closed_loop || st.turns_done == 0) continue;
      analysis::SessionRecord s;
      s.id = st.spec->id;
      s.turns = st.turns_done;
      s.start_s = st.start_s;
      s.end_s = st.end_s;
      s.task_s = st.end_s - st.start_s;
      s.waiting_s = st.waiting_s;
      s.output_tokens = static_cast<int>(st.output_tokens);
      out.sessions.push_back(s);
    }
    std::vector<double> tasks;
    for (const analysis::SessionRecord& s : out.sessions) tasks.push_back(s.task_s);
    out.task_s = summarise(tasks);
    if (requests_.empty()) return out;
    out.span_s = std::max(0.0, last_end - first_arrival);
    const double span = out.span_s > 0.0 ? out.span_s : 1.0;
    out.offered_rate = static_cast<double>(requests_.size()) / span;
    out.throughput_rps = out.served / span;
    out.output_tokens_per_s = static_cast<double>(out.tokens_generated) / span;
    out.goodput_rps = meet / span;
    out.slo_attainment = out.served ? static_cast<double>(meet) / out.served : 0.0;
    out.ttft_s = summarise(ttft);
    out.tbt_s = summarise(tbt);
    out.end_to_end_s = summarise(e2e);
    out.queue_s = summarise(queue);
    out.tokens_per_s_per_user = summarise(speed);
    out.slo_met = true;
    if (o_.slo.ttft_s > 0.0) {
      std::vector<double> v = ttft;
      out.slo_ttft_s = percentile(v, o_.slo.ttft_percentile);
      out.slo_met &= out.rejected == 0 && out.slo_ttft_s <= o_.slo.ttft_s;
    }
    if (o_.slo.tokens_per_s > 0.0 && !speed.empty()) {
      std::vector<double> v = speed;
      // "p-th percentile speed at least Y": p% of users get at least Y.
      out.slo_tokens_per_s = percentile(v, 100.0 - o_.slo.tokens_per_s_percentile);
      out.slo_met &= out.slo_tokens_per_s >= o_.slo.tokens_per_s;
    }
    double busy = 0.0, iterations = 0.0, batch = 0.0;
    for (const Replica& r : replicas_) {
      busy += r.busy_s;
      iterations += static_cast<double>(r.iterations);
      batch += r.batch_sum;
    }
    out.iterations = static_cast<std::uint64_t>(iterations);
    out.mean_batch = iterations > 0.0 ? batch / iterations : 0.0;
    // Server-side: the first arrival to the last token leaving a replica.
    const double server_span = now_ - requests_.front().arrival_s;
    out.utilisation = server_span > 0.0 ? busy / (server_span * all) : 0.0;
    out.littles_l = server_span > 0.0 ? in_system_integral_ / server_span : 0.0;
    double w = 0.0;
    for (const double x : server_time) w += x;
    out.littles_lambda_w = server_span > 0.0 ? w / server_span : 0.0;
    out.timeline = timeline_.bins(now_);
    return out;
  }

  const StepModel& model_;
  const SimulationOptions& o_;
  KvCapacity kv_;
  int max_batch_ = 0;
  std::vector<Replica> replicas_;
  std::vector<SessionState> sessions_;
  std::vector<Request> requests_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  double now_ = 0.0;
  long long waiting_ = 0, running_ = 0;
  double in_system_integral_ = 0.0;
  long long finished_ = 0, total_turns_ = 0;
  int next_prefill_ = 0, next_decode_ = 0;
  double setup_s_ = 0.0, round_trip_s_ = 0.0, per_token_s_ = 0.0;
  Timeline timeline_;
};

}  // namespace

analysis::ServingResult simulate(const std::vector<Session>& sessions, const StepModel& model,
                                 const SimulationOptions& options) {
  return Simulation(sessions, model, options).run();
}

}  // namespace wafersim::sim::serving
