// What a user sees through a serving stack, on top of the raw hardware
// figures: a client/server round trip and connection set-up before the first
// token, and a fixed overhead per streamed token. Applies to the wafer and the
// GPU clusters alike (it lives here with the other analytical models).
#pragma once

namespace wafersim::models::gpu {

struct ServingOverhead {
  double round_trip_s = 0.0;          // client -> API -> inference -> client, once per request
  double per_token_overhead_s = 0.0;  // added to every streamed token
  double connection_setup_s = 0.0;    // per request: connection, validation, context rebuild
};

// The persistent-connection path, as published for GPT-5.3-Codex-Spark
// (OpenAI, "Introducing GPT-5.3-Codex-Spark", February 2026): "Through the
// introduction of a persistent WebSocket connection and targeted optimizations
// inside of Responses API, we reduced overhead per client/server roundtrip by
// 80%, per-token overhead by 30%, and time-to-first-token by 50%."
// We apply the 80% to round_trip, the 30% to per_token_overhead, and the 50%
// TTFT reduction to connection_setup (the per-request work a persistent
// connection with cached state skips); the hardware's own TTFT is unchanged.
struct PersistentConnectionFactors {
  double round_trip = 0.2;  // 1 - 80%
  double per_token = 0.7;   // 1 - 30%
  double setup = 0.5;       // 1 - 50%
};

struct UserSeen {
  double decode_tokens_per_s_per_user = 0.0;
  double ttft_s = 0.0;
};

// 1 / (1/rate + per_token) and ttft + set-up + round trip, with the persistent
// factors applied when `persistent`.
inline UserSeen user_seen(double raw_tokens_per_s, double raw_ttft_s, const ServingOverhead& o,
                          bool persistent,
                          const PersistentConnectionFactors& f = PersistentConnectionFactors{}) {
  const double rt = o.round_trip_s * (persistent ? f.round_trip : 1.0);
  const double per_token = o.per_token_overhead_s * (persistent ? f.per_token : 1.0);
  const double setup = o.connection_setup_s * (persistent ? f.setup : 1.0);
  UserSeen u;
  u.decode_tokens_per_s_per_user =
      raw_tokens_per_s > 0.0 ? 1.0 / (1.0 / raw_tokens_per_s + per_token) : 0.0;
  u.ttft_s = raw_ttft_s + setup + rt;
  return u;
}

}  // namespace wafersim::models::gpu
