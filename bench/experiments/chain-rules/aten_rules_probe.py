#!/usr/bin/env python3
"""Which rounding rules ATen follows for the chain IR's ops on 16-bit tensors, on CUDA (and the CPU for
comparison): for each op and dtype, the fraction of elements of ATen's result equal to each candidate
formula's. The chain interpreter and the fused kernels must follow the device's rule (Note [Chain dtypes]
in kernels/chain/include/hotkernel/chain/ChainIR.h; docs/design/fusion.md).

    python3 bench/experiments/chain-rules/aten_rules_probe.py --out rules.json

Candidates, each computed in float32 from the 16-bit input x and rounded once to the dtype unless said:
  scalar_opmath   the Python number kept in float32 (opmath), e.g. x * 0.7978845608
  scalar_rounded  the number rounded to the dtype first
  pow3_float      x * x * x in float32, rounded once
  pow3_stepwise   (x * x rounded) * x, rounded
  pown2_float     1 / (x * x) in float32
  pown2_stepwise  1 / (x * x rounded), rounded
  div_reciprocal  x * (1 / s) in float32;  div_exact  x / s in float32
Output: JSON {"format": "hotkernel-aten-rules", "version": 1, "torch", "device", "results": [{op, dtype, device,
candidate, match}]} and a table on stdout.
"""
import argparse
import json
import math

import torch


def probes(x):
    xf = x.float()
    dt = x.dtype
    r = lambda t: t.to(dt)  # noqa: E731
    c = math.sqrt(2 / math.pi)
    cr = torch.tensor(c).to(dt).float().item()
    k = 0.044715
    kr = torch.tensor(k).to(dt).float().item()
    return [
        ("mul_scalar", x * c, {"scalar_opmath": r(xf * c), "scalar_rounded": r(xf * cr)}),
        ("add_scalar", x + k, {"scalar_opmath": r(xf + k), "scalar_rounded": r(xf + kr)}),
        ("radd_scalar", 1.0 + x, {"scalar_opmath": r(xf + 1.0)}),
        ("sub_scalar_alpha", torch.sub(x, k, alpha=3), {"scalar_opmath": r(xf - 3 * k), "scalar_rounded": r(xf - 3 * kr)}),
        ("rsub_scalar", 1.0 - x, {"scalar_opmath": r(1.0 - xf)}),
        ("div_scalar", x / 3.0, {"div_reciprocal": r(xf * (1 / 3.0)), "div_exact": r(xf / 3.0)}),
        ("rdiv_scalar", 2.0 / x, {"div_exact": r(2.0 / xf), "div_reciprocal": r(2.0 * (1 / xf))}),
        ("pow3", x.pow(3.0), {"pow3_float": r(xf * xf * xf), "pow3_stepwise": r(r(xf * xf).float() * xf)}),
        ("pow2", x.pow(2.0), {"pow2_float": r(xf * xf)}),
        ("pown2", x.pow(-2.0), {"pown2_float": r(1 / (xf * xf)), "pown2_stepwise": r(1 / r(xf * xf).float())}),
        ("pow_half", x.abs().pow(0.5), {"sqrt": r(xf.abs().sqrt())}),
        ("tanh", torch.tanh(x), {"float_tanh": r(torch.tanh(xf))}),
        ("silu", torch.nn.functional.silu(x), {"float_silu": r(xf / (1 + torch.exp(-xf)))}),
        ("gelu_tanh", torch.nn.functional.gelu(x, approximate="tanh"),
         {"float_formula": r(0.5 * xf * (1 + torch.tanh(math.sqrt(2 / math.pi) * (xf + 0.044715 * xf ** 3))))}),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--n", type=int, default=1 << 20)
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    results = []
    for device in devices:
        for dtype in (torch.bfloat16, torch.float16):
            g = torch.Generator(device="cpu").manual_seed(0)
            x = ((torch.rand(args.n, generator=g) * 4 - 2)).to(dtype).to(device)
            x = torch.where(x.abs() < 0.25, torch.full_like(x, 0.5), x)  # away from 0 for the divisions
            for op, got, candidates in probes(x):
                for name, want in candidates.items():
                    match = (got == want).float().mean().item()
                    results.append({"op": op, "dtype": str(dtype).replace("torch.", ""), "device": device,
                                    "candidate": name, "match": match})
    print("| device | dtype | op | candidate | elements equal |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['device']} | {r['dtype']} | {r['op']} | {r['candidate']} | {100 * r['match']:.2f}% |")
    doc = {"format": "hotkernel-aten-rules", "version": 1, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "results": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
