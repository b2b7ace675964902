// What travels through the pipeline: a token (or a block of prompt tokens)
// and its activation vectors, each with where its pieces sit, when each
// piece is ready and (functional mode) its values. Plain data: the executor
// (sim/exec/executor.hpp) fills it, the engine moves it between stages, the
// record recycler (sim/exec/record_recycler.hpp) reads its ready times.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fabric/critical_path.hpp"
#include "sim/placement/layout.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

inline constexpr int kSlots = static_cast<int>(Slot::count);

// An activation vector of one token, or of a block of `tokens` prompt
// tokens (prefill in blocks): where its pieces are (each piece holds its
// elements of every token of the block), when each piece is ready, and
// (functional mode) its values, token after token ([tokens][n]).
struct Vec {
  Layout layout;
  std::vector<Timed> ready;
  std::vector<float> values;
  int tokens = 1;
  // Elements per token (functional mode).
  std::size_t width() const { return values.size() / static_cast<std::size_t>(tokens); }
  std::span<float> row(int t) {
    return std::span(values).subspan(static_cast<std::size_t>(t) * width(), width());
  }
  std::span<const float> row(int t) const {
    return std::span(values).subspan(static_cast<std::size_t>(t) * width(), width());
  }
  Timed latest() const {
    Timed t = ready.front();
    for (const Timed& r : ready) t = later(t, r);
    return t;
  }
};

// Which sequence and position one row of a message is, and (a decode
// batch's rows) the token id it carries in.
struct RowTag {
  int user = 0;
  int position = 0;
  std::int32_t token = 0;
};

// The rows of a block of `tokens` consecutive positions of one user.
inline std::vector<RowTag> block_rows(int user, int position, int tokens) {
  std::vector<RowTag> rows(static_cast<std::size_t>(tokens));
  for (int t = 0; t < tokens; ++t) rows[static_cast<std::size_t>(t)] = {user, position + t, 0};
  return rows;
}

// One token on its way through the pipeline, a block of `tokens` prompt
// tokens at positions [position, position + tokens), or (workload.
// decode_batch > 1) a decode batch: the next token of each of `tokens`
// users, one row each (`batch`), through every matrix as one GEMM.
struct TokenMessage {
  int user = 0;
  int position = 0;
  int tokens = 1;
  std::int32_t token = 0;
  bool prefill = false;
  bool needs_logits = false;  // the last prompt token and generated tokens
  // A token of a speculative round on the target: its greedy choice is
  // compared with the draft's proposal, not fed back.
  bool verifies = false;
  // A decode batch's rows (user, position), row after row, or (workload.
  // batch_prompts) a batch of prompt blocks': each member's block, member
  // after member; empty for one user's token or block (its rows are
  // block_rows(user, position, tokens)).
  std::vector<RowTag> batch;
  // The rows of `batch` the head takes (a batch of prompt blocks: each
  // member's last prompt token, where its prompt ends in this message);
  // empty: every row (a decode batch), or one user's last token.
  std::vector<int> logit_rows;
  Cycles start_cycle;  // when it left the host (or the draft's last proposal)
  Cycles handed_at;    // when it was written into the fifo it waits in
  std::array<Vec, kSlots> slots;
  // The greedy token of each row the head computed (functional runs): one
  // for a token or a block, one per row for a decode batch, whose `logits`
  // hold every row's, row after row.
  std::vector<std::int32_t> next_tokens;
  Timed done;
  std::vector<float> logits;
  // The functional lane (sim/exec/value_lane.hpp): the token as the values-only
  // executor computes it, and the ticket of the last work posted for it.
  std::shared_ptr<TokenMessage> values;
  std::uint64_t lane_ticket = 0;

  bool is_batch() const { return !batch.empty(); }
  // The users a batch has rows of (its rows come user by user).
  int batch_users() const {
    int n = 0;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (i == 0 || batch[i].user != batch[i - 1].user) ++n;
    return n;
  }
  // The users it carries: a batch's, else its one user's.
  int user_count() const { return is_batch() ? batch_users() : 1; }
  // Every row's (user, position).
  std::vector<RowTag> rows() const {
    return is_batch() ? batch : block_rows(user, position, tokens);
  }

  // What the values mirror needs of this token besides its vectors.
  void copy_header_to(TokenMessage& o) const {
    o.user = user, o.position = position, o.tokens = tokens, o.token = token;
    o.prefill = prefill, o.needs_logits = needs_logits, o.verifies = verifies;
    o.batch = batch;
    o.logit_rows = logit_rows;
  }
};

inline Vec& slot(TokenMessage& m, Slot s) {
  return m.slots[static_cast<int>(s)];
}

}  // namespace wafersim::sim
