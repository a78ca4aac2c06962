#!/usr/bin/env python3
"""The indexing and window workloads of bench/cpu_bench.cc in PyTorch on the
CPU, each at its best (oneDNN where PyTorch uses it, threads pinned):

  pool       2x2 max pooling, stride 2, of f32[32, 64, 56, 56]
  conv       a 3x3 convolution, padding 1, 64 -> 64 channels, f32[32, 64, 56, 56]
  conv_grad  its backward pass: the input's and the weights' gradients
  embedding  rows of a f32[2^20, 64] table at 2^20 random tokens (index_select)
  embedding_grad  its gradient: 2^20 rows of 64 added into a zeroed f32[2^20, 64]
             at the tokens (index_add_, what the embedding's backward does)

Prints the median time in milliseconds over --reps runs after a warm-up, the
threads and the build. Run by cpu_bench's *_PyTorch rows (same run as
Accy's rows)."""
import torch

import torch_timing


def main():
    cases = ["pool", "conv", "conv_grad", "embedding", "embedding_grad"]
    args = torch_timing.arguments(
        default_reps=10, add=lambda p: p.add_argument("--case", required=True, choices=cases))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        if args.case == "pool":
            x = torch.rand(32, 64, 56, 56, generator=gen)
            run = lambda: torch.nn.functional.max_pool2d(x, 2, 2)
        elif args.case == "conv":
            x = torch.rand(32, 64, 56, 56, generator=gen)
            w = torch.rand(64, 64, 3, 3, generator=gen) * 0.1
            run = lambda: torch.nn.functional.conv2d(x, w, padding=1)
        elif args.case == "conv_grad":
            # The layer's backward pass: the input's and the weights'
            # gradients from the output's (what autograd runs; no bias).
            x = torch.rand(32, 64, 56, 56, generator=gen)
            w = torch.rand(64, 64, 3, 3, generator=gen) * 0.1
            dy = torch.rand(32, 64, 56, 56, generator=gen)
            run = lambda: torch.ops.aten.convolution_backward(
                dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
        elif args.case == "embedding_grad":
            grads = torch.rand(1 << 20, 64, generator=gen)
            tokens = torch.randint(0, 1 << 20, (1 << 20,), generator=gen)
            out = torch.empty(1 << 20, 64)
            run = lambda: out.zero_().index_add_(0, tokens, grads)
        else:
            table = torch.rand(1 << 20, 64, generator=gen)
            tokens = torch.randint(0, 1 << 20, (1 << 20,), generator=gen)
            out = torch.empty(1 << 20, 64)
            run = lambda: torch.index_select(table, 0, tokens, out=out)
        torch_timing.report(run, args.reps, warmup=3)


if __name__ == "__main__":
    main()
