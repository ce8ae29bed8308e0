#!/usr/bin/env python3
"""A chain_kernel_tool stand-in for bench/fusion_bench.py (--tool): runs the real tool
(CHAIN_TOOL, default .deps/prebuilt/bin/chain_kernel_tool, else build/bin/chain_kernel_tool)
with the same arguments, then adds to its manifest, for every point whose kernel divides
by a row sum (`__fdiv_rn(vA, rB)` with `rB = hk_row_sum(...)`: softmax), a sibling point
NAME-rcp whose kernel multiplies by the sum's reciprocal, computed once a row
(`__fdiv_rn(1.0f, rB)`), compiled with nvcc at the manifest's arch (same front end and
ptxas as NVRTC). The question: how much of the attention scores' row kernel is the IEEE
division a value, against torch.compile's kernel (which divides approximately).

    python3 bench/fusion_bench.py --tool bench/experiments/chain-division/rcp_tool.py \
        --cases attention-softmax:float16:16x12x512x512 --no-compile --out rcp.json
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def real_tool():
    if os.environ.get("CHAIN_TOOL"):
        return os.environ["CHAIN_TOOL"]
    for p in (".deps/prebuilt/bin/chain_kernel_tool", "build/bin/chain_kernel_tool"):
        if os.path.exists(os.path.join(ROOT, p)):
            return os.path.join(ROOT, p)
    sys.exit("rcp_tool: no chain_kernel_tool (set CHAIN_TOOL)")


def with_reciprocal(src):
    """The kernel source with each division by a row sum turned into a multiply by its reciprocal, or None."""
    sums = re.findall(r"const float (r\d+) = hk_row_sum\(", src)
    out, changed = src, False
    for r in sums:
        div = re.compile(r"__fdiv_rn\((v\d+), " + r + r"\)")
        if not div.search(out):
            continue
        out = div.sub(lambda m: "__fmul_rn(" + m.group(1) + ", hk_rcp_" + r + ")", out)
        out = re.sub(r"(  const float " + r + r" = hk_row_sum\([^;]*;\n)",
                     lambda m: m.group(1) + "  const float hk_rcp_" + r + " = __fdiv_rn(1.0f, " + r + ");\n", out)
        changed = True
    return out if changed else None


def main():
    argv = sys.argv[1:]
    proc = subprocess.run([real_tool()] + argv, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if "--out" not in argv or proc.returncode not in (0, 1):
        return proc.returncode
    out_dir = argv[argv.index("--out") + 1]
    path = os.path.join(out_dir, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    added = []
    for p in list(manifest["points"]):
        if p.get("status", "ok") != "ok" or not p.get("cubin"):
            continue
        src_path = os.path.join(out_dir, os.path.splitext(p["cubin"])[0] + ".cu")
        if not os.path.exists(src_path):
            continue
        with open(src_path) as f:
            src = with_reciprocal(f.read())
        if src is None:
            continue
        name = p["name"] + "-rcp"
        cu, cubin = os.path.join(out_dir, name + ".cu"), os.path.join(out_dir, name + ".cubin")
        with open(cu, "w") as f:
            f.write(src)
        c = subprocess.run([nvcc, "-cubin", "-arch=" + manifest["arch"], "-std=c++17", "-O3", "-o", cubin, cu],
                           capture_output=True, text=True)
        if c.returncode != 0:
            print(f"{name}: nvcc failed:\n{c.stderr}", file=sys.stderr)
            continue
        q = dict(p)
        q["name"], q["cubin"] = name, name + ".cubin"
        added.append(q)
        print(f"{name:14s} ok   (reciprocal a row)")
    manifest["points"].extend(added)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
