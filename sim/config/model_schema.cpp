// model: a transformer's shape (models::ModelConfig), in a preset file, inline
// or as overrides of a preset. docs/scenario-schema.md, "Model".
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

using models::ModelConfig;
using namespace yaml;

constexpr Need R = Need::required;
constexpr Need O = Need::optional;

std::string count(int n) {
  return fmt::format("{}", n);
}

constexpr Key<ModelConfig> kModel[] = {
    {"name", R, "string", "in a preset file it must equal the file name",
     [](auto& v, auto& m, auto&) { m.name = read_string(v); },
     [](auto& m) { return yaml_string(m.name); }},
    {"description", O, "string", "optional, free text",
     [](auto& v, auto&, auto&) { read_string(v); }},
    {"architecture", R, "llama, mistral, qwen2, qwen3, mixtral, qwen3_moe or gpt2",
     "what each changes: models/model_config.hpp",
     [](auto& v, auto& m, auto&) {
       m.architecture = models::parse_architecture(
           read_choice(v, "architecture",
                       {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "gpt2"}));
     },
     [](auto& m) { return std::string(models::architecture_name(m.architecture)); }},
    {"hidden_size", R, "count", "width of the residual stream",
     [](auto& v, auto& m, auto&) {
       m.hidden_size = read_count_in(v, 1, 131'072, "4096", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.hidden_size); }},
    {"intermediate_size", R, "count", "width of the MLP (of each expert for mixtral and qwen3_moe)",
     [](auto& v, auto& m, auto&) {
       m.intermediate_size = read_count_in(v, 1, 1'048'576, "14336", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.intermediate_size); }},
    {"num_layers", R, "count", "transformer layers",
     [](auto& v, auto& m, auto&) {
       m.num_layers = read_count_in(v, 1, 4096, "32", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.num_layers); }},
    {"num_heads", R, "count", "query heads",
     [](auto& v, auto& m, auto&) {
       m.num_heads = read_count_in(v, 1, 4096, "32", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.num_heads); }},
    {"num_kv_heads", R, "count", "key/value heads; divides num_heads",
     [](auto& v, auto& m, auto&) {
       m.num_kv_heads = read_count_in(v, 1, 4096, "8", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.num_kv_heads); }},
    {"head_dim", R, "count", "width of one head",
     [](auto& v, auto& m, auto&) {
       m.head_dim = read_count_in(v, 1, 131072, "128", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.head_dim); }},
    {"vocab_size", R, "count", "tokens of the vocabulary",
     [](auto& v, auto& m, auto&) {
       m.vocab_size = read_count_in(v, 1, 16'777'216, "128256", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.vocab_size); }},
    {"max_position", R, "count", "longest context: prompt plus generated tokens",
     [](auto& v, auto& m, auto&) {
       m.max_position = read_count_in(v, 1, 1 << 30, "131072", /*zero_later=*/true);
     },
     [](auto& m) { return count(m.max_position); }},
    {"rope_theta", R, "plain number (10000.0)", "RoPE base; unused by gpt2",
     [](auto& v, auto& m, auto&) { m.rope_theta = read_real(v, "500000.0"); },
     [](auto& m) { return yaml_real(m.rope_theta); }},
    {"rms_norm_eps", R, "plain number (1.0e-5)", "norm epsilon (gpt2: LayerNorm's)",
     [](auto& v, auto& m, auto&) { m.rms_norm_eps = read_real(v, "1.0e-5"); },
     [](auto& m) { return yaml_real(m.rms_norm_eps); }},
    {"tie_embeddings", R, "true / false", "lm_head shares the embedding's matrix",
     [](auto& v, auto& m, auto&) { m.tie_embeddings = read_bool(v); },
     [](auto& m) { return yaml_bool(m.tie_embeddings); }},
    // Architecture extras: optional everywhere, 0 / false when absent, and
    // written only when they differ from that.
    {"num_experts", O, "count, default 0",
     "experts per layer; >= 1 for mixtral and qwen3_moe, 0 otherwise",
     [](auto& v, auto& m, auto&) { m.num_experts = read_count_in(v, 0, 4096, "8"); },
     [](auto& m) { return count(m.num_experts); }, [](auto& m) { return m.num_experts != 0; }},
    {"experts_per_token", O, "count, default 0", "top-k experts per token (mixtral, qwen3_moe)",
     [](auto& v, auto& m, auto&) { m.experts_per_token = read_count_in(v, 0, 4096, "2"); },
     [](auto& m) { return count(m.experts_per_token); },
     [](auto& m) { return m.experts_per_token != 0; }},
    {"attention_bias", O, "true / false, default false",
     "q/k/v and o biases for the llama family (Hugging Face attention_bias)",
     [](auto& v, auto& m, auto&) { m.attention_bias = read_bool(v); },
     [](auto&) { return std::string("true"); }, [](auto& m) { return m.attention_bias; }},
    {"rope_scaling", O, "none or llama3, default none",
     "how RoPE's frequencies are rescaled (Llama 3.1 / 3.2 / 3.3: llama3, with the four keys "
     "below; models/model_config.hpp, RopeScaling)",
     [](auto& v, auto& m, auto&) {
       m.rope_scaling.type =
           models::parse_rope_scaling(read_choice(v, "rope_scaling", {"none", "llama3"}));
     },
     [](auto& m) { return std::string(models::rope_scaling_name(m.rope_scaling.type)); },
     [](auto& m) { return m.rope_scaling.type != models::RopeScalingType::none; }},
    {"rope_scaling_factor", O, "plain number (8.0), default 0",
     "llama3: how much the low frequencies are slowed (>= 1)",
     [](auto& v, auto& m, auto&) { m.rope_scaling.factor = read_real(v, "8.0"); },
     [](auto& m) { return yaml_real(m.rope_scaling.factor); },
     [](auto& m) { return m.rope_scaling.factor != 0.0; }},
    {"rope_low_freq_factor", O, "plain number (1.0), default 0",
     "llama3: wavelengths above original / this are slowed by the factor",
     [](auto& v, auto& m, auto&) { m.rope_scaling.low_freq_factor = read_real(v, "1.0"); },
     [](auto& m) { return yaml_real(m.rope_scaling.low_freq_factor); },
     [](auto& m) { return m.rope_scaling.low_freq_factor != 0.0; }},
    {"rope_high_freq_factor", O, "plain number (4.0), default 0",
     "llama3: wavelengths below original / this are kept; between, interpolated",
     [](auto& v, auto& m, auto&) { m.rope_scaling.high_freq_factor = read_real(v, "4.0"); },
     [](auto& m) { return yaml_real(m.rope_scaling.high_freq_factor); },
     [](auto& m) { return m.rope_scaling.high_freq_factor != 0.0; }},
    {"rope_original_max_position", O, "count, default 0",
     "llama3: the context the model was trained on (Hugging Face "
     "original_max_position_embeddings)",
     [](auto& v, auto& m, auto&) {
       m.rope_scaling.original_max_position = read_count_in(v, 0, 1 << 30, "8192");
     },
     [](auto& m) { return count(m.rope_scaling.original_max_position); },
     [](auto& m) { return m.rope_scaling.original_max_position != 0; }},
    {"sliding_window", O, "count, default 0 = whole context",
     "each query sees the last N positions (itself included)",
     [](auto& v, auto& m, auto&) { m.sliding_window = read_count_in(v, 0, 1 << 30, "4096"); },
     [](auto& m) { return count(m.sliding_window); },
     [](auto& m) { return m.sliding_window != 0; }},
};

}  // namespace

std::span<const Key<ModelConfig>> model_keys() {
  return kModel;
}

}  // namespace wafersim::sim::schema
