#include "analysis/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/svg_chart.hpp"

namespace wafersim::analysis {

namespace {

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px auto;max-width:1500px;padding:0 16px;color:#222}"
    "h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;"
    "border-bottom:1px solid #ccc;padding-bottom:3px}"
    ".sub{color:#555;margin-top:0}"
    ".cards{display:flex;flex-wrap:wrap;gap:10px}"
    ".card{border:1px solid #ccc;border-radius:6px;padding:8px 14px;min-width:150px}"
    ".card .v{font-size:20px;font-weight:bold}.card .k{color:#555;font-size:12px}"
    "table{border-collapse:collapse;font-size:13px;margin:8px 0}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}"
    ".scroll{overflow-x:auto}.note{color:#555;font-size:12px}";

std::string page_start(const std::string& title, const std::string& subtitle) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
      "<title>{0}</title>\n<style>{1}</style>\n</head>\n<body>\n<h1>{0}</h1>\n"
      "<p class=\"sub\">{2}</p>\n",
      xml_escape(title), kStyle, xml_escape(subtitle));
}

std::string page_end() {
  return "<p class=\"note\">Written by wafersim; this file is self-contained (no scripts, nothing "
         "fetched).</p>\n</body>\n</html>\n";
}

std::string card(const std::string& key, const std::string& value) {
  return fmt::format(
      "<div class=\"card\"><div class=\"v\">{}</div><div class=\"k\">{}</div></div>\n",
      xml_escape(value), xml_escape(key));
}

std::string seconds(double s) {
  if (s <= 0) return "0 s";
  if (s < 1e-3) return fmt::format("{:.3g} us", s * 1e6);
  if (s < 1.0) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} s", s);
}

std::string rate(double v) {
  return v >= 1e4 ? tick_label(v) : fmt::format("{:.4g}", v);
}

std::string table(const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows) {
  std::string s = "<div class=\"scroll\"><table>\n<tr>";
  for (const auto& h : head) s += "<th>" + xml_escape(h) + "</th>";
  s += "</tr>\n";
  for (const auto& r : rows) {
    s += "<tr>";
    for (const auto& c : r) s += "<td>" + xml_escape(c) + "</td>";
    s += "</tr>\n";
  }
  return s + "</table></div>\n";
}

// At most `limit` evenly spaced indices of n, in order.
std::vector<std::size_t> thin(std::size_t n, std::size_t limit) {
  std::vector<std::size_t> idx;
  const std::size_t step = std::max<std::size_t>(1, (n + limit - 1) / limit);
  for (std::size_t i = 0; i < n; i += step) idx.push_back(i);
  if (n > 0 && idx.back() != n - 1) idx.push_back(n - 1);
  return idx;
}

std::string gpu_section(const Baselines& b) {
  std::string s = "<h2>The wafer beside GPU systems (same model, precision and workload)</h2>\n";
  std::vector<SystemFigures> all = {b.wafer};
  all.insert(all.end(), b.gpus.begin(), b.gpus.end());
  BarChart per_user{"tokens/s per user", "tokens/s", {}, {{"tokens/s per user", {}}}, 480, 300};
  BarChart aggregate{"aggregate tokens/s", "tokens/s", {}, {{"aggregate tokens/s", {}}}, 480, 300};
  double longest_ttft = 0;
  for (const SystemFigures& f : all) longest_ttft = std::max(longest_ttft, f.ttft_s);
  const bool in_us = longest_ttft < 1e-3;
  BarChart ttft{"time to first token", in_us ? "us" : "ms", {}, {{"TTFT", {}}}, 480, 300};
  std::vector<std::vector<std::string>> rows;
  for (const SystemFigures& f : all) {
    for (BarChart* c : {&per_user, &aggregate, &ttft}) c->categories.push_back(f.system);
    per_user.series[0].values.push_back(f.decode_tokens_per_s_per_user);
    aggregate.series[0].values.push_back(f.aggregate_tokens_per_s);
    ttft.series[0].values.push_back(f.ttft_s * (in_us ? 1e6 : 1e3));
    rows.push_back(
        {f.system, std::to_string(f.chips),
         f.tp > 0 ? fmt::format("{}/{}", f.tp, f.pp) : std::string("-"),
         rate(f.decode_tokens_per_s_per_user), rate(f.aggregate_tokens_per_s), seconds(f.ttft_s),
         f.power_kw > 0 ? fmt::format("{:.1f}", f.power_kw) : std::string("-"),
         f.tokens_per_s_per_kw > 0 ? rate(f.tokens_per_s_per_kw) : std::string("-"), f.bottleneck});
  }
  s += "<div class=\"charts\">\n" + bar_chart_svg(per_user) + bar_chart_svg(aggregate) +
       bar_chart_svg(ttft) + "</div>\n";
  s += table({"system", "chips", "tp/pp", "tok/s/user", "aggregate tok/s", "TTFT", "kW", "tok/s/kW",
              "bottleneck"},
             rows);
  return s;
}

}  // namespace

std::string run_report_html(const RunResult& r, const Metrics& m,
                            const PlacementPicture* placement) {
  std::string s = page_start(
      "wafersim run: " + r.scenario_name,
      fmt::format("{} on {} x {} ({} x {} cores per wafer), {}, placement {}, {} user{}, {} mode",
                  r.model_name, r.wafers, r.hardware_name, r.mesh_width, r.mesh_height, r.precision,
                  r.placement_strategy, r.users, r.users == 1 ? "" : "s",
                  r.functional ? "functional" : "timing-only"));
  s += "<h2>Headline figures</h2>\n<div class=\"cards\">\n";
  s += card("tokens/s per user", rate(m.decode_tokens_per_s_per_user));
  s += card("aggregate tokens/s (all users)", rate(m.aggregate_tokens_per_s));
  s += card("time to first token", seconds(m.ttft_s));
  s += card("inter-token latency", seconds(m.inter_token_latency_s));
  s += card("bottleneck", m.bottleneck);
  s += card("cores used", fmt::format("{} of {}", r.cores_used, m.cores_total));
  s += card("SRAM used", fmt::format("{:.1f}%", m.sram_utilisation * 100));
  s += card("longest context per user", fmt::format("{} tokens", r.max_context_tokens));
  s += "</div>\n";

  // Critical path.
  s += "<h2>Where a token's time goes (critical path)</h2>\n";
  if (m.critical_path_tokens > 0) {
    StackedBar bar;
    bar.title =
        fmt::format("critical path by resource, mean over {} {} token{}", m.critical_path_tokens,
                    m.critical_path_basis == "decode" ? "generated" : "prompt",
                    m.critical_path_tokens == 1 ? "" : "s");
    bar.unit = "cycles";
    bar.width = 760;
    for (Resource c : kPathCategories)
      bar.segments.push_back(
          {std::string(resource_name(c)), static_cast<double>(cycles_in(m.critical_path, c).value) /
                                              static_cast<double>(m.critical_path_tokens)});
    s += stacked_bar_svg(bar);
  } else {
    s += "<p>No token was simulated.</p>\n";
  }

  // Per-token latencies.
  s += "<h2>Per-token latency</h2>\n";
  {
    XyChart c;
    c.title = "each token's latency (arrival at the wafer to its logits)";
    c.x_label = "position in the sequence";
    c.y_label = "latency (us)";
    c.width = 900;
    c.height = 340;
    const bool per_user = r.users <= 6;
    std::map<std::string, XySeries> series;
    std::vector<std::size_t> idx = thin(r.token_records.size(), 6000);
    for (std::size_t i : idx) {
      const TokenRecord& t = r.token_records[i];
      const std::string name =
          t.prefill ? "prompt tokens"
                    : (per_user ? fmt::format("user {} generated", t.user) : "generated tokens");
      XySeries& se = series[name];
      se.name = name;
      se.lines = false;
      se.markers = true;
      se.x.push_back(t.position);
      se.y.push_back(static_cast<double>(t.end_cycle.value - t.start_cycle.value) / r.clock_hz *
                     1e6);
    }
    for (auto& [name, se] : series) c.series.push_back(std::move(se));
    s += xy_chart_svg(c);
    if (idx.size() < r.token_records.size())
      s += fmt::format("<p class=\"note\">{} of {} tokens drawn (evenly spaced).</p>\n", idx.size(),
                       r.token_records.size());
  }

  if (r.baselines) s += gpu_section(*r.baselines);

  if (placement) {
    s += "<h2>Placement</h2>\n<div class=\"scroll\">\n" + placement_svg(*placement) + "</div>\n";
  }
  s += page_end();
  return s;
}

namespace {

// The header's traffic, SLO and step-grid lines.
std::string serving_header_lines(const ServingHeader& h) {
  std::string s = "<p>" + xml_escape("Traffic: " + h.traffic) + "</p>\n";
  if (!h.slo.empty()) s += "<p>" + xml_escape("SLO: " + h.slo) + "</p>\n";
  if (!h.calibration.empty())
    s += "<p class=\"note\">" + xml_escape("Wafer: " + h.calibration) + "</p>\n";
  return s;
}

// Summary table, CDFs, SLO attainment and the queue over time of serving
// results, one entry per system.
std::string serving_sections(const ServingHeader& h, const std::vector<ServingResult>& results) {
  std::string s;
  const auto name = [](const ServingResult& r) {
    return r.stack.connection == "none" ? r.system : r.system + " (" + r.stack.connection + ")";
  };
  s += "<h2>Summary</h2>\n";
  std::vector<std::vector<std::string>> rows;
  for (const ServingResult& r : results)
    rows.push_back(
        {name(r), std::to_string(r.replicas), std::to_string(r.chips), std::to_string(r.served),
         std::to_string(r.rejected), fmt::format("{:.3g}", r.throughput_rps),
         rate(r.output_tokens_per_s), seconds(r.ttft_s.p50), seconds(r.ttft_s.p90),
         seconds(r.ttft_s.p99), seconds(r.tbt_s.p50), seconds(r.tbt_s.p99),
         fmt::format("{:.1f}%", r.slo_attainment * 100), fmt::format("{:.3g}", r.goodput_rps),
         fmt::format("{:.1f}%", r.utilisation * 100)});
  s += table({"system", "replicas", "chips", "served", "rejected", "req/s", "tok/s", "TTFT p50",
              "TTFT p90", "TTFT p99", "TBT p50", "TBT p99", "SLO met", "goodput req/s", "busy"},
             rows);

  // CDFs of TTFT and time between tokens, per system.
  const auto cdf = [&](const std::string& title, const std::string& x_label, auto value) {
    XyChart c;
    c.title = title;
    c.x_label = x_label;
    c.y_label = "share of requests";
    c.width = 700;
    c.height = 340;
    double lo = INFINITY, hi = 0;
    for (const ServingResult& r : results) {
      std::vector<double> v;
      for (const RequestRecord& q : r.requests)
        if (!q.rejected) v.push_back(value(q) * 1e3);
      std::sort(v.begin(), v.end());
      XySeries se;
      se.name = name(r);
      for (std::size_t i : thin(v.size(), 600)) {
        se.x.push_back(v[i]);
        se.y.push_back(static_cast<double>(i + 1) / static_cast<double>(v.size()));
        if (v[i] > 0) lo = std::min(lo, v[i]);
        hi = std::max(hi, v[i]);
      }
      c.series.push_back(std::move(se));
    }
    c.x_log = std::isfinite(lo) && hi / lo > 50;
    if (c.x_log) c.x_label += " (log scale)";
    return xy_chart_svg(c);
  };
  s += "<h2>Distributions (CDF over served requests)</h2>\n<div class=\"charts\">\n";
  s += cdf("time to first token", "TTFT (ms)", [](const RequestRecord& q) { return q.ttft_s; });
  s += cdf("time between tokens (mean per request)", "TPOT (ms)",
           [](const RequestRecord& q) { return q.tbt_mean_s; });
  s += "</div>\n";

  s += "<h2>SLO attainment</h2>\n";
  BarChart slo{"share of served requests meeting the SLO", "%", {}, {{"SLO met", {}}}, 640, 300};
  for (const ServingResult& r : results) {
    slo.categories.push_back(name(r));
    slo.series[0].values.push_back(r.slo_attainment * 100);
  }
  s += h.slo.empty() ? std::string("<p>The scenario sets no SLO.</p>\n") : bar_chart_svg(slo);

  s += "<h2>Queue over time</h2>\n<div class=\"charts\">\n";
  XyChart waiting{"requests waiting (time average per interval)",
                  "time (s)",
                  "requests",
                  {},
                  true,
                  false,
                  700,
                  340};
  XyChart running{"requests running (admitted, prefilling or decoding)",
                  "time (s)",
                  "requests",
                  {},
                  true,
                  false,
                  700,
                  340};
  for (const ServingResult& r : results) {
    XySeries w{name(r), {}, {}, true, false}, u{name(r), {}, {}, true, false};
    for (const TimelineBin& b : r.timeline) {
      w.x.push_back(b.start_s), w.y.push_back(b.waiting);
      u.x.push_back(b.start_s), u.y.push_back(b.running);
    }
    waiting.series.push_back(std::move(w));
    running.series.push_back(std::move(u));
  }
  s += xy_chart_svg(waiting) + xy_chart_svg(running) + "</div>\n";
  return s;
}

}  // namespace

std::string serving_report_html(const ServingHeader& h, const std::vector<ServingResult>& results) {
  return page_start("wafersim serve: " + h.scenario, h.model) + serving_header_lines(h) +
         serving_sections(h, results) + page_end();
}

std::string capacity_report_html(const CapacityHeader& h, const std::vector<CapacityResult>& rows) {
  const std::string unit = capacity_load_unit(h);
  std::string s = page_start("wafersim capacity: " + h.serving.scenario, h.serving.model);
  s += serving_header_lines(h.serving);

  s += "<h2>Capacity of one replica</h2>\n";
  s += "<div class=\"cards\">\n";
  for (const CapacityResult& r : rows)
    s += card(r.system + ": " + unit + " per replica within the SLO",
              r.max_rate_per_replica > 0.0 ? fmt::format("{:.3g}", r.max_rate_per_replica)
                                           : std::string("none"));
  s += "</div>\n";
  std::vector<std::vector<std::string>> table_rows;
  const bool target = h.target_rate > 0.0;
  for (const CapacityResult& r : rows) {
    std::vector<std::string> row = {r.system,
                                    fmt::format("{:.3g}", r.max_rate_per_replica),
                                    rate(r.at_max.output_tokens_per_s),
                                    seconds(r.at_max.ttft_s.p99),
                                    fmt::format("{:.4g}", r.at_max.tokens_per_s_per_user.p50),
                                    std::to_string(r.probes.size())};
    if (target) {
      const bool never = r.max_rate_per_replica <= 0.0;
      row.push_back(never ? std::string("never")
                          : std::to_string(r.replicas_needed) + (r.target_checked ? "" : "?"));
      row.push_back(never ? std::string("-") : std::to_string(r.chips_needed));
      row.push_back(never ? std::string("-") : fmt::format("{:.1f}", r.power_w_needed / 1e3));
    }
    row.push_back(r.description);
    table_rows.push_back(std::move(row));
  }
  std::vector<std::string> columns = {"system",       unit + " per replica", "tok/s per replica",
                                      "TTFT p99",     "tok/s per user p50",  "loads simulated"};
  if (target) {
    columns.push_back("replicas for " + fmt::format("{:g}", h.target_rate));
    columns.push_back("chips");
    columns.push_back("kW");
  }
  columns.push_back("deployment");
  s += table(columns, table_rows);
  if (target)
    s += "<p class=\"note\">" +
         xml_escape(fmt::format(
             "Replicas for {:g} {}: each count checked by simulating the whole deployment at that "
             "load ('?': not met within 3 more replicas; never: one replica misses the SLO at the "
             "lowest load).",
             h.target_rate, unit)) +
         "</p>\n";

  // What the search saw: every simulated load, the SLO's figures against it.
  s += "<h2>The search: every load simulated on one replica</h2>\n<div class=\"charts\">\n";
  const auto over_load = [&](const std::string& title, const std::string& y_label, auto value,
                             double bound, const std::string& bound_name) {
    XyChart c;
    c.title = title;
    c.x_label = unit + " per replica";
    c.y_label = y_label;
    c.width = 700;
    c.height = 340;
    double lo = INFINITY, hi = 0.0, y_lo = INFINITY, y_hi = 0.0;
    for (const CapacityResult& r : rows) {
      std::vector<std::pair<double, double>> pts;
      for (const CapacityProbe& p : r.probes) pts.emplace_back(p.load, value(p));
      std::sort(pts.begin(), pts.end());
      XySeries se{r.system, {}, {}, true, true};
      for (const auto& [x, y] : pts) {
        se.x.push_back(x);
        se.y.push_back(y);
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        if (y > 0.0) y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
      }
      c.series.push_back(std::move(se));
    }
    // Past capacity a queue grows without bound: a log axis keeps the SLO's
    // bound readable beside it.
    c.y_log = bound > 0.0 && std::isfinite(y_lo) && y_hi / y_lo > 50.0;
    if (c.y_log) c.y_label += " (log scale)";
    if (bound > 0.0 && hi > 0.0)
      c.series.push_back({bound_name, {lo, hi}, {bound, bound}, true, false});
    c.x_log = !h.closed_loop && std::isfinite(lo) && lo > 0.0 && hi / lo > 8.0;
    if (c.x_log) c.x_label += " (log scale)";
    return xy_chart_svg(c);
  };
  s += over_load("share of requests meeting the SLO", "%",
                 [](const CapacityProbe& p) { return p.slo_attainment * 100.0; }, 0.0, "");
  if (h.slo_ttft_s > 0.0)
    s += over_load(fmt::format("TTFT p{:g}", h.slo_ttft_percentile), "ms",
                   [](const CapacityProbe& p) { return p.slo_ttft_s * 1e3; }, h.slo_ttft_s * 1e3,
                   "SLO bound");
  if (h.slo_tokens_per_s > 0.0)
    s += over_load(fmt::format("tokens/s per user reached by {:g}% of requests",
                               h.slo_tokens_per_s_percentile),
                   "tokens/s", [](const CapacityProbe& p) { return p.slo_tokens_per_s; },
                   h.slo_tokens_per_s, "SLO bound");
  s += over_load("output tokens/s of the replica", "tokens/s",
                 [](const CapacityProbe& p) { return p.output_tokens_per_s; }, 0.0, "");
  s += "</div>\n";

  if (target) {
    BarChart chips{"chips for the target", "chips", {}, {{"chips", {}}}, 640, 300};
    BarChart power{"power for the target", "kW", {}, {{"kW", {}}}, 640, 300};
    for (const CapacityResult& r : rows) {
      if (r.max_rate_per_replica <= 0.0) continue;
      chips.categories.push_back(r.system);
      chips.series[0].values.push_back(r.chips_needed);
      power.categories.push_back(r.system);
      power.series[0].values.push_back(r.power_w_needed / 1e3);
    }
    if (!chips.categories.empty())
      s += "<h2>Hardware for " + xml_escape(fmt::format("{:g} {}", h.target_rate, unit)) +
           "</h2>\n<div class=\"charts\">\n" + bar_chart_svg(chips) + bar_chart_svg(power) +
           "</div>\n";
  }

  std::vector<ServingResult> at_max;
  for (const CapacityResult& r : rows)
    if (r.max_rate_per_replica > 0.0) at_max.push_back(r.at_max);
  if (!at_max.empty()) {
    s += "<h2>At the highest load each system sustains (one replica)</h2>\n";
    s += serving_sections(h.serving, at_max);
  }
  s += page_end();
  return s;
}

namespace {

std::string json_cell(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format("{:.4g}", v.get<double>());
  if (v.is_null()) return "";
  return v.dump();
}

}  // namespace

std::string sweep_report_html(const nlohmann::ordered_json& sweep) {
  if (!sweep.is_object() || sweep.value("format", "") != "wafersim-sweep" ||
      !sweep.contains("points") || !sweep["points"].is_array())
    throw std::invalid_argument(
        "sweep report: expected a JSON object with format \"wafersim-sweep\" and points[] "
        "(docs/sweeps.md)");
  const auto& points = sweep["points"];
  // The swept parameters, in the order they first appear.
  std::vector<std::string> axes;
  for (const auto& p : points)
    if (p.contains("overrides") && p["overrides"].is_object())
      for (const auto& [k, v] : p["overrides"].items())
        if (std::find(axes.begin(), axes.end(), k) == axes.end()) axes.push_back(k);
  const std::vector<std::pair<std::string, std::string>> figures = {
      {"decode_tokens_per_s_per_user", "tokens/s per user"},
      {"aggregate_tokens_per_s", "aggregate tokens/s"},
      {"ttft_s", "time to first token (s)"},
      {"inter_token_latency_s", "inter-token latency (s)"}};
  const auto ran = [](const nlohmann::ordered_json& p) {
    return p.contains("decode_tokens_per_s_per_user") &&
           p["decode_tokens_per_s_per_user"].is_number();
  };
  std::string s = page_start("wafersim sweep: " + sweep.value("scenario", std::string("")),
                             fmt::format("{} points over {}", points.size(),
                                         axes.empty() ? std::string("no parameter")
                                                      : fmt::format("{}", fmt::join(axes, ", "))));
  const auto axis_value = [](const nlohmann::ordered_json& p, const std::string& a) {
    return p.contains("overrides") && p["overrides"].contains(a) ? p["overrides"][a]
                                                                 : nlohmann::ordered_json();
  };
  for (const std::string& axis : axes) {
    // Numeric axes get curves, the others grouped bars; one line (bar
    // series) per setting of the other parameters.
    bool numeric = true;
    double lo = INFINITY, hi = -INFINITY;
    std::vector<std::string> categories;
    for (const auto& p : points) {
      const auto v = axis_value(p, axis);
      if (!v.is_number()) numeric = false;
      if (v.is_number()) lo = std::min(lo, v.get<double>()), hi = std::max(hi, v.get<double>());
      const std::string c = json_cell(v);
      if (std::find(categories.begin(), categories.end(), c) == categories.end())
        categories.push_back(c);
    }
    const auto others = [&](const nlohmann::ordered_json& p) {
      std::string o;
      for (const std::string& a : axes)
        if (a != axis) o += (o.empty() ? "" : ", ") + a + " " + json_cell(axis_value(p, a));
      return o.empty() ? std::string("all points") : o;
    };
    s += "<h2>" + xml_escape("Over " + axis) + "</h2>\n<div class=\"charts\">\n";
    for (const auto& [key, label] : figures) {
      std::vector<std::string> lines;
      for (const auto& p : points)
        if (ran(p) && std::find(lines.begin(), lines.end(), others(p)) == lines.end())
          lines.push_back(others(p));
      if (numeric) {
        XyChart c;
        c.title = label + " over " + axis;
        c.x_label = axis + (lo > 0 && hi / lo >= 8 ? " (log scale)" : "");
        c.y_label = label;
        c.x_log = lo > 0 && hi / lo >= 8;
        c.width = 560;
        c.height = 320;
        for (const std::string& line : lines) {
          XySeries se{line, {}, {}, true, true};
          std::vector<std::pair<double, double>> xy;
          for (const auto& p : points)
            if (ran(p) && others(p) == line && p.contains(key) && p[key].is_number())
              xy.emplace_back(axis_value(p, axis).get<double>(), p[key].get<double>());
          std::sort(xy.begin(), xy.end());
          for (const auto& [x, y] : xy) se.x.push_back(x), se.y.push_back(y);
          c.series.push_back(std::move(se));
        }
        s += xy_chart_svg(c);
      } else {
        BarChart c;
        c.title = label + " by " + axis;
        c.y_label = label;
        c.categories = categories;
        c.width = 560;
        c.height = 320;
        for (const std::string& line : lines) {
          BarSeries se{line, std::vector<double>(categories.size(), NAN)};
          for (const auto& p : points)
            if (ran(p) && others(p) == line && p.contains(key) && p[key].is_number()) {
              const auto at =
                  std::find(categories.begin(), categories.end(), json_cell(axis_value(p, axis)));
              se.values[static_cast<std::size_t>(at - categories.begin())] = p[key].get<double>();
            }
          c.series.push_back(std::move(se));
        }
        s += bar_chart_svg(c);
      }
    }
    s += "</div>\n";
  }
  s += "<h2>Every point</h2>\n";
  std::vector<std::string> head = {"index"};
  head.insert(head.end(), axes.begin(), axes.end());
  for (const char* k :
       {"exit_code", "wafers_used", "decode_tokens_per_s_per_user", "aggregate_tokens_per_s",
        "ttft_s", "inter_token_latency_s", "bottleneck", "error"})
    head.push_back(k);
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : points) {
    std::vector<std::string> row = {json_cell(p.value("index", nlohmann::ordered_json()))};
    for (const std::string& a : axes) row.push_back(json_cell(axis_value(p, a)));
    for (std::size_t k = 1 + axes.size(); k < head.size(); ++k)
      row.push_back(p.contains(head[k]) ? json_cell(p[head[k]]) : std::string());
    rows.push_back(std::move(row));
  }
  s += table(head, rows);
  s += page_end();
  return s;
}

}  // namespace wafersim::analysis
