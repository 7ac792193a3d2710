#include "corvid/engine/dummy_weights.h"

#include <cmath>
#include <filesystem>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/formats/json_file.h"
#include "corvid/ops/ops.h"

namespace corvid {

namespace {

// splitmix64: a counter-based generator, so every row can be filled in parallel and
// the values do not depend on the thread count.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1).
float unit(uint64_t stream, uint64_t i) {
  return static_cast<float>(static_cast<double>(mix(stream ^ mix(i)) >> 11) * 0x1.0p-52 - 1.0);
}

struct Builder {
  DType dtype;
  uint64_t seed;
  WeightSet set;
  uint64_t next_stream = 0;

  // rows x cols of `dt`: values center + spread * U(-1, 1).
  void add(const std::string& name, int64_t rows, int64_t cols, DType dt, float center, float spread) {
    // Checked here, on the caller's thread: an exception inside the pool's workers cannot be caught.
    CORVID_CHECK(cols % dtype_info(dt).block_elems == 0, set.source, ": tensor ", name, " has rows of ", cols,
                 " elements, not a whole number of ", dtype_name(dt), " blocks (", dtype_info(dt).block_elems, ")");
    auto storage = std::make_shared<Buffer>(bytes_for(dt, rows * cols));
    Tensor t = rows == 1 ? Tensor(dt, {cols}, storage->data()) : Tensor(dt, {rows, cols}, storage->data());
    const uint64_t stream = mix(seed * 0x100000001b3ull + ++next_stream);
    ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1, int) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = 0; c < cols; ++c)
          row[static_cast<size_t>(c)] = center + spread * unit(stream, static_cast<uint64_t>(r * cols + c));
        ops::quantize_row(dt, row.data(), t.row(r), cols);
      }
    }, 16);
    set.tensors[name] = t;
    set.owners.push_back(storage);
  }
  // A projection of `in` features: std 1/sqrt(in) (uniform spread sqrt(3) x std).
  void proj(const std::string& name, int64_t out, int64_t in) {
    add(name, out, in, dtype, 0.0f, std::sqrt(3.0f / static_cast<float>(in)));
  }
  void norm(const std::string& name, int64_t n) { add(name, 1, n, DType::F32, 1.0f, 0.05f); }
};

}  // namespace

DType dummy_weight_dtype(const std::string& name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                  DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    if (dtype_name(t) == name) return t;
  fail("--dummy-weights: unknown dtype '", name, "' (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
}

LoadedModel load_dummy_model(const std::string& config_path, DType dtype, Device device, uint64_t seed) {
  std::string path = config_path;
  if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / "config.json").string();
  const ModelConfig c = parse_model_config(read_json_file(path), path);
  Builder b{dtype, seed, {}};
  b.set.source = path + " (dummy weights, " + std::string(dtype_name(dtype)) + ")";
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  b.add("model.embed_tokens.weight", c.vocab_size, H, dtype, 0.0f, 0.02f * std::sqrt(3.0f));
  b.norm("model.norm.weight", H);
  if (!c.tie_word_embeddings) b.proj("lm_head.weight", c.vocab_size, H);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    b.norm(p + "input_layernorm.weight", H);
    b.norm(p + "post_attention_layernorm.weight", H);
    b.proj(p + "self_attn.q_proj.weight", c.num_attention_heads * D, H);
    b.proj(p + "self_attn.k_proj.weight", c.num_key_value_heads * D, H);
    b.proj(p + "self_attn.v_proj.weight", c.num_key_value_heads * D, H);
    b.proj(p + "self_attn.o_proj.weight", H, c.num_attention_heads * D);
    if (c.attention_bias) {
      b.add(p + "self_attn.q_proj.bias", 1, c.num_attention_heads * D, DType::F32, 0.0f, 0.02f);
      b.add(p + "self_attn.k_proj.bias", 1, c.num_key_value_heads * D, DType::F32, 0.0f, 0.02f);
      b.add(p + "self_attn.v_proj.bias", 1, c.num_key_value_heads * D, DType::F32, 0.0f, 0.02f);
    }
    if (c.qk_norm) {
      b.norm(p + "self_attn.q_norm.weight", D);
      b.norm(p + "self_attn.k_norm.weight", D);
    }
    b.proj(p + "mlp.gate_proj.weight", I, H);
    b.proj(p + "mlp.up_proj.weight", I, H);
    b.proj(p + "mlp.down_proj.weight", H, I);
  }
  LoadedModel m;
  m.device = device;
  m.files = std::make_unique<ModelFiles>();
  m.files->config = c;
  m.files->path = path;
  m.files->weights = std::move(b.set);
  m.bind_model();
  return m;
}

}  // namespace corvid
