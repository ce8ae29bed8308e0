#!/usr/bin/env python3
"""Probe of the staged cluster softmax on float32 rows of 400,000 (issue 19) against eager and torch.compile.

    softmax_probe.py [--rows 4096] [--cols 400000] [--log] [--point 16x512x13]
                     [--variant TAG:ROWS_A_CLUSTER[:-DOPT=1,...] ...] [--reps 15] [--out FILE]
                     [--template FILE]
                     [--compile-only DIR]

Compiles kernels/softmax/softmax_lastdim.cu (hk_prelude.cuh expanded in place, as SoftmaxFamily::source()
does; SoftmaxFamily::compileOptions' options for the staged point CLUSTERxTHREADSxITEMS, float32, 16-byte
vectors, plus each variant's) with NVRTC through ctypes, launches each cubin through the driver API (the
non-portable cluster size and the dynamic shared memory opted in, as CudaKernelLauncher does), checks its output
against ATen's softmax (largest difference), then times every variant, eager and torch.compile with the project's
method (ops_bench.Timer: CUDA events around one call, L2 flushed, the GPU kept busy while the call is enqueued;
all candidates interleaved in rotating order; paired ratios per repetition, median and 2.5/97.5 percentiles).

A variant's ROWS_A_CLUSTER sets the grid: ceil(rows / R) clusters, each serving rows r, r + clusters, ...
(the template's row loop; production launches one row a cluster unless pipelined). Its options may set the
probe's knobs, which the production template does not have (the probe rewrites its text; without a knob's define
a candidate compiles the template's kernel). The knobs depend on the template given (--template; which one it is,
the probe tells from its text), each with its own default variants:
- the template before 7c15234 (`git show 44b68c0:kernels/softmax/softmax_lastdim.cu`; HK_PIPE=1 there is the
  two-stage pipeline), PROBE_EDITS_TWO_STAGE:
  HK_PROBE_OVERLAP=1     with R > 1: a thread issues the cp.async of its slot for the cluster's next row
                         right after it wrote that slot's output, so the next row's loads overlap this row's
                         write pass in one stage (each thread stages and reads only its own slots; two CTAs
                         an SM, where HK_PIPE's two stages leave one); production's HK_PIPE since 7c15234
  HK_PROBE_STORE_HINT=1  the output stores with an L2 evict_first policy
  HK_PROBE_CP_HINT=1     the staging cp.async with an L2 evict_first policy
- the template since 7c15234 (the default; HK_PIPE=1 is the one-stage refill), PROBE_EDITS_REFILL:
  HK_PROBE_ONLINE=1      (max, sum) pairs reduced over the CTA, each thread's terms against its own maximum

JSON written (format "hotkernel-softmax-probe", version 1): machine, date, op, template ("two-stage" or
"refill"; absent in files of the first runs, which were "two-stage"), shape, copy bandwidth and per
candidate {name, options, rowsPerCluster, registers, sharedBytes, medianUs, copyFraction, vsEager, vsCompile,
maxAbsErr, samplesUs}.
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

# (text of the template before 7c15234, its replacement): each must occur exactly once.
PROBE_EDITS_TWO_STAGE = [
    # The staging copy, with the knob's L2 policy (first: the refill below has the same text).
    ('  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(gmem) : "memory");',
     "#if HK_PROBE_CP_HINT\n"
     '  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(a), "l"(gmem),\n'
     '               "l"(hk_probe_evict_first()) : "memory");\n'
     "#else\n"
     '  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(gmem) : "memory");\n'
     "#endif"),
    # The knobs' defaults and their device helpers, before the staging copy.
    ("__device__ __forceinline__ void hk_cp_async(void* smem, const void* gmem) {",
     "#ifndef HK_PROBE_OVERLAP\n#define HK_PROBE_OVERLAP 0\n#endif\n"
     "#ifndef HK_PROBE_STORE_HINT\n#define HK_PROBE_STORE_HINT 0\n#endif\n"
     "#ifndef HK_PROBE_CP_HINT\n#define HK_PROBE_CP_HINT 0\n#endif\n"
     "__device__ __forceinline__ unsigned long long hk_probe_evict_first() {\n"
     "  unsigned long long p;\n"
     "  asm(\"createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\" : \"=l\"(p));\n"
     "  return p;\n}\n"
     "__device__ __forceinline__ void hk_probe_store(hk_pack* a, const hk_pack& p) {\n"
     "#if HK_PROBE_STORE_HINT\n"
     "  const unsigned int* r = reinterpret_cast<const unsigned int*>(&p);\n"
     "  asm volatile(\"st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;\"\n"
     "               ::\"l\"(a), \"r\"(r[0]), \"r\"(r[1]),\n"
     "               \"r\"(r[2]), \"r\"(r[3]), \"l\"(hk_probe_evict_first()) : \"memory\");\n"
     "#else\n  *a = p;\n#endif\n}\n"
     # The refill of a slot: issued after the slot's output store, which waits for the slot's shared-memory
     # read (the output is computed from it), so the copy never overwrites a value not yet read.
     "__device__ __forceinline__ void hk_probe_refill(void* smem, const void* gmem) {\n"
     "  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));\n"
     "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" ::\"r\"(a), \"l\"(gmem) : \"memory\");\n}\n"
     "__device__ __forceinline__ void hk_cp_async(void* smem, const void* gmem) {"),
    # One stage: with the overlap, rows after the first were staged by the previous row's write pass.
    ("    const hk_pack* const stage = hk_stage;\n    hk_stage_slice(hk_stage, src, begin, end, tid);\n",
     "    const hk_pack* const stage = hk_stage;\n"
     "    if (!HK_PROBE_OVERLAP || k == 0) hk_stage_slice(hk_stage, src, begin, end, tid);\n"),
    # The staged write pass: the store, then the slot's refill for the cluster's next row.
    ("        dst[v] = p;\n      }\n    }\n#endif  // HK_ITEMS == 0",
     "#if HK_SMEM\n"
     "        hk_probe_store(dst + v, p);\n"
     "#if HK_PROBE_OVERLAP && !HK_PIPE\n"
     "        if (row + clusters < rows) {\n"
     "          hk_probe_refill(hk_stage + (i * HK_THREADS + tid),\n"
     "                          reinterpret_cast<const hk_pack*>(in + (row + clusters) * cols) + v);\n"
     "        }\n"
     "#endif\n"
     "#else\n"
     "        dst[v] = p;\n"
     "#endif\n"
     "      }\n    }\n#endif  // HK_ITEMS == 0"),
]


# The same for the template since 7c15234 (pipelined points refill one stage):
#   HK_PROBE_ONLINE=1  the CTA reduces (max, sum) pairs, each thread's sum taken against its own maximum (one CTA
#                      barrier less between the staged slice and the cluster's exchange; not ATen's terms: the
#                      output differs in the last bits)
PROBE_EDITS_REFILL = [
    ("    m = hk_row_max(m, hk_buf[0]);\n    const float base = hk_pair_base(m);\n",
     "#ifndef HK_PROBE_ONLINE\n#define HK_PROBE_ONLINE 0\n#endif\n"
     "#if !HK_PROBE_ONLINE\n    m = hk_row_max(m, hk_buf[0]);\n#endif\n    const float base = hk_pair_base(m);\n"),
    ("    s = hk_row_sum(s, hk_buf[1]);\n#endif  // HK_ITEMS == 0",
     "#if HK_PROBE_ONLINE\n    hk_row_pair(m, s, hk_buf[0], hk_buf[1]);\n"
     "#else\n    s = hk_row_sum(s, hk_buf[1]);\n#endif\n"
     "#endif  // HK_ITEMS == 0"),
]


def template_kind(text):
    """"two-stage" for the template before 7c15234 (HK_PIPE: a second stage), else "refill"."""
    return "two-stage" if "hk_cp_async_wait_prior" in text else "refill"


def source(template=""):
    with open(template or os.path.join(ROOT, "kernels/softmax/softmax_lastdim.cu")) as f:
        text = f.read()
    edits = PROBE_EDITS_TWO_STAGE if template_kind(text) == "two-stage" else PROBE_EDITS_REFILL
    for old, new in edits:
        if text.count(old) != 1:
            raise RuntimeError(f"kernels/softmax/softmax_lastdim.cu changed: {old[:60]!r} is not there once")
        text = text.replace(old, new)
    with open(os.path.join(ROOT, "kernels/common/hk_prelude.cuh")) as f:
        prelude = f.read()
    include = '#include "hk_prelude.cuh"'
    assert text.count(include) == 1
    return text.replace(include, prelude)


DEFAULT_VARIANTS_TWO_STAGE = [
    "tight:1",
    "tight-r4:4",
    "tight-r16:16",
    "overlap-r4:4:-DHK_PROBE_OVERLAP=1",
    "overlap-r16:16:-DHK_PROBE_OVERLAP=1",
    "store-hint:1:-DHK_PROBE_STORE_HINT=1",
    "cp-hint:1:-DHK_PROBE_CP_HINT=1",
    "overlap-r16-hints:16:-DHK_PROBE_OVERLAP=1,-DHK_PROBE_STORE_HINT=1,-DHK_PROBE_CP_HINT=1",
    "pipelined-r16:16:-DHK_PIPE=1",
]
DEFAULT_VARIANTS_REFILL = [
    "tight:1",
    "refill-r4:4:-DHK_PIPE=1",
    "refill-r16:16:-DHK_PIPE=1",
    "online:1:-DHK_PROBE_ONLINE=1",
    "online-refill-r4:4:-DHK_PIPE=1,-DHK_PROBE_ONLINE=1",
    "online-refill-r16:16:-DHK_PIPE=1,-DHK_PROBE_ONLINE=1",
]


def candidates(args, kind):
    cluster, threads, items = (int(x) for x in args.point.lower().split("x"))
    base = ["-DHK_DTYPE=0", f"-DHK_THREADS={threads}", "-DHK_ROWS=1", "-DHK_VEC=4", f"-DHK_ITEMS={items}",
            f"-DHK_CLUSTER={cluster}", "-DHK_SMEM=1"] + (["-DHK_LOG=1"] if args.log else [])
    out = []
    for spec in args.variant or (DEFAULT_VARIANTS_TWO_STAGE if kind == "two-stage" else DEFAULT_VARIANTS_REFILL):
        tag, rows_a_cluster, *rest = spec.split(":", 2)
        extra = [o for o in (rest[0] if rest else "").split(",") if o]
        stages = 2 if kind == "two-stage" and "-DHK_PIPE=1" in extra else 1
        out.append({"name": f"{cluster}x{threads}x{items} {tag}", "options": base + extra, "cluster": cluster,
                    "threads": threads, "rowsPerCluster": int(rows_a_cluster),
                    "sharedBytes": stages * threads * items * 16})
    return out


class Kernel(LoadedFunction):
    def __init__(self, cuda, image, shared, cluster):
        super().__init__(cuda, image, b"hk_softmax_lastdim")
        self.check(cuda.cuFuncSetAttribute(self.fn, 8, shared), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED)")
        if cluster > 8:
            self.check(cuda.cuFuncSetAttribute(self.fn, 14, 1), "cuFuncSetAttribute(NON_PORTABLE_CLUSTER)")

    def launch(self, torch, x, out, c):
        rows, cols = x.shape
        clusters = -(-rows // c["rowsPerCluster"])
        args = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_longlong(rows),
                ctypes.c_longlong(cols)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        stream = torch.cuda.current_stream().cuda_stream
        self.check(self.cuda.cuLaunchKernel(self.fn, clusters * c["cluster"], 1, 1, c["threads"], 1, 1,
                                            c["sharedBytes"], ctypes.c_void_p(stream), params, None),
                   "cuLaunchKernel")


def max_abs_err(torch, out, ref, block=256):
    err = 0.0
    for r in range(0, out.shape[0], block):
        err = max(err, (out[r:r + block] - ref[r:r + block]).abs().max().item())
    return err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=400000)
    ap.add_argument("--log", action="store_true", help="log_softmax instead of softmax")
    ap.add_argument("--point", default="16x512x13", help="CLUSTERxTHREADSxITEMS of the staged point")
    ap.add_argument("--variant", action="append", default=[], help="TAG:ROWS_A_CLUSTER[:-DOPT=1,...] (repeatable)")
    ap.add_argument("--template", default="", help="the template to edit (default kernels/softmax/softmax_lastdim.cu)")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--no-compile", action="store_true", help="do not time torch.compile")
    ap.add_argument("--out", default="softmax-probe.json")
    ap.add_argument("--compile-only", default="", help="write the cubins to this folder and stop (no GPU)")
    args = ap.parse_args()

    nvrtc = find_nvrtc()
    src = source(args.template)
    kind = template_kind(src)
    cands = candidates(args, kind)
    for c in cands:
        c["cubin"] = compile_cubin(nvrtc, src, args.arch, c["options"])
    if args.compile_only:
        write_cubins(args.compile_only, cands)
        return 0

    import torch

    cuda = load_driver()
    torch.cuda.init()

    rows, cols = args.rows, args.cols
    op = torch.log_softmax if args.log else torch.softmax
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float32, generator=gen) * 4
    ref = op(x, -1)
    out = torch.empty_like(x)
    timed = [("eager", lambda: op(x, -1))]
    if not args.no_compile:
        compiled = torch.compile(lambda a: op(a, -1))
        for _ in range(2):
            compiled(x)
        timed.append(("compile", lambda: compiled(x)))
    report = []
    for c in cands:
        try:
            k = Kernel(cuda, c["cubin"], c["sharedBytes"], c["cluster"])
            out.fill_(float("nan"))
            k.launch(torch, x, out, c)
            torch.cuda.synchronize()
        except RuntimeError as e:
            print(f"{c['name']}: not launched ({e}): dropped", flush=True)
            c["dropped"] = str(e)
            continue
        c.update(registers=k.registers, maxAbsErr=max_abs_err(torch, out, ref))
        timed.append((c["name"], lambda k=k, c=c: k.launch(torch, x, out, c)))
        print(f"{c['name']}: {k.registers} registers, {c['sharedBytes']} B shared, max |err| {c['maxAbsErr']:.3g}",
              flush=True)
    del ref

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from ops_bench import Timer, copy_bandwidth, machine, time_interleaved
    timer = Timer()
    copy_gbps = copy_bandwidth(timer) / 1e9
    samples = time_interleaved(timer, timed, args.reps)

    moved = 2 * rows * cols * 4
    med = {name: statistics.median(v) for name, v in samples.items()}
    print(f"copy bandwidth {copy_gbps:.0f} GB/s; eager {med['eager']:.1f} us" +
          (f", compile {med['compile']:.1f} us" if "compile" in med else ""))

    for c in [{"name": n} for n, _ in timed if n in ("eager", "compile")] + [c for c in cands if "dropped" not in c]:
        name = c["name"]
        entry = {k: c.get(k) for k in ("name", "options", "rowsPerCluster", "registers", "sharedBytes", "maxAbsErr")}
        entry.update(medianUs=med[name], copyFraction=moved / (med[name] * 1e-6) / (copy_gbps * 1e9),
                     vsEager=paired_ratio(samples, name, "eager"), samplesUs=samples[name])
        if "compile" in samples:
            entry["vsCompile"] = paired_ratio(samples, name, "compile")
        report.append(entry)
        print(f"{name:36s} {med[name]:8.1f} us  {100 * entry['copyFraction']:5.1f}% copy  vs eager "
              f"{entry['vsEager']['median']:.3f}x [{entry['vsEager']['low']:.3f}, {entry['vsEager']['high']:.3f}]"
              f"  regs {c.get('registers')}", flush=True)

    write_probe_json(args.out, "hotkernel-softmax-probe", 1, machine(), {
        "op": "log_softmax" if args.log else "softmax",
        "template": kind,
        "dtype": "float32",
        "shape": [rows, cols],
        "copyGBps": copy_gbps,
        "reps": args.reps,
        "candidates": report,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
