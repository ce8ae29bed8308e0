#!/usr/bin/env python3
"""Probe of the padded GEMM's copy kernel (kernels/gemm/pad_rows.cu) on the LM heads' copies, two templates side
by side.

    pad_rows_probe.py [--base FILE] [--points 512x8,256x8] [--reps 21] [--out FILE] [--compile-only DIR]

Compiles hk_pad_rows from the current template and from --base (an earlier text of it, e.g.
`git show 054fa05:kernels/gemm/pad_rows.cu > base.cu`) with NVRTC through ctypes, for each point THREADSxVEC
(MmPadFamily::compileOptions' -DHK_THREADS / -DHK_VEC; the grid MmPadFamily::launchGeometry's: ceil(packs /
threads) CTAs, at most 2^20 / threads), checks each launch's output bit for bit against ATen's strided copy, then
times every kernel and ATen's `out.copy_(buf[:, :n])` with the project's method (ops_bench.Timer: CUDA events
around one call, L2 flushed; all candidates interleaved in rotating order; paired ratios per repetition, median
and 2.5/97.5 percentiles). The copies: GPT-2's LM head output fp16 [8192, 50264] -> [8192, 50257], BERT's MLM
head output bf16 [16384, 30528] -> [16384, 30522], and GPT-2's weight fp16 [50257, 768] -> [50264, 768].

JSON written (format "hotkernel-pad-rows-probe", version 1): machine, date, copy bandwidth, reps, and per copy
{name, dtype, dst [rows, cols], src [rows, cols, ld], bytes, candidates: [{name, template, threads, vec,
registers, medianUs, copyFraction, vsAten, vsBase (the same point of --base), samplesUs}]}.
"""
import argparse
import ctypes
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "rms-norm"))
from norm_probe import (  # noqa: E402  (the probes' NVRTC, driver, timing, statistics and JSON)
    LoadedFunction, compile_cubin, find_nvrtc, load_driver, paired_ratio, write_cubins,
    write_probe_json)

TEMPLATE = os.path.join(ROOT, "kernels", "gemm", "pad_rows.cu")
MAX_THREADS_IN_GRID = 1 << 20
# (name, dtype, dst rows, dst cols, src rows, src cols, src ld)
COPIES = [
    ("gpt2-head-out", "float16", 8192, 50257, 8192, 50257, 50264),
    ("bert-head-out", "bfloat16", 16384, 30522, 16384, 30522, 30528),
    ("gpt2-weight-pad", "float16", 50264, 768, 50257, 768, 768),
]


class Kernel(LoadedFunction):
    def __init__(self, cuda, image):
        super().__init__(cuda, image, b"hk_pad_rows")

    def launch(self, torch, src, dst, shape, threads, vec):
        dst_rows, dst_cols, src_rows, src_cols, src_ld = shape
        packs = -(-(dst_rows * dst_cols) // vec)
        ctas = max(1, min(-(-packs // threads), MAX_THREADS_IN_GRID // threads))
        args = [ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr())] + \
            [ctypes.c_longlong(v) for v in shape]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        stream = torch.cuda.current_stream().cuda_stream
        self.check(self.cuda.cuLaunchKernel(self.fn, ctas, 1, 1, threads, 1, 1, 0, ctypes.c_void_p(stream), params,
                                            None), "cuLaunchKernel")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="", help="an earlier pad_rows.cu to time beside the current one")
    ap.add_argument("--points", default="512x8,256x8", help="THREADSxVEC,...")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--out", default="pad-rows-probe.json")
    ap.add_argument("--compile-only", default="", help="write the cubins to this folder and stop (no GPU)")
    args = ap.parse_args()

    points = [tuple(int(v) for v in p.split("x")) for p in args.points.split(",")]
    templates = [("current", open(TEMPLATE).read())]
    if args.base:
        templates.append(("base", open(args.base).read()))
    nvrtc = find_nvrtc()
    cands = []
    for tag, text in templates:
        for threads, vec in points:
            cubin = compile_cubin(nvrtc, text, args.arch, [f"-DHK_THREADS={threads}", f"-DHK_VEC={vec}"])
            cands.append({"name": f"{tag} {threads}x{vec}", "template": tag, "threads": threads, "vec": vec,
                          "cubin": cubin})
    if args.compile_only:
        write_cubins(args.compile_only, cands)
        return 0

    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from ops_bench import Timer, copy_bandwidth, machine, time_interleaved

    cuda = load_driver()
    torch.zeros(1, device="cuda")  # the primary context, current: the driver's module loads need it
    for c in cands:
        c["kernel"] = Kernel(cuda, c["cubin"])
    timer = Timer()
    copy_gbps = copy_bandwidth(timer) / 1e9
    report = []
    for name, dtype, *shape in COPIES:
        dst_rows, dst_cols, src_rows, src_cols, src_ld = shape
        dt = getattr(torch, dtype)
        gen = torch.Generator(device="cuda").manual_seed(0)
        src = torch.randn(src_rows, src_ld, device="cuda", dtype=dt, generator=gen)
        dst = torch.empty(dst_rows, dst_cols, device="cuda", dtype=dt)
        ref = torch.zeros(dst_rows, dst_cols, device="cuda", dtype=dt)
        ref[:src_rows, :src_cols].copy_(src[:, :src_cols])

        def aten(src=src, dst=dst, src_rows=src_rows, src_cols=src_cols):
            dst[:src_rows, :src_cols].copy_(src[:, :src_cols])
            if dst.shape[0] > src_rows:
                dst[src_rows:].zero_()

        timed = [("aten", aten)]
        for c in cands:
            dst.fill_(float("nan"))
            c["kernel"].launch(torch, src, dst, shape, c["threads"], c["vec"])
            torch.cuda.synchronize()
            same = torch.equal(dst.view(torch.int16), ref.view(torch.int16))
            print(f"{name} {c['name']}: {c['kernel'].registers} registers, bits {'equal' if same else 'DIFFER'}",
                  flush=True)
            if not same:
                raise SystemExit(f"{name}: {c['name']} wrote other bits than ATen's copy")
            timed.append((c["name"], lambda c=c, src=src, dst=dst, shape=shape:
                          c["kernel"].launch(torch, src, dst, shape, c["threads"], c["vec"])))
        del ref
        samples = time_interleaved(timer, timed, args.reps)
        moved = 2 * dst.element_size() * dst_rows * dst_cols  # read once, written once (the zeros only written)
        med = {n: statistics.median(v) for n, v in samples.items()}

        entries = []
        for n, _ in timed:
            c = next((c for c in cands if c["name"] == n), {})
            e = {"name": n, "template": c.get("template", "aten"), "threads": c.get("threads"), "vec": c.get("vec"),
                 "registers": c["kernel"].registers if c else None, "medianUs": med[n],
                 "copyFraction": moved / (med[n] * 1e-6) / (copy_gbps * 1e9),
                 "vsAten": paired_ratio(samples, n, "aten"), "samplesUs": samples[n]}
            base = f"base {c['threads']}x{c['vec']}" if c.get("template") == "current" else ""
            if base in samples:
                e["vsBase"] = paired_ratio(samples, n, base)
            entries.append(e)
            print(f"{name:16s} {n:16s} {med[n]:8.1f} us {100 * e['copyFraction']:5.1f}% copy  vs aten "
                  f"{e['vsAten']['median']:.3f}x" + (f"  vs base {e['vsBase']['median']:.3f}x "
                                                       f"[{e['vsBase']['low']:.3f}, {e['vsBase']['high']:.3f}]"
                                                       if "vsBase" in e else ""), flush=True)
        report.append({"name": name, "dtype": dtype, "dst": [dst_rows, dst_cols], "src": [src_rows, src_cols, src_ld],
                       "bytes": moved, "candidates": entries})
        del src, dst

    write_probe_json(args.out, "hotkernel-pad-rows-probe", 1, machine(),
                     {"copyGBps": copy_gbps, "reps": args.reps, "copies": report})
    return 0


if __name__ == "__main__":
    sys.exit(main())
