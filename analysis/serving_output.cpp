#include "analysis/serving_output.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "analysis/hdf5_writing.hpp"
#include "analysis/output_file.hpp"

namespace wafersim::analysis {

namespace {

using namespace h5;

std::string ms(double s) {
  return fmt::format("{:.1f}", s * 1e3);
}

std::string label(const ServingResult& r) {
  return r.stack.connection == "none" ? r.system : r.system + " (" + r.stack.connection + ")";
}

nlohmann::ordered_json percentiles_json(const Percentiles& p) {
  return {{"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

}  // namespace

void write_serving_report(std::ostream& out, const ServingHeader& h,
                          const std::vector<ServingResult>& results) {
  out << fmt::format("serving study {}: {}\n", h.scenario, h.model);
  out << "  traffic  " << h.traffic << "\n";
  if (!h.slo.empty()) out << "  slo      " << h.slo << "\n";
  if (!h.calibration.empty()) out << "  wafer    " << h.calibration << "\n";
  out << "\n";
  for (const ServingResult& r : results)
    out << fmt::format("  {:<28} {}\n", label(r), r.description);
  out << "\n";
  out << fmt::format(
      "  {:<28} {:>6} {:>5} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>6} {:>6} {:>8}\n",
      "system", "chips", "kW", "req/s", "tok/s", "TTFT p50", "TTFT p99", "TBT p50", "TBT p99",
      "tok/s/usr", "e2e p50", "util", "batch", "SLO met");
  out << fmt::format(
      "  {:<28} {:>6} {:>5} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>6} {:>6} {:>8}\n",
      "", "", "", "", "", "ms", "ms", "ms", "ms", "p50", "s", "", "mean", "");
  for (const ServingResult& r : results) {
    out << fmt::format(
        "  {:<28} {:>6} {:>5.1f} {:>7.2f} {:>9.0f} {:>9} {:>9} {:>8} {:>8} {:>9.0f} {:>9.2f} "
        "{:>5.0f}% {:>6.1f} {:>8}\n",
        label(r), r.chips, r.power_w / 1000.0, r.throughput_rps, r.output_tokens_per_s,
        ms(r.ttft_s.p50), ms(r.ttft_s.p99), ms(r.tbt_s.p50), ms(r.tbt_s.p99),
        r.tokens_per_s_per_user.p50, r.end_to_end_s.p50, 100.0 * r.utilisation, r.mean_batch,
        h.slo.empty()
            ? std::string("-")
            : fmt::format("{}{:.0f}%", r.slo_met ? "yes " : "no ", 100.0 * r.slo_attainment));
  }
  bool sessions = false;
  for (const ServingResult& r : results) sessions |= !r.sessions.empty();
  if (sessions) {
    // Where an agent's task time goes: think/tool time between turns, the
    // time to each turn's first token (queue, prefill, serving stack) and
    // the decoding of its tokens. Only the last shrinks with the token rate.
    struct Split {
      double task = 0.0, ttft = 0.0, decode = 0.0, think = 0.0;
    };
    std::vector<Split> splits;
    for (const ServingResult& r : results) {
      Split s;
      double waiting = 0.0;
      for (const SessionRecord& x : r.sessions) {
        s.task += x.task_s;
        waiting += x.waiting_s;
      }
      for (const RequestRecord& q : r.requests) {
        if (q.rejected) continue;
        s.ttft += q.ttft_s;
        s.decode += q.end_to_end_s - q.ttft_s;
      }
      s.think = std::max(0.0, s.task - waiting);
      splits.push_back(s);
    }
    out << "\n  agent tasks (closed-loop sessions): where the task time goes\n";
    out << fmt::format("  {:<28} {:>10} {:>10} {:>11} {:>8} {:>8} {:>11}\n", "system", "task p50 s",
                       "task p90 s", "think/tool", "TTFT", "decode", "tok/s/usr");
    for (std::size_t i = 0; i < results.size(); ++i) {
      const ServingResult& r = results[i];
      const Split& s = splits[i];
      const double t = s.task > 0.0 ? s.task : 1.0;
      out << fmt::format("  {:<28} {:>10.1f} {:>10.1f} {:>10.0f}% {:>7.0f}% {:>7.0f}% {:>11.0f}\n",
                         label(r), r.task_s.p50, r.task_s.p90, 100.0 * s.think / t,
                         100.0 * s.ttft / t, 100.0 * s.decode / t, r.tokens_per_s_per_user.p50);
    }
    // The fastest and the slowest token rate, side by side: Amdahl's law on the task.
    std::size_t fast = 0, slow = 0;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].tokens_per_s_per_user.p50 > results[fast].tokens_per_s_per_user.p50) fast = i;
      if (results[i].tokens_per_s_per_user.p50 < results[slow].tokens_per_s_per_user.p50) slow = i;
    }
    if (fast != slow && results[slow].tokens_per_s_per_user.p50 > 0.0 &&
        results[fast].task_s.p50 > 0.0) {
      const Split& s = splits[slow];
      const double t = s.task > 0.0 ? s.task : 1.0;
      out << fmt::format(
          "  {} decodes {:.1f}x faster per user than {}, but its agents finish their tasks "
          "{:.2f}x sooner (p50): of {}'s task time, {:.0f}% is think/tool time and {:.0f}% "
          "waiting for first tokens, which a faster token rate does not shorten; only the "
          "{:.0f}% spent decoding does.\n",
          label(results[fast]),
          results[fast].tokens_per_s_per_user.p50 / results[slow].tokens_per_s_per_user.p50,
          label(results[slow]), results[slow].task_s.p50 / results[fast].task_s.p50,
          label(results[slow]), 100.0 * s.think / t, 100.0 * s.ttft / t, 100.0 * s.decode / t);
    }
  }
  out << "\n";
  for (const ServingResult& r : results) {
    out << fmt::format(
        "  {}: {} served, {} rejected, tokens {} of {} asked, queue p99 {} ms, goodput {:.2f} "
        "req/s, Little's law L {:.2f} vs lambda W {:.2f}\n",
        label(r), r.served, r.rejected, r.tokens_generated, r.tokens_asked, ms(r.queue_s.p99),
        r.goodput_rps, r.littles_l, r.littles_lambda_w);
  }
}

void add_serving_header_json(const ServingHeader& h, nlohmann::ordered_json& j) {
  j["scenario"] = h.scenario;
  j["model"] = h.model;
  j["traffic"] = h.traffic;
  j["slo"] = h.slo;
  j["calibration"] = h.calibration;
}

nlohmann::ordered_json serving_system_json(const ServingResult& r) {
  nlohmann::ordered_json s;
  s["system"] = r.system;
  s["connection"] = r.stack.connection;
  s["description"] = r.description;
  s["replicas"] = r.replicas;
  s["chips"] = r.chips;
  s["power_w"] = r.power_w;
  s["prefill_policy"] = r.prefill_policy;
  s["max_batch"] = r.max_batch;
  s["kv_slot_tokens"] = r.kv_slot_tokens;
  s["kv_pool_tokens"] = r.kv_pool_tokens;
  s["served"] = r.served;
  s["rejected"] = r.rejected;
  s["tokens_asked"] = r.tokens_asked;
  s["tokens_generated"] = r.tokens_generated;
  s["span_s"] = r.span_s;
  s["offered_rate"] = r.offered_rate;
  s["throughput_rps"] = r.throughput_rps;
  s["output_tokens_per_s"] = r.output_tokens_per_s;
  s["goodput_rps"] = r.goodput_rps;
  s["slo_attainment"] = r.slo_attainment;
  s["slo_met"] = r.slo_met;
  s["slo_ttft_s"] = r.slo_ttft_s;
  s["slo_tokens_per_s"] = r.slo_tokens_per_s;
  s["ttft_s"] = percentiles_json(r.ttft_s);
  s["tbt_s"] = percentiles_json(r.tbt_s);
  s["end_to_end_s"] = percentiles_json(r.end_to_end_s);
  s["queue_s"] = percentiles_json(r.queue_s);
  s["tokens_per_s_per_user"] = percentiles_json(r.tokens_per_s_per_user);
  if (!r.sessions.empty()) s["task_s"] = percentiles_json(r.task_s);
  s["utilisation"] = r.utilisation;
  s["mean_batch"] = r.mean_batch;
  s["iterations"] = r.iterations;
  s["littles_l"] = r.littles_l;
  s["littles_lambda_w"] = r.littles_lambda_w;
  s["stack"] = {{"connection_setup_s", r.stack.connection_setup_s},
                {"round_trip_s", r.stack.round_trip_s},
                {"per_token_s", r.stack.per_token_s}};
  nlohmann::ordered_json t = nlohmann::ordered_json::array();
  for (const TimelineBin& b : r.timeline) t.push_back({b.start_s, b.waiting, b.running, b.busy});
  s["timeline_columns"] = {"start_s", "waiting", "running", "busy"};
  s["timeline"] = t;
  return s;
}

nlohmann::ordered_json serving_json(const ServingHeader& h,
                                    const std::vector<ServingResult>& results) {
  nlohmann::ordered_json j;
  j["format"] = "wafersim-serving";
  j["format_version"] = 1;
  add_serving_header_json(h, j);
  j["systems"] = nlohmann::ordered_json::array();
  for (const ServingResult& r : results) j["systems"].push_back(serving_system_json(r));
  return j;
}

void write_requests_csv(const std::filesystem::path& path,
                        const std::vector<ServingResult>& results) {
  std::ostringstream o;
  o << "system,connection,id,session,turn,replica,arrival_s,admitted_s,first_token_s,"
       "last_token_s,prompt_tokens,cached_tokens,output_tokens,ttft_s,tbt_mean_s,tbt_p99_s,"
       "end_to_end_s,rejected,meets_slo\n";
  for (const ServingResult& r : results) {
    for (const RequestRecord& q : r.requests) {
      o << fmt::format(
          "{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{},{}"
          "\n",
          r.system, r.stack.connection, q.id, q.session, q.turn, q.replica, q.arrival_s,
          q.admitted_s, q.first_token_s, q.last_token_s, q.prompt_tokens, q.cached_tokens,
          q.output_tokens, q.ttft_s, q.tbt_mean_s, q.tbt_p99_s, q.end_to_end_s, q.rejected ? 1 : 0,
          q.meets_slo ? 1 : 0);
    }
  }
  write_text_atomically(path, o.str());
}

namespace {

template <class T, class F>
void column(H5::Group& g, const char* name, const std::vector<RequestRecord>& rows, F get,
            std::string_view units, std::string_view description) {
  std::vector<T> v;
  v.reserve(rows.size());
  for (const RequestRecord& q : rows) v.push_back(static_cast<T>(get(q)));
  write_vector<T>(g, name, v, units, description);
}

void write_percentiles(H5::Group& g, const char* name, const Percentiles& p, std::string_view units,
                       std::string_view description) {
  H5::Group s = make_group(g, name);
  set_attr(s, "units", units);
  set_attr(s, "description", description);
  write_scalar(s, "mean", p.mean, units, "mean");
  write_scalar(s, "p50", p.p50, units, "50th percentile");
  write_scalar(s, "p90", p.p90, units, "90th percentile");
  write_scalar(s, "p99", p.p99, units, "99th percentile");
  write_scalar(s, "max", p.max, units, "maximum");
}

void write_system(H5::Group& parent, const char* name, const ServingResult& r) {
  H5::Group g = make_group(parent, name);
  set_attr(g, "system", r.system);
  set_attr(g, "connection", r.stack.connection);
  set_attr(g, "description", r.description);
  set_attr(g, "prefill_policy", r.prefill_policy);
  set_attr(g, "replicas", static_cast<std::int32_t>(r.replicas));
  set_attr(g, "chips", static_cast<std::int32_t>(r.chips));
  set_attr(g, "max_batch", static_cast<std::int32_t>(r.max_batch));
  write_scalar(g, "power_w", r.power_w, "W", "power of every replica at full load (0: unknown)");
  write_scalar(g, "served", static_cast<std::uint64_t>(r.served), "requests", "requests served");
  write_scalar(g, "rejected", static_cast<std::uint64_t>(r.rejected), "requests",
               "requests longer than a KV slot");
  write_scalar(g, "tokens_generated", static_cast<std::uint64_t>(r.tokens_generated), "tokens",
               "output tokens generated (= asked for)");
  write_scalar(g, "throughput_rps", r.throughput_rps, "requests/s",
               "requests completed per second");
  write_scalar(g, "output_tokens_per_s", r.output_tokens_per_s, "tokens/s",
               "output tokens per second");
  write_scalar(g, "goodput_rps", r.goodput_rps, "requests/s",
               "requests per second meeting the SLO");
  write_scalar(g, "slo_attainment", r.slo_attainment, "1", "share of requests meeting the SLO");
  write_scalar(g, "slo_ttft_s", r.slo_ttft_s, "s",
               "TTFT at the SLO's percentile (0: the SLO bounds no TTFT)");
  write_scalar(g, "slo_tokens_per_s", r.slo_tokens_per_s, "tokens/s",
               "per-user speed the SLO's share of requests reaches (0: no such bound)");
  write_scalar(g, "utilisation", r.utilisation, "1", "share of replica time in iterations");
  write_scalar(g, "mean_batch", r.mean_batch, "sequences", "sequences per iteration, mean");
  write_scalar(g, "littles_l", r.littles_l, "requests", "time-average requests in the system");
  write_scalar(g, "littles_lambda_w", r.littles_lambda_w, "requests",
               "arrival rate x mean time in the system");
  write_percentiles(g, "ttft_s", r.ttft_s, "s", "time to first token, as the client sees it");
  write_percentiles(g, "tbt_s", r.tbt_s, "s", "time between tokens, as the client sees it");
  write_percentiles(g, "end_to_end_s", r.end_to_end_s, "s", "request sent to last token seen");
  write_percentiles(g, "queue_s", r.queue_s, "s", "arrival at the server to admission");
  write_percentiles(g, "tokens_per_s_per_user", r.tokens_per_s_per_user, "tokens/s",
                    "per-request decode speed");
  H5::Group q = make_group(g, "requests");
  const auto& rows = r.requests;
  column<std::int32_t>(
      q, "id", rows, [](auto& x) { return x.id; }, "1", "request, in order of arrival");
  column<std::int32_t>(
      q, "session", rows, [](auto& x) { return x.session; }, "1", "session");
  column<std::int32_t>(
      q, "turn", rows, [](auto& x) { return x.turn; }, "1", "turn within the session");
  column<std::int32_t>(
      q, "replica", rows, [](auto& x) { return x.replica; }, "1", "replica (-1: rejected)");
  column<double>(
      q, "arrival_s", rows, [](auto& x) { return x.arrival_s; }, "s", "sent by the client");
  column<double>(
      q, "admitted_s", rows, [](auto& x) { return x.admitted_s; }, "s", "admitted to a batch");
  column<double>(
      q, "first_token_s", rows, [](auto& x) { return x.first_token_s; }, "s",
      "first token (server)");
  column<double>(
      q, "last_token_s", rows, [](auto& x) { return x.last_token_s; }, "s", "last token (server)");
  column<std::int32_t>(
      q, "prompt_tokens", rows, [](auto& x) { return x.prompt_tokens; }, "tokens", "whole prompt");
  column<std::int32_t>(
      q, "cached_tokens", rows, [](auto& x) { return x.cached_tokens; }, "tokens",
      "reused from the session's kept KV cache");
  column<std::int32_t>(
      q, "output_tokens", rows, [](auto& x) { return x.output_tokens; }, "tokens", "generated");
  column<double>(
      q, "ttft_s", rows, [](auto& x) { return x.ttft_s; }, "s", "time to first token (client)");
  column<double>(
      q, "tbt_mean_s", rows, [](auto& x) { return x.tbt_mean_s; }, "s",
      "mean time between tokens (client)");
  column<double>(
      q, "tbt_p99_s", rows, [](auto& x) { return x.tbt_p99_s; }, "s",
      "99th percentile time between tokens (client)");
  column<double>(
      q, "end_to_end_s", rows, [](auto& x) { return x.end_to_end_s; }, "s",
      "sent to last token seen");
  column<std::uint8_t>(
      q, "rejected", rows, [](auto& x) { return x.rejected; }, "1", "1: longer than a KV slot");
  column<std::uint8_t>(
      q, "meets_slo", rows, [](auto& x) { return x.meets_slo; }, "1", "1: met the SLO");
  if (!r.sessions.empty()) {
    H5::Group s = make_group(g, "sessions");
    std::vector<double> start, end, task, waiting;
    std::vector<std::int32_t> turns, output;
    for (const SessionRecord& x : r.sessions) {
      start.push_back(x.start_s);
      end.push_back(x.end_s);
      task.push_back(x.task_s);
      waiting.push_back(x.waiting_s);
      turns.push_back(x.turns);
      output.push_back(x.output_tokens);
    }
    write_vector(s, "start_s", start, "s", "first turn sent");
    write_vector(s, "end_s", end, "s", "last turn's last token seen");
    write_vector(s, "task_s", task, "s", "end - start");
    write_vector(s, "waiting_s", waiting, "s", "of which waiting on the model");
    write_vector(s, "turns", turns, "1", "turns");
    write_vector(s, "output_tokens", output, "tokens", "generated over all turns");
  }
  H5::Group t = make_group(g, "timeline");
  std::vector<double> start, waiting, running, busy;
  for (const TimelineBin& b : r.timeline) {
    start.push_back(b.start_s);
    waiting.push_back(b.waiting);
    running.push_back(b.running);
    busy.push_back(b.busy);
  }
  write_vector(t, "start_s", start, "s", "start of the bin");
  write_vector(t, "waiting", waiting, "requests", "queued, time average over the bin");
  write_vector(t, "running", running, "requests", "admitted, time average over the bin");
  write_vector(t, "busy", busy, "1", "share of replicas in an iteration, time average");
}

}  // namespace

void write_serving_hdf5(const std::filesystem::path& path, const ServingHeader& h,
                        const std::vector<ServingResult>& results,
                        const std::string& resolved_scenario_yaml) {
  write_atomically(path, [&](const std::filesystem::path& temp) {
    H5::FileCreatPropList fcpl;
    H5Pset_obj_track_times(fcpl.getId(), false);
    H5::H5File f(temp.string(), H5F_ACC_TRUNC, fcpl);
    set_attr(f, "format", "wafersim-serving");
    set_attr(f, "format_version", static_cast<std::int32_t>(1));
    set_attr(f, "scenario", h.scenario);
    set_attr(f, "model", h.model);
    set_attr(f, "traffic", h.traffic);
    set_attr(f, "slo", h.slo);
    set_attr(f, "calibration", h.calibration);
    H5::Group s = make_group(f, "serving");
    for (std::size_t i = 0; i < results.size(); ++i)
      write_system(s, std::to_string(i).c_str(), results[i]);
    const H5::StrType type = utf8_string();
    H5::DataSet ds =
        f.createDataSet("scenario", type, H5::DataSpace(H5S_SCALAR), dataset_properties());
    ds.write(resolved_scenario_yaml, type);
    f.close();
  });
}

}  // namespace wafersim::analysis
