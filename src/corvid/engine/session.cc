#include "corvid/engine/session.h"

#include <algorithm>
#include <chrono>

#include "corvid/core/error.h"
#include "corvid/ops/sampling.h"

namespace corvid {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Session::Session(Runner& runner, int64_t context_size, const KvFormat& kv_format,
                 std::span<const std::optional<KvFormat>> layer_formats, int64_t kv_quant_start)
    : runner_(runner),
      kv_(with_layer_formats(runner.model().state_spec(), layer_formats), context_size, runner.device(), kv_format,
          kv_quant_start) {
  const int64_t vocab = runner.config().vocab_size;
  if (runner.device() == Device::CPU) {
    logits_ = OwnedTensor(DType::F32, {1, vocab});
    next_logits_ = logits_.tensor;
  } else {
    device_logits_ = DeviceTensor(runner.device(), DType::F32, {1, vocab});
    next_logits_ = device_logits_.tensor;
  }
}

void Session::prefill(int64_t chunk) {
  chunk = std::max<int64_t>(1, chunk);
  while (cached_ < tokens_.size()) {
    const size_t end = std::min(tokens_.size(), cached_ + static_cast<size_t>(chunk));
    positions_.clear();
    for (size_t i = cached_; i < end; ++i) positions_.push_back(static_cast<int32_t>(i));
    std::span<const int32_t> piece(tokens_.data() + cached_, end - cached_);
    runner_.forward(piece, positions_, kv_, next_logits_, /*all_logits=*/false);
    cached_ = end;
  }
}

const Tensor& Session::score(std::span<const int32_t> new_tokens) {
  const int64_t n = static_cast<int64_t>(new_tokens.size());
  CORVID_CHECK(n > 0, "score: no tokens");
  CORVID_CHECK(static_cast<int64_t>(tokens_.size()) + n <= kv_.capacity(), "score: ", tokens_.size() + new_tokens.size(),
               " tokens exceed the context size ", kv_.capacity());
  all_logits_ = OwnedTensor(DType::F32, {n, runner_.config().vocab_size});
  prefill(/*chunk=*/kv_.capacity());  // anything pending from an earlier turn first
  positions_.clear();
  for (int64_t i = 0; i < n; ++i) positions_.push_back(static_cast<int32_t>(static_cast<int64_t>(tokens_.size()) + i));
  runner_.forward(new_tokens, positions_, kv_, all_logits_.tensor, /*all_logits=*/true);
  tokens_.insert(tokens_.end(), new_tokens.begin(), new_tokens.end());
  cached_ = tokens_.size();
  return all_logits_.tensor;
}

std::vector<int32_t> Session::continue_from(std::span<const int32_t> tokens) {
  const size_t limit = std::min(tokens.size(), tokens_.size());
  size_t common = 0;
  while (common < limit && tokens[common] == tokens_[common]) ++common;
  tokens_.resize(common);
  cached_ = std::min(cached_, common);
  return std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(common), tokens.end());
}

GenerationStats Session::generate(std::span<const int32_t> new_tokens, const GenerateOptions& options,
                                  const std::function<bool(int32_t)>& on_token) {
  CORVID_CHECK(!new_tokens.empty() || !tokens_.empty(), "generate: empty prompt");
  const int64_t needed = static_cast<int64_t>(tokens_.size() + new_tokens.size()) + options.max_new_tokens;
  CORVID_CHECK(needed <= kv_.capacity(), "the prompt (", tokens_.size() + new_tokens.size(), " tokens) plus ",
               options.max_new_tokens, " new tokens needs ", needed, " positions, more than the context size ",
               kv_.capacity());
  GenerationStats stats;
  Sampler sampler(options.sampling);
  tokens_.insert(tokens_.end(), new_tokens.begin(), new_tokens.end());
  const size_t prompt_end = tokens_.size();
  // Nothing new to feed: recompute the last position to get its logits again.
  if (cached_ == tokens_.size()) --cached_;
  stats.prompt_tokens = static_cast<int64_t>(tokens_.size() - cached_);

  auto t0 = std::chrono::steady_clock::now();
  prefill(options.prefill_chunk);
  stats.prefill_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  const int64_t vocab = runner_.config().vocab_size;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    std::span<const int32_t> prompt(tokens_.data(), prompt_end);
    std::span<const int32_t> output(tokens_.data() + prompt_end, tokens_.size() - prompt_end);
    int32_t next = 0;
    if (next_logits_.device == Device::CPU) {
      next = sampler.sample(std::span<float>(next_logits_.ptr<float>(), static_cast<size_t>(vocab)), prompt, output);
    } else {
      const ops::TokenSampling row = sampler.next(prompt, output, vocab);
      ops::sample_tokens(next_logits_, std::span<const ops::TokenSampling>(&row, 1), std::span<int32_t>(&next, 1));
    }
    ++stats.generated_tokens;
    // The token joins the sequence; its KV is computed by the next forward (now or next turn).
    tokens_.push_back(next);
    const bool keep_going = on_token(next);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end()) {
      stats.stopped_by_eos = true;
      break;
    }
    if (!keep_going || step + 1 == options.max_new_tokens) break;
    prefill(1);
  }
  stats.decode_seconds = seconds_since(t0);
  return stats;
}

}  // namespace corvid
