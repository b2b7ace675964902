// deployment: (how the wafer and the GPU systems are deployed to serve a
// study's traffic) and slo: (what the deployment promises its users).
// docs/scenario-schema.md, "Serving".
#include "sim/config/quantity.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

using namespace yaml;
using serving::DeploymentSpec;
using serving::PrefillPolicy;
using serving::Router;
using serving::Slo;
using serving::StageOrder;

constexpr Need O = Need::optional;

int read_replicas(const Value& v) {
  const int n = read_count(v, "4");
  if (n < 1 || n > 100000) fail(v.loc(), v.path, "must be between 1 and 100000 (model copies)");
  return n;
}

// A batch limit: a count, or auto (0: as the KV cache allows).
int read_batch(const Value& v) {
  if (v.node.IsScalar() && v.node.Scalar() == "auto" && is_plain(v)) return 0;
  const int n = read_count(v, "64");
  if (n < 1 || n > 1000000)
    fail(v.loc(), v.path,
         "must be between 1 and 1000000 sequences, or auto (as the KV cache allows)");
  return n;
}

std::string write_batch(int n) {
  return n == 0 ? std::string("auto") : std::to_string(n);
}

double read_percentile(const Value& v) {
  const double p = read_real(v, "99");
  if (!(p > 0.0 && p <= 100.0)) fail(v.loc(), v.path, "must be in (0, 100], e.g. 99 for p99");
  return p;
}

constexpr Key<DeploymentSpec> kDeployment[] = {
    {"wafer.replicas", O, "count (default 1)", "wafer pipelines (each of the scenario's wafers)",
     [](auto& v, auto& d, auto&) { d.wafer.replicas = read_replicas(v); },
     [](auto& d) { return fmt::format("{}", d.wafer.replicas); }, nullptr, 0, true},
    {"wafer.max_batch", O, "count or auto (default auto)",
     "sequences in flight per pipeline; auto: the most whose KV cache fits at max_context",
     [](auto& v, auto& d, auto&) { d.wafer.max_batch = read_batch(v); },
     [](auto& d) { return write_batch(d.wafer.max_batch); }, nullptr, 0, true},
    {"wafer.prefill_block", O, "count 1..4096 (default 64)",
     "prompt tokens per block in the wafer's prefill calibration runs (workload.prefill_block)",
     [](auto& v, auto& d, auto&) {
       d.wafer_prefill_block = read_count(v, "64");
       if (d.wafer_prefill_block < 1 || d.wafer_prefill_block > 4096)
         fail(v.loc(), v.path, "must be between 1 and 4096 tokens");
     },
     [](auto& d) { return fmt::format("{}", d.wafer_prefill_block); }, nullptr, 0, true},
    {"wafer.stage_order", O, "fifo | decode-first (default fifo)",
     "whether a decode token trails the prompt blocks sent before it through every stage of the "
     "wafer's pipeline (fifo: the engine's stages) or passes them (decode-first: a what-if "
     "scheduler the engine does not model)",
     [](auto& v, auto& d, auto&) {
       d.wafer_stage_order =
           read_choice(v, "stage order", {"decode-first", "fifo"}) == "fifo"
               ? StageOrder::fifo
               : StageOrder::decode_first;
     },
     [](auto& d) { return std::string(serving::stage_order_name(d.wafer_stage_order)); }, nullptr,
     0, true},
    {"gpu.replicas", O, "count (default 1)", "model copies of every GPU system (each its split)",
     [](auto& v, auto& d, auto&) { d.gpu.replicas = read_replicas(v); },
     [](auto& d) { return fmt::format("{}", d.gpu.replicas); }, nullptr, 0, true},
    {"gpu.max_batch", O, "count or auto (default 256)",
     "sequences in flight per GPU replica (vLLM's max_num_seqs defaults to 256)",
     [](auto& v, auto& d, auto&) { d.gpu.max_batch = read_batch(v); },
     [](auto& d) { return write_batch(d.gpu.max_batch); }, nullptr, 0, true},
    {"max_context", O, "count or auto (default auto)",
     "longest prompt + output of one sequence; auto: the traffic's longest",
     [](auto& v, auto& d, auto&) {
       if (v.node.IsScalar() && v.node.Scalar() == "auto" && is_plain(v)) {
         d.max_context = 0;
         return;
       }
       d.max_context = read_count(v, "8192");
       if (d.max_context < 2) fail(v.loc(), v.path, "must be at least 2 tokens, or auto");
     },
     [](auto& d) {
       return d.max_context == 0 ? std::string("auto") : fmt::format("{}", d.max_context);
     }},
    {"router", O, "least-loaded | round-robin (default least-loaded)",
     "how requests are spread over replicas (a session's later turns follow its KV cache)",
     [](auto& v, auto& d, auto&) {
       d.router = read_choice(v, "router", {"least-loaded", "round-robin"}) == "round-robin"
                      ? Router::round_robin
                      : Router::least_loaded;
     },
     [](auto& d) { return std::string(serving::router_name(d.router)); }},
    {"prefill.policy", O, "prefill-first | chunked | disaggregated (default chunked)",
     "how prompts share the replicas with decoding",
     [](auto& v, auto& d, auto&) {
       const std::string p =
           read_choice(v, "prefill policy", {"prefill-first", "chunked", "disaggregated"});
       d.prefill = p == "prefill-first" ? PrefillPolicy::prefill_first
                   : p == "chunked"     ? PrefillPolicy::chunked
                                        : PrefillPolicy::disaggregated;
     },
     [](auto& d) { return std::string(serving::prefill_policy_name(d.prefill)); }, nullptr, 0,
     true},
    {"prefill.chunk_tokens", O, "count 1..1048576 (default 512)",
     "chunked: tokens per iteration, decode tokens first",
     [](auto& v, auto& d, auto&) {
       d.chunk_tokens = read_count(v, "512");
       if ((d.chunk_tokens < 1) || (d.chunk_tokens > (1 << 20)))
         fail(v.loc(), v.path, "must be between 1 and 1048576 tokens per iteration");
     },
     [](auto& d) { return fmt::format("{}", d.chunk_tokens); }, nullptr, 0, true},
    {"prefill.replicas", O, "count (default 1)",
     "disaggregated: replicas that only prefill, beside the decoding ones",
     [](auto& v, auto& d, auto&) { d.prefill_replicas = read_replicas(v); },
     [](auto& d) { return fmt::format("{}", d.prefill_replicas); },
     [](auto& d) { return d.prefill == PrefillPolicy::disaggregated; }, 0, true},
    {"keep_kv_between_turns", O, "true / false (default true)",
     "sessions keep their KV cache between turns (prefix reuse; evicted LRU when room is needed)",
     [](auto& v, auto& d, auto&) { d.keep_kv_between_turns = read_bool(v); },
     [](auto& d) { return yaml_bool(d.keep_kv_between_turns); }},
};

constexpr Key<Slo> kSlo[] = {
    {"ttft", O, "time", "time to first token at most this, at ttft_percentile",
     [](auto& v, auto& s, auto&) {
       s.ttft_s = read_quantity_in(v, parse_duration, "2 s", 0.0, 3600.0, format_duration);
       if (!(s.ttft_s > 0.0)) fail(v.loc(), v.path, "must be a time above 0, e.g. 2 s");
     },
     [](auto& s) { return format_duration(s.ttft_s); }, [](auto& s) { return s.ttft_s > 0.0; }},
    {"ttft_percentile", O, "number in (0, 100] (default 99)", "of requests",
     [](auto& v, auto& s, auto&) { s.ttft_percentile = read_percentile(v); },
     [](auto& s) { return yaml_real(s.ttft_percentile); }},
    {"tokens_per_s", O, "number > 0",
     "per-user decode speed at least this, for tokens_per_s_percentile of requests",
     [](auto& v, auto& s, auto&) {
       s.tokens_per_s = read_real(v, "100");
       if (!(s.tokens_per_s > 0.0)) fail(v.loc(), v.path, "must be above 0 tokens/s, e.g. 100");
     },
     [](auto& s) { return yaml_real(s.tokens_per_s); },
     [](auto& s) { return s.tokens_per_s > 0.0; }},
    {"tokens_per_s_percentile", O, "number in (0, 100] (default 50)",
     "share of requests (in %) that must reach tokens_per_s",
     [](auto& v, auto& s, auto&) { s.tokens_per_s_percentile = read_percentile(v); },
     [](auto& s) { return yaml_real(s.tokens_per_s_percentile); }},
};

}  // namespace

std::span<const Key<DeploymentSpec>> deployment_keys() {
  return kDeployment;
}
std::span<const Key<Slo>> slo_keys() {
  return kSlo;
}

DeploymentSpec read_deployment(const Value& v) {
  const Mapping m(v, top_keys(deployment_keys()));
  DeploymentSpec d;
  Provenance unused;
  read_keys(m, /*complete=*/true, deployment_keys(), d, unused, ReadContext{});
  if (d.prefill != PrefillPolicy::disaggregated && m.find("prefill") != nullptr) {
    const Value& p = m.get("prefill");
    if (p.node.IsMap() && p.node["replicas"])
      fail(p.loc(), p.path + ".replicas",
           "prefill replicas are only for policy: disaggregated (prefill on replicas of its own)");
  }
  return d;
}

Slo read_slo(const Value& v) {
  const Mapping m(v, top_keys(slo_keys()));
  Slo s;
  Provenance unused;
  read_keys(m, /*complete=*/true, slo_keys(), s, unused, ReadContext{});
  if (!s.any())
    fail(v.loc(), v.path, "sets no objective: give ttft (e.g. 2 s) and/or tokens_per_s (e.g. 100)");
  return s;
}

}  // namespace wafersim::sim::schema
