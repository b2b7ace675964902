// workload: what is decoded (Workload), and outputs: (Outputs).
// docs/scenario-schema.md, "Workload".
#include <climits>
#include <cstdint>
#include <filesystem>

#include <fmt/ranges.h>

#include "models/tokenizer.hpp"
#include "sim/config/preset_resolver.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

using namespace yaml;

constexpr Need R = Need::required;
constexpr Need O = Need::optional;

// SplitMix64 (Steele, Lea, Flood 2014): the generator behind prompt_tokens.
// Its whole definition is here, so ids do not depend on the standard library.
std::uint64_t splitmix64(std::uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Prompt ids drawn from `seed`: the generator starts at seed XOR "prompt" (in
// ASCII) so that the prompt stream differs from anything else seeded with the
// same number; each draw maps to [0, vocab) by multiply-high (no modulo bias
// beyond 2^-64).
std::vector<std::int32_t> draw_prompt(int count, int vocab, std::uint64_t seed) {
  constexpr std::uint64_t kPromptStream = 0x70726F6D7074ull;  // "prompt"
  std::uint64_t state = seed ^ kPromptStream;
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const unsigned __int128 wide =
        static_cast<unsigned __int128>(splitmix64(state)) * static_cast<unsigned>(vocab);
    ids.push_back(static_cast<std::int32_t>(wide >> 64));
  }
  return ids;
}

// A count in [lo, hi], or (`per_user`) a list of such counts with one per
// user (workload.users, read before): the list into `by_user` (cleared for a
// single count); returns the single count or the list's largest.
int read_user_counts(const Value& v, const Workload& w, int lo, int hi, const std::string& example,
                     const std::string& meaning, std::vector<int>& by_user) {
  by_user.clear();
  if (!v.node.IsSequence()) return read_count_in(v, lo, hi, example);
  if (static_cast<int>(v.node.size()) != w.users)
    fail(v.loc(), v.path,
         fmt::format("has {} value{} but workload.users is {}: give one count per user ({}), "
                     "or a single count for every user",
                     v.node.size(), v.node.size() == 1 ? "" : "s", w.users, meaning));
  int most = lo;
  for (std::size_t i = 0; i < v.node.size(); ++i) {
    by_user.push_back(read_count_in(v.item(i), lo, hi, example));
    most = std::max(most, by_user.back());
  }
  return most;
}

std::string write_user_counts(const std::vector<int>& by_user, int single) {
  if (by_user.empty()) return fmt::format("{}", single);
  return fmt::format("[{}]", fmt::join(by_user, ", "));
}

// The value of a key given per user, or its item for user `u` (a list).
Value user_item(const Value& v, int u) {
  return v.node.IsSequence() ? v.item(static_cast<std::size_t>(u)) : v;
}

// Every user's cached_tokens, prompt and generate_tokens must fit the
// model's context: reported at the prompt (its item for that user) when it
// alone (after the cached positions) reaches max_position, else at
// generate_tokens. `prompt_length(u)`: user u's prompt.
template <class PromptLength>
void check_context(const Value& prompt, PromptLength prompt_length, const Workload& w,
                   const ReadContext& ctx) {
  const models::ModelConfig& model = *ctx.model;
  for (int u = 0; u < w.users; ++u) {
    const long long cached = user_cached_tokens(w, u);
    const long long length = prompt_length(u);
    const long long generate = user_generate_tokens(w, u);
    const long long before = cached + length;
    const long long total = before + generate;
    if (total <= model.max_position) continue;
    const bool per_user = !w.prompt_tokens_by_user.empty() ||
                          !w.generate_tokens_by_user.empty() || !w.cached_tokens_by_user.empty();
    const std::string sum = fmt::format(
        "{}{}the prompt ({} tokens) + generate_tokens ({}) = {} tokens, more than "
        "max_position {} of model {}",
        per_user ? fmt::format("user {}: ", u) : "",
        cached > 0 ? fmt::format("cached_tokens ({}) + ", cached) : "", length, generate, total,
        model.max_position, model.name);
    if (before >= model.max_position) {
      const Value at = user_item(prompt, u);
      fail(at.loc(), at.path,
           fmt::format("{}; the prompt must be shorter than {} tokens", sum,
                       model.max_position - cached));
    }
    const Value at = user_item(ctx.mapping->get("generate_tokens"), u);
    fail(at.loc(), at.path,
         fmt::format("{}; with this prompt generate_tokens can be at most {}", sum,
                     model.max_position - before));
  }
}

// prompt_ids: the length first (an absurd prompt fails before its ids are read).
void read_prompt_ids(const Value& prompt, Workload& w, const ReadContext& ctx) {
  if (!prompt.node.IsSequence()) {
    fail(prompt.loc(), prompt.path,
         fmt::format("expected a list of token ids such as [1, 2, 3], got {}",
                     describe(prompt.node)));
  }
  std::vector<Value> id_values;
  for (std::size_t i = 0; i < prompt.node.size(); ++i) id_values.push_back(prompt.item(i));
  const auto length = static_cast<long long>(id_values.size());
  if (length == 0) fail(prompt.loc(), prompt.path, "needs at least one token id, e.g. [1, 2, 3]");
  check_context(prompt, [&](int) { return length; }, w, ctx);
  const models::ModelConfig& model = *ctx.model;
  w.prompt_ids.clear();
  for (const Value& id_value : id_values) {
    const int id = read_count(id_value, "42");
    if (id >= model.vocab_size) {
      fail(id_value.loc(), id_value.path,
           fmt::format("token id {} is out of range; ids must be in [0, {}) for model {} "
                       "(vocab_size {})",
                       id, model.vocab_size, model.name, model.vocab_size));
    }
    w.prompt_ids.push_back(id);
  }
}

// prompt_tokens: a count, or one per user (drawn at the longest; user u
// takes the first of its ids, see user_prompt()).
void read_prompt_tokens(const Value& prompt, Workload& w, const ReadContext& ctx) {
  if (prompt.node.IsScalar() && read_count(prompt, "8") < 1)
    fail(prompt.loc(), prompt.path, "must be at least 1 token");
  // Lengths beyond the model's are check_context's to explain.
  const int longest =
      read_user_counts(prompt, w, 1, INT_MAX, "8", "its prompt's tokens", w.prompt_tokens_by_user);
  check_context(
      prompt,
      [&](int u) {
        return w.prompt_tokens_by_user.empty() ? longest
                                               : w.prompt_tokens_by_user[static_cast<std::size_t>(u)];
      },
      w, ctx);
  w.prompt_ids = draw_prompt(longest, ctx.model->vocab_size, w.seed);
}

// Written back where the prompt has per-user lengths (prompt_ids then is
// not: the lengths and the seed give every user's ids).
std::string write_prompt_tokens(const Workload& w) {
  return write_user_counts(w.prompt_tokens_by_user, static_cast<int>(w.prompt_ids.size()));
}

// prompt: text, encoded with the workload's tokenizer (read before it).
void read_prompt_text(const Value& prompt, Workload& w, const ReadContext& ctx) {
  const std::string text = read_string(prompt, "the prompt as text, e.g. \"def fib(n):\"");
  if (w.tokenizer.empty()) {
    fail(prompt.loc(), prompt.path,
         ctx.checkpoint.empty()
             ? std::string("a text prompt needs a tokenizer: give workload.tokenizer (a "
                           "tokenizer.json), or name a checkpoint folder that holds one in model:")
             : fmt::format("a text prompt needs a tokenizer: {} has no tokenizer.json; give "
                           "workload.tokenizer",
                           ctx.checkpoint));
  }
  std::vector<std::int32_t> ids;
  try {
    ids = models::Tokenizer::from_file(w.tokenizer).encode(text);
  } catch (const models::TokenizerError& e) {
    fail(prompt.loc(), prompt.path, e.what());
  }
  if (ids.empty()) fail(prompt.loc(), prompt.path, "encodes to no tokens; give some text");
  check_context(prompt, [n = static_cast<long long>(ids.size())](int) { return n; }, w, ctx);
  const models::ModelConfig& model = *ctx.model;
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= model.vocab_size) {
      fail(prompt.loc(), prompt.path,
           fmt::format("the tokenizer {} gives id {}, outside model {}'s vocabulary [0, {}): "
                       "the tokenizer does not belong to this model",
                       w.tokenizer, id, model.name, model.vocab_size));
    }
  }
  w.prompt_ids = std::move(ids);
  w.prompt_text = text;
}

// tokenizer: a tokenizer.json, checked by reading it (its errors at this key).
void read_tokenizer(const Value& v, Workload& w, const ReadContext&) {
  const std::string given = read_string(v, "a tokenizer.json");
  const std::filesystem::path p = checkpoint_path(given, v);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    fail(v.loc(), v.path,
         fmt::format("'{}' is not a file (looked for {}, relative to the current directory and "
                     "to the scenario's folder)",
                     given, p.string()));
  try {
    (void)models::Tokenizer::from_file(p);
  } catch (const models::TokenizerError& e) {
    fail(v.loc(), v.path, e.what());
  }
  w.tokenizer = p.string();
}

// Absent tokenizer: the checkpoint folder's tokenizer.json, when it has one,
// read now (an unusable one is an error before anything runs, at workload:).
void default_tokenizer(Workload& w, const ReadContext& ctx) {
  if (ctx.checkpoint.empty()) return;
  const std::filesystem::path p = std::filesystem::path(ctx.checkpoint) / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return;
  try {
    (void)models::Tokenizer::from_file(p);
  } catch (const models::TokenizerError& e) {
    const Value& workload = ctx.mapping->self();
    fail(workload.key_loc(), join_path(workload.path, "tokenizer"),
         std::string(e.what()) +
             "\n  (the checkpoint folder's tokenizer.json, used by default: fix it, or give "
             "workload.tokenizer)");
  }
  w.tokenizer = p.string();
}

// A flow list, wrapped so that long prompts stay readable.
std::string write_prompt_ids(const Workload& w) {
  const std::string key = "  prompt_ids: ";
  std::string ids = key + "[";
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < w.prompt_ids.size(); ++i) {
    std::string item = std::to_string(w.prompt_ids[i]);
    if (i + 1 < w.prompt_ids.size()) item += ",";
    if (i > 0) {
      if (ids.size() - line_start + 1 + item.size() > 96) {
        ids += "\n    ";
        line_start = ids.size() - 4;
      } else {
        ids += " ";
      }
    }
    ids += item;
  }
  return ids.substr(key.size()) + "]";
}

// workload.arrivals_s: one finite time >= 0 per user (read after users).
void read_arrivals(const Value& v, Workload& w, const ReadContext&) {
  if (!v.node.IsSequence())
    fail(v.loc(), v.path,
         fmt::format("expected a list of arrival times in seconds, one per user, such as [0, "
                     "0.002], got {}",
                     describe(v.node)));
  if (static_cast<int>(v.node.size()) != w.users)
    fail(v.loc(), v.path,
         fmt::format("has {} arrival time{} but workload.users is {}: give one time per user",
                     v.node.size(), v.node.size() == 1 ? "" : "s", w.users));
  w.arrivals_s.clear();
  for (std::size_t i = 0; i < v.node.size(); ++i) {
    const Value item = v.item(i);
    const double t = read_real(item, "0.002");
    if (t < 0.0 || t > 1.0e6)
      fail(item.loc(), item.path,
           fmt::format("must be between 0 and 1e6 seconds (when user {}'s prompt arrives), got {}",
                       i, t));
    w.arrivals_s.push_back(t);
  }
}

std::string write_arrivals(const Workload& w) {
  return fmt::format("[{}]", fmt::join(w.arrivals_s, ", "));
}

// Read by rank: seed, users, decode_batch (after users), batch_prompts (after decode_batch),
// prefill_block and cached_tokens, then generate_tokens, then the prompt (its length is checked
// against generate_tokens, its draw uses the seed).
constexpr Key<Workload> kWorkload[] = {
    {"prompt", O, "text (needs a tokenizer)",
     "the prompt as text, encoded with the tokenizer (written back as prompt_ids)",
     read_prompt_text, nullptr, nullptr, 2},
    {"tokenizer", O, "path to a tokenizer.json (default: the checkpoint folder's)",
     "encodes a text prompt and decodes the generated ids into text", read_tokenizer,
     [](auto& w) { return yaml_string(w.tokenizer); }, [](auto& w) { return !w.tokenizer.empty(); },
     0, false, default_tokenizer},
    {"prompt_ids", O, "list of token ids, each in [0, vocab_size), at least one",
     "the prompt, explicitly", read_prompt_ids, write_prompt_ids,
     [](auto& w) { return w.prompt_tokens_by_user.empty(); }, 2},
    {"prompt_tokens", O, "count >= 1, or a list of counts, one per user",
     "the prompt: this many ids drawn from seed (per user: each user's prompt length)",
     read_prompt_tokens, write_prompt_tokens,
     [](auto& w) { return !w.prompt_tokens_by_user.empty(); }, 2},
    {"generate_tokens", R, "count 1..10^8, or a list of counts, one per user",
     "tokens to decode (per user: each user's)",
     [](auto& v, auto& w, auto&) {
       w.generate_tokens = read_user_counts(v, w, 1, 100'000'000, "16", "the tokens it decodes",
                                            w.generate_tokens_by_user);
     },
     [](auto& w) { return write_user_counts(w.generate_tokens_by_user, w.generate_tokens); },
     nullptr, 1},
    {"seed", O, "whole number in [0, 2^64), default 0",
     "seeds the prompt and the synthetic weights",
     [](auto& v, auto& w, auto&) { w.seed = read_unsigned(v, UINT64_MAX, "42"); },
     [](auto& w) { return fmt::format("{}", w.seed); }},
    {"users", O, "count 1..100000, default 1", "sequences decoded at once, each with its KV cache",
     [](auto& v, auto& w, auto&) {
       w.users = read_count(v, "4");
       if (w.users < 1 || w.users > 100000)
         fail(v.loc(), v.path, "must be between 1 and 100000 (sequences decoded at once)");
     },
     [](auto& w) { return fmt::format("{}", w.users); }},
    {"decode_batch", O, "count 1..users, default 1",
     "users whose decode tokens go through each stage together as one batch (a GEMM of that many "
     "rows per matrix); 1 = each user's token on its own, pipelined behind the others'",
     [](auto& v, auto& w, auto&) {
       w.decode_batch = read_count(v, "4");
       if (w.decode_batch < 1 || w.decode_batch > w.users)
         fail(v.loc(), v.path,
              fmt::format("must be between 1 and workload.users ({}): users per decode batch",
                          w.users));
     },
     [](auto& w) { return fmt::format("{}", w.decode_batch); },
     [](auto& w) { return w.decode_batch > 1; }},
    {"batch_prompts", O, "true / false, default false",
     "with decode_batch > 1: a batch's prompts go through each stage together too, block by "
     "block (a GEMM of every member's rows), once its last member has arrived; false = each "
     "user's prompt on its own, pipelined behind the others'",
     [](auto& v, auto& w, auto&) {
       w.batch_prompts = read_bool(v);
       if (w.batch_prompts && w.decode_batch < 2)
         fail(v.loc(), v.path,
              "needs workload.decode_batch > 1 (the prompts of a decode batch's users go "
              "together); set decode_batch, or remove batch_prompts");
     },
     [](auto& w) { return std::string(w.batch_prompts ? "true" : "false"); },
     [](auto& w) { return w.batch_prompts; }},
    {"arrivals_s", O, "list of seconds >= 0, one per user, default all 0",
     "when each user's prompt reaches the host (simulated time): later users' prompts enter "
     "the pipeline while earlier users decode",
     read_arrivals, write_arrivals, [](auto& w) { return !w.arrivals_s.empty(); }},
    {"prefill_block", O, "count 1..1000000, default 1",
     "prompt tokens that go through each stage together as one block",
     [](auto& v, auto& w, auto&) {
       w.prefill_block = read_count(v, "32");
       if (w.prefill_block < 1 || w.prefill_block > 1000000)
         fail(v.loc(), v.path,
              "must be between 1 and 1000000 (prompt tokens per block; 1 = token by token)");
     },
     [](auto& w) { return fmt::format("{}", w.prefill_block); }},
    {"cached_tokens", O, "count 0..max_position - 1, or a list of counts, one per user; default 0",
     "positions already in every user's KV cache (timing only: decode at a long context "
     "without simulating its prefill; per user: each user's)",
     [](auto& v, auto& w, auto& ctx) {
       const int most = ctx.model ? ctx.model->max_position - 1 : 100000000;
       w.cached_tokens = read_user_counts(v, w, 0, most, "32000", "the positions it has cached",
                                          w.cached_tokens_by_user);
     },
     [](auto& w) { return write_user_counts(w.cached_tokens_by_user, w.cached_tokens); },
     [](auto& w) { return w.cached_tokens > 0; }},
};

constexpr Key<Outputs> kOutputs[] = {
    {"results", O, "path", "HDF5 results file, relative to the current directory (default none)",
     [](auto& v, auto& o, auto&) { o.results = read_string(v, "a file path such as out/run.h5"); },
     [](auto& o) { return yaml_string(*o.results); },
     [](auto& o) { return o.results.has_value(); }},
    {"functional", O, "true / false, default true", "compute real numbers; false = timing only",
     [](auto& v, auto& o, auto&) { o.functional = read_bool(v); },
     [](auto& o) { return yaml_bool(o.functional); }},
};

}  // namespace

std::span<const Key<Workload>> workload_keys() {
  return kWorkload;
}
std::span<const Key<Outputs>> outputs_keys() {
  return kOutputs;
}

void read_workload(const Value& v, const models::ModelConfig& model, const std::string& checkpoint,
                   Workload& w) {
  const Mapping m(v, top_keys(workload_keys()));
  const int prompts = int{m.has("prompt")} + int{m.has("prompt_ids")} + int{m.has("prompt_tokens")};
  if (prompts > 1) {
    const Value& second = m.get(m.has("prompt_tokens") ? "prompt_tokens" : "prompt_ids");
    fail(second.key_loc(), second.path,
         "give one prompt: prompt (text), prompt_ids (explicit token ids) or prompt_tokens (a "
         "count of ids drawn from the seed)");
  }
  if (prompts == 0) {
    fail(v.key_loc(), join_path(v.path, "prompt_tokens"),
         "missing the prompt; give prompt_tokens (a count, e.g. prompt_tokens: 8), prompt_ids "
         "(e.g. prompt_ids: [1, 2, 3]) or prompt (text, with a tokenizer)");
  }
  Provenance unused;
  ReadContext ctx;
  ctx.model = &model;
  ctx.checkpoint = checkpoint;
  read_keys(m, /*complete=*/true, workload_keys(), w, unused, ctx);
}

void read_outputs(const Value& v, Outputs& outputs) {
  const Mapping m(v, top_keys(outputs_keys()));
  Provenance unused;
  read_keys(m, /*complete=*/true, outputs_keys(), outputs, unused, ReadContext{});
}

}  // namespace wafersim::sim::schema
