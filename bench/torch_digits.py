#!/usr/bin/env python3
"""One training step of the digits-sized convolutional network of
bench/cpu_bench.cc (BM_DigitsStep_*) in PyTorch on the CPU: batch 256 of
8x8 one-channel images, a 3x3 convolution to 16 channels (padding 1, bias),
ReLU, 2x2 max pooling, a dense layer to 10 classes (bias), softmax
cross-entropy (mean over the batch); gradients for every weight. Prints the
median step time in milliseconds over --reps steps after a warm-up, the
threads and the build. Run by cpu_bench's BM_DigitsStep_PyTorch rows (same
run as Accy's rows)."""
import torch

import torch_timing


def main():
    args = torch_timing.arguments(default_reps=100)
    gen = torch.Generator().manual_seed(1)
    batch, channels, classes = 256, 16, 10
    x = torch.rand(batch, 1, 8, 8, generator=gen) * 16
    labels = torch.randint(0, classes, (batch,), generator=gen)
    w1 = ((torch.rand(channels, 1, 3, 3, generator=gen) * 2 - 1) * 0.3).requires_grad_()
    b1 = torch.zeros(channels).requires_grad_()
    w2 = ((torch.rand(classes, channels * 4 * 4, generator=gen) * 2 - 1) * 0.1).requires_grad_()
    b2 = torch.zeros(classes).requires_grad_()

    def step():
        h = torch.nn.functional.conv2d(x, w1, b1, padding=1).relu()
        h = torch.nn.functional.max_pool2d(h, 2)
        logits = torch.nn.functional.linear(h.flatten(1), w2, b2)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        grads = torch.autograd.grad(loss, [w1, b1, w2, b2])
        return loss, grads

    torch_timing.report(step, args.reps, warmup=10)


if __name__ == "__main__":
    main()
