#!/usr/bin/env python3
"""chain_kernel_tool on every named chain at small shapes for sm_90: exit status,
the manifest (Note [Chain kernel manifest, v2] in bench/chain_kernel_tool.cpp)
field by field, a non-empty ELF cubin holding hk_chain and its source for every
point, points the shape rules out listed as skipped, and usage errors (exit 2,
a message, no manifest).

    chain_kernel_tool_test.py <chain_kernel_tool>

Exits 77 (ctest's skip) when NVRTC cannot be loaded on this machine.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

ELEMENT = {"float32": 4, "float16": 2, "bfloat16": 2}
MAX_POINTWISE_CTAS = 1 << 16  # kMaxPointwiseCtas
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
    return cond


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=240)


# chain -> (dtype, shape, tool arguments, expected arguments: (kind, dtype, shape) in order)
CASES = {
    "rmsnorm": ("bfloat16", (37, 512), ["--eps", "1e-05"],
                [("input", "bfloat16", "full"), ("input", "bfloat16", "column"), ("output", "bfloat16", "full")]),
    "swiglu": ("bfloat16", (37, 512), [],
               [("input", "bfloat16", "full"), ("input", "bfloat16", "full"), ("output", "bfloat16", "full")]),
    "newgelu": ("float16", (37, 384), [], [("input", "float16", "full"), ("output", "float16", "full")]),
    "residual-add-cast": ("bfloat16", (37, 512), ["--to", "float32"],
                          [("input", "bfloat16", "full"), ("input", "bfloat16", "full"),
                           ("output", "bfloat16", "full"), ("output", "float32", "full")]),
    "residual-layernorm": ("bfloat16", (37, 768), ["--eps", "1e-05"],
                           [("input", "bfloat16", "full"), ("input", "bfloat16", "full"),
                            ("input", "bfloat16", "column"), ("input", "bfloat16", "column"),
                            ("output", "bfloat16", "full"), ("output", "bfloat16", "full")]),
    # HF's rotary on x of [batch 2, heads 4, seq 37, head dim 64]: the view [2 * 4 * 37, 64].
    "rotary": ("bfloat16", (2 * 4 * 37, 64), ["--shape", "2x4x37x64"],
               [("input", "bfloat16", "full")] * 5 + [("output", "bfloat16", "full")]),
    # GPT-2's eager attention scores of [batch 2, heads 3, queries 37, keys 64], the mask shared by the heads.
    "attention-softmax": ("float16", (2 * 3 * 37, 64), ["--shape", "2x3x37x64", "--scale", "0.125"],
                          [("input", "float16", "full")] * 2 + [("output", "float16", "full")]),
}
LAID_OUT = ("rotary", "attention-softmax")  # --shape in their extra arguments, a layout in the manifest
# The tool's --shape of a case (rotary's is BATCHxHEADSxSEQxHEADDIM, in its extra arguments).
ROTARY_SPANS = {"x": (37 - 1) * 4 * 64 + (4 - 1) * 64 + (2 - 1) * 37 * 4 * 64 + 64}


def check_manifest(chain, dtype, rows, cols, expected, out_dir, eps=1e-05, min_points=3, arch="sm_90"):
    with open(os.path.join(out_dir, "manifest.json")) as f:
        m = json.load(f)
    what = f"{chain} {dtype} [{rows}, {cols}]"
    expect(m["format"] == "hotkernel-chain-kernels" and m["version"] == 2, f"{what}: format {m['format']} v{m['version']}")
    if chain == "rotary":
        expect(m.get("rotary") == {"batch": 2, "heads": 4, "seq": 37, "headDim": 64}, f"{what}: rotary {m.get('rotary')}")
        expect(m["layout"].get("rowDims") == [2, 4, 37], f"{what}: layout {m['layout']}")
    elif chain == "attention-softmax":
        expect(m.get("attention") == {"batch": 2, "heads": 3, "queries": 37, "keys": 64, "scale": 0.125},
               f"{what}: attention {m.get('attention')}")
        expect(m["layout"].get("rowDims") == [2, 3, 37], f"{what}: layout {m['layout']}")
    else:
        expect(m["layout"] == {}, f"{what}: a contiguous case has layout {m['layout']}")
    expect((m["chain"], m["dtype"], m["rows"], m["cols"], m["arch"]) == (chain, dtype, rows, cols, arch),
           f"{what}: the manifest names {m['chain']} {m['dtype']} [{m['rows']}, {m['cols']}] {m['arch']}")
    expect(m["kernel"] == "hk_chain", f"{what}: kernel {m['kernel']}")
    expect(m["ir"]["format"] == "hotkernel-chain" and m["ir"]["outputs"], f"{what}: no chain IR")
    expect(m["nvrtcVersion"] >= 12000, f"{what}: nvrtcVersion {m['nvrtcVersion']}")
    if chain in ("rmsnorm", "residual-layernorm"):
        expect(m.get("eps") == eps, f"{what}: eps {m.get('eps')}")
    if chain == "residual-add-cast":
        expect(m.get("to") == "float32", f"{what}: to {m.get('to')}")
    reductions = any(n["op"] in ("sum", "mean", "amax") for n in m["ir"]["nodes"])
    names = [p["name"] for p in m["points"]]
    expect(len(names) >= min_points and len(set(names)) == len(names), f"{what}: points {names}")
    if chain == "rotary":
        expect(sum(1 for n in names if n.endswith("f")) >= 3, f"{what}: the folded points are missing: {names}")
    for p in m["points"]:
        pw = f"{what} {p['name']}"
        prm = p["params"]
        folded = prm.get("fold", False)  # Note [Folded segments]: rotary's halves in one thread
        expect(p["name"] == f"t{prm['threads']}v{prm['vec']}r{prm['rowsPerCta']}i{prm['items']}" + ("f" if folded else ""),
               f"{pw}: name")
        expect(not folded or chain == "rotary", f"{pw}: folded, but only rotary's cat cuts equal segments")
        expect(p["error"] is None and p["cubin"] == p["name"] + ".cubin", f"{pw}: error {p['error']}")
        if p["cubin"]:
            with open(os.path.join(out_dir, p["cubin"]), "rb") as f:
                image = f.read()
            expect(len(image) > 0 and image.startswith(b"\x7fELF") and b"hk_chain" in image,
                   f"{pw}: {p['cubin']} is not an ELF image holding hk_chain ({len(image)} bytes)")
        expect(os.path.getsize(os.path.join(out_dir, p["source"])) > 0, f"{pw}: empty source")
        expect(p["registers"] > 0 and p["spillBytes"] == 0, f"{pw}: {p['registers']} registers, {p['spillBytes']} spilled")
        expect(p["block"] == prm["threads"] and p["sharedBytes"] >= 0, f"{pw}: block {p['block']}")
        if reductions:
            grid = math.ceil(rows / prm["rowsPerCta"])
        else:
            expect(prm["rowsPerCta"] == 1 and prm["items"] in (0, 2, 4), f"{pw}: a row point for an elementwise chain")
            width = cols // 2 if folded else cols  # folded: one thread a vector position of each half
            # Note [Unrolled elementwise chains]: items vectors a thread a step.
            per_cta = prm["threads"] * max(prm["items"], 1)
            grid = min(math.ceil(rows * width // prm["vec"] / per_cta), MAX_POINTWISE_CTAS)
        expect(p["grid"] == grid, f"{pw}: grid {p['grid']}, want {grid}")
        expect(cols % prm["vec"] == 0, f"{pw}: vec {prm['vec']} does not divide {cols}")
        rows_per_thread = prm["threads"] // prm["rowsPerCta"]
        expect(prm["items"] == 0 or not reductions or cols <= rows_per_thread * prm["vec"] * prm["items"],
               f"{pw}: items too few")
        kinds = [(a["kind"], a.get("dtype"), a.get("shape")) for a in p["args"]]
        expect(kinds == expected + [("rows", None, None), ("cols", None, None)], f"{pw}: args {kinds}")
        nodes = [a["node"] for a in p["args"] if "node" in a]
        expect(all(0 <= n < len(m["ir"]["nodes"]) for n in nodes) and len(set(nodes)) == len(nodes), f"{pw}: nodes")
        for a in p["args"]:
            if a["kind"] in ("input", "output"):
                want = ELEMENT[a["dtype"]] * (prm["vec"] if a["shape"] in ("full", "column") else 1)
                expect(a["alignment"] == want, f"{pw}: {a['kind']} node {a['node']} alignment {a['alignment']}")
                if chain not in LAID_OUT:
                    span = {"full": rows * cols, "column": cols, "row": rows, "row_flat": rows}[a["shape"]]
                    expect((a["cols"], a["span"]) == (cols, span), f"{pw}: node {a['node']} cols/span {a['cols']}, {a['span']}")
        if chain == "rotary":  # x, cos, x2, x1, sin, out: x's memory spans the projection, x2 and x1 half a row less
            spans = [a["span"] for a in p["args"] if a["kind"] in ("input", "output")]
            extents = [a["cols"] for a in p["args"] if a["kind"] in ("input", "output")]
            expect(extents == [64, 64, 32, 32, 64, 64], f"{pw}: extents {extents}")
            expect(spans[0] == ROTARY_SPANS["x"] and spans[5] == spans[0] and spans[2] == spans[0] - 32
                   and spans[1] == 37 * 64 + (2 - 1) * 37 * 64, f"{pw}: spans {spans}")
        if chain == "attention-softmax":  # scores, mask, probabilities: the mask spans one batch's rows per batch
            spans = [a["span"] for a in p["args"] if a["kind"] in ("input", "output")]
            expect(spans == [rows * cols, 2 * 37 * 64, rows * cols], f"{pw}: spans {spans}")
    return m


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for chain, (dtype, (rows, cols), extra, expected) in CASES.items():
            out = os.path.join(tmp, chain)
            shape = [] if chain in LAID_OUT else ["--shape", f"{rows}x{cols}"]
            r = run(tool, "--chain", chain, "--dtype", dtype, *shape, "--arch", "sm_90",
                    "--jobs", "2", "--out", out, *extra)
            if r.returncode == 1 and "NVRTC is unavailable" in r.stderr:
                print(f"skipped: {r.stderr.strip()}")
                return 77
            if expect(r.returncode == 0, f"{chain}: exit {r.returncode}: {r.stdout}{r.stderr}"):
                check_manifest(chain, dtype, rows, cols, expected, out)

        # Explicit points: one the shape rules out (cols 100 is no multiple of 8) is listed as skipped.
        out = os.path.join(tmp, "points")
        r = run(tool, "--chain", "rmsnorm", "--dtype", "float32", "--shape", "5x100", "--points",
                "t128v4r1i0,t128v8r1i0,t32v1r1i1", "--out", out)
        if expect(r.returncode == 0, f"--points: exit {r.returncode}: {r.stderr}"):
            m = check_manifest("rmsnorm", "float32", 5, 100, [("input", "float32", "full"),
                               ("input", "float32", "column"), ("output", "float32", "full")], out, eps=1e-06, min_points=1)
            expect([p["name"] for p in m["points"]] == ["t128v4r1i0"], f"--points: {[p['name'] for p in m['points']]}")
            skipped = {s["name"]: s["problem"] for s in m["skipped"]}
            expect("not a multiple of vec 8" in skipped.get("t128v8r1i0", ""), f"--points: skipped {skipped}")
            expect("over the registers" in skipped.get("t32v1r1i1", ""), f"--points: skipped {skipped}")

        usage = [
            (["--chain", "layernorm", "--shape", "4x8"], "unknown --chain"),
            (["--chain", "swiglu", "--shape", "4"], "bad --shape"),
            (["--chain", "swiglu", "--shape", "0x8"], "bad --shape"),
            (["--chain", "swiglu", "--shape", "4x8", "--dtype", "int8"], "bad --dtype"),
            (["--chain", "swiglu", "--shape", "4x8", "--eps", "1e-5"], "--eps is rmsnorm's and residual-layernorm's"),
            (["--chain", "rmsnorm", "--shape", "4x8", "--eps", "0"], "bad --eps"),
            (["--chain", "newgelu", "--shape", "4x8", "--to", "float32"], "--to is residual-add-cast's"),
            (["--chain", "swiglu", "--shape", "4x8", "--scale", "0.5"], "--scale is attention-softmax's"),
            (["--chain", "attention-softmax", "--shape", "2x3x4"], "bad --shape"),
            (["--chain", "attention-softmax", "--shape", "2x3x4x8", "--scale", "-1"], "bad --scale"),
            (["--chain", "swiglu", "--shape", "4x8", "--arch", "90"], "bad --arch"),
            (["--chain", "swiglu", "--shape", "4x8", "--points", "t256v8r2i0"], "out of range"),
            (["--chain", "swiglu", "--shape", "4x8", "--points", "fast"], "bad point"),
            (["--chain", "swiglu", "--shape", "4x7", "--points", "t256v8r1i0"], "no parameter point serves"),
            (["--chain", "swiglu", "--shape", "4x8"], "--out is required"),
        ]
        for i, (args, message) in enumerate(usage):
            out = os.path.join(tmp, f"usage{i}")
            r = run(tool, *args, *(["--out", out] if "--out is required" != message else []))
            expect(r.returncode == 2 and message in r.stderr,
                   f"{' '.join(args)}: exit {r.returncode}, stderr {r.stderr.strip()!r} (want 2 and {message!r})")
            expect(not os.path.exists(os.path.join(out, "manifest.json")), f"{' '.join(args)}: a manifest was written")
    for f in failures:
        print("FAIL", f)
    print(f"chain_kernel_tool_test: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
