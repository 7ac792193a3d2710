#include "corvid/engine/runner.h"

#include <algorithm>
#include <cstdio>

#include "corvid/core/error.h"

namespace corvid {

namespace {

int64_t next_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Recorded decode batches pad their block tables to at least this many blocks, so
// short sequences share one recording per batch bucket.
constexpr int64_t kMinRecordedTableWidth = 4;

}  // namespace

Runner::Runner(Model& model) : model_(model) {}

Runner::~Runner() {
  if (single_.id >= 0) device_backend(model_.device()).drop(single_.id);
  for (const auto& [shape, rec] : batches_)
    if (rec.id >= 0) device_backend(model_.device()).drop(rec.id);
}

void Runner::check_logits(const Tensor& logits, int64_t rows, const char* op) const {
  const int64_t vocab = model_.config().vocab_size;
  CORVID_CHECK(logits.dtype == DType::F32 && logits.rows() == rows && logits.cols() == vocab, op,
               ": logits must be F32 [", rows, ", ", vocab, "]");
  CORVID_CHECK(logits.device == Device::CPU || logits.device == model_.device(), op, ": logits on ",
               device_name(logits.device), " for a model on ", device_name(model_.device()));
}

Tensor Runner::logits_target(const Tensor& logits, int64_t rows) {
  if (logits.device == model_.device()) return logits;
  if (!device_logits_.buffer.data() || device_logits_.tensor.rows() < rows) {
    device_logits_ = DeviceTensor(model_.device(), DType::F32, {rows, model_.config().vocab_size});
    ++logits_generation_;
  }
  return device_logits_.rows(rows);
}

template <class Fn>
bool Runner::run_recorded(Recording& rec, const Recording& want, Fn run) {
  DeviceBackend& backend = device_backend(model_.device());
  if (rec.id < 0 || !rec.same_inputs(want)) {
    if (rec.id >= 0) backend.drop(rec.id);
    rec = want;
    rec.id = -1;
    backend.begin_capture();
    try {
      run();
    } catch (const Error& e) {
      // Something in the step cannot be recorded: run steps eagerly from now on, and say so
      // (every later step loses the recording's speed).
      backend.abort_capture();
      std::fprintf(stderr, "corvid: recording a step failed (%s); steps run eagerly from now on\n", e.what());
      record_steps_ = false;
      run();
      return false;
    }
    rec.id = backend.end_capture();
  }
  backend.replay(rec.id);
  return true;
}

void Runner::forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                     const Tensor& logits, bool all_logits) {
  const ModelConfig& c = model_.config();
  const int64_t n = static_cast<int64_t>(tokens.size());
  CORVID_CHECK(n > 0 && positions.size() == tokens.size(), "forward: need one position per token");
  for (int32_t t : tokens)
    CORVID_CHECK(t >= 0 && t < c.vocab_size, "forward: token id ", t, " is outside the vocabulary (", c.vocab_size,
                 ")");
  const int64_t n_out = all_logits ? n : 1;
  check_logits(logits, n_out, "forward");
  CORVID_CHECK(kv.device() == model_.device(), "forward: KV cache on ", device_name(kv.device()), " for a model on ",
               device_name(model_.device()));
  CORVID_CHECK(kv.num_layers() == static_cast<int64_t>(model_.state_spec().size()),
               "forward: the KV cache was made for another model shape");
  for (int32_t pos : positions)
    CORVID_CHECK(pos >= 0 && pos < kv.capacity(), "position ", pos, " is outside the KV cache (capacity ",
                 kv.capacity(), ")");
  step_.out_rows.clear();
  for (int64_t r = n - n_out; r < n; ++r) step_.out_rows.push_back(r);
  const Step step{tokens, positions, positions, {}, step_.out_rows, &kv};
  const Tensor out = logits_target(logits, n_out);
  DeviceBackend& backend = device_backend(model_.device());
  if (n == 1 && record_steps_ && warm_ && backend.supports_capture()) {
    // Decode issues ~16 small launches per layer; recorded once, a step is one graph
    // launch. The step's host inputs are staged in device memory first, and the kernels
    // read them from there, so one recording serves every position.
    backend.stage_inputs({tokens, positions, positions, {}, {}});
    const Recording want{-1, kv.signature(), out.data, model_.buffers_generation(), backend.layout_generation(),
                         logits_generation_, true};
    run_recorded(single_, want, [&] { model_.forward(step, out); });
  } else {
    model_.forward(step, out);
  }
  warm_ = true;
  if (out.data != logits.data) copy_tensor(logits, out);
}

void Runner::forward_batch(std::span<const BatchSequence> batch, BlockPool& pool, const Tensor& logits) {
  const ModelConfig& c = model_.config();
  CORVID_CHECK(!batch.empty(), "forward_batch: empty batch");
  CORVID_CHECK(pool.device() == model_.device(), "forward_batch: KV pool on ", device_name(pool.device()),
               " for a model on ", device_name(model_.device()));
  const std::vector<LayerState>& spec = model_.state_spec();
  bool same_shape = pool.num_layers() == static_cast<int64_t>(spec.size());
  for (size_t l = 0; same_shape && l < spec.size(); ++l) {
    const Tensor& k = pool.keys(static_cast<int64_t>(l));
    same_shape = k.dim(1) == spec[l].kv_heads && k.dim(2) == spec[l].head_dim;
  }
  CORVID_CHECK(same_shape, "forward_batch: the KV pool was made for another model shape");
  const int64_t bs = pool.block_size();
  Scratch& b = step_;
  b.tokens.clear();
  b.positions.clear();
  b.slots.clear();
  b.query_seq.clear();
  b.out_rows.clear();
  size_t max_blocks = 1;
  for (const BatchSequence& seq : batch) max_blocks = std::max(max_blocks, seq.block_table.size());
  b.tables.assign(batch.size() * max_blocks, 0);
  for (size_t s = 0; s < batch.size(); ++s) {
    const BatchSequence& seq = batch[s];
    const int64_t n = static_cast<int64_t>(seq.tokens.size());
    CORVID_CHECK(n > 0 && seq.start >= 0, "forward_batch: sequence ", s, " has no tokens or a negative start");
    CORVID_CHECK(static_cast<int64_t>(seq.block_table.size()) * bs >= seq.start + n, "forward_batch: sequence ", s,
                 " has ", seq.block_table.size(), " blocks of ", bs, " for ", seq.start + n, " positions");
    for (size_t i = 0; i < seq.block_table.size(); ++i) {
      const int32_t block = seq.block_table[i];
      CORVID_CHECK(block >= 0 && block < pool.num_blocks(), "forward_batch: sequence ", s, " names block ", block,
                   ", outside the pool of ", pool.num_blocks());
      b.tables[s * max_blocks + i] = block;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t t = seq.tokens[static_cast<size_t>(i)];
      CORVID_CHECK(t >= 0 && t < c.vocab_size, "forward_batch: token id ", t, " is outside the vocabulary (",
                   c.vocab_size, ")");
      const int64_t pos = seq.start + i;
      b.tokens.push_back(t);
      b.positions.push_back(static_cast<int32_t>(pos));
      b.slots.push_back(static_cast<int32_t>(seq.block_table[static_cast<size_t>(pos / bs)] * bs + pos % bs));
      b.query_seq.push_back(static_cast<int32_t>(s));
    }
    if (seq.logits) b.out_rows.push_back(static_cast<int64_t>(b.tokens.size()) - 1);
  }
  const int64_t n = static_cast<int64_t>(b.tokens.size()), n_out = static_cast<int64_t>(b.out_rows.size());
  check_logits(logits, n_out, "forward_batch");

  const bool decode_only = n == static_cast<int64_t>(batch.size()) && n_out == n;
  if (decode_only && record_steps_ && n <= kMaxRecordedBatch && device_backend(model_.device()).supports_capture()) {
    forward_decode_recorded(pool, static_cast<int64_t>(max_blocks), logits);
    return;
  }
  const Step step{b.tokens, b.positions, b.slots, {bs, b.tables, static_cast<int64_t>(max_blocks), b.query_seq},
                  b.out_rows, &pool};
  if (n_out == 0) {
    // No logits wanted (a prefill chunk that does not end its prompt): the model still
    // runs every layer to fill the KV cache.
    model_.forward(step, Tensor(DType::F32, {0, c.vocab_size}, nullptr, model_.device()));
    return;
  }
  const Tensor out = logits_target(logits, n_out);
  model_.forward(step, out);
  if (out.data != logits.data) copy_tensor(logits, out);
}

void Runner::forward_decode_recorded(BlockPool& pool, int64_t max_blocks, const Tensor& logits) {
  Scratch& b = step_;
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t rows = next_power_of_two(n);
  const int64_t width = next_power_of_two(std::max<int64_t>(max_blocks, kMinRecordedTableWidth));
  // Pad: extra queries are sequences of their own at position 0 over block 0 whose
  // keys and values go nowhere; their logits are computed and ignored.
  std::vector<int32_t> tables(static_cast<size_t>(rows * width), 0);
  for (int64_t s = 0; s < n; ++s)
    std::copy_n(b.tables.begin() + s * max_blocks, max_blocks, tables.begin() + s * width);
  b.tables = std::move(tables);
  for (int64_t s = n; s < rows; ++s) {
    b.tokens.push_back(0);
    b.positions.push_back(0);
    b.slots.push_back(-1);
    b.query_seq.push_back(static_cast<int32_t>(s));
    b.out_rows.push_back(s);
  }
  const int64_t vocab = model_.config().vocab_size;
  if (!device_logits_.buffer.data() || device_logits_.tensor.rows() < rows) {
    device_logits_ = DeviceTensor(model_.device(), DType::F32, {rows, vocab});
    ++logits_generation_;
  }
  const Tensor out = device_logits_.rows(rows);
  const Tensor wanted(DType::F32, {n, vocab}, out.data, model_.device());  // the real rows
  const Step step{b.tokens, b.positions, b.slots, {pool.block_size(), b.tables, width, b.query_seq}, b.out_rows,
                  &pool};
  auto run = [&] { model_.forward(step, out); };

  DeviceBackend& backend = device_backend(model_.device());
  backend.stage_inputs({b.tokens, b.positions, b.slots, b.tables, b.query_seq});
  Recording& rec = batches_[{rows, width}];
  if (!rec.warm) {
    // The first step of a shape runs eagerly: scratch, workspaces and library state
    // reach their sizes for it, so the recording (next time) allocates nothing.
    run();
    rec = Recording{-1, pool.signature(), out.data, model_.buffers_generation(), backend.layout_generation(),
                    logits_generation_, true};
  } else {
    const Recording want{-1, pool.signature(), out.data, model_.buffers_generation(), backend.layout_generation(),
                         logits_generation_, true};
    run_recorded(rec, want, run);
  }
  copy_tensor(logits, wanted);
}

}  // namespace corvid
