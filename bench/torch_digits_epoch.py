#!/usr/bin/env python3
"""One training epoch of examples/digits in PyTorch on the CPU, the same
network and schedule a PyTorch user would write at their best: 3x3
convolution to 16 channels (padding 1, bias), ReLU, 2x2 max pooling, a
dense layer to 10 classes (bias), softmax cross-entropy; 45 steps of SGD
(rate 0.1) on minibatches of 32 drawn with replacement from the 1,437
training images (scikit-learn's digits, read from /opt/accy/datasets, pixels
/ 16). Prints the median epoch time in milliseconds over --reps epochs after
a warm-up, the threads and the build (what cpu_bench's runTorchScript
reads)."""
import gzip

import numpy as np
import torch

import torch_timing


def main():
    args = torch_timing.arguments(default_reps=10)
    with gzip.open("/opt/accy/datasets/digits.csv.gz", "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    x = torch.tensor(table[:1437, :64] / 16, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(table[:1437, 64], dtype=torch.int64)
    gen = torch.Generator().manual_seed(1)
    w1 = ((torch.rand(16, 1, 3, 3, generator=gen) * 2 - 1) * (6 / 9) ** 0.5).requires_grad_()
    b1 = torch.zeros(16).requires_grad_()
    w2 = ((torch.rand(10, 256, generator=gen) * 2 - 1) * (6 / 256) ** 0.5).requires_grad_()
    b2 = torch.zeros(10).requires_grad_()
    params = [w1, b1, w2, b2]

    def epoch():
        for _ in range(45):
            pick = torch.randint(0, x.shape[0], (32,), generator=gen)
            h = torch.nn.functional.conv2d(x[pick], w1, b1, padding=1).relu()
            h = torch.nn.functional.max_pool2d(h, 2)
            loss = torch.nn.functional.cross_entropy(torch.nn.functional.linear(h.flatten(1), w2, b2), y[pick])
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p -= 0.1 * g

    torch_timing.report(epoch, args.reps, warmup=2)


if __name__ == "__main__":
    main()
