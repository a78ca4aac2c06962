#!/usr/bin/env python3
"""The random-number rows of bench/cpu_bench.cc in NumPy and PyTorch, each at
its best on one thread: 2^24 f32 values drawn into a buffer made once.

  numpy uniform   Generator(PCG64).random(dtype=float32, out=...)
  numpy normal    Generator(PCG64).standard_normal(dtype=float32, out=...)
  torch uniform   torch.rand(out=...)
  torch normal    torch.randn(out=...)

Prints the median time in milliseconds over --reps runs after a warm-up, the
threads and the library's version (what cpu_bench's runReferenceCommand reads)."""
import argparse
import statistics
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True, choices=["numpy", "torch"])
    parser.add_argument("--case", required=True, choices=["uniform", "normal"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    n = 1 << 24
    if args.lib == "numpy":
        import numpy as np
        gen = np.random.Generator(np.random.PCG64(1))
        out = np.empty(n, dtype=np.float32)
        if args.case == "uniform":
            step = lambda: gen.random(dtype=np.float32, out=out)
        else:
            step = lambda: gen.standard_normal(dtype=np.float32, out=out)
        version = f"numpy {np.__version__} PCG64"
        threads = 1  # NumPy's generators run on the calling thread
    else:
        import torch
        torch.set_num_threads(args.threads)
        torch.manual_seed(1)
        out = torch.empty(n)
        step = (lambda: torch.rand(n, out=out)) if args.case == "uniform" else (lambda: torch.randn(n, out=out))
        version = f"torch {torch.__version__}"
        threads = torch.get_num_threads()
    for _ in range(3):
        step()
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(f"median_ms {statistics.median(times) * 1e3:.4f}")
    print(f"threads {threads}")
    print(version)


if __name__ == "__main__":
    main()
