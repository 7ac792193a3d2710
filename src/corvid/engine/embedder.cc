#include "corvid/engine/embedder.h"

#include <algorithm>
#include <future>

#include "corvid/core/error.h"
#include "corvid/engine/request.h"

namespace corvid {

Embedder::Embedder(LoadedModel& model, PoolingConfig pooling, EmbedderConfig config)
    : model_(model), pooling_(std::move(pooling)), config_(config) {
  const ModelConfig& c = model_.model->config();
  CORVID_CHECK(config_.max_batch_tokens > 0 && config_.max_batch_seqs > 0 && config_.max_waiting > 0,
               "embedder: batch limits must be positive");
  encoder_ = model_.model->state_spec().empty();
  max_input_tokens_ = std::min(c.max_position_embeddings > 0 ? c.max_position_embeddings : config_.max_batch_tokens,
                               config_.max_batch_tokens);
  if (pooling_.max_tokens) max_input_tokens_ = std::min(max_input_tokens_, *pooling_.max_tokens);
  CORVID_CHECK(encoder_ || pooling_.mode == PoolingMode::LastToken, c.architecture,
               ": a decoder embeds with last-token pooling only");
  if (!encoder_) {
    KvManagerConfig kv;
    kv.device = model_.model->device();
    kv.format = config_.kv_format;
    kv.prefix_caching = false;
    // One step's worth: every token of the step, plus a partial block per input.
    kv.num_blocks = (config_.max_batch_tokens + kv.block_size - 1) / kv.block_size + config_.max_batch_seqs;
    kv.max_seqs = config_.max_batch_seqs;
    kv.max_chunk = max_input_tokens_;
    kv_ = std::make_unique<KvManager>(model_.model->state_spec(), kv);
  }
  thread_ = std::thread([this] { run(); });
}

Embedder::~Embedder() { shutdown(); }

void Embedder::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Embedder::steps() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return steps_;
}

void Embedder::submit(std::vector<std::vector<int32_t>> inputs, Callback done) {
  using Reason = RequestRejected::Reason;
  if (inputs.empty()) throw RequestRejected(Reason::Invalid, "the input is empty: give at least one text or token list");
  const int64_t vocab = model_.model->config().vocab_size;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t>& in = inputs[i];
    if (in.empty()) throw RequestRejected(Reason::Invalid, "input " + std::to_string(i) + " has no tokens");
    if (static_cast<int64_t>(in.size()) > max_input_tokens_)
      throw RequestRejected(Reason::TooLong, "input " + std::to_string(i) + " has " + std::to_string(in.size()) +
                                                 " tokens, more than the model's " +
                                                 std::to_string(max_input_tokens_));
    for (int32_t t : in)
      if (t < 0 || t >= vocab)
        throw RequestRejected(Reason::Invalid, "input " + std::to_string(i) + ": token id " + std::to_string(t) +
                                                   " is outside the vocabulary (" + std::to_string(vocab) + ")");
  }
  auto job = std::make_shared<Job>();
  job->remaining = inputs.size();
  job->result.embeddings.resize(inputs.size());
  for (const std::vector<int32_t>& in : inputs) job->result.tokens.push_back(static_cast<int64_t>(in.size()));
  job->inputs = std::move(inputs);
  job->done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw RequestRejected(Reason::Unavailable, "the server is shutting down");
    if (static_cast<int64_t>(queue_.size() + job->inputs.size()) > config_.max_waiting)
      throw RequestRejected(Reason::QueueFull, "too many embedding inputs are waiting; retry later");
    for (size_t i = 0; i < job->inputs.size(); ++i) queue_.push_back({job, i});
  }
  wake_.notify_one();
}

std::vector<std::vector<float>> Embedder::embed(std::vector<std::vector<int32_t>> inputs) {
  std::promise<EmbeddingResult> promise;
  std::future<EmbeddingResult> future = promise.get_future();
  submit(std::move(inputs), [&promise](EmbeddingResult r) { promise.set_value(std::move(r)); });
  EmbeddingResult r = future.get();
  if (!r.error.empty()) fail(r.error);
  return std::move(r.embeddings);
}

void Embedder::run() {
  for (;;) {
    std::vector<Item> items;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      // In arrival order, as many whole inputs as the step holds (the first always fits).
      int64_t tokens = 0;
      while (!queue_.empty() && static_cast<int64_t>(items.size()) < config_.max_batch_seqs) {
        const int64_t len = static_cast<int64_t>(queue_.front().job->inputs[queue_.front().index].size());
        if (!items.empty() && tokens + len > config_.max_batch_tokens) break;
        tokens += len;
        items.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      ++steps_;
    }
    run_step(items);
  }
}

void Embedder::run_step(std::vector<Item>& items) {
  std::vector<std::vector<float>> out(items.size());
  std::string error;
  try {
    if (encoder_) {
      run_encoder(items, out);
    } else {
      run_decoder(items, out);
    }
  } catch (const std::exception& e) {
    error = std::string("embedding failed: ") + e.what();
  }
  for (size_t i = 0; i < items.size(); ++i) {
    Job& job = *items[i].job;
    if (!error.empty() && job.result.error.empty()) job.result.error = error;
    job.result.embeddings[items[i].index] = std::move(out[i]);
    if (--job.remaining == 0) {
      if (!job.result.error.empty()) job.result.embeddings.clear();
      job.done(std::move(job.result));
    }
  }
}

void Embedder::run_encoder(const std::vector<Item>& items, std::vector<std::vector<float>>& out) {
  std::vector<std::span<const int32_t>> seqs;
  int64_t n = 0;
  for (const Item& it : items) {
    seqs.emplace_back(it.job->inputs[it.index]);
    n += static_cast<int64_t>(seqs.back().size());
  }
  const int64_t dim = dimensions();
  hidden_.resize(static_cast<size_t>(n * dim));
  model_.runner->encode(seqs, Tensor(DType::F32, {n, dim}, hidden_.data()));
  int64_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int64_t len = static_cast<int64_t>(seqs[i].size());
    out[i] = pool_hidden(hidden_.data() + row * dim, len, dim, pooling_);
    row += len;
  }
}

void Embedder::run_decoder(const std::vector<Item>& items, std::vector<std::vector<float>>& out) {
  std::vector<SequenceKv> kv(items.size());
  std::vector<BatchSequence> batch(items.size());
  struct Release {  // the step's blocks go back whatever happens
    KvManager& kv;
    std::vector<SequenceKv>& seqs;
    ~Release() {
      for (SequenceKv& s : seqs)
        if (!s.empty()) kv.release(s);
    }
  } release{*kv_, kv};
  for (size_t i = 0; i < items.size(); ++i) {
    const std::vector<int32_t>& tokens = items[i].job->inputs[items[i].index];
    CORVID_CHECK(kv_->reserve(kv[i], 0, static_cast<int64_t>(tokens.size())),
                 "the embedding step's KV pool is out of blocks");
    batch[i] = BatchSequence{tokens, 0, kv[i].tables, true};
  }
  const int64_t dim = dimensions(), rows = static_cast<int64_t>(items.size());
  hidden_.resize(static_cast<size_t>(rows * dim));
  model_.runner->forward_batch(batch, *kv_, Tensor(DType::F32, {rows, dim}, hidden_.data()), StepOutput::Hidden);
  for (size_t i = 0; i < items.size(); ++i)
    out[i] = pool_hidden(hidden_.data() + static_cast<int64_t>(i) * dim, 1, dim, pooling_);
}

}  // namespace corvid
