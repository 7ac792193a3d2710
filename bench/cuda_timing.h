// Timing GPU work for the CUDA benchmarks (gemv_bench.cc, attention_bench.cc).
#pragma once

#include <cuda_runtime.h>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"

namespace corvid::bench {

// Times `calls` launches of fn(i) on the backend's stream with CUDA events, after three
// warm-up calls; returns microseconds per call.
template <class Fn>
double time_calls(int calls, Fn&& fn) {
  cudaStream_t s = ops::cuda::context().stream;
  cudaEvent_t a, b;
  CORVID_CUDA_CHECK(cudaEventCreate(&a));
  CORVID_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn(i);  // warm-up
  CORVID_CUDA_CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < calls; ++i) fn(i);
  CORVID_CUDA_CHECK(cudaEventRecord(b, s));
  CORVID_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CORVID_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  CORVID_CUDA_CHECK(cudaEventDestroy(a));
  CORVID_CUDA_CHECK(cudaEventDestroy(b));
  return ms * 1e3 / calls;
}

}  // namespace corvid::bench
