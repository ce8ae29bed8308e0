#!/usr/bin/env python3
"""A float32 emulation of the middle-dim softmax's arithmetic (kernels/softmax/softmax_dim.cu) on the CPU, numpy
only: per (outer, inner) position, HK_TY threads each fold their rows in index order into an online (max, sum)
pair, the pairs merge in the kernel's fixed tree, then softmax and log_softmax are written; once with a plain
running sum, once compensated (Note [Compensated middle-dim sums]). Prints each variant's largest errors against
float64 and its excess over the family's float32 bounds (softmax: 2 s(cols) + 2^-22 relative, 2^-126 absolute;
log_softmax: 2^-22 relative, 4e-6 absolute). numpy's float32 exp stands in for CUDA's expf.

  python3 bench/experiments/softmax-dim-sums/emulate.py [--dim 4099] [--ty 16] [--positions 3072] [--seed 1]
"""
import argparse

import numpy as np

F = np.float32


def run(x, ty, compensated):
    dim, positions = x.shape
    sums, maxes = [], []
    for t in range(ty):
        m = np.full(positions, -np.inf, F)
        s = np.zeros(positions, F)
        c = np.zeros(positions, F)
        for r in range(t, dim, ty):
            v = x[r]
            rise = v > m
            scale = np.where(rise, np.exp((m - v).astype(F)), F(1)).astype(F)
            s = np.where(rise, (s * scale).astype(F), s)
            if compensated:
                c = np.where(rise, (c * scale).astype(F), c)
            base = np.where(rise, v, m)
            base = np.where(np.isneginf(base), F(0), base)
            term = np.exp((v - base).astype(F)).astype(F)
            m = np.maximum(m, v)
            if compensated:
                y = (term - c).astype(F)
                u = (s + y).astype(F)
                c = ((u - s).astype(F) - y).astype(F)
                s = u
            else:
                s = (s + term).astype(F)
        sums.append((s - c).astype(F) if compensated else s)
        maxes.append(m)
    h = ty // 2
    while h > 0:  # ty with ty + h, h halving: the kernel's tree
        for t in range(h):
            nm = np.maximum(maxes[t], maxes[t + h])
            sums[t] = (sums[t] * np.exp((maxes[t] - nm).astype(F)) +
                       sums[t + h] * np.exp((maxes[t + h] - nm).astype(F))).astype(F)
            maxes[t] = nm
        h //= 2
    m, s = maxes[0], sums[0]
    softmax = (np.exp((x - m).astype(F)) * (F(1) / s).astype(F)).astype(F)
    log_softmax = ((x - m).astype(F) - np.log(s).astype(F)).astype(F)
    return softmax, log_softmax, s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=4099)
    ap.add_argument("--ty", type=int, default=16)
    ap.add_argument("--positions", type=int, default=3 * 256 * 4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    x = (np.random.default_rng(a.seed).standard_normal((a.dim, a.positions)) * 4).astype(F)
    x64 = x.astype(np.float64)
    m64 = x64.max(0)
    e = np.exp(x64 - m64)
    s64 = e.sum(0)
    ref, log_ref = e / s64, (x64 - m64) - np.log(s64)
    rel = 2 * 4e-6 * max(1.0, (a.dim / 16384) ** 0.5) + 2 ** -22
    for compensated in (False, True):
        out, log_out, s = run(x, a.ty, compensated)
        print(f"{'compensated' if compensated else 'plain'} (dim {a.dim}, ty {a.ty}): "
              f"sum rel err {np.max(np.abs(s - s64) / s64):.2e}, "
              f"softmax excess {np.max(np.abs(out - ref) - (np.abs(ref) * rel + 2 ** -126)):.2e}, "
              f"log_softmax excess {np.max(np.abs(log_out - log_ref) - (np.abs(log_ref) * 2 ** -22 + 4e-6)):.2e}")


if __name__ == "__main__":
    main()
