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

// Where a group of segment `seg` (kv/kv_store.h) sees absolute position pos: counted
// from the segment's begin, clamped to its last position (a later query sees all of it),
// negative before it (the query sees none of its keys).
int32_t segment_position(const KvSegment& seg, int64_t pos) {
  return static_cast<int32_t>(std::min(pos, seg.end - 1) - seg.begin);
}
bool in_segment(const KvSegment& seg, int64_t pos) { return pos >= seg.begin && pos < seg.end; }

}  // namespace

Runner::Runner(Model& model) : model_(model) {}

Runner::~Runner() {
  if (single_.id >= 0) device_backend(model_.device()).drop(single_.id);
  for (const auto& [shape, rec] : batches_)
    if (rec.id >= 0) device_backend(model_.device()).drop(rec.id);
}

void Runner::check_logits(const Tensor& logits, int64_t rows, const char* op, StepOutput output) const {
  const bool hidden = output == StepOutput::Hidden;
  const int64_t cols = hidden ? model_.config().hidden_size : model_.config().vocab_size;
  CORVID_CHECK(logits.dtype == DType::F32 && logits.rows() == rows && logits.cols() == cols, op, ": ",
               hidden ? "hidden states" : "logits", " must be F32 [", rows, ", ", cols, "]");
  CORVID_CHECK(logits.device == Device::CPU || logits.device == model_.device(), op, ": logits on ",
               device_name(logits.device), " for a model on ", device_name(model_.device()));
}

Tensor Runner::logits_target(const Tensor& logits, int64_t rows) {
  return logits.device == model_.device() ? logits : device_logits(rows);
}

Tensor Runner::device_logits(int64_t rows) {
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
      // The step runs eagerly instead. That grows any buffer the step needed that nothing
      // had grown yet (nothing may grow while recording: a first decode step may need
      // more scratch than the prompt did), so the next step records again. A second
      // failure means something in the step cannot be recorded: from then on steps run
      // eagerly, and the user is told (every later step loses the recording's speed).
      backend.abort_capture();
      rec.id = -1;
      if (++failed_recordings_ >= 2) {
        std::fprintf(stderr, "corvid: recording a step failed (%s); steps run eagerly from now on\n", e.what());
        record_steps_ = false;
      }
      run();
      return false;
    }
    rec.id = backend.end_capture();
  }
  backend.replay(rec.id);
  return true;
}

Runner::Recording Runner::wanted(const KvStore& kv, const Tensor& out) const {
  return Recording{-1, kv.signature(), out.data, model_.buffers_generation(),
                   device_backend(model_.device()).layout_generation(), logits_generation_, inputs_generation_, true};
}

void Runner::stage(const KvStore* kv, const InputLayout& layout, bool paged) {
  const int32_t* dev = nullptr;
  if (model_.device() != Device::CPU) {
    // One copy for the whole step; ops read their arrays from it (and a recording holds it).
    if (inputs_.size() > device_inputs_capacity_) {
      device_inputs_capacity_ = std::max<size_t>(inputs_.size() * 2, 1024);
      device_inputs_ = DeviceBuffer(model_.device(), device_inputs_capacity_ * sizeof(int32_t));
      ++inputs_generation_;
    }
    device_backend(model_.device()).copy_to_device(device_inputs_.data(), inputs_.data(),
                                                   inputs_.size() * sizeof(int32_t));
    dev = static_cast<const int32_t*>(device_inputs_.data());
  }
  auto view = [&](int64_t offset, int64_t count) {
    return ops::Indices(std::span<const int32_t>(inputs_.data() + offset, static_cast<size_t>(count)),
                        dev ? dev + offset : nullptr);
  };
  const int64_t n = layout.n;
  groups_.clear();
  const ops::Indices tokens = view(0, n), positions = view(layout.positions(), n);
  if (!paged) {
    if (kv && kv->num_groups() > 1) {  // the delayed switch: rows and positions per group
      for (int64_t g = 0; g < kv->num_groups(); ++g)
        groups_.push_back({view(layout.slots(g), n), {}, view(layout.group_positions(g), n)});
    } else {
      groups_.push_back({positions, {}, positions});  // contiguous: a position's row is the position
    }
  } else {
    const ops::Indices query_seq = view(layout.query_seq(), n);
    for (int64_t g = 0; g < kv->num_groups(); ++g)
      groups_.push_back({view(layout.slots(g), n),
                         {kv->block_size(), view(layout.tables(g), layout.seqs * layout.width), layout.width, query_seq},
                         view(layout.group_positions(g), n)});
  }
  step_ = Step{tokens, positions, groups_, out_rows_, kv, StepOutput::Logits, {}};
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
  out_rows_.clear();
  for (int64_t r = n - n_out; r < n; ++r) out_rows_.push_back(r);
  inputs_.assign(tokens.begin(), tokens.end());
  inputs_.insert(inputs_.end(), positions.begin(), positions.end());
  const InputLayout layout{n, 0, 0};
  if (kv.num_groups() > 1) {
    // The delayed switch: each group's rows (position - begin inside its segment, else
    // -1: stored nowhere) and positions.
    inputs_.resize(static_cast<size_t>(layout.size(kv.num_groups())), 0);
    for (int64_t g = 0; g < kv.num_groups(); ++g) {
      const KvSegment seg = kv.segment(g);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t pos = positions[static_cast<size_t>(j)];
        inputs_[static_cast<size_t>(layout.slots(g) + j)] =
            in_segment(seg, pos) ? static_cast<int32_t>(pos - seg.begin) : -1;
        inputs_[static_cast<size_t>(layout.group_positions(g) + j)] = segment_position(seg, pos);
      }
    }
  }
  stage(&kv, layout, /*paged=*/false);
  const Tensor out = logits_target(logits, n_out);
  DeviceBackend& backend = device_backend(model_.device());
  if (n == 1 && record_steps_ && warm_ && backend.supports_capture()) {
    // Decode issues ~16 small launches per layer; recorded once, a step is one graph
    // launch. Its kernels read the staged inputs, so one recording serves every position.
    run_recorded(single_, wanted(kv, out), [&] { model_.forward(step_, out); });
  } else {
    model_.forward(step_, out);
  }
  warm_ = true;
  if (out.data != logits.data) copy_tensor(logits, out);
}

void Runner::forward_batch(std::span<const BatchSequence> batch, const KvStore& kv, const Tensor& logits,
                           StepOutput output) {
  const ModelConfig& c = model_.config();
  CORVID_CHECK(!batch.empty(), "forward_batch: empty batch");
  CORVID_CHECK(kv.paged(), "forward_batch: needs a paged KV store");
  CORVID_CHECK(kv.device() == model_.device(), "forward_batch: KV pool on ", device_name(kv.device()),
               " for a model on ", device_name(model_.device()));
  const std::vector<LayerState>& spec = model_.state_spec();
  bool same_shape = kv.num_layers() == static_cast<int64_t>(spec.size());
  for (size_t l = 0; same_shape && l < spec.size(); ++l) {
    const Tensor& k = kv.keys(static_cast<int64_t>(l));
    same_shape = k.dim(1) == spec[l].kv_heads && k.dim(2) == spec[l].head_dim;
  }
  CORVID_CHECK(same_shape, "forward_batch: the KV pool was made for another model shape");
  const int64_t bs = kv.block_size(), groups = kv.num_groups();
  int64_t n = 0, n_out = 0;
  size_t max_blocks = 1;
  for (size_t s = 0; s < batch.size(); ++s) {
    const BatchSequence& seq = batch[s];
    CORVID_CHECK(!seq.tokens.empty() && seq.start >= 0, "forward_batch: sequence ", s,
                 " has no tokens or a negative start");
    CORVID_CHECK(static_cast<int64_t>(seq.block_tables.size()) == groups, "forward_batch: sequence ", s, " has ",
                 seq.block_tables.size(), " block tables for a store of ", groups, " groups");
    for (const std::vector<int32_t>& table : seq.block_tables) max_blocks = std::max(max_blocks, table.size());
    n += static_cast<int64_t>(seq.tokens.size());
    n_out += seq.logits;
  }
  check_logits(logits, n_out, "forward_batch", output);
  DeviceBackend& backend = device_backend(model_.device());
  const bool decode_only = n == static_cast<int64_t>(batch.size()) && n_out == n && output == StepOutput::Logits;
  const bool recorded = decode_only && record_steps_ && n <= kMaxRecordedBatch && backend.supports_capture();
  // A recorded batch is padded: extra queries are sequences of their own at position 0
  // over block 0 whose keys and values go nowhere; their logits are computed and ignored.
  const int64_t rows = recorded ? next_power_of_two(n) : n;
  const int64_t seqs = recorded ? rows : static_cast<int64_t>(batch.size());
  const int64_t width = recorded ? next_power_of_two(std::max<int64_t>(static_cast<int64_t>(max_blocks),
                                                                       kMinRecordedTableWidth))
                                 : static_cast<int64_t>(max_blocks);
  const InputLayout layout{rows, seqs, width};
  inputs_.assign(static_cast<size_t>(layout.size(groups)), 0);
  int32_t* tokens = inputs_.data();
  int32_t* positions = tokens + layout.positions();
  int32_t* query_seq = tokens + layout.query_seq();
  auto slots = [&](int64_t g) { return tokens + layout.slots(g); };
  auto group_positions = [&](int64_t g) { return tokens + layout.group_positions(g); };
  auto tables = [&](int64_t g) { return tokens + layout.tables(g); };
  std::vector<KvSegment> segments;
  for (int64_t g = 0; g < groups; ++g) {
    segments.push_back(kv.segment(g));
    CORVID_CHECK(segments.back().begin % bs == 0 && (segments.back().end == INT64_MAX || segments.back().end % bs == 0),
                 "forward_batch: KV group ", g, "'s segment is not whole blocks of ", bs);
  }
  out_rows_.clear();
  int64_t i = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const BatchSequence& seq = batch[s];
    const int64_t count = static_cast<int64_t>(seq.tokens.size());
    for (int64_t g = 0; g < groups; ++g) {
      const std::vector<int32_t>& table = seq.block_tables[static_cast<size_t>(g)];
      CORVID_CHECK(static_cast<int64_t>(table.size()) * bs >= seq.start + count, "forward_batch: sequence ", s,
                   " has ", table.size(), " blocks of ", bs, " for ", seq.start + count, " positions");
      int32_t* row = tables(g) + static_cast<int64_t>(s) * width;
      // A group of a segment reads its table from the segment's first block.
      const KvSegment& seg = segments[static_cast<size_t>(g)];
      const size_t first = static_cast<size_t>(seg.begin / bs);
      const size_t last = std::min(table.size(), seg.end == INT64_MAX ? table.size() : static_cast<size_t>(seg.end / bs));
      for (size_t b = first; b < last; ++b) {
        CORVID_CHECK(table[b] < kv.group_blocks(g), "forward_batch: sequence ", s, " names block ", table[b],
                     ", outside the pool of ", kv.group_blocks(g));
        // A released entry is never read (it lies before every query's window); 0 keeps
        // a kernel that loads a whole tile inside the pool.
        row[b - first] = std::max<int32_t>(table[b], 0);
      }
    }
    for (int64_t j = 0; j < count; ++j, ++i) {
      const int32_t t = seq.tokens[static_cast<size_t>(j)];
      CORVID_CHECK(t >= 0 && t < c.vocab_size, "forward_batch: token id ", t, " is outside the vocabulary (",
                   c.vocab_size, ")");
      const int64_t pos = seq.start + j;
      tokens[i] = t;
      positions[i] = static_cast<int32_t>(pos);
      query_seq[i] = static_cast<int32_t>(s);
      for (int64_t g = 0; g < groups; ++g) {
        const KvSegment& seg = segments[static_cast<size_t>(g)];
        group_positions(g)[i] = segment_position(seg, pos);
        if (!in_segment(seg, pos)) {
          slots(g)[i] = -1;  // the group keeps none of this position
          continue;
        }
        const int32_t block = seq.block_tables[static_cast<size_t>(g)][static_cast<size_t>(pos / bs)];
        CORVID_CHECK(block >= 0, "forward_batch: sequence ", s, " has no block for position ", pos, " in KV group ", g);
        slots(g)[i] = static_cast<int32_t>(block * bs + pos % bs);
      }
    }
    if (seq.logits) out_rows_.push_back(i - 1);
  }
  for (; i < rows; ++i) {  // padding
    query_seq[i] = static_cast<int32_t>(i);
    for (int64_t g = 0; g < groups; ++g) slots(g)[i] = -1;
    out_rows_.push_back(i);
  }
  stage(&kv, layout, /*paged=*/true);
  step_.output = output;

  if (recorded) {
    const int64_t vocab = c.vocab_size;
    const Tensor out = device_logits(rows);
    auto run = [&] { model_.forward(step_, out); };
    Recording& rec = batches_[{rows, width}];
    if (!rec.warm) {
      // The first step of a shape runs eagerly: scratch, workspaces and library state
      // reach their sizes for it, so the recording (next time) allocates nothing.
      run();
      rec = wanted(kv, out);
    } else {
      run_recorded(rec, wanted(kv, out), run);
    }
    copy_tensor(logits, Tensor(DType::F32, {n, vocab}, out.data, model_.device()));  // the real rows
    return;
  }
  if (n_out == 0) {
    // No logits wanted (a prefill chunk that does not end its prompt): the model still
    // runs every layer to fill the KV cache.
    model_.forward(step_, Tensor(DType::F32, {0, c.vocab_size}, nullptr, model_.device()));
    return;
  }
  if (output == StepOutput::Hidden) {
    if (logits.device == model_.device()) {
      model_.forward(step_, logits);
      return;
    }
    const Tensor out = device_hidden(n_out);
    model_.forward(step_, out);
    copy_tensor(logits, out);
    return;
  }
  const Tensor out = logits_target(logits, n_out);
  model_.forward(step_, out);
  if (out.data != logits.data) copy_tensor(logits, out);
}

Tensor Runner::device_hidden(int64_t rows) {
  if (!device_hidden_.buffer.data() || device_hidden_.tensor.rows() < rows)
    device_hidden_ = DeviceTensor(model_.device(), DType::F32, {rows, model_.config().hidden_size});
  return device_hidden_.rows(rows);
}

void Runner::encode(std::span<const std::span<const int32_t>> sequences, const Tensor& hidden) {
  const ModelConfig& c = model_.config();
  CORVID_CHECK(!sequences.empty(), "encode: empty batch");
  CORVID_CHECK(model_.state_spec().empty(), "encode: ", c.architecture,
               " keeps state per sequence (a decoder); it runs through forward_batch");
  sequence_starts_.assign(1, 0);
  inputs_.clear();
  for (size_t s = 0; s < sequences.size(); ++s) {
    CORVID_CHECK(!sequences[s].empty(), "encode: sequence ", s, " has no tokens");
    for (int32_t t : sequences[s])
      CORVID_CHECK(t >= 0 && t < c.vocab_size, "encode: token id ", t, " is outside the vocabulary (", c.vocab_size,
                   ")");
    CORVID_CHECK(static_cast<int64_t>(sequences[s].size()) <= c.max_position_embeddings, "encode: sequence ", s,
                 " has ", sequences[s].size(), " tokens, more than the model's ", c.max_position_embeddings,
                 " positions");
    inputs_.insert(inputs_.end(), sequences[s].begin(), sequences[s].end());
    sequence_starts_.push_back(static_cast<int64_t>(inputs_.size()));
  }
  const int64_t n = static_cast<int64_t>(inputs_.size());
  check_logits(hidden, n, "encode", StepOutput::Hidden);
  CORVID_CHECK(hidden.device == Device::CPU || hidden.device == model_.device(), "encode: hidden states on ",
               device_name(hidden.device), " for a model on ", device_name(model_.device()));
  for (size_t s = 0; s + 1 < sequence_starts_.size(); ++s)
    for (int64_t p = 0; p < sequence_starts_[s + 1] - sequence_starts_[s]; ++p)
      inputs_.push_back(static_cast<int32_t>(p));
  out_rows_.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) out_rows_[static_cast<size_t>(r)] = r;
  stage(nullptr, {n, 0, 0}, /*paged=*/false);
  groups_.clear();
  step_.groups = {};
  step_.output = StepOutput::Hidden;
  step_.sequence_starts = sequence_starts_;
  const Tensor out = hidden.device == model_.device() ? hidden : device_hidden(n);
  model_.forward(step_, out);
  if (out.data != hidden.data) copy_tensor(hidden, out);
}

}  // namespace corvid
