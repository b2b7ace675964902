// A Hugging Face checkpoint folder decoded on the simulated wafer, end to end:
// `wafersim run` on a scenario whose model: is the folder must produce the
// tokens an independent NumPy forward pass of the same files produces
// (tests/checkpoints), say where its weights came from with the hash
// `sha256sum` gives, turn text into ids and ids into text as the
// tokenizer.json says, and refuse what it cannot use before writing anything.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/checkpoint_scripts.hpp"

namespace wafersim::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

class CheckpointRunTest : public CheckpointScriptsTest {
 protected:
  // wafersim `args`, its exit code and output.
  Outcome wafersim(const std::string& args) {
    const fs::path err = dir_ / "wafersim.err";
    const std::string cmd = std::string(WAFERSIM_BINARY) + " " + args + " 2>" + err.string();
    Outcome o;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
    const int status = ::pclose(p);
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err);
    o.err.assign(std::istreambuf_iterator<char>(e), {});
    return o;
  }
  // A scenario on the small test mesh with `model` and the rest of its text.
  fs::path scenario(const std::string& name, const fs::path& model, const std::string& rest) {
    const fs::path file = dir_ / (name + ".yaml");
    std::ofstream(file) << "name: " << name << "\nhardware: small\nmodel: " << model.string()
                        << "\n"
                        << rest;
    return file;
  }
  // What `wafersim run --json` says, or a failure.
  json run_json(const fs::path& scenario_file) {
    const Outcome o = wafersim("run " + scenario_file.string() + " --json --threads 2");
    EXPECT_EQ(o.code, 0) << o.err;
    try {
      return json::parse(o.out);
    } catch (const json::parse_error&) {
      ADD_FAILURE() << "not JSON:\n" << o.out << o.err;
      return {};
    }
  }
  // sha256sum's hash of the checkpoint: the file's, or (shards) that of the
  // manifest sha256sum prints for them in name order.
  std::string sha256sum(const fs::path& folder, bool shards) {
    const fs::path err = dir_ / "sha.err";
    const std::string cmd = "cd " + shell_quoted(folder.string()) +
                            (shards ? " && sha256sum model-*.safetensors | sha256sum"
                                    : " && sha256sum model.safetensors") +
                            " 2>" + shell_quoted(err.string());
    return run(cmd, err).substr(0, 64);
  }
};

std::vector<std::int32_t> ids(const json& j) {
  return j.get<std::vector<std::int32_t>>();
}

// One checkpoint, decoded by `wafersim run` under one dataflow.
struct Case {
  std::string name;
  std::string checkpoint_args;  // make_checkpoint.py
  std::string scenario_rest;    // precision, placement
  bool shards = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class CheckpointLayouts : public CheckpointRunTest, public ::testing::WithParamInterface<Case> {};

TEST_P(CheckpointLayouts, RunDecodesTheTokensNumpyDecodes) {
  const Case& c = GetParam();
  const fs::path folder = make_checkpoint("model", c.checkpoint_args + " --seed 11");
  if (HasFailure()) return;
  const std::vector<std::int32_t> prompt = {496, 40, 41, 42, 43, 44, 45, 300};
  const json want = numpy(folder, "--generate 6 --prompt-ids " + id_list(prompt)).at(0);
  const json got = run_json(scenario("ck", folder,
                                     c.scenario_rest + "workload:\n  prompt_ids: [" +
                                         id_list(prompt) + "]\n  generate_tokens: 6\n"));
  if (HasFailure()) return;
  EXPECT_EQ(ids(got.at("tokens")), ids(want.at("generated")))
      << "NumPy's smallest top-2 logit gap: " << want.at("min_margin").dump();
  EXPECT_EQ(ids(got.at("tokens")), ids(got.at("reference_tokens")));
  const json& w = got.at("weights");
  EXPECT_EQ(w.at("source"), "checkpoint");
  EXPECT_EQ(w.at("sha256"), sha256sum(folder, c.shards));
  EXPECT_EQ(w.at("files").size(), c.shards ? 2u : 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, CheckpointLayouts,
    ::testing::Values(
        Case{"llama_bf16", "--model-type llama --dtype bf16", "precision: bf16\n"},
        Case{"llama_fp8_scales", "--model-type llama --fp8", "precision: fp32\n"},
        Case{"qwen3_f32_whole_region", "--model-type qwen3 --dtype f32",
             "precision: fp32\nplacement: {strategy: whole-region, layer_groups: 2}\n"},
        Case{"mixtral_bf16_shards", "--model-type mixtral --dtype bf16 --shards 2",
             "precision: bf16\n", true},
        Case{"qwen3_moe_bf16_shards", "--model-type qwen3_moe --dtype bf16 --shards 2",
             "precision: bf16\n", true},
        Case{"gpt2_f32", "--model-type gpt2 --dtype f32", "precision: fp32\n"},
        // Llama 3.1's rope_scaling (the simulated cores' RoPE) and
        // attention_bias (q, k, v and o_proj biases on the cores).
        Case{"llama_rope_llama3_bf16", "--model-type llama --dtype bf16 --rope-scaling llama3",
             "precision: bf16\n"},
        Case{"llama_attention_bias_f32", "--model-type llama --dtype f32 --attention-bias",
             "precision: fp32\n"},
        Case{"qwen3_attention_bias_whole_region", "--model-type qwen3 --dtype f32 --attention-bias",
             "precision: fp32\nplacement: {strategy: whole-region, layer_groups: 2}\n"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST_F(CheckpointRunTest, TextInTextOut) {
  const fs::path folder = make_checkpoint("model", "--model-type llama --dtype bf16 --seed 3");
  if (HasFailure()) return;
  const std::string text = "The wafer isn't hot.";
  const json want = numpy(folder, "--generate 6 --tokenizer-text " + shell_quoted(text)).at(0);
  const json got = run_json(
      scenario("text", folder, "workload:\n  prompt: \"" + text + "\"\n  generate_tokens: 6\n"));
  if (HasFailure()) return;
  EXPECT_EQ(ids(got.at("prompt_ids")), ids(want.at("prompt_ids")));
  EXPECT_EQ(got.at("prompt_text"), text);
  EXPECT_EQ(ids(got.at("tokens")), ids(want.at("generated")));
  const json decoded = numpy(folder, "--decode-ids " + id_list(ids(want.at("generated")))).at(0);
  // Tokens of a random model rarely make valid UTF-8: both sides replace each
  // invalid byte sequence by U+FFFD (the JSON writer, Python's "replace").
  EXPECT_EQ(got.at("generated_text"), decoded.at("text"));
}

TEST_F(CheckpointRunTest, SyntheticWeightsOnlyWhenAskedAndTheyDecodeOtherTokens) {
  const fs::path folder = make_checkpoint("model", "--model-type llama --dtype bf16 --seed 5");
  if (HasFailure()) return;
  const std::string workload = "workload:\n  prompt_ids: [1, 2, 3]\n  generate_tokens: 6\n";
  const json real = run_json(scenario("real", folder, workload));
  const json synthetic =
      run_json(scenario("synthetic", folder, "weights: {source: synthetic}\n" + workload));
  if (HasFailure()) return;
  EXPECT_EQ(real.at("weights").at("source"), "checkpoint");
  EXPECT_EQ(synthetic.at("weights").at("source"), "synthetic");
  EXPECT_NE(real.at("tokens"), synthetic.at("tokens"));
}

TEST_F(CheckpointRunTest, AFolderWithoutWeightsIsAnErrorInAFunctionalRunOnly) {
  const fs::path folder = make_checkpoint("model", "--model-type llama --dtype bf16");
  if (HasFailure()) return;
  fs::remove(folder / "model.safetensors");
  const fs::path s =
      scenario("noweights", folder, "workload:\n  prompt_ids: [1, 2, 3]\n  generate_tokens: 4\n");
  const fs::path out = dir_ / "r.h5";
  const Outcome functional = wafersim("run " + s.string() + " --out " + out.string());
  EXPECT_EQ(functional.code, 1) << functional.err;
  EXPECT_NE(functional.err.find("weights.path"), std::string::npos) << functional.err;
  EXPECT_NE(functional.err.find("no model.safetensors"), std::string::npos) << functional.err;
  EXPECT_FALSE(fs::exists(out));
  const Outcome timing = wafersim("run " + s.string() + " --timing-only --json");
  ASSERT_EQ(timing.code, 0) << timing.err;
  EXPECT_EQ(json::parse(timing.out).at("weights").at("source"), "none");
}

// validate reads the checkpoint's headers against the model: a config that
// does not describe the files is found without running.
TEST_F(CheckpointRunTest, ValidateChecksTheCheckpointAgainstTheModel) {
  const fs::path folder = make_checkpoint("model", "--model-type llama --dtype bf16");
  if (HasFailure()) return;
  const fs::path s =
      scenario("v", folder, "workload:\n  prompt_ids: [1, 2, 3]\n  generate_tokens: 4\n");
  const Outcome good = wafersim("validate " + s.string());
  EXPECT_EQ(good.code, 0) << good.err;
  EXPECT_NE(good.out.find("weights checkpoint"), std::string::npos) << good.out;
  // The config now says a wider MLP than the files hold.
  std::ifstream in(folder / "config.json");
  json config = json::parse(in);
  config["intermediate_size"] = config["intermediate_size"].get<int>() + 16;
  std::ofstream(folder / "config.json") << config.dump();
  const Outcome bad = wafersim("validate " + s.string());
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.err.find("mlp.gate_proj.weight"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("where the config needs"), std::string::npos) << bad.err;
  // Timing only: the weights are not needed, so not checked.
  const Outcome timing =
      wafersim("validate " + scenario("t", folder,
                                      "workload:\n  prompt_ids: [1, 2, 3]\n  generate_tokens: 4\n"
                                      "outputs: {functional: false}\n")
                                 .string());
  EXPECT_EQ(timing.code, 0) << timing.err;
  EXPECT_NE(timing.out.find("weights none (timing only)"), std::string::npos) << timing.out;
}

TEST_F(CheckpointRunTest, ABrokenTokenizerInTheFolderIsAnErrorBeforeTheRun) {
  const fs::path folder = make_checkpoint("model", "--model-type llama --dtype bf16");
  if (HasFailure()) return;
  std::ofstream(folder / "tokenizer.json") << "{\"model\": {\"type\": \"WordPiece\"}}";
  const fs::path out = dir_ / "r.h5";
  const Outcome o =
      wafersim("run " +
               scenario("tok", folder, "workload:\n  prompt_ids: [1, 2, 3]\n  generate_tokens: 4\n")
                   .string() +
               " --out " + out.string());
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.err.find("workload.tokenizer"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("tokenizer.json"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CheckpointRunTest, ACorruptOrChangedCheckpointIsAnErrorNamingTheFile) {
  const fs::path folder = make_checkpoint("model", "--model-type llama --dtype bf16");
  if (HasFailure()) return;
  const std::string workload = "workload:\n  prompt_ids: [1, 2, 3]\n  generate_tokens: 4\n";
  // A pinned hash that is not the files'.
  const fs::path pinned =
      scenario("pinned", folder, "weights: {sha256: " + std::string(64, '0') + "}\n" + workload);
  const Outcome changed = wafersim("run " + pinned.string());
  EXPECT_EQ(changed.code, 1) << changed.err;
  EXPECT_NE(changed.err.find("content hash"), std::string::npos) << changed.err;
  // Truncated: the data area ends before the tensors do.
  const fs::path file = folder / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  const fs::path out = dir_ / "r.h5";
  const Outcome truncated =
      wafersim("run " + scenario("cut", folder, workload).string() + " --out " + out.string());
  EXPECT_EQ(truncated.code, 1) << truncated.err;
  EXPECT_NE(truncated.err.find("model.safetensors"), std::string::npos) << truncated.err;
  EXPECT_NE(truncated.err.find("truncated"), std::string::npos) << truncated.err;
  EXPECT_FALSE(fs::exists(out));
}

// A draft named by its checkpoint folder decodes with its own weights: a
// draft with the target's weights proposes exactly what the target decodes
// (every proposal accepted), one with other weights does not.
TEST_F(CheckpointRunTest, ASpeculativeDraftUsesItsCheckpoint) {
  const fs::path target = make_checkpoint("target", "--model-type qwen3 --seed 1");
  const fs::path same = make_checkpoint("same", "--model-type qwen3 --seed 1");
  const fs::path other = make_checkpoint("other", "--model-type qwen3 --seed 2");
  if (HasFailure()) return;
  auto with_draft = [&](const std::string& name, const fs::path& draft) {
    return run_json(scenario(name, target,
                             "workload:\n  prompt_ids: [1, 2, 3]\n  generate_tokens: 8\n"
                             "speculative_decoding:\n  draft_model: " +
                                 draft.string() + "\n  draft_tokens: 3\n  acceptance_rate: 0.7\n"));
  };
  const json a = with_draft("same", same), b = with_draft("other", other);
  if (HasFailure()) return;
  EXPECT_EQ(a.at("draft_weights").at("sha256"), sha256sum(same, false));
  EXPECT_EQ(b.at("draft_weights").at("sha256"), sha256sum(other, false));
  EXPECT_EQ(a.at("tokens"), b.at("tokens"));  // the target decides what is kept
  const json& sa = a.at("speculative_decoding");
  const json& sb = b.at("speculative_decoding");
  EXPECT_EQ(sa.at("wafer_acceptance_rate"), 1.0);
  EXPECT_LT(sb.at("wafer_acceptance_rate").get<double>(), 1.0);
}

TEST_F(CheckpointRunTest, TheResolvedScenarioReproducesTheRun) {
  const fs::path folder = make_checkpoint("model", "--model-type qwen3 --dtype bf16 --seed 9");
  if (HasFailure()) return;
  const fs::path out = dir_ / "r.h5";
  const Outcome first =
      wafersim("run " +
               scenario("again", folder, "workload:\n  prompt: \"one two\"\n  generate_tokens: 5\n")
                   .string() +
               " --json --out " + out.string());
  ASSERT_EQ(first.code, 0) << first.err;
  const Outcome second = wafersim("run " + out.string() + ".scenario.yaml --json");
  ASSERT_EQ(second.code, 0) << second.err;
  const json a = json::parse(first.out), b = json::parse(second.out);
  EXPECT_EQ(a.at("tokens"), b.at("tokens"));
  EXPECT_EQ(a.at("weights"), b.at("weights"));
  EXPECT_EQ(a.at("generated_text"), b.at("generated_text"));
}

}  // namespace
}  // namespace wafersim::testing
