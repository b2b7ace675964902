// docs/results-format.md against the outputs: every JSON key (recursively,
// an array's objects by their keys) and every HDF5 dataset and attribute of a
// run must be documented there. A run that carries nearly everything: two
// users, speculative decoding on a second wafer, functional, GPU baselines
// and a serving stack.
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/wafersim_cli.hpp"

namespace {

namespace fs = std::filesystem;

std::string src(const std::string& rel) {
  return std::string(WAFERSIM_SOURCE_DIR) + "/" + rel;
}

// The text of docs/results-format.md between two headings.
std::string doc_section(const std::string& from, const std::string& to) {
  std::ifstream in(src("docs/results-format.md"));
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::size_t a = text.find(from);
  const std::size_t b = text.find(to, a == std::string::npos ? 0 : a);
  EXPECT_NE(a, std::string::npos) << from;
  EXPECT_NE(b, std::string::npos) << to;
  return a == std::string::npos || b == std::string::npos ? "" : text.substr(a, b - a);
}

// What a section mentions: its `code spans`, and every identifier inside them.
struct Mentions {
  std::set<std::string> spans, words;
  explicit Mentions(const std::string& text) {
    static const std::regex span("`([^`]+)`");
    static const std::regex word("[A-Za-z_][A-Za-z0-9_]*");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), span);
         it != std::sregex_iterator(); ++it) {
      const std::string s = (*it)[1].str();
      spans.insert(s);
      for (auto w = std::sregex_iterator(s.begin(), s.end(), word); w != std::sregex_iterator();
           ++w)
        words.insert(w->str());
    }
  }
  bool span(const std::string& s) const { return spans.count(s) > 0; }
  bool word(const std::string& s) const { return words.count(s) > 0; }
};

// Every key path of a JSON value: "a", "a.b", "list[]", "list[].c".
void json_paths(const nlohmann::json& j, const std::string& at, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string p = at.empty() ? it.key() : at + "." + it.key();
      out.push_back(p);
      json_paths(*it, p, out);
    }
  } else if (j.is_array()) {
    for (const auto& e : j)
      if (e.is_object()) json_paths(e, at + "[]", out);
  }
}

// A key is documented by its full path in a code span (`busiest_link.wafer`,
// `token_records[].user`), or -- inside a documented object -- by its name
// (`….ttft_s`, or a list such as `{compute, sram, ...}` in its parent's row).
bool json_documented(const std::string& path, const Mentions& m) {
  if (m.span(path)) return true;
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos) return false;  // a top-level key needs its own row
  std::string parent = path.substr(0, dot);
  const std::string leaf = path.substr(dot + 1);
  if (!(m.span("…." + leaf) || m.span("." + leaf) || m.word(leaf))) return false;
  if (parent.size() > 2 && parent.compare(parent.size() - 2, 2, "[]") == 0) {
    if (m.span(parent)) return true;
    parent.resize(parent.size() - 2);
  }
  return json_documented(parent, m);
}

struct Hdf5Contents {
  std::vector<std::string> datasets;    // "/summary/users"
  std::vector<std::string> attributes;  // "/summary/busiest_link_bytes@x", "/@wafers"
};

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* data) {
  auto* out = static_cast<std::pair<std::string, Hdf5Contents*>*>(data);
  out->second->attributes.push_back(out->first + "@" + name);
  return 0;
}

herr_t collect_object(hid_t root, const char* name, const H5O_info_t* info, void* data) {
  auto* contents = static_cast<Hdf5Contents*>(data);
  const std::string path = std::string(name) == "." ? "/" : "/" + std::string(name);
  if (info->type == H5O_TYPE_DATASET) contents->datasets.push_back(path);
  const hid_t object = H5Oopen(root, name, H5P_DEFAULT);
  std::pair<std::string, Hdf5Contents*> ctx{path == "/" ? "" : path, contents};
  H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute, &ctx);
  H5Oclose(object);
  return 0;
}

Hdf5Contents hdf5_contents(const std::string& file) {
  Hdf5Contents c;
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << file;
  if (f < 0) return c;
  H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, collect_object, &c);
  H5Fclose(f);
  return c;
}

// A dataset is documented by its path in a code span, by a row for its
// group's members (`/tokens/critical_path/<category>`, `/draft_weights/…`)
// naming it, or by `…/NAME` in a row of its group.
bool hdf5_documented(const std::string& path, const Mentions& m, const std::string& section) {
  if (m.span(path)) return true;
  const std::size_t slash = path.rfind('/');
  const std::string group = path.substr(0, slash), leaf = path.substr(slash + 1);
  if (section.find("`" + group + "/<") != std::string::npos && m.word(leaf)) return true;
  if (m.span(group + "/…")) return true;
  return m.span("…/" + leaf) && section.find("`" + group + "/") != std::string::npos;
}

class ResultsFormatDocs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = wafersim::test_support::cli_scratch_dir("results_docs");
    const std::string h5 = (dir_ / "r.h5").string();
    const auto o = wafersim::test_support::run_wafersim(
        "run " + src("scenarios/regression/tiny-small-speculative.yaml") +
        " --json --out " + h5 + " --set compare_with=null --set 'serving={round_trip: 40 ms}'");
    ASSERT_EQ(o.code, 0) << o.err;
    json_ = nlohmann::json::parse(o.out);
    hdf5_ = hdf5_contents(h5);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static inline fs::path dir_;
  static inline nlohmann::json json_;
  static inline Hdf5Contents hdf5_;
};

TEST_F(ResultsFormatDocs, EveryJsonKeyIsDocumented) {
  // The run has what the check is about: nested objects, arrays of objects,
  // the baselines and the speculative summary.
  ASSERT_TRUE(json_.contains("gpu_baselines")) << json_.dump(1);
  ASSERT_TRUE(json_.contains("speculative_decoding"));
  ASSERT_TRUE(json_.contains("serving"));
  const Mentions m(doc_section("## JSON", "## HDF5"));
  std::vector<std::string> paths;
  json_paths(json_, "", paths);
  EXPECT_GT(paths.size(), 80u);
  for (const std::string& p : paths)
    EXPECT_TRUE(json_documented(p, m)) << "JSON key " << p << " is not in docs/results-format.md";
  // The check can fail: a key nobody documented.
  EXPECT_FALSE(json_documented("token_records[].undocumented_key", m));
  EXPECT_FALSE(json_documented("undocumented_key", m));
}

TEST_F(ResultsFormatDocs, EveryHdf5DatasetAndAttributeIsDocumented) {
  const std::string section = doc_section("## HDF5", "## Serving results");
  const Mentions m(section);
  EXPECT_GT(hdf5_.datasets.size(), 60u);
  for (const std::string& d : hdf5_.datasets)
    EXPECT_TRUE(hdf5_documented(d, m, section))
        << "HDF5 dataset " << d << " is not in docs/results-format.md";
  for (const std::string& a : hdf5_.attributes) {
    const std::string name = a.substr(a.find('@') + 1);
    EXPECT_TRUE(m.span(name) || m.word(name))
        << "HDF5 attribute " << a << " is not in docs/results-format.md";
  }
  EXPECT_FALSE(hdf5_documented("/summary/undocumented_dataset", m, section));
  // The JSON's GPU rows and the file's carry the same figures.
  for (const char* column : {"/gpu_baselines/replicas", "/gpu_baselines/kv_limited"})
    EXPECT_NE(std::find(hdf5_.datasets.begin(), hdf5_.datasets.end(), column),
              hdf5_.datasets.end())
        << column;
}

}  // namespace

namespace {

// The serving and capacity JSON (GPU systems alone: no engine runs) against
// the "Serving results" section.
TEST(ServingResultsDocs, EveryServingAndCapacityJsonKeyIsDocumented) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("results_docs_serving");
  std::ofstream(d / "s.yaml") << R"(name: gpu-capacity-docs
model: llama-3.1-8b
traffic:
  seed: 5
  arrivals: {rate: 2/s}
  requests: 200
  prompt_tokens: {uniform: [500, 1500]}
  output_tokens: {uniform: [50, 150]}
deployment: {gpu: {max_batch: 32}}
compare_with: [{preset: dgx-h100, framework: {name: vllm}}]
slo: {ttft: 500 ms, tokens_per_s: 60}
)";
  const Mentions m(doc_section("## Serving results", "## HTML reports"));
  for (const std::string command : {"serve", "capacity"}) {
    const auto o = wafersim::test_support::run_wafersim(
        command + " " + (d / "s.yaml").string() + " --json" +
        (command == "capacity" ? " --target-rate 20" : ""));
    ASSERT_EQ(o.code, 0) << o.err;
    const nlohmann::json j = nlohmann::json::parse(o.out);
    std::vector<std::string> paths;
    json_paths(j, "", paths);
    EXPECT_GT(paths.size(), 30u) << command;
    for (const std::string& p : paths)
      EXPECT_TRUE(json_documented(p, m))
          << command << " JSON key " << p << " is not in docs/results-format.md";
  }
  EXPECT_FALSE(json_documented("systems[].probes[].undocumented_key", m));
  fs::remove_all(d);
}

}  // namespace
