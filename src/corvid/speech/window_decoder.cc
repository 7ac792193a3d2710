#include "corvid/speech/window_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "corvid/core/error.h"

namespace corvid {

namespace {

constexpr float kNeg = -std::numeric_limits<float>::infinity();

void log_softmax(std::vector<float>& row) {
  const float top = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v - top));
  const float log_sum = top + static_cast<float>(std::log(sum));
  for (float& v : row) v -= log_sum;
}

// log(sum(exp(row[from..to)))) and max(row[0..from)), for the timestamp probability rule.
float log_sum_exp(const std::vector<float>& row, size_t from, size_t to) {
  float top = kNeg;
  for (size_t i = from; i < to; ++i) top = std::max(top, row[i]);
  if (top == kNeg) return kNeg;
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += std::exp(static_cast<double>(row[i] - top));
  return top + static_cast<float>(std::log(sum));
}

}  // namespace

WindowDecoder::WindowDecoder(WhisperSteps& model, const WhisperVocab& vocab) : model_(model), vocab_(vocab) {
  suppress_ = vocab.suppress;
  // Never sampled, whatever the checkpoint's list says (faster-whisper adds them too).
  for (int32_t t : {vocab.transcribe, vocab.translate, vocab.sot, vocab.sot_prev, vocab.sot_lm, vocab.no_speech})
    if (t >= 0) suppress_.push_back(t);
  std::sort(suppress_.begin(), suppress_.end());
  suppress_.erase(std::unique(suppress_.begin(), suppress_.end()), suppress_.end());
}

void WindowDecoder::log_probs(std::vector<float>& row, const std::vector<int32_t>& sampled,
                              const Rules& rules) const {
  const size_t V = row.size();
  for (int32_t t : suppress_) row[static_cast<size_t>(t)] = kNeg;
  if (sampled.empty() && rules.suppress_blank)
    for (int32_t t : vocab_.suppress_begin) row[static_cast<size_t>(t)] = kNeg;
  const size_t ts = static_cast<size_t>(vocab_.timestamp_begin);
  if (rules.timestamps) {
    row[static_cast<size_t>(vocab_.no_timestamps)] = kNeg;
    bool check_probability = false;
    if (sampled.empty()) {
      std::fill(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(ts), kNeg);
      for (size_t i = static_cast<size_t>(rules.max_initial) + 1; i < V; ++i) row[i] = kNeg;
    } else {
      const int32_t last = sampled.back();
      if (vocab_.is_timestamp(last)) {
        const int32_t before = sampled.size() >= 2 ? sampled[sampled.size() - 2] : last;
        if (vocab_.is_timestamp(before)) {
          std::fill(row.begin() + static_cast<std::ptrdiff_t>(ts), row.end(), kNeg);  // after a pair: text
        } else {
          std::fill(row.begin(), row.begin() + vocab_.eot, kNeg);  // a lone timestamp: its pair or the end
          check_probability = true;
        }
      } else {
        check_probability = true;
      }
      for (auto it = sampled.rbegin(); it != sampled.rend(); ++it)
        if (vocab_.is_timestamp(*it)) {
          std::fill(row.begin() + static_cast<std::ptrdiff_t>(ts), row.begin() + *it, kNeg);  // never back
          break;
        }
    }
    if (check_probability) {
      std::vector<float> lp = row;
      log_softmax(lp);
      const float text_best = *std::max_element(lp.begin(), lp.begin() + static_cast<std::ptrdiff_t>(ts));
      if (log_sum_exp(lp, ts, V) > text_best) std::fill(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(ts), kNeg);
    }
  }
  log_softmax(row);
}

double WindowDecoder::score(const Hypothesis& h, float length_penalty) const {
  const double length = std::max<size_t>(h.tokens.size(), 1);
  return h.sum_logprob / std::pow(length, static_cast<double>(length_penalty));
}

void WindowDecoder::step(const std::vector<Hypothesis*>& hyps, std::vector<float>& rows) {
  std::vector<WhisperSequence*> seqs;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int64_t> want;
  for (Hypothesis* h : hyps) {
    seqs.push_back(h->seq.get());
    tokens.push_back({h->tokens.back()});
    want.push_back(static_cast<int64_t>(want.size()));
  }
  model_.decode(seqs, tokens, want, rows);
}

WindowResult WindowDecoder::decode(std::shared_ptr<const EncodedAudio> audio, int64_t window, const WindowRequest& r) {
  const WhisperConfig& c = model_.config();
  const std::vector<int32_t>& prompt = r.prompt;
  const auto sot_at = std::find(prompt.begin(), prompt.end(), vocab_.sot);
  CORVID_CHECK(sot_at != prompt.end(), "whisper: the prompt has no <|startoftranscript|>");
  CORVID_CHECK(static_cast<int64_t>(prompt.size()) < c.text_positions, "whisper: a prompt of ", prompt.size(),
               " tokens leaves no room in the decoder's ", c.text_positions, " positions");
  CORVID_CHECK(r.beam_size >= 1 && r.best_of >= 1 && r.temperature >= 0 && r.patience > 0,
               "whisper: beam_size and best_of must be at least 1, temperature non-negative, patience positive");
  const int64_t hypotheses = std::max(r.beam_size, r.temperature > 0 ? r.best_of : 1);
  CORVID_CHECK(hypotheses <= model_.capacity().hypotheses, "whisper: ", hypotheses,
               " hypotheses at once (beam_size / best_of) exceed the ", model_.capacity().hypotheses,
               " this model was sized for");
  Rules rules;
  rules.timestamps = prompt.back() != vocab_.no_timestamps;
  rules.suppress_blank = r.suppress_blank;
  rules.max_initial = std::min<int32_t>(
      vocab_.timestamp_end,
      vocab_.timestamp_begin + static_cast<int32_t>(std::lround(r.max_initial_timestamp / 0.02f)));
  // CTranslate2's bound: at most half the positions, and no more than fit.
  int max_new = static_cast<int>(std::min<int64_t>(c.text_positions / 2, c.text_positions + 1 - static_cast<int64_t>(prompt.size())));
  if (r.max_new_tokens > 0) max_new = std::min(max_new, r.max_new_tokens);

  Hypothesis first;
  first.seq = model_.start(audio, window);
  const int64_t sot_row = sot_at - prompt.begin(), last_row = static_cast<int64_t>(prompt.size()) - 1;
  std::vector<int64_t> want = {sot_row};
  if (last_row != sot_row) want.push_back(last_row);
  std::vector<float> logits;
  WhisperSequence* seqs[] = {first.seq.get()};
  const std::vector<std::vector<int32_t>> prompt_step = {prompt};
  model_.decode(seqs, prompt_step, want, logits);
  const size_t V = static_cast<size_t>(c.vocab_size);
  float no_speech = 0;
  if (vocab_.no_speech >= 0) {
    std::vector<float> sot_logits(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(V));
    log_softmax(sot_logits);
    no_speech = std::exp(sot_logits[static_cast<size_t>(vocab_.no_speech)]);
  }
  std::vector<float> next(logits.end() - static_cast<std::ptrdiff_t>(V), logits.end());
  WindowResult out = r.beam_size > 1 && r.temperature == 0
                         ? beam_search(std::move(first), next, r, rules, max_new)
                         : sample(std::move(first), next, r, rules, max_new);
  out.no_speech_prob = no_speech;
  out.avg_logprob = out.sum_logprob / static_cast<double>(out.tokens.size() + 1);
  return out;
}

WindowResult WindowDecoder::sample(Hypothesis first, const std::vector<float>& first_logits, const WindowRequest& r,
                                   const Rules& rules, int max_new) {
  const size_t V = first_logits.size();
  const int n = r.temperature > 0 ? r.best_of : 1;
  std::vector<Hypothesis> hyps(static_cast<size_t>(n));
  std::vector<float> rows;
  for (int i = 0; i < n; ++i) {
    Hypothesis& h = hyps[static_cast<size_t>(i)];
    if (i == n - 1) {
      h.seq = std::move(first.seq);
    } else {
      h.seq = model_.start(first.seq->audio, first.seq->window);
      model_.copy(*first.seq, *h.seq);
    }
    rows.insert(rows.end(), first_logits.begin(), first_logits.end());
  }
  std::mt19937_64 rng(r.seed);
  std::vector<Hypothesis*> live;
  for (Hypothesis& h : hyps) live.push_back(&h);
  std::vector<double> weights(V);
  for (int t = 0; t < max_new && !live.empty(); ++t) {
    std::vector<Hypothesis*> going;
    for (size_t i = 0; i < live.size(); ++i) {
      Hypothesis& h = *live[i];
      std::vector<float> row(rows.begin() + static_cast<std::ptrdiff_t>(i * V),
                             rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
      log_probs(row, h.tokens, rules);
      int32_t token = 0;
      if (r.temperature > 0) {
        for (size_t v = 0; v < V; ++v) weights[v] = std::exp(static_cast<double>(row[v]) / r.temperature);
        std::discrete_distribution<int32_t> pick(weights.begin(), weights.end());
        token = pick(rng);
      } else {
        token = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      }
      h.sum_logprob += row[static_cast<size_t>(token)];
      if (token == vocab_.eot) {
        h.finished = true;
        continue;
      }
      h.tokens.push_back(token);
      going.push_back(&h);
    }
    live = std::move(going);
    if (!live.empty() && t + 1 < max_new) step(live, rows);
  }
  const Hypothesis* best = &hyps[0];
  for (const Hypothesis& h : hyps)
    if (score(h, r.length_penalty) > score(*best, r.length_penalty)) best = &h;
  WindowResult out;
  out.tokens = best->tokens;
  out.sum_logprob = best->sum_logprob;
  return out;
}

WindowResult WindowDecoder::beam_search(Hypothesis first, const std::vector<float>& first_logits,
                                        const WindowRequest& r, const Rules& rules, int max_new) {
  const size_t V = first_logits.size();
  const size_t beams = static_cast<size_t>(r.beam_size);
  const size_t max_finished = static_cast<size_t>(std::max(1L, std::lround(r.beam_size * r.patience)));
  std::vector<Hypothesis> live;
  live.push_back(std::move(first));
  std::vector<float> rows = first_logits;
  std::vector<Hypothesis> done;
  struct Candidate {
    double sum;
    size_t parent;
    int32_t token;
  };
  for (int t = 0; t < max_new; ++t) {
    std::vector<Candidate> candidates;
    for (size_t b = 0; b < live.size(); ++b) {
      std::vector<float> row(rows.begin() + static_cast<std::ptrdiff_t>(b * V),
                             rows.begin() + static_cast<std::ptrdiff_t>((b + 1) * V));
      log_probs(row, live[b].tokens, rules);
      // The beam's best beam_size + 1 tokens: enough to keep beam_size going past one end.
      std::vector<int32_t> order(V);
      for (size_t v = 0; v < V; ++v) order[v] = static_cast<int32_t>(v);
      const size_t k = std::min(beams + 1, V);
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                        [&](int32_t a, int32_t c) { return row[static_cast<size_t>(a)] > row[static_cast<size_t>(c)]; });
      for (size_t j = 0; j < k; ++j) {
        const float lp = row[static_cast<size_t>(order[j])];
        if (lp == kNeg) break;
        candidates.push_back({live[b].sum_logprob + lp, b, order[j]});
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& c) { return a.sum > c.sum; });
    std::vector<Candidate> keep;
    std::vector<Hypothesis> newly_done;
    for (const Candidate& cand : candidates) {
      if (cand.token == vocab_.eot) {
        Hypothesis h;
        h.tokens = live[cand.parent].tokens;
        h.sum_logprob = cand.sum;
        h.finished = true;
        newly_done.push_back(std::move(h));
      } else {
        keep.push_back(cand);
        if (keep.size() == beams) break;
      }
    }
    for (Hypothesis& h : newly_done)
      if (done.size() < max_finished) done.push_back(std::move(h));
    if (done.size() >= max_finished || keep.empty()) {
      live.clear();
      break;
    }
    // The kept candidates' caches: a parent's last child takes its cache; the others
    // take copies, made first, while every parent still holds its own.
    std::vector<Hypothesis> next(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      const Candidate& cand = keep[i];
      next[i].tokens = live[cand.parent].tokens;
      next[i].tokens.push_back(cand.token);
      next[i].sum_logprob = cand.sum;
      bool later_sibling = false;
      for (size_t j = i + 1; j < keep.size(); ++j) later_sibling |= keep[j].parent == cand.parent;
      if (!later_sibling) continue;
      const WhisperSequence& parent = *live[cand.parent].seq;
      next[i].seq = model_.start(parent.audio, parent.window);
      model_.copy(parent, *next[i].seq);  // shares the parent's blocks: no device work
    }
    for (size_t i = 0; i < keep.size(); ++i)
      if (!next[i].seq) next[i].seq = std::move(live[keep[i].parent].seq);
    live = std::move(next);  // parents no child took: their blocks go back
    if (t + 1 < max_new) {
      std::vector<Hypothesis*> ptrs;
      for (Hypothesis& h : live) ptrs.push_back(&h);
      step(ptrs, rows);
    }
  }
  // Fewer finished than wanted (the length ran out): the live beams compete too.
  for (Hypothesis& h : live)
    if (done.size() < max_finished) done.push_back(std::move(h));
  CORVID_CHECK(!done.empty(), "whisper: beam search found no hypothesis");
  const Hypothesis* best = &done[0];
  for (const Hypothesis& h : done)
    if (score(h, r.length_penalty) > score(*best, r.length_penalty)) best = &h;
  WindowResult out;
  out.tokens = best->tokens;
  out.sum_logprob = best->sum_logprob;
  return out;
}

std::vector<std::pair<std::string, float>> WindowDecoder::detect_language(std::shared_ptr<const EncodedAudio> audio,
                                                                         int64_t window) {
  CORVID_CHECK(vocab_.multilingual && !vocab_.languages.empty(), "whisper: an English-only model detects no language");
  auto seq = model_.start(std::move(audio), window);
  WhisperSequence* seqs[] = {seq.get()};
  const std::vector<std::vector<int32_t>> sot = {{vocab_.sot}};
  const int64_t row[] = {0};
  std::vector<float> logits;
  model_.decode(seqs, sot, row, logits);
  std::vector<std::pair<std::string, float>> out;
  float top = kNeg;
  for (const auto& [code, id] : vocab_.languages) top = std::max(top, logits[static_cast<size_t>(id)]);
  double sum = 0;
  for (const auto& [code, id] : vocab_.languages) sum += std::exp(static_cast<double>(logits[static_cast<size_t>(id)] - top));
  for (const auto& [code, id] : vocab_.languages)
    out.emplace_back(code, static_cast<float>(std::exp(static_cast<double>(logits[static_cast<size_t>(id)] - top)) / sum));
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace corvid
