#!/usr/bin/env python3
"""The sampler rows of bench/cpu_bench.cc in PyTorch: examples/sampler's HMC
for Bayesian logistic regression on scikit-learn's breast-cancer data, the
same settings (4 chains, 200 warm-up and 1,000 kept draws, 20 leapfrog steps
of 0.05 jittered by +-10%, a Normal(0, 1) prior), written as a PyTorch user
would at their best: eager, f64, the four chains batched in one [chain, coef]
tensor, the gradient by autograd.

Prints the median time in milliseconds of a whole run over --reps runs, the
smallest effective sample size over the coefficients (split chains, Geyer's
initial monotone sequence, as examples/sampler/sampler.h computes it), the
threads and the library's version."""
import numpy as np
import torch

import torch_timing

CHAINS, WARMUP, DRAWS, LEAPFROG, STEP = 4, 200, 1000, 20, 0.05


def data():
    t = np.loadtxt("/opt/accy/datasets/breast_cancer.csv", delimiter=",", skiprows=1)
    x = (t[:, :30] - t[:, :30].mean(0)) / t[:, :30].std(0)
    x = np.hstack([np.ones((x.shape[0], 1)), x])
    return torch.tensor(x, dtype=torch.float64), torch.tensor(t[:, 30], dtype=torch.float64)


def ess(draws):
    """draws [chain, draw] -> the effective sample size over split chains."""
    h = draws.shape[1] // 2
    s = np.concatenate([draws[:, :h], draws[:, h:2 * h]])
    m, n = s.shape
    w = s.var(1, ddof=1).mean()
    var = (n - 1) / n * w + s.mean(1).var(ddof=1)
    c = s - s.mean(1, keepdims=True)
    f = np.fft.rfft(c, 2 * n)
    acov = np.fft.irfft(f * np.conj(f))[:, :n].mean(0) / n
    rho = 1 - (w - acov) / var
    rho[0] = 1
    tau, prev = 0.0, np.inf
    for k in range(0, n - 1, 2):
        pair = rho[k] + rho[k + 1]
        if pair < 0:
            break
        prev = min(pair, prev)
        tau += prev
    return m * n / max(2 * tau - 1, 1 / np.log10(m * n))


def main():
    args = torch_timing.arguments(3)
    x, y = data()
    gen = torch.Generator().manual_seed(2026)
    k = x.shape[1]

    def logp_and_grad(beta):
        beta = beta.detach().requires_grad_(True)
        z = beta @ x.T
        lp = (y * z - torch.nn.functional.softplus(z)).sum(1) - 0.5 * (beta * beta).sum(1)
        (g,) = torch.autograd.grad(lp.sum(), beta)
        return lp.detach(), g

    result = {}

    def run():
        beta = torch.randn(CHAINS, k, generator=gen, dtype=torch.float64)
        lp, g = logp_and_grad(beta)
        kept = []
        for t in range(WARMUP + DRAWS):
            p0 = torch.randn(CHAINS, k, generator=gen, dtype=torch.float64)
            u = torch.rand(CHAINS, 2, generator=gen, dtype=torch.float64)
            eps = (0.9 + 0.2 * u[:, :1]) * STEP
            b1, p1, g1 = beta, p0 + 0.5 * eps * g, g
            for _ in range(LEAPFROG):
                b1 = b1 + eps * p1
                lp1, g1 = logp_and_grad(b1)
                p1 = p1 + eps * g1
            p1 = p1 - 0.5 * eps * g1
            h0 = 0.5 * (p0 * p0).sum(1) - lp
            h1 = 0.5 * (p1 * p1).sum(1) - lp1
            accept = (u[:, 1].log() < h0 - h1).unsqueeze(1)
            beta, lp, g = torch.where(accept, b1, beta), torch.where(accept[:, 0], lp1, lp), torch.where(accept, g1, g)
            if t >= WARMUP:
                kept.append(beta)
        result["draws"] = torch.stack(kept, 1).numpy()  # [chain, draw, coef]

    torch_timing.report(run, args.reps, 0)
    draws = result["draws"]
    print(f"min_ess {min(ess(draws[:, :, j]) for j in range(k)):.1f}")


if __name__ == "__main__":
    main()
