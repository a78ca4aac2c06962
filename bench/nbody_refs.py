#!/usr/bin/env python3
"""The N-body rows of bench/cpu_bench.cc in NumPy and PyTorch (f64, vectorised,
each at its best: the same softened leapfrog, kick-drift-kick with the
acceleration carried, as examples/nbody/nbody.h), each in the fastest of the
forms a user of it would write that were tried here:

  w[i, j] = m_j / (|x_j - x_i|^2 + eps^2)^(3/2)
  a_i = sum_j w[i, j] x_j - x_i sum_j w[i, j]       (two products)

with |x_j - x_i|^2 from the Gram matrix (NumPy) or torch.cdist (PyTorch).
The direct form (diff[i, j, :] = x_j - x_i, then einsum) took 2.4x (NumPy)
and 5x (PyTorch) longer.

Prints the median time in milliseconds of --steps steps over --reps runs after
a warm-up, the threads and the library's version (what cpu_bench's
runReferenceCommand reads)."""
import argparse
import statistics
import time


def start(bodies, seed=2026):
    """examples/nbody/nbody.h's start(): the same 64-bit LCG, the same draws."""
    mask = (1 << 64) - 1
    a, c = 6364136223846793005, 1442695040888963407
    state = (seed * a + c) & mask
    pos, vel = [], []

    def nxt():
        nonlocal state
        state = (state * a + c) & mask
        return (state >> 11) * 2.0**-53

    for _ in range(bodies):
        while True:
            x, y, z = 2 * nxt() - 1, 2 * nxt() - 1, 2 * nxt() - 1
            if x * x + y * y + z * z <= 1:
                break
        pos.append([x, y, z])
        vel.append([0.2 * (nxt() - 0.5), 0.2 * (nxt() - 0.5), 0.2 * (nxt() - 0.5)])
    mean = [sum(v[d] for v in vel) / bodies for d in range(3)]
    vel = [[v[d] - mean[d] for d in range(3)] for v in vel]
    return pos, vel, [1.0 / bodies] * bodies


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True, choices=["numpy", "torch"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bodies", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    dt, eps2 = 5e-4, 0.05**2
    pos0, vel0, mass0 = start(args.bodies)
    if args.lib == "numpy":
        import numpy as np
        xp = np
        pos0, vel0, mass0 = np.array(pos0), np.array(vel0), np.array(mass0)
        version = f"numpy {np.__version__}"
        threads = 1  # NumPy's elementwise ops and reductions run on the calling thread
        copy = np.copy

        def accel(x, m):
            # The fastest of the forms tried (docs/PERFORMANCE.md, "N-body"):
            # r^2 from the Gram matrix, the sum over j as a product.
            sq = np.einsum("ik,ik->i", x, x)
            r2 = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T) + eps2
            w = m[None, :] / (r2 * np.sqrt(r2))
            return w @ x - x * w.sum(axis=1)[:, None]
    else:
        import torch
        torch.set_num_threads(args.threads)
        xp = torch
        pos0, vel0, mass0 = (torch.tensor(v, dtype=torch.float64) for v in (pos0, vel0, mass0))
        version = f"torch {torch.__version__}"
        threads = torch.get_num_threads()
        copy = torch.clone

        def accel(x, m):
            # The fastest of the forms tried: cdist (a product inside for
            # this many points), rsqrt, the sum over j as a product.
            r2 = torch.cdist(x, x).square_() + eps2
            w = m[None, :] * r2.rsqrt().pow_(3)
            return w @ x - x * w.sum(dim=1)[:, None]

    def run():
        x, v, m = copy(pos0), copy(vel0), mass0
        a = accel(x, m)
        for _ in range(args.steps):
            half = v + a * (0.5 * dt)
            x = x + half * dt
            a = accel(x, m)
            v = half + a * (0.5 * dt)
        return x, v

    run()
    times = []
    for _ in range(args.reps):
        begin = time.perf_counter()
        run()
        times.append(time.perf_counter() - begin)
    print(f"median_ms {statistics.median(times) * 1e3:.4f}")
    print(f"threads {threads}")
    print(version)


if __name__ == "__main__":
    main()
