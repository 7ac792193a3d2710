// Server metrics in Prometheus' text format (GET /metrics): HTTP requests by
// status, and latency histograms measured where the client sees them (time to first
// token from the request's arrival, inter-token latency between streamed tokens),
// next to the engine's own counters and gauges (EngineStats).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "corvid/engine/engine.h"

namespace corvid::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);  // thread-safe
  // The _bucket / _sum / _count lines of metric `name`.
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_response(int status);                 // every HTTP answer
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_inter_token(double seconds) { itl_.observe(seconds); }
  void observe_e2e(double seconds) { e2e_.observe(seconds); }

  std::string render(const EngineStats& engine, const std::string& model_name) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> responses_;
  Histogram ttft_, itl_, e2e_;
};

}  // namespace corvid::server
