// Decoding one 30-s window as CTranslate2's Whisper generate() does it (what
// faster-whisper runs): the prompt, then tokens until <|endoftext|>, greedy, beam search
// or temperature sampling, under Whisper's logit rules in this order:
// 1. suppress: the checkpoint's non-speech tokens and the task/start specials, every step;
// 2. suppress at the first sampled token: " " and <|endoftext|> (suppress_blank);
// 3. timestamp rules (when the prompt does not end in <|notimestamps|>): never
//    <|notimestamps|>; the first token is a timestamp no later than
//    max_initial_timestamp; timestamps come in pairs (text after a pair, a timestamp or
//    <|endoftext|> after a lone one); they never go back; and when the timestamps'
//    total probability beats every text token, a timestamp it is.
// The no-speech probability is the softmax of the raw logits at <|startoftranscript|>.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "corvid/models/whisper/whisper_model.h"
#include "corvid/models/whisper/whisper_steps.h"
#include "corvid/speech/whisper_vocab.h"

namespace corvid {

struct WindowRequest {
  std::vector<int32_t> prompt;  // [<|startofprev|> previous text...] sot [language task] [notimestamps]
  int beam_size = 1;            // > 1: beam search (temperature must be 0)
  float patience = 1.0f;        // beam search ends after round(beam_size * patience) finished hypotheses
  float length_penalty = 1.0f;  // ranking: sum of log-probabilities / length^penalty
  float temperature = 0.0f;     // > 0: sampling, best of `best_of`
  int best_of = 5;
  float max_initial_timestamp = 1.0f;  // seconds
  bool suppress_blank = true;
  int max_new_tokens = 0;  // 0: as many as fit (at most half the decoder's positions)
  uint64_t seed = 0;       // sampling
};

struct WindowResult {
  std::vector<int32_t> tokens;  // sampled tokens, without <|endoftext|>
  double sum_logprob = 0;       // over the tokens and the <|endoftext|> that ended them
  double avg_logprob = 0;       // sum_logprob / (tokens + 1), faster-whisper's measure
  float no_speech_prob = 0;
};

class WindowDecoder {
 public:
  WindowDecoder(WhisperSteps& model, const WhisperVocab& vocab);

  WindowResult decode(std::shared_ptr<const EncodedAudio> audio, int64_t window, const WindowRequest& request);
  // Language probabilities of a window (multilingual models): the softmax over the
  // language tokens of the logits after <|startoftranscript|>, best first.
  std::vector<std::pair<std::string, float>> detect_language(std::shared_ptr<const EncodedAudio> audio,
                                                            int64_t window);

 private:
  struct Hypothesis {
    std::unique_ptr<WhisperSequence> seq;
    std::vector<int32_t> tokens;
    double sum_logprob = 0;
    bool finished = false;
  };
  // What the logit rules of one request depend on.
  struct Rules {
    bool timestamps = false;
    bool suppress_blank = true;
    int32_t max_initial = 0;  // the latest first timestamp
  };
  // Rules 1-3 on one hypothesis' logits, then log-softmax in place.
  void log_probs(std::vector<float>& row, const std::vector<int32_t>& sampled, const Rules& rules) const;
  WindowResult sample(Hypothesis first, const std::vector<float>& first_logits, const WindowRequest& r,
                      const Rules& rules, int max_new);
  WindowResult beam_search(Hypothesis first, const std::vector<float>& first_logits, const WindowRequest& r,
                           const Rules& rules, int max_new);
  // Feeds each hypothesis its last token; their logits into `rows` [hyps, vocab].
  void step(const std::vector<Hypothesis*>& hyps, std::vector<float>& rows);
  double score(const Hypothesis& h, float length_penalty) const;

  WhisperSteps& model_;
  const WhisperVocab& vocab_;
  std::vector<int32_t> suppress_;  // rule 1, sorted
};

}  // namespace corvid
