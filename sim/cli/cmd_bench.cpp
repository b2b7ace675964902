// wafersim bench: figures, not tests.
//   bench fabric     speed of the full-size WSE-3 fabric at flow level (build,
//                    a decode-like whole-wafer phase) and of the wavelet model.
//   bench agreement  flow level vs wavelet level on the communication
//                    primitives, as the markdown tables of docs/validation.md.
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "fabric/collectives.hpp"
#include "fabric/fabric.hpp"
#include "fabric/synthetic.hpp"
#include "fabric/traffic.hpp"
#include "fabric/wavelet.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/studies/bench_kernels.hpp"
#include "sim/studies/bench_models.hpp"
#include "sim/studies/bench_ops.hpp"
#include "sim/studies/bench_serving.hpp"
#include "sim/studies/bench_sweep.hpp"
#include "sim/studies/bench_weights.hpp"

namespace wafersim::sim {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A field of /proc/self/status in MiB (VmRSS: resident now; VmHWM: peak).
double status_mib(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  return 0.0;
}

fabric::WaferSpec hardware(const std::string& name, const std::string& preset_dir) {
  return preset_dir.empty() ? load_hardware_preset(name) : load_hardware_preset(name, preset_dir);
}

// ---------------------------------------------------------------- fabric ---

// A decode-like phase over the whole wafer: one region per die; in each, the
// top core of every column multicasts a 64-element bf16 input chunk down the
// column, every core multiplies a 64x64 bf16 tile once its chunk is there,
// and every row tree-reduces 64 fp32 partials into its west core.
struct PhaseFigures {
  int regions = 0;
  std::uint64_t cycles = 0;  // simulated: when the last row reduction completes
  double wall_s = 0.0;
};

PhaseFigures decode_like_phase(fabric::Fabric& fab) {
  using namespace fabric;
  const WaferSpec& spec = fab.spec();
  const Mesh& mesh = fab.mesh();
  const CoreCost tile = fab.cost().gemv_tile(64, 64, 16);
  const Bytes chunk{64 * 2}, partial{64 * 4};
  PhaseFigures out;
  const auto t0 = Clock::now();
  std::vector<Timed> arrivals, ready;
  std::vector<std::vector<Timed>> column;
  for (int dy = 0; dy < spec.dies_y; ++dy)
    for (int dx = 0; dx < spec.dies_x; ++dx) {
      const int x0 = dx * mesh.width() / spec.dies_x, x1 = (dx + 1) * mesh.width() / spec.dies_x;
      const int y0 = dy * mesh.height() / spec.dies_y, y1 = (dy + 1) * mesh.height() / spec.dies_y;
      const int w = x1 - x0, h = y1 - y0;
      ++out.regions;
      column.resize(static_cast<std::size_t>(w));
      for (int i = 0; i < w; ++i)
        multicast_line(mesh, fab.flow(), Line{{x0 + i, y0}, Direction::south, h}, chunk, Timed{},
                       column[static_cast<std::size_t>(i)]);
      ready.resize(static_cast<std::size_t>(w));
      for (int j = 0; j < h; ++j) {
        for (int i = 0; i < w; ++i)
          ready[static_cast<std::size_t>(i)] = fab.cores().run(
              Coord{x0 + i, y0 + j},
              column[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)], tile);
        const Timed done = reduce_line(mesh, fab.flow(), ReductionScheme::tree,
                                       Line{{x0, y0 + j}, Direction::east, w}, partial, ready);
        out.cycles = std::max(out.cycles, done.at.value);
      }
    }
  out.wall_s = seconds_since(t0);
  return out;
}

struct WaveletFigures {
  int size = 64;
  double rate = 0.0;
  std::uint64_t router_cycles = 0;
  double wall_s = 0.0;
  double router_cycles_per_s() const {
    return wall_s > 0 ? static_cast<double>(router_cycles) / wall_s : 0.0;
  }
};

WaveletFigures wavelet_speed(const fabric::WaferSpec& base, int size, double rate) {
  using namespace fabric;
  WaferSpec spec = base;
  spec.mesh_width = spec.mesh_height = size;
  const Mesh mesh(size, size);
  SyntheticLoad load;
  load.rate = rate;
  load.warmup = 200;
  load.measure = 1000;
  load.drain = 0;
  const Traffic traffic = synthetic_traffic(mesh, spec, load);
  WaveletConfig config;
  config.max_cycles = load.warmup + load.measure;
  WaveletStats stats;
  const auto t0 = Clock::now();
  run_wavelet(mesh, spec, traffic, config, &stats);
  WaveletFigures f;
  f.size = size;
  f.rate = rate;
  f.wall_s = seconds_since(t0);
  f.router_cycles = stats.router_cycles;
  return f;
}

int bench_fabric(bool json, const std::string& preset_dir) {
  const fabric::WaferSpec spec = hardware("wse3", preset_dir);
  const double rss_before = status_mib("VmRSS");
  const auto t0 = Clock::now();
  auto fab = std::make_unique<fabric::Fabric>(spec);
  const double build_s = seconds_since(t0);
  const double rss_fabric = status_mib("VmRSS") - rss_before;
  const double hwm_after_build = status_mib("VmHWM");
  const PhaseFigures first = decode_like_phase(*fab);
  const PhaseFigures second = decode_like_phase(*fab);  // warm caches, later timelines
  const double hwm_after_phase = status_mib("VmHWM");
  fab.reset();
  const WaveletFigures low = wavelet_speed(spec, 64, 0.01);
  const WaveletFigures mid = wavelet_speed(spec, 64, 0.03);
  const unsigned threads = std::thread::hardware_concurrency();

  if (json) {
    nlohmann::ordered_json j;
    j["hardware"] = spec.name;
    j["mesh"] = {{"width", spec.mesh_width}, {"height", spec.mesh_height}};
    j["hardware_threads"] = threads;
    j["fabric_build_s"] = build_s;
    j["fabric_resident_mib"] = rss_fabric;
    j["peak_resident_mib_after_build"] = hwm_after_build;
    j["decode_phase"] = {{"regions", first.regions},
                         {"simulated_cycles", first.cycles},
                         {"wall_s", first.wall_s},
                         {"wall_s_second_run", second.wall_s}};
    j["peak_resident_mib_after_phase"] = hwm_after_phase;
    j["wavelet"] = nlohmann::ordered_json::array();
    for (const auto& w : {low, mid})
      j["wavelet"].push_back({{"mesh", w.size},
                              {"rate", w.rate},
                              {"router_cycles", w.router_cycles},
                              {"wall_s", w.wall_s},
                              {"router_cycles_per_s", w.router_cycles_per_s()}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  fmt::print("bench fabric: {} ({}x{} = {} cores), {} hardware threads\n", spec.name,
             spec.mesh_width, spec.mesh_height, spec.core_count(), threads);
  fmt::print(
      "  fabric build            {:8.3f} s   {:7.1f} MiB resident (peak so far {:.1f} MiB)   "
      "target <= 0.5 s, <= 1 GiB\n",
      build_s, rss_fabric, hwm_after_build);
  fmt::print(
      "  decode-like phase       {:8.3f} s   ({} regions, {} simulated cycles; second run {:.3f} "
      "s)   target <= 0.3 s\n",
      first.wall_s, first.regions, first.cycles, second.wall_s);
  fmt::print("  peak resident           {:8.1f} MiB\n", hwm_after_phase);
  for (const auto& w : {low, mid})
    fmt::print(
        "  wavelet {}x{} @ {:.2f}    {:8.2f} M router-cycles/s ({} router-cycles in {:.3f} s)   "
        "target >= 5 M at low load\n",
        w.size, w.size, w.rate, w.router_cycles_per_s() / 1e6, w.router_cycles, w.wall_s);
  return 0;
}

// ------------------------------------------------------------- agreement ---

struct Row {
  std::string primitive;
  std::string shape;
  std::uint64_t flow = 0, wavelet = 0;
  std::uint64_t exclusive = 0;  // flow level with LinkSharing::exclusive
};

std::string error_pct(const Row& r) {
  if (r.wavelet == 0) return "n/a";
  const double e = (static_cast<double>(r.flow) - static_cast<double>(r.wavelet)) /
                   static_cast<double>(r.wavelet) * 100.0;
  return fmt::format("{:+.1f}%", e);
}

// Times a primitive at both levels: `build` appends it to the traffic
// (starting at `start`) and returns the messages whose arrivals complete it.
// With background > 0, uniform random traffic at that rate runs on color 0
// from cycle 0 (the primitive starts after a warm-up).
template <class Build>
Row time_primitive(const fabric::Mesh& mesh, const fabric::WaferSpec& spec, std::string primitive,
                   std::string shape, double background, Build build) {
  using namespace fabric;
  Traffic t;
  Cycles start{0};
  if (background > 0) {
    SyntheticLoad load;
    load.rate = background;
    load.warmup = 0;
    load.measure = 3000;
    load.drain = 0;
    load.seed = 11;
    t = synthetic_traffic(mesh, spec, load);
    start = Cycles{500};
  }
  const std::vector<std::uint32_t> ends = build(t, start);
  auto done = [&](const TrafficResult& r) { return r.done(ends) - start.value; };
  Row row{std::move(primitive), std::move(shape), done(run_flow(mesh, spec, t)),
          done(run_wavelet(mesh, spec, t))};
  FlowModel exclusive(mesh, spec);
  exclusive.set_sharing(LinkSharing::exclusive);
  row.exclusive = done(run_flow(mesh, spec, exclusive, t));
  return row;
}

int bench_agreement(const std::string& preset_dir) {
  using namespace fabric;
  WaferSpec spec = hardware("wse3", preset_dir);
  spec.mesh_width = spec.mesh_height = 32;
  spec.dies_x = spec.dies_y = 1;
  const Mesh mesh(32, 32);
  const Cycles add = spec.reduce_hop_overhead;
  const std::uint8_t c1 = 1, c2 = 2;

  for (const double bg : {0.0, 0.05}) {
    std::vector<Row> rows;
    for (int d : {1, 8, 31, 62})
      for (std::uint64_t b : {4ull, 256ull, 4096ull}) {
        const Coord dst = d <= 31 ? Coord{d, 0} : Coord{31, d - 31};
        rows.push_back(time_primitive(
            mesh, spec, "point-to-point", fmt::format("{} hops, {} B", d, b), bg,
            [&](Traffic& t, Cycles s) {
              return std::vector<std::uint32_t>{t.unicast({0, 0}, dst, Bytes{b}, s, c1)};
            }));
      }
    for (int n : {8, 32})
      for (std::uint64_t b : {64ull, 1024ull})
        rows.push_back(time_primitive(mesh, spec, "multicast (column)",
                                      fmt::format("{} cores, {} B", n, b), bg,
                                      [&](Traffic& t, Cycles s) {
                                        return std::vector<std::uint32_t>{t.multicast(
                                            Line{{5, 0}, Direction::south, n}, Bytes{b}, s, c1)};
                                      }));
    for (auto scheme : {ReductionScheme::chain, ReductionScheme::tree})
      for (int n : {8, 32})
        for (std::uint64_t b : {64ull, 1024ull})
          rows.push_back(time_primitive(
              mesh, spec,
              scheme == ReductionScheme::chain ? "reduction (chain, row)" : "reduction (tree, row)",
              fmt::format("{} cores, {} B", n, b), bg, [&](Traffic& t, Cycles s) {
                std::vector<NodeReady> ready(static_cast<std::size_t>(n), NodeReady{s, false, {}});
                return std::vector<std::uint32_t>{t.reduction(
                    scheme, Line{{0, 7}, Direction::east, n}, Bytes{b}, add, ready, c2)};
              }));
    for (int n : {8, 32})
      for (std::uint64_t b : {64ull, 1024ull})
        rows.push_back(time_primitive(
            mesh, spec, "all-reduce (tree, row)", fmt::format("{} cores, {} B", n, b), bg,
            [&](Traffic& t, Cycles s) {
              std::vector<NodeReady> ready(static_cast<std::size_t>(n), NodeReady{s, false, {}});
              std::vector<std::uint32_t> has;
              for (const fabric::MessageRef& r :
                   t.all_reduce(ReductionScheme::tree, Line{{0, 7}, Direction::east, n}, Bytes{b},
                                add, ready, c2))
                if (has.empty() || has.back() != r.message) has.push_back(r.message);
              return has;
            }));
    // A move between matrices as the engine makes them: a root column sends
    // one vector piece per row to the next matrix's column, rows shifted by
    // half the column, so the pieces share the destination column's links;
    // each route on a color of its own, as the color budget gives them.
    for (int n : {8, 16})
      for (std::uint64_t b : {256ull, 1024ull})
        rows.push_back(time_primitive(
            mesh, spec, "column-to-column move", fmt::format("{} pieces, {} B", n, b), bg,
            [&](Traffic& t, Cycles s) {
              std::vector<std::uint32_t> ends;
              for (int i = 0; i < n; ++i)
                ends.push_back(t.unicast({2, 8 + i}, {20, 8 + (i + n / 2) % n}, Bytes{b}, s,
                                         static_cast<std::uint8_t>(1 + i)));
              return ends;
            }));
    for (auto scheme : {ReductionScheme::chain, ReductionScheme::tree})
      for (int n : {8, 16})
        rows.push_back(
            time_primitive(mesh, spec, "GEMV phase",
                           fmt::format("{0}x{0} region, {1} reduce", n,
                                       scheme == ReductionScheme::chain ? "chain" : "tree"),
                           bg, [&](Traffic& t, Cycles s) {
                             GemvPhase g;
                             g.region = Rect{8, 8, n, n};
                             g.chunk_bytes = Bytes{128};    // 64 bf16 inputs per column
                             g.partial_bytes = Bytes{256};  // 64 fp32 partials per row
                             g.start = s;
                             g.compute = Cycles{532};  // a 64x64 bf16 tile on the wse3 core
                             g.scheme = scheme;
                             g.multicast_color = c1;
                             g.reduce_color = c2;
                             return add_gemv_phase(t, g, add);
                           }));
    fmt::print("\n### {}\n\n",
               bg > 0 ? fmt::format("With background uniform random traffic at {} "
                                    "wavelets/node/cycle (seed 11, primitive starts at cycle 500)",
                                    bg)
                      : std::string("No load"));
    fmt::print(
        "| primitive | shape | flow cycles | wavelet cycles | flow error | flow, exclusive | "
        "error |\n|---|---|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows)
      fmt::print("| {} | {} | {} | {} | {} | {} | {} |\n", r.primitive, r.shape, r.flow, r.wavelet,
                 error_pct(r), r.exclusive, error_pct(Row{"", "", r.exclusive, r.wavelet, 0}));
  }

  // Latency-throughput curve, uniform random on 16x16.
  WaferSpec s16 = spec;
  s16.mesh_width = s16.mesh_height = 16;
  const Mesh m16(16, 16);
  fmt::print(
      "\n### Uniform random on 16x16 (1-wavelet packets, 1 color, warm-up 1000, window 2000, seed "
      "1)\n\n");
  fmt::print(
      "Bisection bound (XY, destinations uniform over the other cores): 4(k^2-1)/k^3 = {:.4f} "
      "wavelets/node/cycle.\n\n",
      uniform_random_bound(16, 16));
  fmt::print(
      "| offered | flow latency | flow accepted | wavelet latency | wavelet accepted "
      "|\n|---:|---:|---:|---:|---:|\n");
  for (double rate : {0.01, 0.05, 0.1, 0.15, 0.18, 0.2, 0.22, 0.25, 0.3}) {
    SyntheticLoad load;
    load.rate = rate;
    const LoadPoint f = measure_load(m16, s16, load, Level::flow);
    const LoadPoint w = measure_load(m16, s16, load, Level::wavelet);
    fmt::print("| {:.2f} | {:.1f} | {:.3f} | {:.1f}{} | {:.3f} |\n", rate, f.latency_cycles,
               f.accepted_rate, w.latency_cycles, w.saturated ? " (saturated)" : "",
               w.accepted_rate);
  }
  return 0;
}

// `bench op`: the operation's options from the command line (AxB sizes,
// the reduction by name), then the figures.
int run_bench_op(BenchOpOptions b, const std::string& matrix, const std::string& region,
                 const std::string& reduction, const std::string& attention_reduction, bool json,
                 const std::string& dir) {
  if (b.op.empty())
    throw CommandError(kExitUsage,
                       "bench op: name the operation: gemv, allreduce, attention or layer");
  b.json = json;
  b.preset_dir = dir.empty() ? default_preset_dir() : std::filesystem::path(dir);
  b.reduction = *parse_reduction(reduction);  // checked by the option's IsMember
  if (!attention_reduction.empty()) b.attention_reduction = parse_reduction(attention_reduction);
  auto dims = [](const std::string& s, const char* flag, int& a, int& c) {
    const auto x = s.find('x');
    try {
      std::size_t end = 0;
      if (x == std::string::npos) throw std::invalid_argument(s);
      a = std::stoi(s.substr(0, x), &end);
      if (end != x) throw std::invalid_argument(s);
      c = std::stoi(s.substr(x + 1), &end);
      if (end != s.size() - x - 1) throw std::invalid_argument(s);
    } catch (const std::exception&) {
      throw CommandError(kExitUsage, fmt::format("{} {}: expected AxB, e.g. 420x420", flag, s));
    }
  };
  dims(matrix, "--matrix", b.out, b.in);
  dims(region, "--region", b.width, b.height);
  try {
    return bench_op(b);
  } catch (const std::invalid_argument& e) {
    throw CommandError(kExitUsage, e.what());
  } catch (const fabric::FitError& e) {
    throw CommandError(kExitBadInput, fmt::format("bench op {}: does not fit: {}", b.op, e.what()));
  }
}

}  // namespace

RegisteredCommand add_bench_command(CLI::App& app) {
  struct Options {
    std::string what;
    bool json = false;
    std::vector<std::string> only;
    std::string point;
    int threads = 0;
    BenchOpOptions op;
    std::string matrix = "4096x4096", region = "420x420", reduction = "two-level";
    std::string attention_reduction;
    std::string precision = "bf16";
    std::string scenario, cache;
    int jobs = 0;
    int points = 16;
    int repeat = 1;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Benchmarks: fabric speed, flow-vs-wavelet agreement, model runs, GEMV kernels, weights");
  cmd->add_option("what", o->what,
                  "fabric | agreement | models | kernels | op | weights | serving | steps | sweep")
      ->required()
      ->check(CLI::IsMember({"fabric", "agreement", "models", "kernels", "op", "weights", "serving",
                             "steps", "sweep"}));
  cmd->add_option("operation", o->op.op, "op: gemv | allreduce | attention | layer")
      ->check(CLI::IsMember({"gemv", "allreduce", "attention", "layer"}));
  cmd->add_option("--hardware", o->op.hardware, "op: a hardware preset (default wse3)");
  cmd->add_option("--model", o->op.model,
                  "op layer, attention: a model preset (default llama-3.1-8b); weights: a model "
                  "preset (synthetic) or a checkpoint folder");
  cmd->add_option("--precision", o->precision, "weights: storage precision (default bf16)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "int8"}));
  cmd->add_option("--matrix", o->matrix, "op gemv: ROWSxCOLUMNS of the matrix (default 4096x4096)");
  cmd->add_option("--region", o->region,
                  "op gemv, layer: WIDTHxHEIGHT cores; op allreduce: WIDTH = the cores of the "
                  "line (default 420x420)");
  cmd->add_flag("--transposed", o->op.transposed,
                "op gemv: input down the west column, sums reduced north (whole-region's qkv)");
  cmd->add_option("--reduction", o->reduction,
                  "op: chain | tree | two-level | k-tree | ring (default two-level)")
      ->check(CLI::IsMember(reduction_names()));
  cmd->add_option("--attention-reduction", o->attention_reduction,
                  "op layer, attention: attention's own scheme (default --reduction's)")
      ->check(CLI::IsMember(reduction_names()));
  cmd->add_option("--groups", o->op.reduction_groups,
                  "op, --reduction k-tree: its K groups per line (default round(sqrt n))")
      ->check(CLI::Range(1, 4'000'000));
  cmd->add_option("--bytes", o->op.bytes, "op allreduce: bytes per core (default 4)");
  cmd->add_option("--context", o->op.context,
                  "op layer, attention: positions already cached (default 4096)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--bits", o->op.bits, "op: weight and KV bits (default 16)")
      ->check(CLI::IsMember({4, 8, 16, 32}));
  cmd->add_option("--fabric-bits", o->op.fabric_bits,
                  "op gemv, attention, layer: bits of each value cores send one another, 32 "
                  "(fp32, default) or 16 (two a wavelet: placement.fabric_bits)")
      ->check(CLI::IsMember({16, 32}));
  cmd->add_option("--instruction-overhead", o->op.instruction_overhead,
                  "op: the kernels' cycles per vector instruction beyond its SIMD cycles "
                  "(hardware core.instruction_overhead; default the preset's, 0 in wse2 and wse3)")
      ->check(CLI::Range(0, 1'000'000));
  cmd->add_flag("--json", o->json, "Print one JSON object (fabric, models, kernels, serving)");
  cmd->add_option("--scenario", o->scenario,
                  "serving, steps: a scenario with traffic: (default "
                  "scenarios/llama-3.1-8b-serving-wse3.yaml); sweep: the scenario swept (default "
                  "scenarios/quickstart.yaml)");
  cmd->add_option("--cache", o->cache,
                  "serving, steps: folder of cached step grids (default: measure again)");
  cmd->add_option("-j,--jobs", o->jobs,
                  "serving, steps: calibration runs at once; sweep: points at once and MPI ranks "
                  "(default: the host's cores)");
  cmd->add_option("--points", o->points, "sweep: points of the grid (users 1..N; default 16)")
      ->check(CLI::Range(2, 10000));
  cmd->add_option(
         "--cases", o->only,
         fmt::format("models: only these cases ({})", fmt::join(bench_model_cases(), ", ")))
      ->delimiter(',')
      ->check(CLI::IsMember(bench_model_cases()));
  cmd->add_option("--point", o->point, "models (internal): run one scenario here, print JSON")
      ->group("");
  cmd->add_option("--threads", o->threads,
                  "models: host threads for the functional arithmetic (0: all the host has)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeat", o->repeat,
                  "models: runs of each case, the cases in turn; each reports its median run "
                  "and the range (default 1)")
      ->check(CLI::Range(1, 100));
  const CLI::App* root = &app;
  return {cmd, [o, root]() {
            const std::string dir = presets_flag(*root);
            if (o->what == "models") {
              BenchModelsOptions m;
              m.json = o->json;
              m.preset_dir = dir.empty() ? default_preset_dir() : std::filesystem::path(dir);
              m.only = o->only;
              m.point = o->point;
              m.threads = o->threads;
              m.repeat = o->repeat;
              return bench_models(m);
            }
            if (o->what == "kernels") return bench_kernels(o->json);
            if (o->what == "sweep") {
              BenchSweepOptions b;
              b.preset_dir = dir.empty() ? default_preset_dir() : std::filesystem::path(dir);
              b.scenario = o->scenario;
              b.points = o->points;
              b.jobs = o->jobs;
              b.json = o->json;
              return bench_sweep(b);
            }
            if (o->what == "serving" || o->what == "steps") {
              BenchServingOptions b;
              b.preset_dir = dir.empty() ? default_preset_dir() : std::filesystem::path(dir);
              b.scenario = o->scenario.empty()
                               ? (b.preset_dir / "llama-3.1-8b-serving-wse3.yaml").string()
                               : o->scenario;
              b.cache_dir = o->cache;
              b.jobs = o->jobs;
              b.json = o->json;
              return o->what == "serving" ? bench_serving(b) : bench_steps(b);
            }
            if (o->what == "weights") {
              BenchWeightsOptions w;
              w.model = o->op.model;
              w.precision = o->precision;
              w.threads = o->threads;
              w.json = o->json;
              w.preset_dir = dir.empty() ? default_preset_dir() : std::filesystem::path(dir);
              return bench_weights(w);
            }
            if (o->what == "op")
              return run_bench_op(o->op, o->matrix, o->region, o->reduction, o->attention_reduction,
                                  o->json, dir);
            return o->what == "fabric" ? bench_fabric(o->json, dir) : bench_agreement(dir);
          }};
}

}  // namespace wafersim::sim
