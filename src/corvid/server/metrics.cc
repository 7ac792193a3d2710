#include "corvid/server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace corvid::server {

namespace {

std::string number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

void write_metric(std::string& out, const std::string& name, const char* type, const std::string& help,
                  const std::string& labels, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  out += name + labels + " " + number(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mutex_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += name + "_sum " + number(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
            0.75, 1, 2.5}),
      e2e_({0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300}) {}

void Metrics::count_response(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++responses_[status];
}

std::string Metrics::render(const EngineStats& s, const std::string& model_name) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out += "# HELP corvid_http_requests_total HTTP requests answered, by status code.\n";
    out += "# TYPE corvid_http_requests_total counter\n";
    for (const auto& [status, count] : responses_)
      out += "corvid_http_requests_total{code=\"" + std::to_string(status) + "\"} " + std::to_string(count) + "\n";
  }
  const std::string model = "{model_name=\"" + model_name + "\"}";
  write_metric(out, "corvid_requests_finished_total", "counter", "Generation requests finished (any reason).", model,
               static_cast<double>(s.requests_finished));
  write_metric(out, "corvid_prompt_tokens_total", "counter", "Prompt tokens admitted.", model, static_cast<double>(s.prompt_tokens));
  write_metric(out, "corvid_generation_tokens_total", "counter", "Tokens generated.", model,
               static_cast<double>(s.generation_tokens));
  write_metric(out, "corvid_num_requests_running", "gauge", "Requests in the running batch.", model, static_cast<double>(s.running));
  write_metric(out, "corvid_num_requests_waiting", "gauge", "Requests waiting to be scheduled.", model,
               static_cast<double>(s.waiting));
  write_metric(out, "corvid_kv_blocks_total", "gauge", "KV cache blocks in the pool.", model, static_cast<double>(s.blocks_total));
  write_metric(out, "corvid_kv_blocks_used", "gauge", "KV cache blocks referenced by a sequence.", model,
               static_cast<double>(s.blocks_used));
  write_metric(out, "corvid_kv_blocks_cached", "gauge", "KV cache blocks kept for prefix reuse.", model,
               static_cast<double>(s.blocks_cached));
  write_metric(out, "corvid_kv_cache_usage_ratio", "gauge", "Fraction of KV blocks referenced by a sequence.", model,
               s.blocks_total > 0 ? static_cast<double>(s.blocks_used) / static_cast<double>(s.blocks_total) : 0.0);
  // The same per KV layer group (kv/kv_manager.h: full attention, each sliding window), so
  // a Gemma-style model's sliding pools can be told from its full-attention one.
  struct GroupMetric {
    const char* name;
    const char* help;
    int64_t KvGroupStats::*field;
  };
  for (const GroupMetric& g : {GroupMetric{"corvid_kv_group_blocks_total", "KV blocks in a layer group's pool.",
                                           &KvGroupStats::blocks_total},
                               GroupMetric{"corvid_kv_group_blocks_used", "KV blocks of a layer group referenced.",
                                           &KvGroupStats::blocks_used},
                               GroupMetric{"corvid_kv_group_blocks_cached", "KV blocks of a layer group kept for reuse.",
                                           &KvGroupStats::blocks_cached},
                               GroupMetric{"corvid_kv_group_peak_blocks_per_sequence",
                                           "The most blocks of a layer group one sequence has held.",
                                           &KvGroupStats::peak_blocks_per_sequence}}) {
    if (s.kv_groups.empty()) break;
    out += std::string("# HELP ") + g.name + " " + g.help + "\n# TYPE " + g.name + " gauge\n";
    for (const KvGroupStats& group : s.kv_groups)
      out += std::string(g.name) + "{model_name=\"" + model_name + "\",group=\"" + group.name + "\"} " +
             number(static_cast<double>(group.*g.field)) + "\n";
  }
  write_metric(out, "corvid_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", model,
               static_cast<double>(s.prefix_cache_queries));
  write_metric(out, "corvid_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", model,
               static_cast<double>(s.prefix_cache_hits));
  write_metric(out, "corvid_prefix_cache_hit_rate", "gauge", "Prefix cache hits / queries, in tokens.", model,
               s.prefix_cache_queries > 0
                   ? static_cast<double>(s.prefix_cache_hits) / static_cast<double>(s.prefix_cache_queries)
                   : 0.0);
  write_metric(out, "corvid_num_preemptions_total", "counter", "Sequences preempted (recomputed later).", model,
               static_cast<double>(s.preemptions));
  write_metric(out, "corvid_engine_steps_total", "counter", "Batched model steps run.", model, static_cast<double>(s.steps));
  ttft_.write(out, "corvid_time_to_first_token_seconds", "Time from the request's arrival to its first token.");
  itl_.write(out, "corvid_inter_token_latency_seconds", "Time between consecutive tokens of a request.");
  e2e_.write(out, "corvid_e2e_request_latency_seconds", "Time from the request's arrival to its end.");
  return out;
}

}  // namespace corvid::server
