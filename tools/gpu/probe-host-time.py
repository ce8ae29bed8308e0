#!/usr/bin/env python3
"""Investigation run on the GPU machine (not part of CI): where a model step's host time goes under the preload.

model_bench.py's Llama-like prefill is host-bound under hotkernel (the step's host time is close to its GPU time, so
the GPU waits for launches); this probe builds that model (bench/model_bench.py's spec), makes it hot and waits for
the optimizer as model_bench does, then times the host part of N steps with hotkernel switched off and on,
interleaved, and, where py-spy is given, samples each mode's steps (native frames included) into a collapsed-stack
file per mode, so the frames that differ between the two show what the preload adds or saves on the host.

  LD_PRELOAD=build/lib/libhotkernel_preload.so python3 tools/gpu/probe-host-time.py --out DIR [--py-spy PATH]

Writes DIR/host-time.json (per mode: host microseconds per step, median and samples; with --py-spy, each mode's
frames by their share of the forward's samples, the share of samples with a hotkernel frame on the stack, and
hotkernel's own share: samples whose deepest frame outside libc, libstdc++ and libc10 is hotkernel's, ranked by
that frame) and, with --py-spy,
DIR/pyspy-{off,on}.txt (py-spy's raw format: one collapsed stack and its sample count a line).
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import model_bench as mb  # noqa: E402


def allow_any_tracer():
    """Yama's ptrace_scope 1 lets only ancestors attach: py-spy, our child, may attach once we say so."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(0x59616D61, ctypes.c_ulong(-1 & 0xFFFFFFFFFFFFFFFF), 0, 0, 0)  # PR_SET_PTRACER, ANY
    except (OSError, AttributeError):
        pass


def summarize(path, top=40):
    """py-spy's raw file (one collapsed stack and its count a line) as shares of the samples in the model's forward:
    each frame's inclusive share (the frames under it included) and its own (leaf) share, the largest first."""
    stacks = {}
    try:
        with open(path) as f:
            for line in f:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                if stack and count.isdigit():
                    stacks[stack] = stacks.get(stack, 0) + int(count)
    except OSError as e:
        return {"error": str(e)}
    forward = {k: v for k, v in stacks.items() if "forward" in k}
    total = sum(forward.values())
    inclusive, own = {}, {}
    for stack, count in forward.items():
        frames = [f.split(" (")[0] for f in stack.split(";")]
        for name in set(frames):
            inclusive[name] = inclusive.get(name, 0) + count
        own[frames[-1]] = own.get(frames[-1], 0) + count
    def shares(d):
        return [[name, round(c / total, 4)] for name, c in sorted(d.items(), key=lambda kv: -kv[1])[:top]] if total else []
    hk = sum(c for k, c in forward.items() if "hotkernel" in k)
    # hotkernel's own host time: samples whose deepest frame outside the helper libraries (allocation, locks,
    # strings, refcounts) is one of hotkernel's, charged to that frame. The inclusive share above also holds the
    # original kernels a trampoline calls.
    helpers = ("(libc.so", "(libstdc++.so", "(libc10.so", "(libm.so", "(ld-linux")
    owned = {}
    for stack, count in forward.items():
        frames = stack.split(";")
        i = len(frames) - 1
        while i > 0 and any(h in frames[i] for h in helpers):
            i -= 1
        if "(libhotkernel" in frames[i]:
            name = frames[i].split(" (")[0]
            owned[name] = owned.get(name, 0) + count
    return {"samples": sum(stacks.values()), "forwardSamples": total,
            "hotkernelShare": round(hk / total, 4) if total else None,
            "hotkernelOwnedShare": round(sum(owned.values()) / total, 4) if total else None,
            "ownedBy": shares(owned), "inclusive": shares(inclusive), "own": shares(own)}


def host_steps(fn, n):
    """Host microseconds of n steps, the GPU drained before each (as model_bench's timer)."""
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama", help="a model of bench/model_bench.py (default llama)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per mode and round")
    ap.add_argument("--rounds", type=int, default=3, help="off/on rounds, interleaved")
    ap.add_argument("--tune-timeout", type=float, default=90.0, help="seconds to learn and tune chains at most")
    ap.add_argument("--py-spy", default="", help="py-spy binary: sample each mode's steps (native frames)")
    ap.add_argument("--rate", type=int, default=1000, help="py-spy samples a second")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    hk = mb.Hotkernel.load()
    if hk is None:
        sys.exit("probe-host-time: libhotkernel is not in the process (run under LD_PRELOAD)")
    allow_any_tracer()
    device = torch.device("cuda")
    spec = mb.model_specs(False)[args.model]
    model = mb.build_model(spec, device)
    gen = torch.Generator(device=device).manual_seed(1234)
    ids = torch.randint(0, model.config.vocab_size, (spec["batch"], spec["seq"]), device=device, generator=gen)
    extra = dict(use_cache=False) if spec["auto"] == "causal" else {}

    def forward():
        return model(input_ids=ids, **extra).logits

    with torch.no_grad():  # as model_bench.py runs its models
        start = time.perf_counter()
        # Learn, tune, learn again until the ready chains stop changing (a deferred chain can leave the rest of its
        # window to be learned; the optimizer picks up a hot chain a moment after it is reported).
        last, stable = None, 0
        while time.perf_counter() - start < args.tune_timeout and stable < 2:
            for _ in range(75):
                forward()
            torch.cuda.synchronize()
            time.sleep(2.0)
            hk.wait_idle(max(args.tune_timeout - (time.perf_counter() - start), 1.0))
            fusion = hk.status().get("fusion", {})
            now = (fusion.get("hot_chains"), fusion.get("ready_chains"))
            stable = stable + 1 if now == last else 0
            last = now
        print(f"probe: tuned in {time.perf_counter() - start:.1f} s; fusion hot / ready chains {last}", flush=True)
        samples = {"off": [], "on": []}
        for r in range(args.rounds):
            for mode in ("off", "on"):
                hk.set_enabled(1 if mode == "on" else 0)
                host_steps(forward, 3)  # settle
                samples[mode] += host_steps(forward, args.steps)
        if args.py_spy:
            # Sampled apart from the timed rounds: py-spy's native mode stops the process at each sample.
            for mode in ("off", "on"):
                hk.set_enabled(1 if mode == "on" else 0)
                host_steps(forward, 3)
                spy = subprocess.Popen([args.py_spy, "record", "--native", "--rate", str(args.rate), "--format", "raw",
                                        "--pid", str(os.getpid()), "-o", os.path.join(args.out, f"pyspy-{mode}.txt")],
                                       stdout=subprocess.DEVNULL,
                                       stderr=open(os.path.join(args.out, f"pyspy-{mode}.log"), "w"))
                time.sleep(1.0)  # attached
                host_steps(forward, args.steps)
                spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
                try:
                    spy.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    spy.kill()
        hk.set_enabled(1)
        fusion = hk.status().get("fusion", {})
    spied = {mode: summarize(os.path.join(args.out, f"pyspy-{mode}.txt")) for mode in ("off", "on")} if args.py_spy else {}
    report = {"model": args.model, "steps": args.steps, "rounds": args.rounds,
              "hostUs": {m: {"median": round(statistics.median(s), 1), "samples": [round(x, 1) for x in s]}
                         for m, s in samples.items()},
              "fusion": {k: fusion.get(k) for k in ("ready_chains", "hot_chains", "deferred_calls", "fused_flushes",
                                                    "passed_calls")},
              "pySpy": spied}
    with open(os.path.join(args.out, "host-time.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"probe: host us per step: off {report['hostUs']['off']['median']}, on {report['hostUs']['on']['median']}")


if __name__ == "__main__":
    main()
