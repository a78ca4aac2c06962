"""Shared by the PyTorch scripts of bench/: times a step and prints what
cpu_bench's runTorchScript reads (median_ms, threads, the build)."""
import statistics
import time

import torch


def report(step, reps, warmup):
    """Runs `step` `warmup` times, then times `reps` runs; prints the median
    in milliseconds, the threads PyTorch used, its BLAS and oneDNN."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    config = torch.__config__.show()
    blas = config.split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in config else "unknown"
    onednn = "USE_MKLDNN=ON" in config
    print(f"median_ms {statistics.median(times) * 1e3:.4f}")
    print(f"threads {torch.get_num_threads()}")
    print(f"torch {torch.__version__} BLAS_INFO={blas} oneDNN={'on' if onednn else 'off'}")
