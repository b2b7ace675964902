// Malformed inputs, each with its verdict: the issue's corpus of values that
// used to be accepted (and gave wrong figures), crash, hang, or fail only
// after the simulation. Every one must now be refused at once with exit code
// 1 and a message that names the file and the key (or path) at fault.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/wafersim_cli.hpp"

namespace {

namespace fs = std::filesystem;
using wafersim::test_support::CliOutcome;
using wafersim::test_support::run_wafersim;

std::string src(const std::string& rel) {
  return std::string(WAFERSIM_SOURCE_DIR) + "/" + rel;
}

struct Malformed {
  std::string name;
  std::string scenario;           // the scenario's text; @DIR@ is the scratch folder
  std::string command = "run";    // run, validate or place
  std::string extra;              // more arguments; @DIR@ as above
  std::vector<std::string> said;  // in stderr, besides the file's name
  std::string make_dir;           // a folder made first, under @DIR@
};

void PrintTo(const Malformed& m, std::ostream* os) {
  *os << m.name;
}

const std::string kBody =
    "model: tiny-llama\nworkload: {prompt_tokens: 4, generate_tokens: 2}\n"
    "outputs: {functional: false}\n";

std::string with_hardware(const std::string& overrides) {
  return "name: x\nhardware: {preset: small, " + overrides + "}\n" + kBody;
}

std::vector<Malformed> corpus() {
  return {
      {"hop_latency_2_64",
       with_hardware("router: {hop_latency: 18446744073709551615 cycles}"),
       "run",
       "",
       {"hardware.router.hop_latency", "out of range", "100000 cycles"},
       ""},
      {"hop_latency_2_63",
       with_hardware("router: {hop_latency: 9223372036854775808 cycles}"),
       "run",
       "",
       {"hardware.router.hop_latency", "out of range"},
       ""},
      {"sram_2_64",
       with_hardware("core: {sram: 18446744073709551615 B}"),
       "run",
       "",
       {"hardware.core.sram", "out of range", "1 GiB"},
       ""},
      {"clock_1e_minus_300",
       with_hardware("core: {clock: 1e-300 Hz}"),
       "run",
       "",
       {"hardware.core.clock", "out of range", "1 MHz"},
       ""},
      {"virtual_channels_1e9",
       with_hardware("router: {virtual_channels: 1000000000}"),
       "run",
       "",
       {"hardware.router.virtual_channels", "out of range", "1024"},
       ""},
      {"tp_3",
       "name: x\nhardware: small\n" + kBody + "gpu_parallelism: {tp: 3}\n",
       "run",
       "",
       {"gpu_parallelism.tp", "does not divide", "4 attention heads"},
       ""},
      {"tp_beyond_a_node",
       "name: x\nhardware: small\n" + kBody + "gpu_parallelism: {tp: 4096}\n",
       "run",
       "",
       {"gpu_parallelism.tp"},
       ""},
      {"second_document",
       "name: x\nhardware: small\n" + kBody + "---\nname: y\n",
       "run",
       "",
       {"second YAML document", ""},
       ""},
      // A document that starts with a comma: yaml-cpp 0.7's LoadAll makes
      // empty documents from it forever (found by fuzz_scenario: 24 GB in a minute).
      {"leading_comma",
       ",\nname: x\nhardware: small\n" + kBody,
       "validate",
       "",
       {"invalid YAML"},
       ""},
      {"yaml_tag",
       "name: x\nhardware: {preset: small, mesh: {width: !!int abc}}\n" + kBody,
       "run",
       "",
       {"YAML tags are not supported", "tag:yaml.org,2002:int"},
       ""},
      {"invalid_utf8_name",
       "name: \"x\xff\xfey\"\nhardware: small\n" + kBody,
       "run",
       "",
       {"invalid UTF-8", ":1:"},
       ""},
      {"placement_file_is_a_folder",
       "name: x\nhardware: small\n" + kBody + "placement: {file: @DIR@}\n",
       "run",
       "",
       {"is a folder"},
       ""},
      {"placement_file_missing_validate",
       "name: x\nhardware: small\n" + kBody + "placement: {file: @DIR@/absent.yaml}\n",
       "validate",
       "",
       {"placement.file"},
       ""},
      {"results_into_missing_folder",
       "name: x\nhardware: small\n" + kBody.substr(0, kBody.find("outputs")) +
           "outputs: {functional: false, results: @DIR@/no/such/r.h5}\n",
       "validate",
       "",
       {"does not exist"},
       ""},
      {"out_into_missing_folder",
       "name: x\nhardware: small\n" + kBody,
       "run",
       "--out @DIR@/no/such/r.h5",
       {"does not exist", "r.h5"},
       ""},
      {"out_is_a_folder",
       "name: x\nhardware: small\n" + kBody,
       "run",
       "--out @DIR@",
       {"is a folder"},
       ""},
      {"config_json_is_a_folder",
       "name: x\nhardware: small\nmodel: @DIR@/ck/config.json\n"
       "workload: {prompt_tokens: 4, generate_tokens: 2}\noutputs: {functional: false}\n",
       "run",
       "",
       {"model", "is a folder"},
       "ck/config.json"},
      {"svg_into_missing_folder",
       "name: x\nhardware: small\n" + kBody,
       "place",
       "--svg @DIR@/no/such/p.svg",
       {"does not exist", "p.svg"},
       ""},
  };
}

class MalformedInputs : public ::testing::TestWithParam<Malformed> {};

std::string expand(std::string text, const std::string& dir) {
  for (auto at = text.find("@DIR@"); at != std::string::npos; at = text.find("@DIR@"))
    text.replace(at, 5, dir);
  return text;
}

TEST_P(MalformedInputs, IsRefusedAtOnceWithExitCode1NamingFileAndKey) {
  const Malformed& m = GetParam();
  const fs::path dir = wafersim::test_support::cli_scratch_dir("malformed_" + m.name);
  const fs::path file = dir / "s.yaml";
  if (!m.make_dir.empty()) fs::create_directories(dir / m.make_dir);
  std::ofstream(file, std::ios::binary) << expand(m.scenario, dir.string());
  const auto start = std::chrono::steady_clock::now();
  const CliOutcome o =
      run_wafersim(m.command + " " + file.string() + " " + expand(m.extra, dir.string()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.code, 1) << o.err << o.out;
  const bool names_file = o.err.find(file.string()) != std::string::npos ||
                          o.err.find(dir.string()) != std::string::npos;
  EXPECT_TRUE(names_file) << o.err;
  for (const std::string& s : m.said)
    EXPECT_NE(o.err.find(s), std::string::npos) << s << "\n" << o.err;
  EXPECT_LT(seconds, 30.0) << "refused only after " << seconds << " s";
  EXPECT_EQ(o.err.find("internal error"), std::string::npos) << o.err;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Corpus, MalformedInputs, ::testing::ValuesIn(corpus()),
                         [](const auto& info) { return info.param.name; });

// A placement file that `place --write-placement` wrote, broken in one way
// per case: each is refused by `run` with exit 1, the file and its key path.
struct PlacementEdit {
  std::string name;
  std::string from, to;  // the first `from` in the file becomes `to`
  std::string said;
  std::string scenario_extra;  // added to the quickstart scenario's options
};

void PrintTo(const PlacementEdit& e, std::ostream* os) {
  *os << e.name;
}

class BrokenPlacementFiles : public ::testing::TestWithParam<PlacementEdit> {};

TEST_P(BrokenPlacementFiles, AreRefusedWithFileAndKey) {
  const PlacementEdit& e = GetParam();
  const fs::path dir = wafersim::test_support::cli_scratch_dir("pfile_" + e.name);
  const std::string file = (dir / "p.yaml").string();
  const CliOutcome w = run_wafersim("place " + src("scenarios/quickstart.yaml") +
                                    " --strategy serpentine --write-placement " + file);
  ASSERT_EQ(w.code, 0) << w.err;
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto at = text.find(e.from);
  ASSERT_NE(at, std::string::npos) << e.from << "\n" << text;
  text.replace(at, e.from.size(), e.to);
  std::ofstream(file) << text;
  const CliOutcome r = run_wafersim("run " + src("scenarios/quickstart.yaml") +
                                    " --timing-only --placement " + file + " " + e.scenario_extra);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(e.said), std::string::npos) << e.said << "\n" << r.err;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, BrokenPlacementFiles,
    ::testing::Values(
        PlacementEdit{"unknown_strategy", "strategy: \"serpentine\"", "strategy: \"foo\"",
                      "unknown strategy 'foo'", ""},
        PlacementEdit{"duplicate_key", "wafers: 1\n", "wafers: 1\nwafers: 1\n",
                      "duplicate key 'wafers'", ""},
        PlacementEdit{"wafers_disagree", "wafers: 1\n", "wafers: 2\n", "wafers: 1", "--wafers 1"},
        PlacementEdit{"second_document", "placement_file: 1\n", "placement_file: 1\n---\n",
                      "second YAML document", ""},
        PlacementEdit{"region_without_its_matrices", "region: [", "region: [0, 0, 1, 1] #[",
                      "is not inside its stage's region", ""}),
    [](const auto& info) { return info.param.name; });

}  // namespace
