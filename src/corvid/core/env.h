// Environment switches: the CORVID_NO_* variables that turn one code path off for A/B
// runs (CORVID_NO_FUSION, CORVID_NO_DP4A, CORVID_NO_DIRECT_GEMV, CORVID_NO_PDL,
// CORVID_NO_CLUSTER_NORM, CORVID_NO_FUSED_QUANT, CORVID_NO_FUSED_OPERAND,
// CORVID_NO_FUSED_ROPE, CORVID_NO_FUSED_SILU, CORVID_NO_CUBLASLT), integer tuning knobs, and CORVID_OP_TIMES=1 (GPU time per op,
// printed at exit: ops/cuda/op_timer.cu).
#pragma once

namespace corvid {

// True when the variable `name` is set to anything but "" or "0". Reads the
// environment on every call: callers keep the answer in a function-local static.
bool env_flag(const char* name);
// The variable `name` as a whole decimal integer; `fallback` when it is unset, empty or
// not one (the tuning knobs: CORVID_DECODE_BLOCKS_PER_SM, CORVID_DP4A_STAGES, CORVID_FLASH_ROWS,
// CORVID_FUSED_GEMM, CORVID_WGMMA_TOKENS, CORVID_NORM_CLUSTER).
int env_int(const char* name, int fallback);

}  // namespace corvid
