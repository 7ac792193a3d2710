// Device side of programmatic dependent launch (context.h launch_pdl). Both are no-ops
// when the kernel was launched the ordinary way.
#pragma once

namespace corvid::ops::cuda {

// Blocks until every kernel before this one on the stream has finished and its
// writes are visible. A kernel started with launch_pdl calls it before touching
// anything those kernels write (or read: it must not overwrite their inputs early).
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the next kernel on the stream, if launched with launch_pdl, start its blocks
// now (they wait in pdl_wait for this kernel to finish). Called first thing by the
// decode-step kernels so the next launch overlaps their work.
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" :::); }

}  // namespace corvid::ops::cuda
