// SpeechService with a fake transcriber: jobs start in arrival order, one at a time on
// one stream and side by side on several, the queue's bound refuses with 429's reason,
// a cancelled job stops (queued or running) and still reports once, shutdown finishes
// the queue, and many submitting threads all get their answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/engine/request.h"
#include "corvid/speech/speech_service.h"

namespace corvid {
namespace {

using namespace std::chrono_literals;

// A job whose "audio" is its number (samples.size()), transcribed to that many segments.
SpeechJob job(size_t n) {
  SpeechJob j;
  j.audio.samples.assign(n, 0.0f);
  j.audio.sample_rate = audio::kWhisperSampleRate;
  return j;
}

// Reports `windows` windows (one segment each), each after `pause`; gate, when set,
// holds the first window until it opens.
struct Fake {
  std::chrono::milliseconds pause{0};
  std::shared_future<void> gate;
  std::mutex mutex;
  std::vector<size_t> order;  // jobs in the order they started
  std::vector<int> workers;   // the worker each ran on
  size_t started() {
    std::lock_guard<std::mutex> lock(mutex);
    return order.size();
  }

  SpeechService::Transcribe fn() {
    return [this](int worker, const SpeechJob& j, const Transcriber::SegmentCallback& on_segment,
                  const Transcriber::ProgressCallback& progress) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        order.push_back(j.audio.samples.size());
        workers.push_back(worker);
      }
      if (gate.valid()) gate.wait();
      Transcript t;
      for (size_t w = 0; w < j.audio.samples.size(); ++w) {
        std::this_thread::sleep_for(pause);
        TranscriptSegment s;
        s.id = static_cast<int>(w + 1);
        s.text = " w" + std::to_string(w);
        t.segments.push_back(s);
        on_segment(s);
        progress(static_cast<double>(w + 1), static_cast<double>(j.audio.samples.size()));
      }
      return t;
    };
  }
};

struct Outcome {
  std::promise<std::string> promise;  // the text, or "error: ..."
  std::atomic<int> reports{0}, segments{0};
  SpeechCallbacks callbacks() {
    return SpeechCallbacks{[this](const TranscriptSegment&) { ++segments; },
                           [this](Transcript t) {
                             ++reports;
                             promise.set_value(t.text());
                           },
                           [this](const std::string& e) {
                             ++reports;
                             promise.set_value("error: " + e);
                           }};
  }
};

// Why submit() refused a one-window job (nullopt: it took it).
std::optional<RequestRejected::Reason> refusal(SpeechService& service, Outcome& outcome) {
  try {
    service.submit(job(1), outcome.callbacks());
  } catch (const RequestRejected& e) {
    return e.reason();
  }
  return std::nullopt;
}

TEST(SpeechService, RunsJobsInArrivalOrder) {
  Fake fake;
  std::promise<void> open;
  fake.gate = open.get_future().share();
  SpeechService service(fake.fn());
  std::vector<Outcome> outcomes(4);
  for (size_t i = 0; i < outcomes.size(); ++i) service.submit(job(i + 1), outcomes[i].callbacks());
  open.set_value();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    std::string expected;
    for (size_t w = 0; w <= i; ++w) expected += (w ? " w" : "w") + std::to_string(w);
    EXPECT_EQ(outcomes[i].promise.get_future().get(), expected);
    EXPECT_EQ(outcomes[i].segments.load(), static_cast<int>(i + 1));
  }
  EXPECT_EQ(fake.order, (std::vector<size_t>{1, 2, 3, 4}));
}

TEST(SpeechService, FullQueueRefusesWithQueueFull) {
  Fake fake;
  std::promise<void> open;
  fake.gate = open.get_future().share();
  SpeechServiceConfig config;
  config.max_waiting = 2;
  SpeechService service(fake.fn(), config);
  std::vector<Outcome> outcomes(3);
  service.submit(job(1), outcomes[0].callbacks());
  while (true) {  // the first job runs (and waits at the gate): the queue is empty again
    std::this_thread::sleep_for(1ms);
    std::lock_guard<std::mutex> lock(fake.mutex);
    if (!fake.order.empty()) break;
  }
  service.submit(job(1), outcomes[1].callbacks());
  service.submit(job(1), outcomes[2].callbacks());
  EXPECT_EQ(service.waiting(), 2u);
  Outcome refused;
  EXPECT_EQ(refusal(service, refused), RequestRejected::Reason::QueueFull) << "a full queue took a job";
  open.set_value();
  for (Outcome& o : outcomes) EXPECT_EQ(o.promise.get_future().get(), "w0");
  EXPECT_EQ(refused.reports.load(), 0);
}

TEST(SpeechService, CancelStopsQueuedAndRunningJobs) {
  Fake fake;
  fake.pause = 20ms;
  SpeechService service(fake.fn());
  Outcome running, queued, after;
  const uint64_t a = service.submit(job(1000), running.callbacks());  // 20 s unless cancelled
  const uint64_t b = service.submit(job(5), queued.callbacks());
  service.submit(job(1), after.callbacks());
  service.cancel(b);
  std::this_thread::sleep_for(50ms);
  service.cancel(a);
  service.cancel(12345);  // unknown: ignored
  auto f = running.promise.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_NE(f.get().find("cancelled"), std::string::npos);
  EXPECT_NE(queued.promise.get_future().get().find("cancelled"), std::string::npos);
  EXPECT_EQ(queued.segments.load(), 0);
  EXPECT_EQ(after.promise.get_future().get(), "w0");
  EXPECT_EQ(running.reports.load(), 1);
  EXPECT_EQ(queued.reports.load(), 1);
  EXPECT_EQ(fake.order, (std::vector<size_t>{1000, 1}));  // the cancelled queued job never started
}

TEST(SpeechService, FailuresAndThrowingCallbacksKeepTheWorker) {
  SpeechService service([](int, const SpeechJob& j, const Transcriber::SegmentCallback& on_segment,
                           const Transcriber::ProgressCallback&) -> Transcript {
    if (j.audio.samples.size() == 2) throw Error("whisper: bad window");
    on_segment(TranscriptSegment{});
    return Transcript{};
  });
  Outcome failing, fine;
  service.submit(job(2), failing.callbacks());
  SpeechCallbacks rude;
  rude.segment = [](const TranscriptSegment&) { throw std::runtime_error("a requester's bug"); };
  rude.failed = [](const std::string&) { throw std::runtime_error("again"); };
  service.submit(job(1), rude);
  service.submit(job(1), fine.callbacks());
  EXPECT_EQ(failing.promise.get_future().get(), "error: whisper: bad window");
  EXPECT_EQ(fine.promise.get_future().get(), "");
}

TEST(SpeechService, ShutdownFinishesTheQueueThenRefuses) {
  Fake fake;
  fake.pause = 5ms;
  SpeechService service(fake.fn());
  std::vector<Outcome> outcomes(3);
  for (Outcome& o : outcomes) service.submit(job(2), o.callbacks());
  service.shutdown();
  for (Outcome& o : outcomes) EXPECT_EQ(o.promise.get_future().get(), "w0 w1");
  Outcome late;
  EXPECT_EQ(refusal(service, late), RequestRejected::Reason::Unavailable) << "a stopped service took a job";
}

TEST(SpeechService, ConcurrentSubmittersAllComplete) {
  Fake fake;
  SpeechServiceConfig config;
  config.max_waiting = 64;
  SpeechService service(fake.fn(), config);
  constexpr int kThreads = 8;
  std::vector<Outcome> outcomes(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { service.submit(job(3), outcomes[static_cast<size_t>(i)].callbacks()); });
  for (std::thread& t : threads) t.join();
  for (Outcome& o : outcomes) EXPECT_EQ(o.promise.get_future().get(), "w0 w1 w2");
}

TEST(SpeechService, StreamsRunJobsSideBySide) {
  // Three streams: the first three jobs all start while the gate holds them; the
  // fourth waits for a free worker.
  Fake fake;
  std::promise<void> open;
  fake.gate = open.get_future().share();
  SpeechServiceConfig config;
  config.streams = 3;
  SpeechService service(fake.fn(), config);
  std::vector<Outcome> outcomes(4);
  for (size_t i = 0; i < outcomes.size(); ++i) service.submit(job(i + 1), outcomes[i].callbacks());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (fake.started() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(fake.started(), 3u) << "three streams run three jobs at once, and no more";
  EXPECT_EQ(service.waiting(), 1u);
  open.set_value();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    std::string expected;
    for (size_t w = 0; w <= i; ++w) expected += (w ? " w" : "w") + std::to_string(w);
    EXPECT_EQ(outcomes[i].promise.get_future().get(), expected);
  }
  std::vector<int> first_three(fake.workers.begin(), fake.workers.begin() + 3);
  std::sort(first_three.begin(), first_three.end());
  EXPECT_EQ(first_three, (std::vector<int>{0, 1, 2})) << "each running job has its own worker";
}

TEST(SpeechService, CancelOnOneStreamLeavesTheOthers) {
  Fake fake;
  fake.pause = 10ms;
  SpeechServiceConfig config;
  config.streams = 2;
  SpeechService service(fake.fn(), config);
  Outcome cancelled, kept;
  const uint64_t a = service.submit(job(1000), cancelled.callbacks());  // 10 s unless cancelled
  service.submit(job(20), kept.callbacks());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (fake.started() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  service.cancel(a);
  auto f = cancelled.promise.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_NE(f.get().find("cancelled"), std::string::npos);
  const std::string text = kept.promise.get_future().get();
  EXPECT_EQ(text.substr(0, 5), "w0 w1");
  EXPECT_EQ(kept.segments.load(), 20);
}

TEST(SpeechService, RefusesZeroStreams) {
  Fake fake;
  SpeechServiceConfig config;
  config.streams = 0;
  EXPECT_THROW(SpeechService(fake.fn(), config), Error);
}

}  // namespace
}  // namespace corvid
