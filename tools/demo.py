#!/usr/bin/env python3
"""hotkernel demo: an unmodified PyTorch inference script under the preload.

On a CUDA machine:
  1. runs examples/softmax_inference.py plainly (eager baseline, outputs saved);
  2. runs it under LD_PRELOAD with an empty cache: hotkernel records the softmax
     variants, optimizes the hot ones in the background and hot-swaps them in
     while the script runs (its log shows each swap);
  3. runs it again under LD_PRELOAD: the cached kernels load at start;
  4. prints softmax times before/after and the max error against eager.
Without a CUDA device it runs the script under the preload, prints the recorded
variants and says that optimization needs a CUDA device.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "softmax_inference.py")


def run(args, env_extra, label):
    env = dict(os.environ)
    env.update(env_extra)
    print(f"\n=== {label} ===", flush=True)
    proc = subprocess.run([sys.executable, SCRIPT] + args, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    summary = None
    for line in proc.stdout.splitlines():
        print("   ", line, flush=True)
        if line.startswith("{") and '"summary"' in line:
            summary = json.loads(line)
    if proc.returncode != 0:
        sys.exit(f"demo: the script failed under '{label}' (exit {proc.returncode})")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="hotkernel build folder")
    ap.add_argument("--seconds", type=float, default=0, help="seconds per run (default: 8 plain, 40 cold, 8 warm)")
    args = ap.parse_args()
    shim = os.path.join(args.build, "lib", "libhotkernel_preload.so")
    cli = os.path.join(args.build, "bin", "hotkernel")
    if not os.path.exists(shim):
        sys.exit(f"demo: {shim} is missing; run tools/setup.sh first")
    work = tempfile.mkdtemp(prefix="hotkernel-demo-")
    cache = os.path.join(work, "cache")
    preload = {"LD_PRELOAD": shim, "HOTKERNEL_CACHE_DIR": cache, "HOTKERNEL_LOG_LEVEL": "info"}

    import torch  # only to ask whether there is a GPU
    if not torch.cuda.is_available():
        profile = os.path.join(work, "profile.json")
        run(["--seconds", str(args.seconds or 3), "--device", "cpu"], dict(preload, HOTKERNEL_PROFILE=profile),
            "CPU: the script under the preload (recording)")
        with open(profile) as f:
            prof = json.load(f)
        # hotkernel-profile v3 spells its keys in snake_case, v1 and v2 in camelCase (docs/design/json-style.md).
        calls = "estimated_calls" if prof.get("version", 0) >= 3 else "estimatedCalls"
        print("\nRecorded softmax variants (estimated calls):")
        for v in prof["variants"]:
            print(f"  {v['op']}  {v['dtype']}  rows={v['rows']} cols={v['cols']}  device={v['device']}  "
                  f"~{v[calls]:.0f} calls")
        print("Hottest ops:", ", ".join(f"{o['op']} (~{o[calls]:.0f})" for o in prof["ops"][:6]))
        print("\nNo CUDA device here: optimization needs a CUDA device. On a GPU machine the same command "
              "optimizes these variants and swaps the faster kernels in.")
        return

    eager_out, hk_out = os.path.join(work, "eager.pt"), os.path.join(work, "hotkernel.pt")
    plain = run(["--seconds", str(args.seconds or 8), "--save", eager_out], {}, "1. eager (no hotkernel)")
    run(["--seconds", str(args.seconds or 40)], dict(preload, HOTKERNEL_SAMPLE="0.2"),
        "2. under the preload, empty cache: record, optimize, hot-swap while serving")
    warm = run(["--seconds", str(args.seconds or 8), "--save", hk_out], preload,
               "3. under the preload, warm cache: kernels loaded at start")
    print("\n=== cache ===", flush=True)
    subprocess.run([cli, "cache", "ls", "--dir", cache])

    a, b = torch.load(eager_out), torch.load(hk_out)
    print("\n=== result (medians over the last quarter of each run) ===")
    for stage in ("lm_head_softmax_ms", "attention_softmax_ms", "iteration_ms"):
        before, after = plain["last"][stage], warm["last"][stage]
        print(f"  {stage:22s} eager {before:8.3f} ms   hotkernel {after:8.3f} ms   {before / after:5.2f}x")
    for name in ("probs", "attn", "ctx"):
        err = (a[name].double() - b[name].double()).abs().max().item()
        print(f"  max |hotkernel - eager| for {name}: {err:.3g}")


if __name__ == "__main__":
    main()
