"""The f32 sums of four data sets of 2^24 values, relative error against a double sum,
for PyTorch 1.13 (torch.sum, 1 and 2 threads) and NumPy (np.sum): the bars Accy's sums
are held to (tests/sum_data.h, whose values are the same; CpuConformance.SumsAtMostAsFarAsPyTorchs and the device suite's AccurateSums;
docs/MATH_ACCURACY.md, "Sums"), and the same values as 8192 rows of 2048 summed along the
row (the device suite's AccurateSums; the largest error relative to the largest row). The data are made from a 32-bit hash of the index,
which the test computes the same way.

Run: /usr/bin/python3 bench/sum_accuracy.py (Debian's python3, where python3-torch installs)
"""
import platform

import numpy as np
import torch

N = 1 << 24
ROWS = 8192


def hashed(i, salt):
    x = (i * np.uint32(2654435761) + np.uint32(salt)).astype(np.uint32)
    x ^= x >> np.uint32(16)
    x = (x * np.uint32(0x45D9F3B)).astype(np.uint32)
    x ^= x >> np.uint32(16)
    return x


def data_sets():
    i = np.arange(N, dtype=np.uint32)
    u = (hashed(i, 1) >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
    sign = np.where(i % 2 == 1, np.float32(-1), np.float32(1)).astype(np.float32)
    scale = (np.float32(10.0) ** ((hashed(i, 2) % np.uint32(7)).astype(np.float32) - np.float32(3))).astype(np.float32)
    return {
        "0.1": np.full(N, 0.1, dtype=np.float32),
        "uniform": u,
        "alternating": (sign * u).astype(np.float32),
        "mixed": (u * scale).astype(np.float32),
    }


def main():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    print(f"cpu: {cpu}; numpy {np.__version__}, torch {torch.__version__}, python {platform.python_version()}")
    for name, x in data_sets().items():
        exact = float(np.sum(x.astype(np.float64)))
        row = [name]
        for threads in (1, 2):
            torch.set_num_threads(threads)
            got = float(torch.from_numpy(x).sum())
            row.append(f"torch{threads}={abs(got - exact) / abs(exact):.3g}")
        row.append(f"numpy={abs(float(np.sum(x)) - exact) / abs(exact):.3g}")
        # The same values as ROWS rows summed along the row: the largest
        # error relative to the largest row (the device suite's AccurateSums).
        rows = x.reshape(ROWS, -1)
        exact_rows = rows.astype(np.float64).sum(axis=1)
        scale = np.abs(exact_rows).max()
        for threads in (1, 2):
            torch.set_num_threads(threads)
            got = torch.from_numpy(rows).sum(dim=1).double().numpy()
            row.append(f"rows_torch{threads}={np.abs(got - exact_rows).max() / scale:.6g}")
        print("  ".join(row))


if __name__ == "__main__":
    main()
