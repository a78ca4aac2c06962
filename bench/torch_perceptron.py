#!/usr/bin/env python3
"""One training step of the two-layer perceptron of bench/cpu_bench.cc in
PyTorch on the CPU: batch 256, 512 inputs, 512 hidden (tanh), 10 classes,
softmax cross-entropy (mean over the batch), gradients for W1, b1 and W2.
Prints the median step time in milliseconds over --reps steps after a
warm-up, and the threads and BLAS PyTorch used. Run by cpu_bench's
BM_PerceptronStep_PyTorch rows (same run as Accy's rows)."""
import torch

import torch_timing


def main():
    args = torch_timing.arguments(default_reps=50)
    gen = torch.Generator().manual_seed(1)
    batch, inputs, hidden, classes = 256, 512, 512, 10
    x = torch.rand(batch, inputs, generator=gen) * 2 - 1
    labels = torch.randint(0, classes, (batch,), generator=gen)
    w1 = ((torch.rand(inputs, hidden, generator=gen) * 2 - 1) * 0.05).requires_grad_()
    b1 = ((torch.rand(hidden, generator=gen) * 2 - 1) * 0.05).requires_grad_()
    w2 = ((torch.rand(hidden, classes, generator=gen) * 2 - 1) * 0.05).requires_grad_()

    def step():
        logits = torch.tanh(x @ w1 + b1) @ w2
        loss = torch.nn.functional.cross_entropy(logits, labels)
        grads = torch.autograd.grad(loss, [w1, b1, w2])
        return loss, grads

    torch_timing.report(step, args.reps, warmup=5)


if __name__ == "__main__":
    main()
