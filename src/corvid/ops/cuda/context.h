// CUDA backend internals shared by its .cu files: error-checking macros, the
// per-process context (stream, cuBLAS handle, scratch memory, cached uploads of
// small host arrays) and launch helpers. Only ops/cuda includes this.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/ops/indices.h"

// Every runtime call goes through this: a failure becomes a corvid::Error naming
// the call, the place and CUDA's own description, instead of a silent bad result.
#define CORVID_CUDA_CHECK(call)                                                                       \
  do {                                                                                                \
    const cudaError_t corvid_err_ = (call);                                                           \
    if (corvid_err_ != cudaSuccess)                                                                   \
      ::corvid::fail("CUDA error: ", #call, " at ", __FILE__, ":", __LINE__, ": ",                    \
                     cudaGetErrorString(corvid_err_));                                                \
  } while (0)

#define CORVID_CUBLAS_CHECK(call)                                                                     \
  do {                                                                                                \
    const cublasStatus_t corvid_st_ = (call);                                                         \
    if (corvid_st_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::corvid::fail("cuBLAS error: ", #call, " at ", __FILE__, ":", __LINE__, ": ",                  \
                     cublasGetStatusString(corvid_st_));                                              \
  } while (0)

// After every <<<...>>>: launch errors (bad configuration, no kernel image for
// this GPU) surface here; errors inside the kernel surface at the next sync.
#define CORVID_CUDA_LAUNCHED(kernel_name)                                                             \
  do {                                                                                                \
    const cudaError_t corvid_err_ = cudaGetLastError();                                               \
    if (corvid_err_ != cudaSuccess)                                                                   \
      ::corvid::fail("CUDA error: launch of ", kernel_name, " at ", __FILE__, ":", __LINE__, ": ",    \
                     cudaGetErrorString(corvid_err_));                                                \
  } while (0)

namespace corvid::ops::cuda {

// Host index arrays without a device copy (ops::Indices::device null: ops called
// directly, as tests and benches do) are uploaded through a slot that remembers what
// it holds, so the positions of one forward are uploaded once and reused by every
// layer. A model's steps come with their inputs on the device already (the runner's
// one upload), which recorded steps need: nothing may upload during a capture. Rows: where rope_store_kv writes (the
// positions for a contiguous cache, pool slots for a paged one); BlockTables and
// QuerySeq: paged attention's tables; SamplingRows / SamplingPenalties:
// ops::sample_tokens' per-row parameters and penalty lists; TokenMasks: ops::mask_logits'
// rows and masks.
enum class UploadSlot { Ids, Positions, Rows, BlockTables, QuerySeq, SamplingRows, SamplingPenalties, TokenMasks, kCount };

// The workspace cuBLAS and cuBLASLt share (one stream orders their calls): ours, so that
// neither allocates inside a recorded step.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublas_lt = nullptr;
  void* cublas_workspace = nullptr;  // kCublasWorkspaceBytes
  int sm_count = 0;
  // Compute capability 9.0 (H100/H200): the sm_90a kernels (wgmma) run, not the compute_90 PTX.
  bool sm90 = false;

  // True between begin_capture and end_capture: work is recorded into a graph, so
  // nothing may allocate, synchronize or upload new host data.
  bool capturing = false;
  // Bumped whenever scratch or an upload slot moves: recorded graphs hold their addresses.
  uint64_t generation = 0;

  // Device scratch of at least `bytes` (grows; contents undefined). One user at a time.
  void* scratch(size_t bytes);

  // Ops (and backend copies) run so far: count_op() bumps it before each one.
  uint64_t ops_run = 0;
  // What op number `op` wrote along with its output x ([rows, cols]) for the op that
  // reads x next. Only the very next op may use it (ops_run == op + 1): any op in
  // between may have changed x.
  struct MadeAlongside {
    const void* x = nullptr;
    int64_t rows = 0, cols = 0;
    uint64_t op = 0;
    bool describes(const void* x_now, int64_t rows_now, int64_t cols_now, uint64_t ops_run_now) const {
      return x == x_now && rows == rows_now && cols == cols_now && op + 1 == ops_run_now;
    }
  };
  // Int8 activations (gemv.h Int8Activations) that the op producing x (an RMSNorm of a
  // decode row, silu_mul, decode attention) wrote along with it, for a decode GEMV that
  // reads x next: it then skips its quantizer launch.
  struct Int8Rows : MadeAlongside {
    int8_t* q = nullptr;
    float* d = nullptr;
  };
  Int8Rows int8_rows;
  // Blocks in the cluster of a decode row's RMSNorm (norm_cluster.cu): 2 after a Q4_0R
  // decode GEMV (gemv_direct.cu; measured per format), else 8. The norm sits between two
  // GEMVs of the same matrices' format, so the last one stands for the next.
  int norm_cluster_blocks = 8;
  // Whether the last decode GEMV took int8 activations (set by gemv_dp4a): producers
  // write them only then, so a model of 16-bit weights does not pay for int8 it never reads.
  bool int8_wanted = true;
  // Where a producer writes them for its output x of `rows` rows of `cols` values, recorded
  // in int8_rows (device memory kept apart from scratch, which the GEMV's own quantizer
  // uses). An empty record (q null: write no int8) when no decode GEMV would take them
  // (gemv.h gemv_int8_inputs, more than kGemvMaxCols rows, cols not a multiple of 32) or
  // the buffer would have to grow while a step is recorded.
  const Int8Rows& int8_output(const void* x, int64_t rows, int64_t cols);
  // Room for int8 outputs of `values` values (make_context reserves decode-sized room, so
  // that the first recorded step does not find the buffer missing).
  void reserve_int8_output(int64_t values);

  // The 16-bit operand (f16 for f16 and block-format weights, else bf16) of a prompt GEMM
  // (gemm_tensor_cores: Fast numerics, more than kGemvMaxCols rows) for its F32 input x,
  // in a buffer of its own. Made by the op that produced x (RMSNorm, silu_mul, prefill
  // attention write it along with their F32 output: half_out.cuh) or by a GEMM that
  // rounded x itself. A GEMM takes it when it runs as the next op and passes it on
  // (op = its own; ops::matmul refuses an out that overlaps x, so x is unchanged), so q,
  // k and v of one x round x once, or not at all.
  struct GemmOperand : MadeAlongside {
    bool f16 = false;
    uint16_t* data = nullptr;
  };
  GemmOperand gemm_operand;
  // The operand type of the last prompt GEMM (set by gemm_tensor_cores): the one
  // producers write, since a model's matrices are usually all f16 or none.
  bool gemm_operand_f16 = false;
  // Room for `values` 16-bit values (grows; outside a recording only).
  uint16_t* gemm_operand_buffer(int64_t values);
  // Where a producer writes the operand for its output x of `rows` x `cols`, recorded
  // in gemm_operand; an empty record (data null: write none) when no prompt GEMM would
  // read it as such (Exact numerics, a decode-sized x, cols not a multiple of 8, or a
  // step being recorded).
  const GemmOperand& gemm_operand_output(const void* x, int64_t rows, int64_t cols);

  const int32_t* upload(UploadSlot slot, std::span<const int32_t> values);
  // A step's index array on the device: where the caller already put it (Indices::device),
  // else uploaded through `slot`.
  const int32_t* indices(UploadSlot slot, const Indices& values) {
    return values.device ? values.device : upload(slot, values.host);
  }
  // A device copy of a constant table (RoPE frequencies), one per distinct content and
  // never moved or freed, so a recorded step of any model keeps reading its own table.
  const float* constant(std::span<const float> values);

 private:
  struct Upload {
    std::vector<char> host;
    void* dev = nullptr;
    size_t capacity = 0;
  };
  const void* upload_bytes(UploadSlot slot, const void* data, size_t bytes);
  std::map<std::vector<float>, void*> constants_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  void* int8_ = nullptr;
  size_t int8_bytes_ = 0;
  void* operand16_ = nullptr;
  size_t operand16_bytes_ = 0;
  Upload uploads_[static_cast<int>(UploadSlot::kCount)];
};

// The process's context on device 0, created on first use (throws without a GPU).
Context& context();

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

inline unsigned blocks_for(int64_t work, int threads) {
  return static_cast<unsigned>((work + threads - 1) / threads);
}

// Programmatic dependent launch (Hopper): false when CORVID_NO_PDL=1 (A/B runs).
bool pdl_enabled();

// Whether prompt GEMMs share their 16-bit operand (Context::GemmOperand): false when
// CORVID_NO_FUSED_OPERAND=1 (A/B runs), then every GEMM rounds its x itself.
bool gemm_operand_fusion();

// Profiling only: true for a kernel named in CORVID_PROFILE_SKIP (comma-separated
// launch names, e.g. "rope_store_kv_kernel,silu_mul_kernel"), whose launch_pdl then launches
// nothing. Outputs are wrong; the step's time without that stage is the point (the
// device has no timeline profiler: leave one stage out and take the difference).
// Warns on stderr once when the variable is set.
bool profile_skipped(const char* name);

// Launches kernel<<<grid, block, 0, stream>>>(args...) so that its blocks may start
// while the kernels before it on the stream are still running (they call
// pdl_launch_dependents(), pdl.cuh), which hides the launch and lets it read what no
// kernel writes (weights) early. The kernel must call pdl_wait() before it touches
// anything earlier kernels write or read. Also inside CUDA graph capture.
template <class... KernelArgs, class... Args>
void launch_pdl(const char* name, void (*kernel)(KernelArgs...), dim3 grid, dim3 block, cudaStream_t stream,
                Args&&... args) {
  if (profile_skipped(name)) return;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = pdl_enabled() ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) ::corvid::fail("CUDA error: launch of ", name, ": ", cudaGetErrorString(err));
}

}  // namespace corvid::ops::cuda
