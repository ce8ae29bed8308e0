#!/usr/bin/env python3
"""sdpa_bench: each scaled_dot_product_attention backend (flash, memory-efficient, cuDNN, math) forced
one at a time against PyTorch's own choice, on the attention shapes of the model benchmark, measured side
by side in one process on one GPU. No preload: it measures what a per-variant backend choice could gain
(docs/design/attention.md), before hotkernel makes one.

    python3 bench/sdpa_bench.py --out sdpa.json [--cases llama-prefill,gpt2] [--reps 31]
    python3 bench/sdpa_bench.py --list

Each case is F.scaled_dot_product_attention as HF transformers' sdpa_attention_forward calls it (q, k, v
head views [b, h, s, d] of the projections, transposed from [b, s, h, d]; scale head_dim ** -0.5):
  llama-prefill  bf16, b 8, 16 query heads, 8 key/value heads (enable_gqa), s 512, d 128, is_causal
  llama-decode   bf16, b 8, one query against 544 cached keys (a static cache's 512 + 32), 16 / 8 heads, d 128
  gpt2           fp16, b 16, 12 heads, s 512, d 64, is_causal
  bert           bf16, b 32, 12 heads, s 512, d 64, an additive padding mask [b, 1, 1, s] (a quarter of
                 the rows padded from 3/4 of s on)
and, beyond the models, where the default may not be the fastest:
  long-prefill   bf16, b 1, 32 / 8 heads, s 4096, d 128, is_causal (a long prompt)
  long-decode    bf16, b 1, one query against 8192 cached keys, 32 / 8 heads, d 128
  headdim-80     fp16, b 8, 32 heads, s 1024, d 80 (Phi-style heads), is_causal
  vit-fp32       fp32, b 32, 12 heads, s 197, d 64 (a ViT-B/16 encoder in float32; bound 1e-4)
For each case the script
  1. runs PyTorch's default (no backend forced) and each backend under torch.nn.attention.sdpa_kernel([b]);
     a backend that refuses the case (it raises) is recorded with its reason and left out;
  2. checks each backend's output against the math backend run in float32 on the same inputs: the largest
     |out - ref| / (1 + |ref|) must stay under 2^-6 for 16-bit dtypes (a softmax over s terms, then a
     weighted sum of s values, each rounded once to the dtype);
  3. times the default and every correct backend with the project's method (bench/ops_bench.py's Timer:
     CUDA events around each call, L2 flushed by a write of twice the L2 first, the GPU kept busy while the
     call is enqueued), interleaved in rotating order, --reps rounds; medians and 95% CIs of each and of the
     paired ratios default / backend (hotkernel_compare_samples' Python twin in model_bench.py);
  4. names the fastest backend, its ratio over the default and whether its CI's low end is above 1.
Output: "hotkernel-bench" v1 JSON, benchmark "sdpa", one result per case, and a Markdown table on stdout.
Exit status 1 when a case has no correct backend or CUDA is missing (the JSON still written).
"""
import argparse
import datetime
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_bench import compare_python, median_ci  # noqa: E402  (paired-ratio statistics)
from ops_bench import Timer, machine  # noqa: E402  (the benchmark method)

FORMAT, VERSION = "hotkernel-bench", 1
DEVICE = "cuda"  # where the cases' tensors live; --smoke without CUDA checks the logic on the CPU
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
BOUND_16BIT = 2.0 ** -6

# name -> (dtype, batch, query heads, kv heads, queries, keys, head dim, is_causal, mask)
CASES = {
    "llama-prefill": ("bfloat16", 8, 16, 8, 512, 512, 128, True, None),
    "llama-decode": ("bfloat16", 8, 16, 8, 1, 544, 128, False, None),
    "gpt2": ("float16", 16, 12, 12, 512, 512, 64, True, None),
    "bert": ("bfloat16", 32, 12, 12, 512, 512, 64, False, "padding"),
    # Beyond the model benchmark: where PyTorch's default may not be the fastest.
    "long-prefill": ("bfloat16", 1, 32, 8, 4096, 4096, 128, True, None),
    "long-decode": ("bfloat16", 1, 32, 8, 1, 8192, 128, False, None),
    "headdim-80": ("float16", 8, 32, 32, 1024, 1024, 80, True, None),
    "vit-fp32": ("float32", 32, 12, 12, 197, 197, 64, False, None),
}
SMOKE = {"tiny": ("float16", 2, 4, 2, 64, 64, 64, True, None)}


def backends():
    from torch.nn.attention import SDPBackend
    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


def head_view(t, b, s, h, d):
    """[b, s, h * d] viewed [b, s, h, d] and transposed to [b, h, s, d], as HF's attention does."""
    return t.view(b, s, h, d).transpose(1, 2)


def make_inputs(case, gen):
    dtype_name, b, hq, hkv, sq, sk, d, causal, mask_kind = case
    dtype = DTYPES[dtype_name]
    q = head_view(torch.randn(b, sq, hq * d, device=DEVICE, generator=gen).to(dtype), b, sq, hq, d)
    k = head_view(torch.randn(b, sk, hkv * d, device=DEVICE, generator=gen).to(dtype), b, sk, hkv, d)
    v = head_view(torch.randn(b, sk, hkv * d, device=DEVICE, generator=gen).to(dtype), b, sk, hkv, d)
    mask = None
    if mask_kind == "padding":
        mask = torch.zeros(b, 1, 1, sk, device=DEVICE, dtype=dtype)
        mask[: b // 4, :, :, (3 * sk) // 4:] = torch.finfo(dtype).min
    kwargs = dict(attn_mask=mask, is_causal=causal, scale=d ** -0.5, enable_gqa=hq != hkv)
    return q, k, v, kwargs


def run(q, k, v, kwargs, backend=None):
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


def reference(q, k, v, kwargs):
    """The math backend in float32 on the same values."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kw = dict(kwargs)
    if kw["attn_mask"] is not None:
        kw["attn_mask"] = kw["attn_mask"].float()
    with sdpa_kernel([SDPBackend.MATH]):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw)


def worst_error(out, ref):
    return ((out.float() - ref).abs() / (ref.abs() + 1)).max().item()


def run_case(name, case, timer, reps, gen):
    q, k, v, kwargs = make_inputs(case, gen)
    ref = reference(q, k, v, kwargs)
    result = {"case": name, "dtype": case[0], "batch": case[1], "queryHeads": case[2], "kvHeads": case[3],
              "queries": case[4], "keys": case[5], "headDim": case[6], "isCausal": case[7], "mask": case[8],
              "backends": {}}
    runnable = {"default": None}
    for bname, backend in backends().items():
        try:
            out = run(q, k, v, kwargs, backend)
            if DEVICE == "cuda":
                torch.cuda.synchronize()  # a backend's launch error is its refusal
        except RuntimeError as e:  # the backend does not take the case
            result["backends"][bname] = {"ok": False, "reason": str(e).splitlines()[0][:300]}
            continue
        err = worst_error(out, ref)
        ok = err < (BOUND_16BIT if case[0] != "float32" else 1e-4)
        result["backends"][bname] = {"ok": ok, "worstError": err}
        if ok:
            runnable[bname] = backend
    result["defaultWorstError"] = worst_error(run(q, k, v, kwargs), ref)
    if len(runnable) == 1:
        result["error"] = "no backend computed the case within the bound"
        return result
    if timer is None:  # the CPU check of --smoke: nothing is timed
        return result
    names = list(runnable)
    samples = {n: [] for n in names}
    for _ in range(3):  # warm-up: each backend's first call selects its kernels
        for n in names:
            run(q, k, v, kwargs, runnable[n])
    torch.cuda.synchronize()
    for r in range(reps):
        order = names[r % len(names):] + names[: r % len(names)]  # rotating order
        events = {n: timer.time_us(lambda n=n: run(q, k, v, kwargs, runnable[n])) for n in order}
        torch.cuda.synchronize()
        for n, (e0, e1) in events.items():
            samples[n].append(e0.elapsed_time(e1) * 1e3)
    fastest = None
    for n in names[1:]:
        cmp = compare_python(samples["default"], samples[n])
        entry = result["backends"][n]
        entry.update(us=cmp["candidate"], speedupVsDefault=cmp["speedup"])
        if fastest is None or cmp["candidate"]["median"] < result["backends"][fastest]["us"]["median"]:
            fastest = n
    result["defaultUs"] = median_ci(samples["default"])
    best = result["backends"][fastest]
    result["fastest"] = fastest
    result["fastestSpeedupVsDefault"] = best["speedupVsDefault"]
    result["fastestWinsClearly"] = best["speedupVsDefault"]["low"] > 1.0
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of " + ", ".join(CASES))
    ap.add_argument("--reps", type=int, default=31, help="timed rounds (each backend once a round)")
    ap.add_argument("--out", help="JSON results")
    ap.add_argument("--smoke", action="store_true", help="one tiny case, 5 rounds")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    args = ap.parse_args()
    table = SMOKE if args.smoke else CASES
    names = list(table) if args.smoke else [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"sdpa_bench: unknown case(s) {', '.join(unknown)} (cases: {', '.join(table)})")
    if args.reps < 5:
        sys.exit("sdpa_bench: --reps must be >= 5")
    if args.list:
        for n in names:
            print(n, table[n])
        return 0
    doc = {"format": FORMAT, "version": VERSION, "benchmark": "sdpa",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "method": "CUDA events, L2 flushed, rotating order; medians and 95% CIs of paired ratios",
           "results": []}
    if not torch.cuda.is_available():
        if not args.smoke:
            print("sdpa_bench: no CUDA device: nothing measured")
            if args.out:
                doc["error"] = "no CUDA device"
                with open(args.out, "w") as f:
                    json.dump(doc, f, indent=1)
            return 1
        # The script's logic on the CPU: inputs, the float32 reference, each backend run or refused and
        # checked; nothing timed.
        global DEVICE
        DEVICE = "cpu"
        r = run_case("tiny", SMOKE["tiny"], None, 0, torch.Generator().manual_seed(0))
        print(json.dumps(r["backends"]))
        ok = "error" not in r and r["backends"]["math"]["ok"] and r["defaultWorstError"] < BOUND_16BIT
        print(f"sdpa_bench: no CUDA device: checked on the CPU ({'ok' if ok else 'FAILED'}), nothing timed")
        return 0 if ok else 1
    doc["machine"] = machine()
    doc["reps"] = 5 if args.smoke else args.reps
    timer = Timer()
    gen = torch.Generator(device=DEVICE)
    gen.manual_seed(0)
    status = 0
    print("| case | default us | fastest | us | vs default [95% CI] | refused |")
    print("|---|---|---|---|---|---|")
    for n in names:
        r = run_case(n, table[n], timer, doc["reps"], gen)
        doc["results"].append(r)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(doc, f, indent=1)
        if "error" in r:
            status = 1
            print(f"| {n} | - | - | - | {r['error']} | |")
            continue
        refused = ", ".join(b for b, e in r["backends"].items() if not e["ok"])
        s = r["fastestSpeedupVsDefault"]
        print(f"| {n} | {r['defaultUs']['median']:.1f} | {r['fastest']} | "
              f"{r['backends'][r['fastest']]['us']['median']:.1f} | {s['median']:.3f}x [{s['low']:.3f}, {s['high']:.3f}] | "
              f"{refused} |")
    return status


if __name__ == "__main__":
    sys.exit(main())
