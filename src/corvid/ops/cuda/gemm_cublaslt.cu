// cuBLASLt for the prefill GEMM (gemm_cublaslt.cuh). Against cublasGemmEx it lets us
// add the bias in the GEMM's epilogue (one pass over out fewer), and the algorithm is
// asked for once per shape instead of cuBLAS's dispatch on every call.
//
// Layout: cuBLAS is column-major, so row-major out[n, ldo] is column-major out^T with
// leading dimension ldo, and out^T = W^T-view * x^T: A = w read transposed ([k, rows]
// column-major, ld k), B = x ([k, n], ld k), C = D = out^T ([rows, n], ld ldo).
#include <cublasLt.h>

#include <map>
#include <tuple>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/gemm_cublaslt.cuh"

namespace corvid::ops::cuda {

namespace {

// Everything cuBLASLt needs for one shape, made once and kept for the process.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;  // cuBLASLt had an algorithm for it
};

// rows, n, k, ldo, f16, bias; the alignments of w, x and out
using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, uint32_t, uint32_t, uint32_t>;

// The largest power of two up to 256 dividing p: cuBLASLt assumes 256-byte-aligned
// operands unless told, and an algorithm chosen for those fails on a tile's row offset.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

template <typename Attr, typename T>
void set_desc(cublasLtMatmulDesc_t desc, Attr attr, const T& value) {
  CORVID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

Plan make_plan(Context& ctx, const LtGemm& g) {
  Plan p;
  const cudaDataType operand = g.f16 ? CUDA_R_16F : CUDA_R_16BF;
  CORVID_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (g.bias) {
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
  }
  CORVID_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, operand, static_cast<uint64_t>(g.k),
                                                 static_cast<uint64_t>(g.rows), g.k));
  CORVID_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, operand, static_cast<uint64_t>(g.k),
                                                 static_cast<uint64_t>(g.n), g.k));
  CORVID_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, static_cast<uint64_t>(g.rows),
                                                 static_cast<uint64_t>(g.n), g.ldo));
  cublasLtMatmulPreference_t pref = nullptr;
  CORVID_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = kCublasWorkspaceBytes;
  CORVID_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &workspace, sizeof(workspace)));
  const uint32_t align_w = alignment(g.w), align_x = alignment(g.x), align_out = alignment(g.out);
  CORVID_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                           &align_w, sizeof(align_w)));
  CORVID_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                           &align_x, sizeof(align_x)));
  CORVID_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                           &align_out, sizeof(align_out)));
  CORVID_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                           &align_out, sizeof(align_out)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(ctx.cublas_lt, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
  CORVID_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = result.algo;
    p.ok = true;
  }
  return p;
}

// The descriptors are host objects that cublasLtMatmul reads when called, so a plan may
// go as soon as its last call returned.
void destroy(Plan& p) {
  cublasLtMatrixLayoutDestroy(p.d);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatmulDescDestroy(p.desc);
}

// Prompt lengths (n) vary request by request, so the plans are bounded: past this many,
// all are dropped and made again as needed (a plan costs one heuristic query, ~tens of µs).
constexpr size_t kMaxPlans = 1024;

uint64_t g_bias_epilogues = 0;

bool cublaslt_disabled() {
  static const bool off = env_flag("CORVID_NO_CUBLASLT");
  return off;
}

}  // namespace

bool lt_gemm(Context& ctx, const LtGemm& g) {
  if (cublaslt_disabled()) return false;
  // One context per process (context()), used from one thread as all of Context, so the
  // plans need no key for it and no lock.
  static std::map<PlanKey, Plan> plans;
  // A bias the epilogue would read unaligned is left to the caller.
  if (g.bias && alignment(g.bias) < 16) return false;
  const PlanKey key{g.rows, g.n, g.k, g.ldo, g.f16, g.bias != nullptr, alignment(g.w), alignment(g.x), alignment(g.out)};
  auto it = plans.find(key);
  if (it == plans.end()) {
    if (plans.size() >= kMaxPlans) {
      for (auto& [_, old] : plans) destroy(old);
      plans.clear();
    }
    it = plans.emplace(key, make_plan(ctx, g)).first;
  }
  Plan& p = it->second;
  if (!p.ok) return false;
  if (g.bias) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  const float one = 1.0f, zero = 0.0f;
  CORVID_CUBLAS_CHECK(cublasLtMatmul(ctx.cublas_lt, p.desc, &one, g.w, p.a, g.x, p.b, &zero, g.out, p.d, g.out, p.d,
                                     &p.algo, ctx.cublas_workspace, kCublasWorkspaceBytes, ctx.stream));
  g_bias_epilogues += g.bias != nullptr;
  return true;
}

uint64_t lt_gemm_bias_epilogues() { return g_bias_epilogues; }

}  // namespace corvid::ops::cuda
