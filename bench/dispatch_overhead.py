#!/usr/bin/env python3
"""Host-side cost of one call of small CUDA ops, for comparing processes with
and without the hotkernel preload (and with or without the reductions in HOTKERNEL_OPS).

Each op runs on a tensor small enough that its GPU time is far below the
host's launch cost, in a loop of `--calls` calls between two
torch.cuda.synchronize(); the time per call is the loop's wall time divided by
its calls (time.perf_counter), repeated `--reps` times: median, min and max.
The loops of all ops are interleaved, rep by rep, so drift in the machine's
state spreads over every op alike. The process's configuration (LD_PRELOAD,
HOTKERNEL_OPS, HOTKERNEL_OPTIMIZE) is recorded with the results: run it once
per configuration and compare the medians of runs made back to back.

With --merge IN.json..., no timing: the runs are gathered into one document
{"format", "version", "benchmark", "date", "runs": [...]} with, per op, each
run's median minus the median of the run labelled "none" (no preload) when
there is one, and a table printed.

Output JSON (format "hotkernel-dispatch-overhead", version 1):
  {"format", "version", "benchmark", "date", "label", "machine": {gpu, torch,
   cuda, driver}, "env": {LD_PRELOAD, HOTKERNEL_OPS, HOTKERNEL_OPTIMIZE,
   HOTKERNEL_SAMPLE}, "calls", "reps", "results": [{"op", "shape", "dtype",
   "usPerCall": {"median", "low", "high", "n"}}]}
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import torch

FORMAT = "hotkernel-dispatch-overhead"
VERSION = 1

OPS = {
    "sum": lambda x: torch.sum(x, -1),
    "mean": lambda x: torch.mean(x, -1),
    "amax": lambda x: torch.amax(x, -1),
    "argmax": lambda x: torch.argmax(x, -1),
    "softmax": lambda x: torch.softmax(x, -1),
    "add": lambda x: x + 1,  # not served by hotkernel: the dispatcher's own cost, for reference
}


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def parse_shape(text):
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"bad shape '{text}': expected e.g. 32x128")
    return dims


def merge(paths, out):
    runs = []
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        if doc.get("format") != FORMAT or doc.get("version") != VERSION:
            print(f"dispatch_overhead: {p} is not a {FORMAT} v{VERSION} document", file=sys.stderr)
            return 2
        runs.append(doc)
    # Per label, the median over its runs of each op's median (runs of one
    # label made at different times in the same session).
    by_label = {}
    for r in runs:
        for res in r["results"]:
            by_label.setdefault(r["label"], {}).setdefault(res["op"], []).append(res["usPerCall"]["median"])
    summary = {label: {op: statistics.median(v) for op, v in ops.items()} for label, ops in by_label.items()}
    base = summary.get("none")
    table = []
    for label, ops in summary.items():
        for op, us in ops.items():
            row = {"label": label, "op": op, "usPerCall": us}
            if base and op in base:
                row["overheadUs"] = us - base[op]
            table.append(row)
            extra = f" ({row['overheadUs']:+.2f} us vs none)" if "overheadUs" in row else ""
            print(f"{label:>12} {op:>8}: {us:7.2f} us/call{extra}")
    doc = {"format": FORMAT, "version": VERSION, "benchmark": "dispatch_overhead",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": runs[0]["machine"] if runs else None, "summary": table, "runs": runs}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"written {out}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=",".join(OPS), help="comma list of: " + ", ".join(OPS))
    ap.add_argument("--shape", type=parse_shape, default=(32, 128), help="tensor shape, e.g. 32x128")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    ap.add_argument("--reps", type=int, default=15, help="timed loops per op")
    ap.add_argument("--label", default="", help="names this process's configuration in the JSON")
    ap.add_argument("--out", required=True, help="JSON output path")
    ap.add_argument("--merge", nargs="+", metavar="IN", help="gather these runs' JSON into --out; no timing")
    args = ap.parse_args()
    if args.merge:
        return merge(args.merge, args.out)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        ap.error(f"unknown ops {unknown}; known: {', '.join(OPS)}")
    if args.calls < 1 or args.reps < 3:
        ap.error("--calls must be >= 1 and --reps >= 3")
    if not torch.cuda.is_available():
        print("dispatch_overhead: no CUDA device", file=sys.stderr)
        return 2

    x = torch.randn(args.shape, device="cuda").to(getattr(torch, args.dtype))
    for op in ops:  # warm-up: first-call costs (and the recorder's first sightings) out of the timing
        for _ in range(200):
            OPS[op](x)
    torch.cuda.synchronize()
    samples = {op: [] for op in ops}
    for _ in range(args.reps):
        for op in ops:
            f = OPS[op]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                f(x)
            torch.cuda.synchronize()
            samples[op].append((time.perf_counter() - t0) / args.calls * 1e6)

    results = []
    for op in ops:
        s = samples[op]
        results.append({"op": op, "shape": list(args.shape), "dtype": args.dtype,
                        "usPerCall": {"median": statistics.median(s), "low": min(s), "high": max(s), "n": len(s)}})
        print(f"{args.label or '-':>24} {op:>8} {args.dtype} {'x'.join(map(str, args.shape))}: "
              f"{statistics.median(s):7.2f} us/call [{min(s):.2f}, {max(s):.2f}]")
    doc = {
        "format": FORMAT, "version": VERSION, "benchmark": "dispatch_overhead",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "label": args.label,
        "machine": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                    "cuda": torch.version.cuda, "driver": driver_version()},
        "env": {k: os.environ.get(k) for k in ("LD_PRELOAD", "HOTKERNEL_OPS", "HOTKERNEL_OPTIMIZE",
                                               "HOTKERNEL_SAMPLE")},
        "calls": args.calls, "reps": args.reps, "results": results,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
