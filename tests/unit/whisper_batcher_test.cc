// WhisperBatcher on the tiny random Whisper (CPU): concurrent streams' encodes and
// decoder steps run merged, and each stream gets bit for bit what the model alone
// gives it; a refused call fails alone; word timing's cross-attention passes through;
// the device is given up between steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <thread>

#include "corvid/core/error.h"
#include "corvid/speech/whisper_batcher.h"
#include "whisper_greedy_step.h"
#include "whisper_tiny_fixture.h"

namespace corvid {
namespace {

using namespace std::chrono_literals;

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// A stream as a transcription drives it: encode a window, a prompt of 3 + i tokens,
// then `steps` greedy steps; odd streams fork a second hypothesis after the prompt (a
// copy sharing blocks) fed the runner-up token. Returns every logits row it got.
std::vector<float> run_stream(WhisperSteps& steps, const std::vector<float>& features, int i, int n_steps) {
  std::shared_ptr<EncodedAudio> audio = steps.encode(features, 1);
  std::vector<std::unique_ptr<WhisperSequence>> hyps;
  hyps.push_back(steps.start(audio, 0));
  std::vector<int32_t> prompt = {1, 10 + i, 20 + 3 * i};
  prompt.resize(static_cast<size_t>(3 + i), 7);
  std::vector<float> trace, logits;
  {
    WhisperSequence* first[] = {hyps[0].get()};
    const std::vector<std::vector<int32_t>> p = {prompt};
    const int64_t last[] = {static_cast<int64_t>(prompt.size()) - 1};
    steps.decode(first, p, last, logits);
  }
  trace.insert(trace.end(), logits.begin(), logits.end());
  std::vector<int32_t> next = {argmax(logits)};
  if (i % 2) {
    hyps.push_back(steps.start(audio, 0));
    steps.copy(*hyps[0], *hyps[1]);
    std::vector<float> row = logits;
    row[static_cast<size_t>(next[0])] = -INFINITY;
    next.push_back(argmax(row));
  }
  for (int s = 0; s < n_steps; ++s) fixtures::greedy_step(steps, hyps, next, trace);
  return trace;
}

TEST(WhisperBatcher, ConcurrentStreamsGetWhatTheModelAloneGives) {
  constexpr int kStreams = 4, kSteps = 12;
  fixtures::TinyWhisper tiny(WhisperCapacity{kStreams, 2, 1, {}});
  auto features = [&](int i) -> const std::vector<float>& { return i % 2 ? tiny.features_short : tiny.features; };
  std::vector<std::vector<float>> alone;
  for (int i = 0; i < kStreams; ++i) alone.push_back(run_stream(*tiny.model, features(i), i, kSteps));

  WhisperBatcherConfig config;
  config.gather = 60s;  // steps wait for every stream: the merging below is exact, not timing's
  WhisperBatcher batcher(*tiny.model, config);
  // The streams are marked before any starts, and each ends its own when done.
  std::vector<std::optional<WhisperBatcher::Stream>> marks(kStreams);
  for (auto& m : marks) m.emplace(batcher);
  std::vector<std::vector<float>> together(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i)
    threads.emplace_back([&, i] {
      together[static_cast<size_t>(i)] = run_stream(batcher, features(i), i, kSteps);
      marks[static_cast<size_t>(i)].reset();
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) EXPECT_EQ(together[static_cast<size_t>(i)], alone[static_cast<size_t>(i)]) << i;
  const WhisperBatcher::Stats stats = batcher.stats();
  EXPECT_EQ(stats.encode_calls, static_cast<uint64_t>(kStreams));
  EXPECT_EQ(stats.encode_runs, 1u) << "the four windows in one encoder pass";
  EXPECT_EQ(stats.decode_calls, static_cast<uint64_t>(kStreams * (kSteps + 1)));
  EXPECT_EQ(stats.decode_steps, static_cast<uint64_t>(kSteps + 1)) << "each round of calls as one step";
  EXPECT_EQ(tiny.model->pool().self_blocks_used(), 0);
  EXPECT_EQ(tiny.model->pool().cross_blocks_used(), 0);
}

TEST(WhisperBatcher, ARefusedCallFailsAlone) {
  fixtures::TinyWhisper tiny(WhisperCapacity{3, 1, 1, {}});
  auto audio = tiny.model->encode(tiny.features, 1);
  const std::vector<std::vector<int32_t>> good = {{1, 2, 3}}, bad = {{1, 512}};
  const int64_t last[] = {2};
  std::vector<float> want;
  {
    auto seq = tiny.model->start(audio, 0);
    WhisperSequence* one[] = {seq.get()};
    tiny.model->decode(one, good, last, want);
  }
  WhisperBatcherConfig config;
  config.gather = 60s;
  WhisperBatcher batcher(*tiny.model, config);
  std::vector<std::optional<WhisperBatcher::Stream>> marks(3);
  for (auto& m : marks) m.emplace(batcher);
  std::vector<std::vector<float>> got(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      auto seq = batcher.start(audio, 0);
      WhisperSequence* one[] = {seq.get()};
      const int64_t second[] = {1};
      try {
        if (i == 1) batcher.decode(one, bad, second, got[i]);
        else batcher.decode(one, good, last, got[i]);
      } catch (const Error& e) {
        errors[i] = e.what();
      }
      marks[i].reset();
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[2], want);
  EXPECT_NE(errors[1].find("outside the vocabulary"), std::string::npos) << errors[1];
  EXPECT_TRUE(errors[0].empty() && errors[2].empty());
  EXPECT_EQ(batcher.stats().decode_steps, 1u) << "the two good calls still ran together";
}

TEST(WhisperBatcher, CrossAttentionPassesThrough) {
  fixtures::TinyWhisper tiny(WhisperCapacity{1, 1, 1, {}});
  auto audio = tiny.model->encode(tiny.features, 1);
  const std::vector<int32_t> tokens = {1, 40, 41, 42, 43};
  const std::pair<int, int> heads[] = {{0, 1}, {1, 3}};
  std::vector<float> want_logits, got_logits;
  const std::vector<float> want = tiny.model->cross_attention(audio, 0, tokens, heads, 700, want_logits);
  WhisperBatcher batcher(*tiny.model);
  const std::vector<float> got = batcher.cross_attention(audio, 0, tokens, heads, 700, got_logits);
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_logits, want_logits);
}

// The front end through the batcher is the model's, which is LogMel's on the CPU.
TEST(WhisperBatcher, SpectrogramIsTheModels) {
  fixtures::TinyWhisper tiny(WhisperCapacity{1, 1, 1, {}});
  std::vector<float> samples(40000);
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = 0.3f * std::sin(0.05f * static_cast<float>(i));
  int64_t want_frames = 0, got_frames = 0;
  const std::vector<float> want =
      audio::LogMel(static_cast<int>(tiny.model->config().n_mels)).spectrogram(samples, 160, &want_frames);
  WhisperBatcher batcher(*tiny.model);
  EXPECT_EQ(batcher.spectrogram(samples, 160, &got_frames), want);
  EXPECT_EQ(got_frames, want_frames);
  EXPECT_EQ(got_frames, 251);
}

TEST(WhisperBatcher, GivesTheDeviceUpBetweenSteps) {
  // Another model's steps (this thread) get turns while a stream decodes.
  fixtures::TinyWhisper tiny(WhisperCapacity{1, 1, 1, {}});
  DeviceTurns turns;
  WhisperBatcherConfig config;
  config.device_turns = &turns;
  WhisperBatcher batcher(*tiny.model, config);
  auto done = std::async(std::launch::async, [&] {
    const WhisperBatcher::Stream stream(batcher);
    return run_stream(batcher, tiny.features, 0, 200).size();
  });
  int steps = 0;
  while (done.wait_for(0ms) != std::future_status::ready) {
    const DeviceTurns::Turn turn(&turns);
    ++steps;
  }
  EXPECT_EQ(done.get(), 201u * 512u);
  EXPECT_GT(steps, 50);  // about one per decoder step, not one for the whole stream
}

}  // namespace
}  // namespace corvid
