"""Shared by the PyTorch scripts of bench/: times a step and prints what
cpu_bench's runTorchScript reads (median_ms, threads, the build)."""
import argparse
import statistics
import time

import torch


def arguments(default_reps, add=None):
    """Parses --threads and --reps (and what `add(parser)` adds), pins
    PyTorch to the threads and returns the arguments."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=default_reps)
    if add is not None:
        add(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    return args


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
