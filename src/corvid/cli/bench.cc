// corvid bench: in-process prefill and decode throughput, llama-bench style
// (pp: one batch of N prompt tokens; tg: N tokens decoded one at a time; both start
// after --depth tokens already in the context, whose cached keys/values are zeros —
// attention reads them all the same, so the cost is that of a real context). On a
// Whisper model (or --dummy-shape): encoder and decoder-step times (bench_speech.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "corvid/cli/bench_speech.h"
#include "corvid/cli/common.h"
#include "corvid/core/error.h"
#include "corvid/engine/dummy_weights.h"
#include "corvid/ops/ops.h"
#include "corvid/core/thread_pool.h"
#include "corvid/speech/speech_model.h"

namespace corvid::cli {

namespace {

struct BenchArgs {
  CommonOptions common;
  int64_t prompt = 512;
  int64_t gen = 128;
  int reps = 3;
  int64_t depth = 0;  // context already present before pp and tg
  std::string dummy_dtype;  // set: -m is a config.json and the weights are random in this dtype
  bool eager = false;       // decode steps run op by op (no CUDA graph), e.g. for CORVID_OP_TIMES
  std::string dummy_shape;  // a Whisper shape: -m names a Whisper folder for its tokenizer
  int windows = 1, beams = 1;  // Whisper: windows per encoder batch, hypotheses per decoder step
  int streams = 1;             // Whisper: concurrent transcriptions, batched
};

struct Stat { double mean = 0, stdev = 0; };
Stat summarize(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stdev += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(s.stdev / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

void run_bench(const BenchArgs& a) {
  apply_common_options(a.common);
  if (!a.dummy_shape.empty() || is_speech_model(a.common.model)) {
    return run_speech_bench(SpeechBenchArgs{.model = a.common.model, .device = a.common.device,
                                            .dummy_shape = a.dummy_shape, .gen = a.gen, .reps = a.reps,
                                            .windows = a.windows, .beams = a.beams, .streams = a.streams,
                                            .eager = a.eager, .kv_cache_dtype = a.common.kv_cache_dtype});
  }
  LoadedModel m = a.dummy_dtype.empty() ? load_model(a.common)
                                         : load_dummy_model(a.common.model, dummy_weight_dtype(a.dummy_dtype),
                                                            weight_placement(a.common));
  Model& model = *m.model;
  Runner& runner = *m.runner;
  if (a.eager) runner.set_step_recording(false);
  const int64_t vocab = model.config().vocab_size;
  const KvFormat kv_format = kv_cache_format(a.common, model.device());
  KVCache kv(with_layer_formats(model.state_spec(), kv_layer_formats(a.common, model)),
             a.depth + std::max(a.prompt, a.gen) + 1, model.device(), kv_format, a.common.kv_quant_start);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(std::max(a.prompt, a.gen))), positions(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = pick(rng);
    positions[i] = static_cast<int32_t>(a.depth + static_cast<int64_t>(i));
  }
  OwnedTensor logits(DType::F32, {1, vocab});
  using clock = std::chrono::steady_clock;
  std::vector<double> pp, tg;
  for (int r = 0; r <= a.reps; ++r) {  // rep 0 warms caches and page-faults the weights in
    if (a.prompt > 0) {
      auto t0 = clock::now();
      runner.forward(std::span(tokens).first(static_cast<size_t>(a.prompt)), std::span(positions).first(static_cast<size_t>(a.prompt)),
                     kv, logits.tensor, false);
      double s = std::chrono::duration<double>(clock::now() - t0).count();
      if (r) pp.push_back(static_cast<double>(a.prompt) / s);
    }
    if (a.gen > 0) {
      auto t0 = clock::now();
      for (int64_t i = 0; i < a.gen; ++i)
        runner.forward(std::span(tokens).subspan(static_cast<size_t>(i), 1), std::span(positions).subspan(static_cast<size_t>(i), 1),
                        kv, logits.tensor, false);
      double s = std::chrono::duration<double>(clock::now() - t0).count();
      if (r) tg.push_back(static_cast<double>(a.gen) / s);
    }
    if (r == 0) ops::reset_op_times();
  }
  const double gb_per_token = static_cast<double>(model.weight_bytes_per_token()) / 1e9;
  std::printf("model: %s (%s, %.1fM params), device: %s, threads: %d, KV cache: %s\n", a.common.model.c_str(),
              model.config().architecture.c_str(), static_cast<double>(model.parameter_count()) / 1e6,
              device_backend(model.device()).description().c_str(), ThreadPool::global().size(),
              (kv_format_name(kv_format) + (a.common.kv_quant_start > 0
                                                ? " from position " + std::to_string(a.common.kv_quant_start)
                                                : std::string())).c_str());
  const std::string at = a.depth > 0 ? " @ d" + std::to_string(a.depth) : "";
  if (!pp.empty()) {
    Stat s = summarize(pp);
    std::printf("pp%lld%s: %.2f ± %.2f tok/s\n", static_cast<long long>(a.prompt), at.c_str(), s.mean, s.stdev);
  }
  if (!tg.empty()) {
    Stat s = summarize(tg);
    std::printf("tg%lld%s: %.2f ± %.2f tok/s (%.2f GB/s of weights)\n", static_cast<long long>(a.gen), at.c_str(), s.mean,
                s.stdev, s.mean * gb_per_token);
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and decode throughput");
  add_common_options(*cmd, args->common);
  cmd->add_option("-p,--prompt", args->prompt, "prompt tokens processed in one batch (0 = skip)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--gen", args->gen, "tokens decoded one at a time (0 = skip)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-d,--depth", args->depth, "tokens already in the context before pp and tg (e.g. 4096)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-r,--reps", args->reps, "repetitions after one warm-up")->check(CLI::PositiveNumber);
  cmd->add_option("--dummy-weights", args->dummy_dtype,
                  "-m names a config.json (e.g. configs/llama-3.1-8b.json); build the model at its real shape "
                  "with random weights of this dtype (BF16, Q8_0, Q4_0, Q4_K, …)");
  cmd->add_flag("--eager", args->eager,
                "run decode steps op by op instead of replaying a recorded step (CUDA graph): with "
                "CORVID_OP_TIMES=1 the per-op times then cover decode");
  cmd->add_option("--dummy-shape", args->dummy_shape,
                  "Whisper: made-up weights of this shape (tiny, base, small, medium, large-v3, large-v3-turbo); "
                  "-m names a Whisper folder for the tokenizer");
  cmd->add_option("--windows", args->windows, "Whisper: 30-s windows encoded in one batch")->check(CLI::PositiveNumber);
  cmd->add_option("--beams", args->beams, "Whisper: hypotheses per decoder step (beam size, best-of)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--streams", args->streams,
                  "Whisper: concurrent transcriptions as the server batches them: one window each in one encoder "
                  "pass, and steps over every stream's --beams hypotheses")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace corvid::cli
