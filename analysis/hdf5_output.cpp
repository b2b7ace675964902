#include "analysis/hdf5_output.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <H5Cpp.h>
#include <fmt/format.h>

#include "analysis/figures.hpp"
#include "analysis/hdf5_writing.hpp"
#include "analysis/result_seal.hpp"
#include "analysis/system_figures.hpp"

namespace wafersim::analysis {

OutputError::OutputError(std::filesystem::path path, const std::string& message)
    : std::runtime_error(fmt::format("cannot write results to '{}': {}", path.string(), message)),
      path_(std::move(path)) {}

ResultReadError::ResultReadError(std::filesystem::path path, const std::string& message)
    : std::runtime_error(fmt::format("cannot read results from '{}': {}", path.string(), message)),
      path_(std::move(path)) {}

namespace {

using namespace h5;

constexpr std::string_view kFormatName = "wafersim-result";
constexpr std::string_view kDirections = "E,W,S,N";

// A per-core (or per-link) array shaped like the mesh; zeros when the run recorded none.
H5::DataSet write_mesh_array(H5::Group& g, const char* name, const std::vector<std::uint64_t>& v,
                             std::vector<hsize_t> dims, std::string_view units,
                             std::string_view description) {
  hsize_t count = 1;
  for (hsize_t d : dims) count *= d;
  if (v.empty() && count > 0) {
    const std::vector<std::uint64_t> zeros(count, 0);
    return write_array<std::uint64_t>(g, name, zeros, std::move(dims), units, description);
  }
  return write_array<std::uint64_t>(g, name, v, std::move(dims), units, description);
}

void write_root(H5::H5File& f, const RunResult& r, const Metrics& m) {
  set_attr(f, "format", kFormatName);
  set_attr<std::int32_t>(f, "format_version", kHdf5FormatVersion);
  set_attr(f, "scenario", r.scenario_name);
  set_attr(f, "scenario_file", r.scenario_file);
  set_attr(f, "hardware", r.hardware_name);
  set_attr(f, "model", r.model_name);
  set_attr(f, "precision", r.precision);
  set_attr(f, "placement_strategy", r.placement_strategy);
  set_attr<std::uint64_t>(f, "seed", r.seed);
  set_attr<std::uint8_t>(f, "functional", r.functional ? 1 : 0);
  set_attr<std::int32_t>(f, "mesh_width", r.mesh_width);
  set_attr<std::int32_t>(f, "mesh_height", r.mesh_height);
  set_attr<std::int32_t>(f, "wafers", r.wafers);
  set_attr(f, "bottleneck", m.bottleneck);
}

// One figure (analysis/figures.hpp) as a scalar dataset with its units and description.
H5::DataSet write_figure(H5::Group& g, const Figure& f, const RunResult& r, const Metrics& m) {
  const std::string name(f.hdf5_dataset());
  const FigureValue v = f.value(r, m);
  switch (f.type) {
    case FigureType::count:
      return write_scalar<std::uint64_t>(g, name.c_str(), std::get<std::uint64_t>(v), f.unit,
                                         f.description);
    case FigureType::real:
      return write_scalar<double>(g, name.c_str(), std::get<double>(v), f.unit, f.description);
    case FigureType::flag:
      return write_scalar<std::uint8_t>(g, name.c_str(), std::get<bool>(v) ? 1 : 0, f.unit,
                                        f.description);
  }
  throw std::logic_error("unknown figure type");
}

void write_summary(H5::H5File& f, const RunResult& r, const Metrics& m) {
  H5::Group g = make_group(f, "summary");
  // The busiest link's datasets also carry where it is, once both are written.
  std::vector<H5::DataSet> link_figures;
  for (const Figure* fig : kHdf5Summary) {
    H5::DataSet ds = write_figure(g, *fig, r, m);
    if (fig == &figure::busiest_link_bytes || fig == &figure::busiest_link_load)
      link_figures.push_back(std::move(ds));
  }
  const BusiestLink none{-1, -1, -1, 0, Bytes{0}, 0.0};
  const BusiestLink& l = m.busiest_link ? *m.busiest_link : none;
  const std::string_view dir = m.busiest_link ? direction_name(l.dir) : "";
  for (H5::DataSet& ds : link_figures) {
    set_attr<std::int32_t>(ds, "x", l.x);
    set_attr<std::int32_t>(ds, "y", l.y);
    set_attr<std::int32_t>(ds, "wafer", l.wafer);
    set_attr(ds, "direction", dir);
  }

  if (r.functional)
    for (const Figure* fig : kHdf5FunctionalSummary) write_figure(g, *fig, r, m);
}

// "compute,sram,...": the order of the category axis.
std::string category_list() {
  std::string s;
  for (Resource c : kPathCategories) {
    if (!s.empty()) s += ',';
    s += category_key(c);
  }
  return s;
}

void write_critical_path(H5::H5File& f, const Metrics& m) {
  H5::Group g = make_group(f, "critical_path");
  set_attr(g, "basis", m.critical_path_basis);
  set_attr<std::uint64_t>(g, "tokens", m.critical_path_tokens);
  set_attr(g, "bottleneck", m.bottleneck);
  std::vector<std::uint64_t> cycles;
  for (Resource c : kPathCategories) cycles.push_back(cycles_in(m.critical_path, c).value);
  const std::vector<double> share(m.critical_path_share.begin(), m.critical_path_share.end());
  H5::DataSet c = write_vector(g, "cycles", cycles, "cycles",
                               "critical-path cycles summed over the basis tokens, per category");
  set_attr(c, "categories", category_list());
  H5::DataSet s =
      write_vector(g, "share", share, "fraction", "each category's share of the critical path");
  set_attr(s, "categories", category_list());
}

void write_mesh(H5::H5File& f, const RunResult& r) {
  // Wafers are stacked in y: rows [k*mesh_height, (k+1)*mesh_height) are wafer k.
  const auto h = static_cast<hsize_t>(r.mesh_height) * static_cast<hsize_t>(r.wafers);
  const auto w = static_cast<hsize_t>(r.mesh_width);
  H5::Group cores = make_group(f, "cores");
  set_attr(cores, "layout", "[y][x]: y = row (grows south), x = column (grows east)");
  write_mesh_array(cores, "busy_cycles", r.core_busy_cycles, {h, w}, "cycles",
                   "cycles each core spent computing");
  write_mesh_array(cores, "sram_bytes", r.core_sram_bytes, {h, w}, "bytes",
                   "SRAM allocated on each core");

  H5::Group links = make_group(f, "links");
  set_attr(links, "layout", "[y][x][dir]: the link leaving core (x, y) in direction dir");
  H5::DataSet bytes = write_mesh_array(links, "bytes", r.link_bytes, {h, w, kLinkDirections},
                                       "bytes", "bytes carried by each outgoing link");
  set_attr(bytes, "directions", kDirections);
}

// A scalar UTF-8 string dataset with its units and description.
void write_text(H5::Group& g, const char* name, const std::string& text,
                std::string_view description) {
  const H5::StrType type = utf8_string();
  H5::DataSet ds = g.createDataSet(name, type, H5::DataSpace(H5S_SCALAR), dataset_properties());
  ds.write(text, type);
  describe_dataset(ds, "text", description);
}

void write_tokens(H5::H5File& f, const RunResult& r) {
  H5::Group g = make_group(f, "tokens");
  const auto& t = r.token_records;
  std::vector<std::int32_t> user;
  std::vector<std::int32_t> position;
  std::vector<std::uint8_t> prefill;
  std::vector<std::uint64_t> start;
  std::vector<std::uint64_t> end;
  std::vector<std::int32_t> token_in;
  for (const TokenRecord& rec : t) {
    user.push_back(rec.user);
    position.push_back(rec.position);
    prefill.push_back(rec.prefill ? 1 : 0);
    start.push_back(rec.start_cycle.value);
    end.push_back(rec.end_cycle.value);
    token_in.push_back(rec.token_in);
  }
  write_vector(g, "user", user, "user", "which sequence (0-based)");
  write_vector(g, "position", position, "position", "position in the sequence (0-based)");
  write_vector(g, "prefill", prefill, "boolean", "1 for a prompt token, 0 for a generated one");
  write_vector(g, "start_cycle", start, "cycles", "cycle the token's processing started");
  write_vector(g, "end_cycle", end, "cycles", "cycle its logits were ready");
  write_vector(g, "token_in", token_in, "token id", "token id fed at this position");

  H5::Group cp = make_group(g, "critical_path");
  set_attr(cp, "description",
           "per-token critical-path cycles by category; they add up to the "
           "token's latency");
  for (Resource c : kPathCategories) {
    std::vector<std::uint64_t> v;
    v.reserve(t.size());
    for (const TokenRecord& rec : t) v.push_back(cycles_in(rec.critical_path, c).value);
    write_vector(cp, std::string(category_key(c)).c_str(), v, "cycles",
                 fmt::format("critical-path cycles spent on {}", resource_name(c)));
  }

  write_vector(g, "prompt_ids", r.prompt_ids, "token id", "the prompt's token ids (user 0)");
  std::vector<std::uint64_t> user_step;
  for (Cycles c : r.user_decode_cycles_per_token) user_step.push_back(c.value);
  write_vector(g, "user_decode_cycles_per_token", user_step, "cycles/token",
               "per user: mean decode step");
  if (r.functional) {
    write_vector(g, "generated", r.tokens, "token id", "token ids generated by the simulation");
    write_vector(g, "reference", r.reference_tokens, "token id",
                 "token ids from the reference forward pass");
  }
  write_text(g, "prompt_text", r.prompt_text, "the prompt as text (empty without a tokenizer)");
  write_text(g, "generated_text", r.generated_text,
             "user 0's generated tokens as text (empty without a tokenizer or values)");
}

void write_scenario(H5::H5File& f, const RunResult& r) {
  H5::Group g = make_group(f, "scenario");
  set_attr(g, "file", r.scenario_file);
  const H5::StrType type = utf8_string();
  H5::DataSet ds =
      g.createDataSet("resolved_yaml", type, H5::DataSpace(H5S_SCALAR), dataset_properties());
  ds.write(r.resolved_scenario_yaml, type);
  describe_dataset(ds, "text", "the fully resolved scenario (YAML) that reproduces this run");
}


// /weights: where the run's weights came from.
void write_weights(H5::H5File& f, const char* group, const WeightsProvenance& w) {
  H5::Group g = make_group(f, group);
  set_attr(g, "source", w.source);
  set_attr(g, "path", w.path);
  set_attr(g, "sha256", w.sha256);
  set_attr<std::uint64_t>(g, "seed", w.seed);
  std::vector<std::string> names, hashes;
  std::vector<std::uint64_t> bytes;
  for (const auto& file : w.files) {
    names.push_back(file.name);
    hashes.push_back(file.sha256);
    bytes.push_back(file.bytes);
  }
  write_strings(g, "files", names, "file name", "the checkpoint's safetensors files");
  write_strings(g, "file_sha256", hashes, "hex", "SHA-256 of each file");
  write_vector(g, "file_bytes", bytes, "bytes", "size of each file");
}

// One figure of the GPU rows as a dataset of /gpu_baselines, one entry per row.
template <class Stored, class Value>
std::vector<Stored> system_column(const SystemFigure& fig, const std::vector<SystemFigures>& rows) {
  std::vector<Stored> v;
  v.reserve(rows.size());
  for (const SystemFigures& row : rows)
    v.push_back(static_cast<Stored>(std::get<Value>(fig.value(row))));
  return v;
}

void write_system_column(H5::Group& g, const SystemFigure& fig,
                         const std::vector<SystemFigures>& rows) {
  const std::string name(fig.name);
  switch (fig.type) {
    case SystemFigureType::text:
      write_strings(g, name.c_str(), system_column<std::string, std::string>(fig, rows), fig.unit,
                    fig.description);
      return;
    case SystemFigureType::count:
      write_vector(g, name.c_str(), system_column<std::int32_t, std::int32_t>(fig, rows), fig.unit,
                   fig.description);
      return;
    case SystemFigureType::real:
      write_vector(g, name.c_str(), system_column<double, double>(fig, rows), fig.unit,
                   fig.description);
      return;
    case SystemFigureType::flag:
      write_vector(g, name.c_str(), system_column<std::uint8_t, bool>(fig, rows), fig.unit,
                   fig.description);
      return;
  }
}

// One figure of the wafer's row as a scalar dataset of /wafer_system (text
// figures are the group's attributes instead).
void write_system_scalar(H5::Group& g, const SystemFigure& fig, const SystemFigures& row) {
  const std::string name(fig.name);
  const SystemValue v = fig.value(row);
  switch (fig.type) {
    case SystemFigureType::text:
      throw std::logic_error("a text figure as a scalar dataset: " + name);
    case SystemFigureType::count:
      write_scalar(g, name.c_str(), std::get<std::int32_t>(v), fig.unit, fig.wafer_described());
      return;
    case SystemFigureType::real:
      write_scalar(g, name.c_str(), std::get<double>(v), fig.unit, fig.wafer_described());
      return;
    case SystemFigureType::flag:
      write_scalar(g, name.c_str(), static_cast<std::uint8_t>(std::get<bool>(v)), fig.unit,
                   fig.wafer_described());
      return;
  }
}

// The wafer-vs-GPU comparison: /gpu_baselines holds one entry per GPU system
// (parallel arrays), /wafer_system the wafer's scalars (docs/results-format.md).
void write_baselines(H5::H5File& f, const RunResult& r) {
  if (!r.baselines) return;
  const Baselines& b = *r.baselines;
  H5::Group g = make_group(f, "gpu_baselines");
  for (const SystemFigure* fig : kHdf5GpuBaselines) write_system_column(g, *fig, b.gpus);
  for (const SystemFigure* fig : kHdf5GpuBaselinesWrittenOnly) write_system_column(g, *fig, b.gpus);

  H5::Group w = make_group(f, "wafer_system");
  for (const SystemFigure* fig : kHdf5WaferSystemAttributes)
    set_attr(w, std::string(fig->name).c_str(), std::get<std::string>(fig->value(b.wafer)));
  for (const SystemFigure* fig : kHdf5WaferSystem) write_system_scalar(w, *fig, b.wafer);
  if (b.speculative) {
    const SpeculativeSummary& s = *b.speculative;
    H5::Group sp = make_group(f, "speculative_decoding");
    set_attr(sp, "draft_model", s.draft_model);
    set_attr(sp, "wafer_acceptance",
             std::string(s.wafer_accepted_by_comparison ? "compared" : "drawn"));
    write_scalar<std::int32_t>(sp, "draft_tokens", s.draft_tokens, "tokens",
                               "gamma: proposals per verification, at most");
    write_scalar(sp, "acceptance_rate", s.acceptance_rate, "1", "alpha, as the scenario gives it");
    write_scalar(sp, "expected_tokens_per_step", s.expected_tokens_per_step, "tokens",
                 "(1 - alpha^(gamma+1)) / (1 - alpha), as the GPU model uses it");
    write_scalar<std::int32_t>(sp, "wafer_draft_wafers", s.wafer_draft_wafers, "wafers",
                               "wafers the draft occupies (counted in /wafer_system/wafers)");
    write_scalar(sp, "wafer_acceptance_rate", s.wafer_acceptance, "1",
                 "accepted / examined proposals in the simulated run (examined: up to a round's "
                 "first rejection)");
    write_scalar(sp, "wafer_tokens_per_round", s.wafer_tokens_per_round, "tokens",
                 "tokens each simulated verification yielded");
    write_scalar(sp, "wafer_draft_step_s", s.wafer_draft_step_s, "s", "mean time of one proposal");
    write_scalar(sp, "wafer_verify_s", s.wafer_verify_s, "s",
                 "mean time from the proposals leaving the draft to their verification");
  }
}

void write_file(const std::filesystem::path& file_path, const RunResult& r, const Metrics& m) {
  H5::FileCreatPropList fcpl;
  H5Pset_obj_track_times(fcpl.getId(), false);  // the root group too
  fcpl.setUserblock(kSealBytes);                // room for the seal (result_seal.hpp)
  H5::H5File f(file_path.string(), H5F_ACC_TRUNC, fcpl);
  write_root(f, r, m);
  write_summary(f, r, m);
  write_critical_path(f, m);
  write_mesh(f, r);
  write_tokens(f, r);
  write_weights(f, "weights", r.weights);
  if (r.draft_weights) write_weights(f, "draft_weights", *r.draft_weights);
  write_scenario(f, r);
  write_baselines(f, r);
  f.close();
  seal_results_file(file_path);
}

// ---- reading -------------------------------------------------------------
//
// Nothing a file holds is trusted: every dataset's rank and shape is checked
// before it is read, no array may claim more elements than the file has
// bytes (so a damaged size cannot make us allocate without bound), and the
// figures read must be consistent (compute_metrics accepts them).

// Bytes the file's datasets can hold at most: deflate (the only filter we
// write) shrinks data at most ~1032 times (zlib's technical details), so no
// honest file holds more than this many times its size.
constexpr std::uint64_t kMostInflation = 1100;
// That bound for the file being read (set by read_file).
thread_local std::uint64_t max_elements = 0;

void check_count(const char* name, hsize_t count, std::size_t element_bytes) {
  if (count > max_elements / std::max<std::size_t>(element_bytes, 1)) {
    throw std::runtime_error(
        fmt::format("{} claims {} elements, more than the file can hold", name, count));
  }
}

// One string of an attribute or a scalar dataset, through the C API: the C++
// API's string reads call strlen on whatever libhdf5 returns, which is a null
// pointer for a damaged variable-length string (a crash, not an error).
std::string read_one_string(hid_t id, bool attribute, const H5::StrType& file_type,
                            const char* name) {
  if (file_type.isVariableStr()) {
    const H5::StrType memory = utf8_string();
    char* p = nullptr;
    const herr_t rc = attribute ? H5Aread(id, memory.getId(), &p)
                                : H5Dread(id, memory.getId(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p);
    if (rc < 0 || p == nullptr) {
      if (p != nullptr) H5free_memory(p);
      throw std::runtime_error(std::string(name) + ": unreadable string");
    }
    std::string s(p);
    H5free_memory(p);
    return s;
  }
  const std::size_t size = file_type.getSize();
  check_count(name, size, 1);
  std::vector<char> buffer(size + 1, '\0');
  const herr_t rc =
      attribute ? H5Aread(id, file_type.getId(), buffer.data())
                : H5Dread(id, file_type.getId(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
  if (rc < 0) throw std::runtime_error(std::string(name) + ": unreadable string");
  return std::string(buffer.data(), ::strnlen(buffer.data(), size));
}

std::string read_string_attr(const H5::H5Object& obj, const char* name) {
  H5::Attribute a = obj.openAttribute(name);
  if (a.getTypeClass() != H5T_STRING || a.getSpace().getSimpleExtentNpoints() != 1)
    throw std::runtime_error(std::string("attribute ") + name + ": expected one string");
  return read_one_string(a.getId(), /*attribute=*/true, a.getStrType(), name);
}

template <class T>
T read_attr(const H5::H5Object& obj, const char* name) {
  H5::Attribute a = obj.openAttribute(name);
  if (a.getTypeClass() != H5Type<T>::memory().getClass() ||
      a.getSpace().getSimpleExtentNpoints() != 1)
    throw std::runtime_error(std::string("attribute ") + name + ": expected one number");
  T value{};
  a.read(H5Type<T>::memory(), &value);
  return value;
}

template <class T>
T read_scalar(const H5::Group& g, const char* name) {
  H5::DataSet ds = g.openDataSet(name);
  if (ds.getSpace().getSimpleExtentNpoints() != 1) {
    throw std::runtime_error(std::string(name) + " is not a scalar");
  }
  if (ds.getTypeClass() != H5Type<T>::memory().getClass())
    throw std::runtime_error(std::string(name) + ": wrong element type");
  T value{};
  ds.read(&value, H5Type<T>::memory());
  return value;
}

// Reads an array and checks its shape.
template <class T>
std::vector<T> read_array(const H5::Group& g, const char* name, const std::vector<hsize_t>& dims) {
  H5::DataSet ds = g.openDataSet(name);
  H5::DataSpace space = ds.getSpace();
  std::vector<hsize_t> actual(static_cast<std::size_t>(space.getSimpleExtentNdims()));
  space.getSimpleExtentDims(actual.data());
  if (actual != dims) {
    throw std::runtime_error(fmt::format("{} has shape [{}], expected [{}]", name,
                                         fmt::join(actual, ", "), fmt::join(dims, ", ")));
  }
  hsize_t count = 1;
  for (hsize_t d : dims) {
    if (d != 0 && count > max_elements / d) check_count(name, max_elements + 1, 1);
    count *= d;
  }
  check_count(name, count, sizeof(T));
  if (ds.getTypeClass() != H5Type<T>::memory().getClass())
    throw std::runtime_error(std::string(name) + ": wrong element type");
  std::vector<T> v(count);
  if (count > 0) ds.read(v.data(), H5Type<T>::memory());
  return v;
}

template <class T>
std::vector<T> read_vector(const H5::Group& g, const char* name) {
  H5::DataSet ds = g.openDataSet(name);
  H5::DataSpace space = ds.getSpace();
  if (space.getSimpleExtentNdims() != 1) throw std::runtime_error(std::string(name) + ": not 1-D");
  hsize_t n = 0;
  space.getSimpleExtentDims(&n);
  return read_array<T>(g, name, {n});
}

// Puts a figure the RunResult holds back into it; a derived one is left to
// compute_metrics.
void read_figure(const H5::Group& g, const Figure& f, RunResult& r) {
  if (f.restore == nullptr) return;
  const std::string name(f.hdf5_dataset());
  if (f.absent_in_older_files && !g.nameExists(name)) return;
  switch (f.type) {
    case FigureType::count:
      f.restore(r, read_scalar<std::uint64_t>(g, name.c_str()));
      return;
    case FigureType::real:
      f.restore(r, read_scalar<double>(g, name.c_str()));
      return;
    case FigureType::flag:
      f.restore(r, read_scalar<std::uint8_t>(g, name.c_str()) != 0);
      return;
  }
}

// A 1-D array of variable-length strings.
std::vector<std::string> read_strings(const H5::Group& g, const char* name);

// A /weights group (absent in older files).
WeightsProvenance read_weights(const H5::Group& wg) {
  WeightsProvenance w;
  w.source = read_string_attr(wg, "source");
  w.path = read_string_attr(wg, "path");
  w.sha256 = read_string_attr(wg, "sha256");
  w.seed = read_attr<std::uint64_t>(wg, "seed");
  const std::vector<std::string> names = read_strings(wg, "files");
  const std::vector<std::string> hashes = read_strings(wg, "file_sha256");
  const auto bytes = read_array<std::uint64_t>(wg, "file_bytes", {names.size()});
  if (hashes.size() != names.size())
    throw std::runtime_error("/weights: files and file_sha256 differ in length");
  for (std::size_t i = 0; i < names.size(); ++i) w.files.push_back({names[i], hashes[i], bytes[i]});
  return w;
}

std::string read_text(const H5::Group& g, const char* name) {
  H5::DataSet ds = g.openDataSet(name);
  if (ds.getSpace().getSimpleExtentNdims() != 0 || ds.getTypeClass() != H5T_STRING)
    throw std::runtime_error(std::string(name) + ": expected a scalar string");
  return read_one_string(ds.getId(), /*attribute=*/false, ds.getStrType(), name);
}

std::vector<std::string> read_strings(const H5::Group& g, const char* name) {
  H5::DataSet ds = g.openDataSet(name);
  const H5::DataSpace space = ds.getSpace();
  if (space.getSimpleExtentNdims() != 1) throw std::runtime_error(std::string(name) + ": not 1-D");
  hsize_t n = 0;
  space.getSimpleExtentDims(&n);
  check_count(name, n, sizeof(char*));
  if (ds.getTypeClass() != H5T_STRING || !ds.getStrType().isVariableStr())
    throw std::runtime_error(std::string(name) + ": expected variable-length strings");
  std::vector<char*> ptrs(n, nullptr);
  const H5::StrType type = utf8_string();
  if (n > 0) ds.read(ptrs.data(), type);
  std::vector<std::string> v;
  v.reserve(n);
  for (const char* p : ptrs) v.emplace_back(p == nullptr ? "" : p);
  if (n > 0) H5Dvlen_reclaim(type.getId(), space.getId(), H5P_DEFAULT, ptrs.data());
  return v;
}

// One figure of the GPU rows, one value per row.
std::vector<SystemValue> read_system_column(const H5::Group& g, const SystemFigure& fig) {
  const std::string name(fig.name);
  std::vector<SystemValue> column;
  switch (fig.type) {
    case SystemFigureType::text:
      for (std::string& v : read_strings(g, name.c_str())) column.emplace_back(std::move(v));
      break;
    case SystemFigureType::count:
      for (std::int32_t v : read_vector<std::int32_t>(g, name.c_str())) column.emplace_back(v);
      break;
    case SystemFigureType::real:
      for (double v : read_vector<double>(g, name.c_str())) column.emplace_back(v);
      break;
    case SystemFigureType::flag:
      for (std::uint8_t v : read_vector<std::uint8_t>(g, name.c_str())) column.emplace_back(v != 0);
      break;
  }
  return column;
}

// One figure of the wafer's row from /wafer_system.
SystemValue read_system_scalar(const H5::Group& g, const SystemFigure& fig) {
  const std::string name(fig.name);
  switch (fig.type) {
    case SystemFigureType::text:
      break;
    case SystemFigureType::count:
      return read_scalar<std::int32_t>(g, name.c_str());
    case SystemFigureType::real:
      return read_scalar<double>(g, name.c_str());
    case SystemFigureType::flag:
      return read_scalar<std::uint8_t>(g, name.c_str()) != 0;
  }
  throw std::logic_error("a text figure as a scalar dataset: " + name);
}

// The wafer-vs-GPU comparison, where the file has one: the figures of
// /gpu_baselines and /wafer_system. What the file does not carry (a GPU row's
// replicas and kv_limited, the end-to-end figures, the speculative decoding
// and serving summaries) keeps its default.
std::optional<Baselines> read_baselines(const H5::H5File& f) {
  if (!f.nameExists("gpu_baselines")) return std::nullopt;
  Baselines b;
  const H5::Group g = f.openGroup("gpu_baselines");
  bool first = true;
  for (const SystemFigure* fig : kHdf5GpuBaselines) {
    const std::vector<SystemValue> column = read_system_column(g, *fig);
    if (first) b.gpus.resize(column.size());
    first = false;
    if (column.size() != b.gpus.size()) {
      throw std::runtime_error(fmt::format("gpu_baselines/{} has {} entries, expected {}",
                                           fig->name, column.size(), b.gpus.size()));
    }
    for (std::size_t i = 0; i < column.size(); ++i) fig->restore(b.gpus[i], column[i]);
  }
  const H5::Group w = f.openGroup("wafer_system");
  for (const SystemFigure* fig : kHdf5WaferSystemAttributes)
    fig->restore(b.wafer, read_string_attr(w, std::string(fig->name).c_str()));
  for (const SystemFigure* fig : kHdf5WaferSystem)
    fig->restore(b.wafer, read_system_scalar(w, *fig));
  return b;
}

RunResult read_file(const std::filesystem::path& path) {
  max_elements = std::filesystem::file_size(path) * kMostInflation;
  H5::H5File f(path.string(), H5F_ACC_RDONLY);
  if (!f.attrExists("format") || read_string_attr(f, "format") != kFormatName) {
    throw std::runtime_error("not a wafersim results file (no format = \"wafersim-result\")");
  }
  const auto version = read_attr<std::int32_t>(f, "format_version");
  if (version > kHdf5FormatVersion) {
    throw std::runtime_error(fmt::format("format version {} is newer than this wafersim reads ({})",
                                         version, kHdf5FormatVersion));
  }

  RunResult r;
  r.scenario_name = read_string_attr(f, "scenario");
  r.scenario_file = read_string_attr(f, "scenario_file");
  r.hardware_name = read_string_attr(f, "hardware");
  r.model_name = read_string_attr(f, "model");
  r.precision = read_string_attr(f, "precision");
  r.placement_strategy = read_string_attr(f, "placement_strategy");
  r.seed = read_attr<std::uint64_t>(f, "seed");
  r.functional = read_attr<std::uint8_t>(f, "functional") != 0;
  r.mesh_width = read_attr<std::int32_t>(f, "mesh_width");
  r.mesh_height = read_attr<std::int32_t>(f, "mesh_height");
  r.wafers = read_attr<std::int32_t>(f, "wafers");
  // The ranges a scenario allows (docs/scenario-schema.md, "Valid ranges").
  if (r.mesh_width < 1 || r.mesh_height < 1 ||
      static_cast<std::int64_t>(r.mesh_width) * r.mesh_height > 4'000'000)
    throw std::runtime_error(
        fmt::format("mesh {} x {} is outside 1 to 4000000 cores", r.mesh_width, r.mesh_height));
  if (r.wafers < 1 || r.wafers > 1024)
    throw std::runtime_error(fmt::format("wafers {} is outside 1 to 1024", r.wafers));

  const H5::Group s = f.openGroup("summary");
  for (const Figure* fig : kHdf5Summary) read_figure(s, *fig, r);
  if (r.functional)
    for (const Figure* fig : kHdf5FunctionalSummary) read_figure(s, *fig, r);

  const auto h = static_cast<hsize_t>(r.mesh_height) * static_cast<hsize_t>(r.wafers);
  const auto w = static_cast<hsize_t>(r.mesh_width);
  const H5::Group cores = f.openGroup("cores");
  r.core_busy_cycles = read_array<std::uint64_t>(cores, "busy_cycles", {h, w});
  r.core_sram_bytes = read_array<std::uint64_t>(cores, "sram_bytes", {h, w});
  r.link_bytes = read_array<std::uint64_t>(f.openGroup("links"), "bytes", {h, w, kLinkDirections});

  const H5::Group t = f.openGroup("tokens");
  const auto position = read_vector<std::int32_t>(t, "position");
  const hsize_t n = position.size();
  const auto prefill = read_array<std::uint8_t>(t, "prefill", {n});
  const auto start = read_array<std::uint64_t>(t, "start_cycle", {n});
  const auto end = read_array<std::uint64_t>(t, "end_cycle", {n});
  const auto token_in = read_array<std::int32_t>(t, "token_in", {n});
  const auto user = read_array<std::int32_t>(t, "user", {n});
  const H5::Group cp = t.openGroup("critical_path");
  std::array<std::vector<std::uint64_t>, kPathCategoryCount> cycles;
  for (std::size_t c = 0; c < kPathCategoryCount; ++c) {
    cycles[c] =
        read_array<std::uint64_t>(cp, std::string(category_key(kPathCategories[c])).c_str(), {n});
  }
  r.token_records.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    TokenRecord& rec = r.token_records[i];
    rec.user = user[i];
    rec.position = position[i];
    rec.prefill = prefill[i] != 0;
    rec.start_cycle = Cycles{start[i]};
    rec.end_cycle = Cycles{end[i]};
    rec.token_in = token_in[i];
    for (std::size_t c = 0; c < kPathCategoryCount; ++c) {
      rec.critical_path[kPathCategories[c]] = Cycles{cycles[c][i]};
    }
  }
  r.prompt_ids = read_vector<std::int32_t>(t, "prompt_ids");
  for (std::uint64_t c : read_vector<std::uint64_t>(t, "user_decode_cycles_per_token"))
    r.user_decode_cycles_per_token.push_back(Cycles{c});
  if (r.functional) {
    r.tokens = read_vector<std::int32_t>(t, "generated");
    r.reference_tokens = read_vector<std::int32_t>(t, "reference");
  }

  if (t.nameExists("prompt_text")) {  // absent in older files
    r.prompt_text = read_text(t, "prompt_text");
    r.generated_text = read_text(t, "generated_text");
  }
  if (f.nameExists("weights")) r.weights = read_weights(f.openGroup("weights"));
  if (f.nameExists("draft_weights")) r.draft_weights = read_weights(f.openGroup("draft_weights"));

  const H5::Group scenario = f.openGroup("scenario");
  r.resolved_scenario_yaml = read_text(scenario, "resolved_yaml");
  r.baselines = read_baselines(f);
  return r;
}

}  // namespace

void write_hdf5(const std::filesystem::path& path, const RunResult& result,
                const Metrics& metrics) {
  h5::write_atomically(
      path, [&](const std::filesystem::path& temp) { write_file(temp, result, metrics); });
}

RunResult read_hdf5(const std::filesystem::path& path) {
  return read_hdf5(path, nullptr);
}

namespace {

// An unsealed file cannot be checked before libhdf5 parses it, and libhdf5
// 1.10 crashes (global heap reads of variable-length strings) or loops
// forever on some damaged files. So it is read once in a child process with
// a time limit first: a crash or a hang there is a ResultReadError here.
// Only unsealed (older) files pay for it.
constexpr int kTrialRead = 0;    // the trial child's exit status: read whole
constexpr int kTrialError = 42;  // refused with an ordinary error

void trial_read_in_child(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  const unsigned seconds = 5 + static_cast<unsigned>((ec ? 0 : size) / 10'000'000);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return;  // cannot isolate it: read it directly
  if (child == 0) {
    ::signal(SIGALRM, SIG_DFL);
    ::alarm(seconds);
    try {
      compute_metrics(read_file(path));
    } catch (...) {
      ::_exit(kTrialError);  // an ordinary error: the real read reports it
    }
    ::_exit(kTrialRead);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return;
  }
  if (WIFEXITED(status) &&
      (WEXITSTATUS(status) == kTrialRead || WEXITSTATUS(status) == kTrialError))
    return;
  // Any other ending is a crash: a signal, or a sanitizer's report (which
  // exits with status 1 instead of dying by the signal).
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (sig == SIGALRM)
    throw ResultReadError(path, fmt::format("reading it did not finish within {} s (libhdf5 "
                                            "loops on some damaged files): the file is damaged",
                                            seconds));
  throw ResultReadError(path, sig != 0 ? fmt::format("libhdf5 crashed reading it (signal {}): "
                                                     "the file is damaged",
                                                     sig)
                                       : fmt::format("reading it failed in libhdf5 (exit "
                                                     "status {}): the file is damaged",
                                                     WEXITSTATUS(status)));
}

}  // namespace

RunResult read_hdf5(const std::filesystem::path& path, std::vector<std::string>* warnings) {
  if (check_results_seal(path) == SealState::unsealed) {
    if (warnings != nullptr)
      warnings->push_back(fmt::format(
          "{} has no checksum (written by a wafersim from before results were sealed): read "
          "without verifying it",
          path.string()));
    const QuietHdf5Errors quiet;
    trial_read_in_child(path);
  }
  const QuietHdf5Errors quiet;
  try {
    RunResult r = read_file(path);
    compute_metrics(r);  // throws std::logic_error on figures no run can produce
    return r;
  } catch (const H5::Exception& e) {
    throw ResultReadError(path, "HDF5: " + quiet.describe(e));
  } catch (const std::length_error& e) {
    throw ResultReadError(path, std::string("a dataset has an impossible size: ") + e.what());
  } catch (const std::logic_error& e) {
    throw ResultReadError(path, std::string("inconsistent contents: ") + e.what());
  } catch (const std::runtime_error& e) {
    throw ResultReadError(path, e.what());
  } catch (const std::bad_alloc&) {
    throw ResultReadError(path, "a dataset claims more memory than this machine has");
  }
}

}  // namespace wafersim::analysis
