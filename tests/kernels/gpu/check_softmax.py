#!/usr/bin/env python3
"""Runs the softmax cubins written by dump_softmax_cubins on a GPU, against torch.

    check_softmax.py <cubin-dir> [--bench] [--quick] [--max-numel N] [--report FILE]

For every variant of <cubin-dir>/manifest.json and every parameter point:
  - compares with torch.softmax (ATen's _softmax) on several input kinds
    (normal at three scales, large magnitudes, values near the dtype's max, constants, partially -inf rows,
    rows of only -inf / holding +inf / holding NaN); NaN positions must match
    and the largest difference must stay within the manifest's tolerance;
  - checks bitwise determinism over two runs into NaN-filled buffers;
  - relaunches with a small grid to exercise the kernel's row-stride loop;
With --bench, times the points of the large variants against torch with the
project's benchmark method (bench/ops_bench.py's Timer: CUDA events, L2
flushed and the GPU kept busy while each launch is enqueued, so Python's
launch time is not timed; every point, ATen and a copy of the
same bytes (out.copy_(x), the floor of a one-read one-write kernel) interleaved in rotating order,
median of 21). Earlier reports (before 2026-11-30's seventh session) timed
each point alone with an idle GPU: their small-shape times include the
launch from Python. --quick and
--max-numel shrink the run for compute-sanitizer.
Needs torch with CUDA and libcuda; launches through the driver API (ctypes).
"""
import argparse
import datetime
import re
import ctypes
import json
import math
import os
import statistics
import sys

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
    ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
cuda.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
cuda.cuFuncGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_void_p]
cuda.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH = 11
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
PORTABLE_CLUSTER_SIZE = 8  # sm_90's portable maximum: wider clusters (16) need the opt-in


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed: CUresult {rc}")


class Kernel:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.image = f.read()  # kept alive: the driver reads it during load only, but be safe
        self.module = ctypes.c_void_p()
        check(cuda.cuModuleLoadData(ctypes.byref(self.module), self.image), f"cuModuleLoadData({path})")
        self.fn = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(self.fn), self.module, b"hk_softmax_lastdim"),
              "cuModuleGetFunction")
        regs = ctypes.c_int()
        check(cuda.cuFuncGetAttribute(ctypes.byref(regs), CU_FUNC_ATTRIBUTE_NUM_REGS, self.fn),
              "cuFuncGetAttribute(NUM_REGS)")
        self.registers = regs.value
        self.shared_opt_in = 0  # dynamic shared memory bytes the function may use (above 48 KiB: opt in)
        # The cubin's own cluster width (__cluster_dims__; 0 without). Wider than 8
        # CTAs, the launch needs the non-portable opt-in, which the project's
        # launcher sets the same way (Note [Function attributes before launch],
        # runtime/include/hotkernel/runtime/CudaKernelLauncher.h).
        width = ctypes.c_int()
        check(cuda.cuFuncGetAttribute(ctypes.byref(width), CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, self.fn),
              "cuFuncGetAttribute(REQUIRED_CLUSTER_WIDTH)")
        self.cluster_width = width.value
        self.refused = None  # why this function cannot run here: its points fail, the others still run
        if self.cluster_width > PORTABLE_CLUSTER_SIZE:
            rc = cuda.cuFuncSetAttribute(self.fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            if rc != 0:
                self.refused = f"cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) failed: CUresult {rc}"

    def launch(self, x, out, grid, block, shared=0):
        if self.refused:
            raise RuntimeError(self.refused)
        rows, cols = x.shape
        args = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                ctypes.c_longlong(rows), ctypes.c_longlong(cols)]
        params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        stream = torch.cuda.current_stream().cuda_stream
        if shared > self.shared_opt_in:  # what the project's launcher does for every size
            check(cuda.cuFuncSetAttribute(self.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
            self.shared_opt_in = shared
        check(cuda.cuLaunchKernel(self.fn, grid, 1, 1, block, 1, 1, shared, ctypes.c_void_p(stream), params, None),
              "cuLaunchKernel")


def make_input(kind, rows, cols, dtype, gen):
    dev = "cuda"
    if kind.startswith("randn"):
        scale = float(kind[5:])
        return (torch.randn(rows, cols, device=dev, generator=gen) * scale).to(dtype)
    if kind == "large":
        big = {torch.float32: 1e30, torch.float16: 6e4, torch.bfloat16: 1e30}[dtype]
        return ((torch.rand(rows, cols, device=dev, generator=gen) * 2 - 1) * big).to(dtype)
    if kind == "near_max":  # within a factor 2 of the dtype's largest finite value: no overflow allowed
        top = torch.finfo(dtype).max
        return ((torch.rand(rows, cols, device=dev, generator=gen) * 0.5 + 0.5) * top).to(dtype)
    if kind == "zeros":
        return torch.zeros(rows, cols, device=dev, dtype=dtype)
    if kind == "masked":  # causal-attention-like: about half -inf, the first element always finite
        x = torch.randn(rows, cols, device=dev, generator=gen).to(dtype)
        mask = torch.rand(rows, cols, device=dev, generator=gen) < 0.5
        mask[:, 0] = False
        return x.masked_fill(mask, float("-inf"))
    if kind == "special":  # row r % 4: only -inf / one +inf / one NaN / normal
        x = torch.randn(rows, cols, device=dev, generator=gen).to(dtype)
        idx = torch.arange(rows, device=dev)
        x[idx % 4 == 0] = float("-inf")
        x[idx % 4 == 1, cols // 2] = float("inf")
        x[idx % 4 == 2, cols - 1] = float("nan")
        return x
    raise ValueError(kind)


def compare(out, ref, tol):
    """(ok, max_abs_diff, message)."""
    nan_out, nan_ref = torch.isnan(out), torch.isnan(ref)
    if not torch.equal(nan_out, nan_ref):
        n = int((nan_out != nan_ref).sum())
        return False, float("nan"), f"NaN positions differ in {n} elements"
    o = out.float().masked_fill(nan_out, 0)
    r = ref.float().masked_fill(nan_ref, 0)
    diff = float((o - r).abs().max()) if o.numel() else 0.0
    return diff <= tol, diff, "" if diff <= tol else f"max |diff| {diff:.3g} > {tol:.3g}"


def bitwise_equal(a, b):
    return torch.equal(a.view(INT_VIEW[a.dtype]), b.view(INT_VIEW[b.dtype]))


def run_checks(manifest, kernels, report, quick, max_numel):
    gen = torch.Generator(device="cuda")
    seed = int.from_bytes(os.urandom(4), "little")
    gen.manual_seed(seed)
    report["seed"] = seed
    failures = 0
    for v in manifest["variants"]:
        dtype = DTYPES[v["dtype"]]
        rows, cols, tol = v["rows"], v["cols"], v["tolerance"]
        numel = rows * cols
        if numel > max_numel:
            continue
        kinds = ["randn1", "randn3", "randn0.01", "randn30", "large", "near_max", "zeros", "masked", "special"]
        if numel > 64 * 2**20 or quick:
            kinds = ["randn3", "near_max", "masked", "special"]
        inputs = {}
        for k in kinds:
            x = make_input(k, rows, cols, dtype, gen)
            ref = torch.softmax(x, -1)
            exact = torch.softmax(x.double(), -1).to(dtype)  # fp64 reference rounded to dtype
            inputs[k] = (x, ref, exact)
        for pt in v["points"]:
            k = kernels[pt["cubin"]]
            entry = {"variant": f'{v["dtype"]}[{rows},{cols}]', "point": pt["describe"], "registers": k.registers,
                     "errors": [], "max_diff": 0.0, "max_diff_vs_fp64": 0.0, "aten_diff_vs_fp64": 0.0}
            cluster = pt.get("cluster", 1)
            if cluster > 1 and k.cluster_width != cluster:
                entry["errors"].append(f"the cubin's cluster width is {k.cluster_width}, the point's {cluster}")
            try:
                check_point(k, pt, rows, tol, inputs, entry)
            except RuntimeError as e:  # a launch the GPU refuses (a cluster it cannot co-schedule): this point fails
                entry["errors"].append(str(e))
            torch.cuda.synchronize()
            status = "ok " if not entry["errors"] else "FAIL"
            failures += bool(entry["errors"])
            print(f'{status} {entry["variant"]:>24} {pt["describe"]:<44} regs={k.registers:3d} '
                  f'maxdiff={entry["max_diff"]:.3g} vs64={entry["max_diff_vs_fp64"]:.3g} '
                  f'aten_vs64={entry["aten_diff_vs_fp64"]:.3g} {"; ".join(entry["errors"])}', flush=True)
            report["checks"].append(entry)
    return failures


def check_point(k, pt, rows, tol, inputs, entry):
    """Runs one point on every input kind; what fails goes to entry["errors"]."""
    for kind, (x, ref, exact) in inputs.items():
        out = torch.full_like(x, float("nan"))
        k.launch(x, out, pt["grid"], pt["block"], pt["shared"])
        ok, diff, msg = compare(out, ref, tol)
        entry["max_diff"] = max(entry["max_diff"], diff) if not math.isnan(diff) else diff
        _, d64, _ = compare(out, exact, 1.0)
        _, a64, _ = compare(ref, exact, 1.0)
        entry["max_diff_vs_fp64"] = max(entry["max_diff_vs_fp64"], d64 if not math.isnan(d64) else 0)
        entry["aten_diff_vs_fp64"] = max(entry["aten_diff_vs_fp64"], a64 if not math.isnan(a64) else 0)
        if not ok:
            entry["errors"].append(f"{kind}: {msg}")
        out2 = torch.full_like(x, float("nan"))
        k.launch(x, out2, pt["grid"], pt["block"], pt["shared"])
        if not bitwise_equal(out, out2):
            entry["errors"].append(f"{kind}: not deterministic")
        if kind in ("randn3", "special") and rows > 3:
            out3 = torch.full_like(x, float("nan"))
            # 3 CTAs (3 clusters) stride over all rows
            k.launch(x, out3, 3 * pt.get("cluster", 1), pt["block"], pt["shared"])
            if not bitwise_equal(out, out3):
                entry["errors"].append(f"{kind}: row-stride launch differs")
        if kind == "randn3":  # in place
            inplace = x.clone()
            k.launch(inplace, inplace, pt["grid"], pt["block"], pt["shared"])
            if not bitwise_equal(out, inplace):
                entry["errors"].append(f"{kind}: in-place result differs")


def bench(manifest, kernels, report, reps=21, clean_flush=False, extra_shared=()):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
    from ops_bench import Timer  # the project's method, shared (bench/ops_bench.py)

    class CleanFlushTimer(Timer):
        """Diagnosis only, not the project's method: L2 emptied by reading
        2 x L2 of other data instead of writing it, so the timed call finds no
        dirty lines to write back (how much of a short call's time those
        write-backs are)."""

        def __init__(self):
            super().__init__()
            self.flush.fill_(1)

        def flush_l2(self):
            torch.sum(self.flush, dtype=torch.int64)

    timer = CleanFlushTimer() if clean_flush else Timer()
    report["flush"] = "read (clean L2, diagnosis)" if clean_flush else "written (the project's method)"
    targets = {("bfloat16", 4096, 32000), ("bfloat16", 8192, 128256), ("bfloat16", 1, 128256),
               ("bfloat16", 16384, 8192), ("float32", 4096, 32000), ("float16", 4096, 32000),
               ("bfloat16", 32768, 128), ("bfloat16", 4096, 1024), ("float32", 8192, 128256),
               ("bfloat16", 16384, 8), ("bfloat16", 65536, 256), ("float32", 32768, 128),
               ("bfloat16", 32, 128256), ("bfloat16", 3, 50000)}
    for v in manifest["variants"]:
        if (v["dtype"], v["rows"], v["cols"]) not in targets:
            continue
        dtype = DTYPES[v["dtype"]]
        x = torch.randn(v["rows"], v["cols"], device="cuda").to(dtype)
        out = torch.empty_like(x)
        name = f'{v["dtype"]}[{v["rows"]},{v["cols"]}]'
        # A copy of the same bytes, timed with them: the floor a one-read,
        # one-write kernel meets at this shape under this method.
        calls = [("aten", None, lambda: torch.softmax(x, -1)), ("copy", None, lambda: out.copy_(x))]
        for pt in v["points"]:
            k = kernels[pt["cubin"]]
            launch = (lambda k=k, pt=pt: k.launch(x, out, pt["grid"], pt["block"], pt["shared"]))
            try:
                launch()
                torch.cuda.synchronize()
            except RuntimeError as e:  # refused by this GPU (run_checks reports it as a failure)
                print(f"bench {name:>24} {pt['describe']:<44} not run: {e}", flush=True)
                continue
            calls.append((pt["describe"], pt, launch))
            # Fewer CTAs an SM without recompiling: dynamic shared memory the
            # kernel does not use (an occupancy probe; not the launcher's geometry).
            for extra in extra_shared:
                label = f'{pt["describe"]} +{extra // 1024} KiB smem'
                wider = (lambda k=k, pt=pt, extra=extra:
                         k.launch(x, out, pt["grid"], pt["block"], pt["shared"] + extra))
                try:
                    wider()
                    torch.cuda.synchronize()
                except RuntimeError as e:
                    print(f"bench {name:>24} {label:<44} not run: {e}", flush=True)
                    continue
                calls.append((label, pt, wider))
        samples = {c[0]: [] for c in calls}
        for rep in range(reps):
            order = calls[rep % len(calls):] + calls[:rep % len(calls)]
            events = [(label, timer.time_us(fn)) for label, _, fn in order]
            torch.cuda.synchronize()
            for label, (e0, e1) in events:
                samples[label].append(e0.elapsed_time(e1) * 1e3)
        t_aten = statistics.median(samples["aten"])
        t_copy = statistics.median(samples["copy"])
        print(f"bench {name:>24} aten {t_aten:9.1f} us {v['bytes'] / t_aten / 1e3:7.0f} GB/s", flush=True)
        print(f"bench {name:>24} copy {t_copy:9.1f} us {v['bytes'] / t_copy / 1e3:7.0f} GB/s", flush=True)
        report["bench"].append({"variant": name, "point": "copy (out.copy_(x))", "us": t_copy, "aten_us": t_aten,
                                "gbps": v["bytes"] / t_copy / 1e3, "method": "interleaved, GPU kept busy"})
        for label, pt, _ in calls[2:]:
            t = statistics.median(samples[label])
            k = kernels[pt["cubin"]]
            print(f"bench {name:>24} {label:<44} {t:9.1f} us {v['bytes'] / t / 1e3:7.0f} GB/s "
                  f"x{t_aten / t:5.2f} regs={k.registers}", flush=True)
            report["bench"].append({"variant": name, "point": label, "us": t, "aten_us": t_aten,
                                    "gbps": v["bytes"] / t / 1e3, "method": "interleaved, GPU kept busy"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cubin_dir")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--quick", action="store_true", help="four input kinds only")
    ap.add_argument("--max-numel", type=int, default=2**62, help="skip larger variants")
    ap.add_argument("--report")
    ap.add_argument("--points", help="only points whose description matches this regex (tags included)")
    ap.add_argument("--extra-shared", default="",
                    help="with --bench, each point again with this many more bytes of dynamic shared memory "
                         "(comma-separated): fewer CTAs an SM, an occupancy probe")
    ap.add_argument("--clean-flush", action="store_true",
                    help="diagnosis: empty L2 by reading, not writing (no dirty lines left for the timed call)")
    args = ap.parse_args()
    with open(os.path.join(args.cubin_dir, "manifest.json")) as f:
        manifest = json.load(f)
    if args.points:
        for v in manifest["variants"]:
            v["points"] = [pt for pt in v["points"] if re.search(args.points, pt["describe"])]
    torch.zeros(1, device="cuda")  # primary context current on this thread
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    kernels = {}
    for v in manifest["variants"]:
        for pt in v["points"]:
            if pt["cubin"] not in kernels:
                kernels[pt["cubin"]] = Kernel(os.path.join(args.cubin_dir, pt["cubin"]))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
    from ops_bench import machine
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "machine": machine(),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "checks": [], "bench": []}
    failures = 0 if args.no_check else run_checks(manifest, kernels, report, args.quick, args.max_numel)
    if args.bench:
        bench(manifest, kernels, report, clean_flush=args.clean_flush,
              extra_shared=[int(b) for b in args.extra_shared.split(",") if b])
    print(f"{failures} failing (variant, point) pairs of {len(report['checks'])}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
