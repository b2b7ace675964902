#include "analysis/sweep_output.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "analysis/hdf5_writing.hpp"

namespace wafersim::analysis {

namespace {

using namespace h5;
using Json = nlohmann::ordered_json;

enum class Kind { integer, number, text };

// One column: its key in a point's JSON object, its units and meaning.
struct Column {
  const char* key;
  Kind kind;
  const char* units;
  const char* description;
};

const Column kPointColumns[] = {
    {"index", Kind::integer, "", "position of the point in the sweep's grid"},
    {"exit_code", Kind::integer, "",
     "the point's run: 0 ran, 1 bad input or the model does not fit, 3 failed"},
    {"model", Kind::text, "", "model preset or path"},
    {"hardware", Kind::text, "", "hardware preset"},
    {"precision", Kind::text, "", "weights' number format"},
    {"wafers_used", Kind::number, "wafers", "wafers the placement used"},
    {"users", Kind::number, "sequences", "sequences decoded at once"},
    {"decode_tokens_per_s_per_user", Kind::number, "tokens/s", "decode rate of one user"},
    {"aggregate_tokens_per_s", Kind::number, "tokens/s", "decode rate of all users together"},
    {"ttft_s", Kind::number, "s", "time to first token"},
    {"inter_token_latency_s", Kind::number, "s", "time between a user's decode tokens"},
    {"max_context_tokens", Kind::number, "tokens", "longest context the placement holds"},
    {"bottleneck", Kind::text, "", "the resource that limits a token"},
    {"power_kw", Kind::number, "kW", "the wafers' power (NaN when the preset gives none)"},
    {"error", Kind::text, "", "why the point did not run (empty when it ran)"},
};

const Column kGpuColumns[] = {
    {"system", Kind::text, "", "GPU cluster preset"},
    {"gpus", Kind::number, "GPUs", "GPUs the cluster uses"},
    {"tp", Kind::number, "", "tensor-parallel degree"},
    {"pp", Kind::number, "", "pipeline-parallel degree"},
    {"decode_tokens_per_s_per_user", Kind::number, "tokens/s", "decode rate of one user"},
    {"aggregate_tokens_per_s", Kind::number, "tokens/s", "decode rate of all users together"},
    {"ttft_s", Kind::number, "s", "time to first token"},
    {"power_kw", Kind::number, "kW", "the cluster's power"},
    {"bottleneck", Kind::text, "", "the resource that limits a step"},
};

std::string text_of(const Json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

double number_of(const Json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return std::numeric_limits<double>::quiet_NaN();
  return it->get<double>();
}

// The columns of `rows` as datasets of `g`.
void write_columns(H5::Group& g, const std::vector<const Json*>& rows, const Column* begin,
                   const Column* end) {
  for (const Column* c = begin; c != end; ++c) {
    if (c->kind == Kind::text) {
      std::vector<std::string> v;
      for (const Json* r : rows) v.push_back(text_of(*r, c->key));
      write_strings(g, c->key, v, "", c->description);
    } else if (c->kind == Kind::integer) {
      std::vector<std::int32_t> v;
      for (const Json* r : rows) v.push_back(r->value(c->key, 0));
      write_vector(g, c->key, v, c->units, c->description);
    } else {
      std::vector<double> v;
      for (const Json* r : rows) v.push_back(number_of(*r, c->key));
      write_vector(g, c->key, v, c->units, c->description);
    }
  }
}

}  // namespace

void write_sweep_hdf5(const std::filesystem::path& path, const Json& sweep) {
  write_atomically(path, [&](const std::filesystem::path& temp) {
    H5::FileCreatPropList fcpl;
    H5Pset_obj_track_times(fcpl.getId(), false);
    H5::H5File f(temp.string(), H5F_ACC_TRUNC, fcpl);
    set_attr(f, "format", "wafersim-sweep");
    set_attr(f, "format_version", static_cast<std::int32_t>(1));
    set_attr(f, "scenario", sweep.value("scenario", std::string()));
    set_attr(f, "points_total", static_cast<std::int32_t>(sweep.value("points_total", 0)));
    set_attr(f, "complete", static_cast<std::uint8_t>(sweep.value("complete", false)));
    set_attr(f, "interrupted", static_cast<std::uint8_t>(sweep.value("interrupted", false)));

    std::vector<const Json*> points, gpus;
    std::vector<std::int32_t> gpu_point;
    for (const Json& p : sweep.at("points")) {
      points.push_back(&p);
      if (p.contains("gpu_baselines"))
        for (const Json& g : p.at("gpu_baselines")) {
          gpus.push_back(&g);
          gpu_point.push_back(p.value("index", 0));
        }
    }
    H5::Group pg = make_group(f, "points");
    write_columns(pg, points, std::begin(kPointColumns), std::end(kPointColumns));
    // A dataset per axis the sweep could vary (its `axes`), set or not.
    for (const Json& name : sweep.value("axes", Json::array())) {
      const std::string axis = name.get<std::string>();
      std::vector<std::string> v;
      for (const Json* p : points)
        v.push_back(p->contains("overrides") ? text_of(p->at("overrides"), axis.c_str()) : "");
      write_strings(pg, ("override_" + axis).c_str(), v, "",
                    "the point's value of this axis (empty: the scenario's own)");
    }
    H5::Group gg = make_group(f, "gpu_baselines");
    write_vector(gg, "point_index", gpu_point, "", "the point (index) this GPU row belongs to");
    write_columns(gg, gpus, std::begin(kGpuColumns), std::end(kGpuColumns));
    std::vector<std::int32_t> missing;
    for (const Json& m : sweep.value("missing", Json::array())) missing.push_back(m.get<int>());
    write_vector(f, "missing", missing, "", "indices of the points without a result");
    f.close();
  });
}

}  // namespace wafersim::analysis
