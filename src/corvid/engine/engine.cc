#include "corvid/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <optional>

#include "corvid/core/error.h"
#include "corvid/engine/stop_tokens.h"

namespace corvid {

namespace {

// Prompt ids fed to the detokenizer as context, so the first generated word decodes
// as a continuation (a SentencePiece decoder strips the leading space of a text's start).
constexpr size_t kDetokenizerContext = 4;
constexpr int kMaxTopLogprobs = 20;

// The longest suffix of `text` that is the beginning of some stop string (and so may
// still become one): that much text must be held back.
size_t stop_prefix_suffix(const std::string& text, const std::vector<std::string>& stops) {
  size_t keep = 0;
  for (const std::string& stop : stops) {
    for (size_t k = std::min(stop.size() - 1, text.size()); k > keep; --k) {
      if (text.compare(text.size() - k, k, stop, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  return keep;
}

}  // namespace

struct Engine::Active {
  Active(GenerationRequest req, const Tokenizer* tokenizer)
      : request(std::move(req)), sampler(request.sampling) {
    if (tokenizer) {
      detokenizer.emplace(*tokenizer, request.skip_special_tokens);
      const size_t context = std::min(kDetokenizerContext, request.prompt.size());
      detokenizer->prime(std::span<const int32_t>(request.prompt.data() + request.prompt.size() - context, context));
    }
    seq.prompt_len = static_cast<int64_t>(request.prompt.size());
    seq.tokens = request.prompt;
    if (!request.on_event) queue = std::make_shared<EventQueue>();
  }

  int64_t id = 0;
  GenerationRequest request;
  Sampler sampler;
  Sequence seq;
  std::optional<StreamingDetokenizer> detokenizer;
  std::string held;  // decoded text not yet returned: it may be the start of a stop string
  std::vector<int32_t> stop_ids;
  std::shared_ptr<EventQueue> queue;
  std::deque<int32_t> forced;  // force_tokens(): the next tokens, instead of sampled ones
  std::optional<FormatMatcher> format;  // the request's format, once it is enforced
  int64_t generated = 0;
  bool done = false;
};

Engine::Engine(Runner& runner, const Tokenizer* tokenizer, const EngineConfig& config)
    : runner_(runner),
      tokenizer_(tokenizer),
      config_(config),
      format_masks_(runner.config().vocab_size, config.format_mask_threads) {
  const ModelConfig& mc = runner.config();
  const std::vector<LayerState> spec = with_layer_formats(runner.model().state_spec(), config.kv_layer_formats);
  CORVID_CHECK(config.block_size > 0, "engine: block_size must be positive, got ", config.block_size);
  CORVID_CHECK(config.max_waiting > 0, "engine: max_waiting must be positive, got ", config.max_waiting);
  config.scheduler.validate();
  KvManagerConfig kv;
  kv.block_size = config.block_size;
  kv.budget_bytes = config.kv_cache_bytes;
  kv.num_blocks = config.num_blocks;
  kv.device = runner.device();
  kv.format = config.kv_format;
  kv.quant_start = config.kv_quant_start;
  kv.head_dtype = config.kv_head_dtype;
  kv.prefix_caching = config.enable_prefix_caching;
  kv.max_seqs = config.scheduler.max_num_seqs;
  kv.max_chunk = config.scheduler.max_num_batched_tokens;
  kv_ = std::make_unique<KvManager>(spec, kv);
  scheduler_ = std::make_unique<Scheduler>(*kv_, config.scheduler);
  max_model_len_ = config.max_model_len > 0 ? config.max_model_len : mc.max_position_embeddings;
  if (max_model_len_ <= 0) max_model_len_ = kv_->max_positions_per_sequence();
  eos_ids_ = stop_token_ids(tokenizer, mc);
  stats_.blocks_total = kv_->blocks_total();
  stats_.kv_groups = kv_->group_stats();
  thread_ = std::thread(&Engine::loop, this);
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::validate(const GenerationRequest& r) const {
  using Reason = RequestRejected::Reason;
  const int64_t vocab = runner_.config().vocab_size;
  auto invalid = [](auto&&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    throw RequestRejected(Reason::Invalid, out.str());
  };
  if (r.prompt.empty()) invalid("the prompt is empty");
  for (int32_t id : r.prompt)
    if (id < 0 || id >= vocab) invalid("prompt token id ", id, " is outside the vocabulary (", vocab, " tokens)");
  for (int32_t id : r.stop_token_ids)
    if (id < 0 || id >= vocab) invalid("stop token id ", id, " is outside the vocabulary (", vocab, " tokens)");
  if (r.max_tokens < 1) invalid("max_tokens must be at least 1, got ", r.max_tokens);
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs)
    invalid("top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", r.top_logprobs);
  for (const std::string& s : r.stop)
    if (s.empty()) invalid("stop strings must not be empty");
  if (!r.stop.empty() && !tokenizer_) invalid("stop strings need a tokenizer");
  try {
    r.sampling.validate();
  } catch (const Error& e) {
    invalid(e.what());
  }
  const int64_t prompt = static_cast<int64_t>(r.prompt.size()), total = prompt + r.max_tokens;
  if (total > max_model_len_) {
    throw RequestRejected(Reason::TooLong, "this request needs " + std::to_string(total) + " tokens (" +
                                               std::to_string(prompt) + " in the prompt + " +
                                               std::to_string(r.max_tokens) + " max_tokens), more than the model's " +
                                               "maximum context length of " + std::to_string(max_model_len_) +
                                               " tokens (max_model_len)");
  }
  const int64_t capacity = kv_->max_positions_per_sequence();
  if (total > capacity) {
    throw RequestRejected(Reason::TooLong, "this request needs " + std::to_string(total) + " tokens (" +
                                               std::to_string(prompt) + " in the prompt + " +
                                               std::to_string(r.max_tokens) + " max_tokens) of KV cache, more than " +
                                               "the " + std::to_string(capacity) +
                                               " tokens the KV cache holds (raise --kv-cache-gb)");
  }
}

RequestHandle Engine::submit(GenerationRequest request) {
  validate(request);
  std::unique_ptr<Active> active;
  try {
    active = std::make_unique<Active>(std::move(request), tokenizer_);
  } catch (const Error& e) {
    throw RequestRejected(RequestRejected::Reason::Invalid, e.what());
  }
  active->stop_ids = active->request.stop_token_ids;
  if (!active->request.ignore_eos) active->stop_ids.insert(active->stop_ids.end(), eos_ids_.begin(), eos_ids_.end());
  if (active->request.format && active->request.format_after.empty())
    active->format.emplace(active->request.format, active->stop_ids);
  std::shared_ptr<EventQueue> queue = active->queue;
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw RequestRejected(RequestRejected::Reason::Unavailable, "the engine is shutting down");
    const int64_t queued = static_cast<int64_t>(inbox_.size()) + stats_.waiting;
    if (queued >= config_.max_waiting) {
      throw RequestRejected(RequestRejected::Reason::QueueFull,
                            "the waiting queue is full (" + std::to_string(config_.max_waiting) +
                                " requests); try again later");
    }
    id = next_id_++;
    active->id = id;
    active->seq.id = id;
    inbox_.push_back(std::move(active));
  }
  wake_.notify_all();
  return RequestHandle(id, std::move(queue));
}

void Engine::cancel(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancels_.push_back(request_id);
  }
  wake_.notify_all();
}

void Engine::force_tokens(int64_t request_id, std::vector<int32_t> tokens) {
  const int64_t vocab = runner_.config().vocab_size;
  for (int32_t id : tokens) CORVID_CHECK(id >= 0 && id < vocab, "forced token id ", id, " is outside the vocabulary");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    forces_.emplace_back(request_id, std::move(tokens));
  }
  wake_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats s = stats_;
  s.waiting += static_cast<int64_t>(inbox_.size());
  return s;
}

void Engine::publish_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.running = scheduler_->num_running();
  stats_.waiting = scheduler_->num_waiting();
  stats_.blocks_used = kv_->blocks_used();
  stats_.blocks_cached = kv_->blocks_cached();
  stats_.kv_groups = kv_->group_stats();
  stats_.prefix_cache_queries = kv_->query_tokens();
  stats_.prefix_cache_hits = kv_->hit_tokens();
  stats_.prompt_tokens = prompt_tokens_;
  stats_.generation_tokens = generation_tokens_;
  stats_.requests_finished = finished_;
  stats_.preemptions = scheduler_->num_preemptions();
  stats_.steps = steps_;
}

void Engine::emit(Active& active, RequestEvent event) {
  event.request_id = active.id;
  if (active.queue) {
    active.queue->push(std::move(event));
    return;
  }
  try {
    active.request.on_event(event);
  } catch (...) {
    // A failing callback must not take the engine down; the request is dropped.
    active.request.on_event = [](const RequestEvent&) {};
    if (!active.done) {
      std::lock_guard<std::mutex> lock(mutex_);
      cancels_.push_back(active.id);
    }
  }
}

void Engine::finish(Active& active, FinishReason reason, RequestEvent event, const std::string& error) {
  if (active.done) return;
  active.done = true;
  event.finish = reason;
  event.error = error;
  event.prompt_tokens = active.seq.prompt_len;
  event.completion_tokens = active.generated;
  event.cached_tokens = std::max<int64_t>(0, active.seq.cached_tokens);
  scheduler_->remove(&active.seq);
  ++finished_;
  publish_stats();  // a client that sees the end sees its blocks released
  emit(active, std::move(event));
}

void Engine::admit_new_requests() {
  std::vector<std::unique_ptr<Active>> arrived;
  std::vector<int64_t> cancelled;
  std::vector<std::pair<int64_t, std::vector<int32_t>>> forced;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    arrived.swap(inbox_);
    cancelled.swap(cancels_);
    forced.swap(forces_);
    stats_.waiting += static_cast<int64_t>(arrived.size());  // keeps submit's queue bound exact until published
  }
  for (auto& active : arrived) {
    prompt_tokens_ += active->seq.prompt_len;
    scheduler_->add(&active->seq);
    const int64_t id = active->id;
    active_.emplace(id, std::move(active));
  }
  for (auto& [id, tokens] : forced) {
    auto it = active_.find(id);
    if (it != active_.end()) it->second->forced.insert(it->second->forced.end(), tokens.begin(), tokens.end());
  }
  for (int64_t id : cancelled) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    finish(*it->second, FinishReason::Cancelled, RequestEvent{});
    active_.erase(it);
  }
}

void Engine::loop() {
  while (true) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || !active_.empty(); });
      stopping = stopping_;
    }
    admit_new_requests();
    if (stopping) {
      for (auto& [id, active] : active_) finish(*active, FinishReason::Cancelled, RequestEvent{});
      active_.clear();
      publish_stats();
      return;
    }
    if (active_.empty()) {
      publish_stats();
      continue;
    }
    const StepPlan plan = scheduler_->schedule();
    publish_stats();
    if (plan.empty()) {
      // Cannot happen with admission's limits (a lone request always fits); fail loudly, never spin.
      for (auto& [id, active] : active_) {
        finish(*active, FinishReason::Error, RequestEvent{}, "internal error: the scheduler found nothing to run");
      }
      active_.clear();
    } else {
      const DeviceTurns::Turn turn(config_.device_turns);
      run_step(plan);
      ++steps_;
    }
    publish_stats();
  }
}

void Engine::run_step(const StepPlan& plan) {
  const int64_t vocab = runner_.config().vocab_size;
  batch_.clear();
  int64_t n_out = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    batch_.push_back({std::span<const int32_t>(c.seq->tokens.data() + c.start, static_cast<size_t>(c.n)),
                      static_cast<int32_t>(c.start), c.seq->kv.tables, c.sample});
    n_out += c.sample;
  }
  sampling_rows_.clear();
  row_formats_.clear();
  for (const ScheduledChunk& c : plan.chunks)
    if (c.sample) {
      Active* active = active_.at(c.seq->id).get();
      sampling_rows_.push_back(active);
      row_formats_.push_back(active->format ? &*active->format : nullptr);
    }
  // Token masks of the rows that follow a format are made while the model runs.
  format_masks_.start(row_formats_);
  // On a GPU the logits stay there: the device samples and only token ids come back.
  const bool device_sampling = runner_.device() != Device::CPU;
  Tensor logits;
  try {
    logits = device_sampling ? device_logits(n_out) : host_logits(n_out);
    runner_.forward_batch(batch_, *kv_, logits);
    format_masks_.apply(logits);
  } catch (const std::exception& e) {
    // The step failed as a whole: every sequence in it ends with the error.
    format_masks_.cancel();
    for (const ScheduledChunk& c : plan.chunks) {
      auto it = active_.find(c.seq->id);
      finish(*it->second, FinishReason::Error, RequestEvent{}, e.what());
      active_.erase(it);
    }
    return;
  }
  scheduler_->commit(plan);
  if (device_sampling) {
    sample_on_device(logits);
  } else {
    for (size_t row = 0; row < sampling_rows_.size(); ++row) {
      Active& active = *sampling_rows_[row];
      try {
        const float* raw = nullptr;
        const int32_t token = sample_on_host(active, logits_.data() + static_cast<int64_t>(row) * vocab, raw);
        on_token(active, token, raw);
      } catch (const std::exception& e) {
        finish(active, FinishReason::Error, RequestEvent{}, e.what());
      }
    }
  }
  for (const ScheduledChunk& c : plan.chunks) {
    auto it = active_.find(c.seq->id);
    if (it != active_.end() && it->second->done) active_.erase(it);
  }
}

Tensor Engine::host_logits(int64_t rows) {
  const int64_t vocab = runner_.config().vocab_size;
  logits_.resize(static_cast<size_t>(rows * vocab));
  return Tensor(DType::F32, {rows, vocab}, logits_.data(), Device::CPU);
}

Tensor Engine::device_logits(int64_t rows) {
  const int64_t vocab = runner_.config().vocab_size;
  if (device_logits_.tensor.rows() < rows || !device_logits_.buffer.data()) {
    // Grown in steps of 64 rows, so a growing batch reallocates rarely (and a step
    // without logits, all prefill chunks, allocates nothing each time).
    device_logits_ = DeviceTensor(runner_.device(), DType::F32, {std::max<int64_t>(64, (rows + 63) / 64 * 64), vocab});
  }
  Tensor t = device_logits_.tensor;
  t.shape[0] = rows;
  return t;
}

int32_t Engine::sample_on_host(Active& active, float* logits, const float*& raw_logits) {
  const GenerationRequest& r = active.request;
  const int64_t vocab = runner_.config().vocab_size;
  raw_logits = nullptr;
  if (r.logprobs || r.top_logprobs > 0) {  // the sampler rewrites logits
    logprob_scratch_.assign(logits, logits + vocab);
    raw_logits = logprob_scratch_.data();
  }
  const Sequence& seq = active.seq;
  const std::span<const int32_t> prompt(seq.tokens.data(), static_cast<size_t>(seq.prompt_len));
  const std::span<const int32_t> output(seq.tokens.data() + seq.prompt_len, seq.tokens.size() - prompt.size());
  return active.sampler.sample(std::span<float>(logits, static_cast<size_t>(vocab)), prompt, output);
}

void Engine::sample_on_device(const Tensor& logits) {
  const int64_t vocab = runner_.config().vocab_size;
  const size_t rows = sampling_rows_.size();
  row_params_.clear();
  for (Active* active : sampling_rows_) {
    const Sequence& seq = active->seq;
    const std::span<const int32_t> prompt(seq.tokens.data(), static_cast<size_t>(seq.prompt_len));
    const std::span<const int32_t> output(seq.tokens.data() + seq.prompt_len, seq.tokens.size() - prompt.size());
    row_params_.push_back(active->sampler.next(prompt, output, vocab));
  }
  sampled_.assign(rows, 0);
  try {
    ops::sample_tokens(logits, row_params_, sampled_);
  } catch (const std::exception&) {
    // One launch samples every row; when it fails (a row of NaN logits), each row is
    // sampled alone so that only the requests at fault end with the error.
    for (size_t row = 0; row < rows; ++row) {
      const Tensor one(DType::F32, {1, vocab}, logits.row<float>(static_cast<int64_t>(row)), logits.device);
      try {
        ops::sample_tokens(one, std::span<const ops::TokenSampling>(&row_params_[row], 1),
                           std::span<int32_t>(&sampled_[row], 1));
      } catch (const std::exception& e) {
        finish(*sampling_rows_[row], FinishReason::Error, RequestEvent{}, e.what());
      }
    }
  }
  for (size_t row = 0; row < rows; ++row) {
    Active& active = *sampling_rows_[row];
    if (active.done) continue;
    try {
      const GenerationRequest& r = active.request;
      const float* raw = nullptr;
      if (r.logprobs || r.top_logprobs > 0) {  // only these rows cross to the host
        logprob_scratch_.resize(static_cast<size_t>(vocab));
        copy_bytes(logprob_scratch_.data(), Device::CPU, logits.row<float>(static_cast<int64_t>(row)), logits.device,
                   static_cast<size_t>(vocab) * sizeof(float));
        raw = logprob_scratch_.data();
      }
      on_token(active, sampled_[row], raw);
    } catch (const std::exception& e) {
      finish(active, FinishReason::Error, RequestEvent{}, e.what());
    }
  }
}

void Engine::on_token(Active& active, int32_t sampled, const float* raw_logits) {
  const GenerationRequest& r = active.request;
  const int64_t vocab = runner_.config().vocab_size;
  int32_t token = sampled;
  if (!active.forced.empty()) {
    token = active.forced.front();
    active.forced.pop_front();
  }
  Sequence& seq = active.seq;
  seq.tokens.push_back(token);
  ++active.generated;
  ++generation_tokens_;
  const bool format_done = follow_format(active, token);

  RequestEvent event;
  event.token_ids.push_back(token);
  if (raw_logits) {
    const std::span<const float> raw(raw_logits, static_cast<size_t>(vocab));
    const float max_logit = *std::max_element(raw.begin(), raw.end());
    double sum = 0;
    for (float l : raw) sum += std::exp(static_cast<double>(l) - max_logit);
    const float log_total = max_logit + static_cast<float>(std::log(sum));
    event.logprobs.push_back(raw[static_cast<size_t>(token)] - log_total);
    if (r.top_logprobs > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(vocab));
      std::iota(ids.begin(), ids.end(), 0);
      const auto k = static_cast<std::ptrdiff_t>(std::min<int64_t>(r.top_logprobs, vocab));
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return raw[static_cast<size_t>(a)] > raw[static_cast<size_t>(b)] ||
               (raw[static_cast<size_t>(a)] == raw[static_cast<size_t>(b)] && a < b);
      });
      std::vector<TokenLogprob> top;
      for (std::ptrdiff_t i = 0; i < k; ++i) {
        const float l = raw[static_cast<size_t>(ids[static_cast<size_t>(i)])];
        if (std::isinf(l)) break;  // a token the request's format forbids (and every one after it)
        top.push_back({ids[static_cast<size_t>(i)], l - log_total});
      }
      event.top_logprobs.push_back(std::move(top));
    }
  }

  auto flush_text = [&] {
    std::string text = std::move(active.held);
    active.held.clear();
    if (active.detokenizer) text += active.detokenizer->flush();
    return text;
  };
  if (std::find(active.stop_ids.begin(), active.stop_ids.end(), token) != active.stop_ids.end()) {
    event.text = flush_text();  // the stop token itself adds no text
    finish(active, FinishReason::Stop, std::move(event));
    return;
  }
  if (active.detokenizer) active.held += active.detokenizer->push(token);
  if (format_done) {  // complete, and nothing may follow (no stop token to end it)
    event.text = flush_text();
    finish(active, FinishReason::Stop, std::move(event));
    return;
  }
  size_t stop_at = std::string::npos;
  const std::string* matched = nullptr;
  for (const std::string& s : r.stop) {
    const size_t at = active.held.find(s);
    if (at < stop_at) stop_at = at, matched = &s;
  }
  if (stop_at != std::string::npos) {
    event.text = active.held.substr(0, stop_at);  // the stop string and anything after it are dropped
    event.stop_string = *matched;
    active.held.clear();
    finish(active, FinishReason::Stop, std::move(event));
    return;
  }
  if (active.generated >= r.max_tokens) {
    event.text = flush_text();
    finish(active, FinishReason::Length, std::move(event));
    return;
  }
  const size_t keep = stop_prefix_suffix(active.held, r.stop);
  event.text = active.held.substr(0, active.held.size() - keep);
  active.held.erase(0, active.held.size() - keep);
  emit(active, std::move(event));
}

bool Engine::follow_format(Active& active, int32_t token) {
  const GenerationRequest& r = active.request;
  if (!r.format) return false;
  if (!active.format) {
    // Not enforced yet: it starts once the output ends with format_after.
    const std::vector<int32_t>& tokens = active.seq.tokens;
    const size_t after = r.format_after.size(), out = tokens.size() - static_cast<size_t>(active.seq.prompt_len);
    if (out >= after && std::equal(r.format_after.begin(), r.format_after.end(), tokens.end() - static_cast<std::ptrdiff_t>(after)))
      active.format.emplace(r.format, active.stop_ids);
    return false;
  }
  // A token the mask forbade can only be a forced one (a reasoning budget's close).
  if (!active.format->accept(token)) fail("token ", token, " breaks the requested output format");
  return active.format->complete() && active.stop_ids.empty();
}

}  // namespace corvid
