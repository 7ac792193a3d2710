#!/usr/bin/env python3
"""The two hardware ceilings the CUDA benchmarks are judged against, measured with PyTorch on the GPU:
device-to-device copy bandwidth (1 GiB buffer copied 20 times; read + write bytes counted) and the
dense bf16 GEMM rate (8192 x 8192 x 8192, 10 reps). Run it in the same device call as the benchmark.

    python3 bench/ceilings.py
"""
import torch


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def main():
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_s = timed(lambda: dst.copy_(src), 20)
    del src, dst
    m = 8192
    a = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    gemm_s = timed(lambda: a @ b, 10)
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
    print(f"copy bandwidth: {2 * n / copy_s / 1e12:.2f} TB/s (D2D, 1 GiB, read + write)")
    print(f"bf16 GEMM: {2 * m ** 3 / gemm_s / 1e12:.0f} TFLOP/s ({m}^3)")


if __name__ == "__main__":
    main()
