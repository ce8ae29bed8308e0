#!/usr/bin/env python3
"""Probe of rms_norm kernel points and template experiments against eager ATen and torch.compile.

    norm_probe.py [--rows 16384] [--cols 8192] [--dtype bfloat16]
                  [--points 256x8x4,512x8x2,...] [--experiment tag=-DA=1,-DB=2 ...]
                  [--reps 31] [--out FILE] [--inductor-code FILE] [--compile-only DIR]
                  [--triton [--triton-mutations noL1,noL2,nohints]]

Compiles kernels/norm/rms_norm.cu (hk_prelude.cuh expanded in place, as
RmsNormFamily::source() does; the options of RmsNormFamily::compileOptions
plus each experiment's) with NVRTC through ctypes, launches each cubin through
the driver API, checks its output and rstd against ATen's _fused_rms_norm
(largest difference reported), then times every point, eager F.rms_norm and
torch.compile(F.rms_norm) with the project's method: CUDA events around one
call, L2 flushed before it, the GPU kept busy while the call is enqueued, all
candidates interleaved in rotating order; medians and paired ratios per
repetition (median and 2.5/97.5 percentiles). Points are
THREADSxVECxITEMS (register-resident when ITEMS > 0), or THREADSxVECx0sSPLIT
for a row split over SPLIT CTAs of a cooperative grid (Note [Split norm rows
over a cooperative grid]; launched with cuLaunchCooperativeKernel and a
zeroed workspace, as the trampoline does).

This is a probe for template experiments behind probe overrides (Note [Norm
occupancy probe]; the knobs are this program's, PROBE_KNOBS below, applied to
the production template's text), not the issue-4 table (ops_bench.py):
a knob that wins here becomes a parameter or the default and is then measured
by ops_bench.py through the tuner. --compile-only writes the cubins to DIR
and needs no GPU (register counts: cuobjdump -res-usage). An experiment's
option "--ptx" compiles that candidate to PTX, which the driver compiles at
load. --triton also times torch.compile's own kernel launched from here (its
PTX and metadata from the inductor / Triton cache), and --triton-mutations
that PTX with its L1 and / or L2 cache hints removed: which of its features
its speed comes from.

JSON written (format "hotkernel-norm-probe", version 1): machine, date,
shape, copy bandwidth, and per candidate {name, params, experiment, options,
registers, medianUs, copyFraction, vsCompile, vsEager, maxAbsErr, maxRstdRelErr,
samplesUs}.
"""
import argparse
import ctypes
import datetime
import glob
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DTYPE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}


def find_nvrtc():
    candidates = [os.environ.get("HOTKERNEL_NVRTC_PATH", "")]
    candidates += glob.glob("/usr/local/cuda/lib64/libnvrtc.so*")
    try:
        import nvidia  # the CUDA wheels torch depends on
        for base in nvidia.__path__:
            candidates += glob.glob(os.path.join(base, "*", "lib", "libnvrtc.so*"))
    except ImportError:
        pass
    for c in candidates:
        if c and os.path.exists(c) and "builtins" not in c and ".alt." not in c:
            return ctypes.CDLL(c)
    raise RuntimeError("libnvrtc not found (set HOTKERNEL_NVRTC_PATH)")


# The probe's knobs, which the production template does not have: its lines
# rewritten so that an experiment's -D overrides them (the defaults are
# production's values, so a candidate without these defines compiles the
# production kernel).
#   HK_STREAM_UNROLL, HK_STREAM_UNROLL2  the streaming batches (vectors in flight)
#   HK_STREAM_L1_HINTS                   0: the streaming accesses without their L1 hints
#   HK_PROBE_MIN_CTAS                    N: __launch_bounds__(HK_THREADS, N); 0: 2048 / HK_THREADS
PROBE_KNOBS = [
    ("#define HK_STREAM_UNROLL (", "#ifndef HK_STREAM_UNROLL\n{line}\n#endif"),
    ("#define HK_STREAM_UNROLL2 (", "#ifndef HK_STREAM_UNROLL2\n{line}\n#endif"),
    ("#define HK_STREAM_L1_HINTS 1", "#ifndef HK_STREAM_L1_HINTS\n{line}\n#endif"),
    ("#define HK_LAUNCH_BOUNDS __launch_bounds__(HK_THREADS, 1)",
     "#ifndef HK_PROBE_MIN_CTAS\n#define HK_PROBE_MIN_CTAS 1\n#endif\n"
     "#define HK_LAUNCH_BOUNDS __launch_bounds__(HK_THREADS, "
     "HK_PROBE_MIN_CTAS > 0 ? HK_PROBE_MIN_CTAS : 2048 / HK_THREADS)"),
]


def with_probe_knobs(text):
    lines = text.split("\n")
    for start, replacement in PROBE_KNOBS:
        at = [i for i, line in enumerate(lines) if line.startswith(start)]
        if len(at) != 1:
            raise RuntimeError(f"kernels/norm/rms_norm.cu changed: no single line starting {start!r}")
        lines[at[0]] = replacement.format(line=lines[at[0]])
    return "\n".join(lines)


def source():
    with open(os.path.join(ROOT, "kernels/norm/rms_norm.cu")) as f:
        text = with_probe_knobs(f.read())
    with open(os.path.join(ROOT, "kernels/common/hk_prelude.cuh")) as f:
        prelude = f.read()
    include = '#include "hk_prelude.cuh"'
    assert include in text
    return text.replace(include, prelude)


def compile_cubin(nvrtc, src, arch, options):
    prog = ctypes.c_void_p()
    rc = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"rms_norm.cu", 0, None, None)
    if rc != 0:
        raise RuntimeError(f"nvrtcCreateProgram: {rc}")
    # An experiment's "--ptx" asks for PTX (compute_XX) that the driver then
    # compiles at load, as it does torch.compile's Triton kernels.
    ptx = "--ptx" in options
    options = [o for o in options if o != "--ptx"]
    if ptx:
        arch = arch.replace("sm_", "compute_")
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device"] + options
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), argv)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        raise RuntimeError(f"NVRTC failed ({' '.join(options)}):\n{log.value.decode(errors='replace')}")
    if ptx:
        nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetPTX(prog, cubin)
    else:
        nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetCUBIN(prog, cubin)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw


def parse_points(text):
    points = []
    for item in text.split(","):
        geometry, _, split = item.lower().partition("s")
        t, v, i = (int(x) for x in geometry.split("x"))
        points.append({"threads": t, "vec": v, "items": i, "rowsPerCta": 1, "split": int(split or 1)})
    return points


def parse_experiments(args):
    experiments = [("", [])]
    for e in args:
        tag, _, opts = e.partition("=")
        experiments.append((tag, [o for o in opts.split(",") if o]))
    return experiments


def candidates(args):
    out = []
    for p in parse_points(args.points):
        for tag, extra in parse_experiments(args.experiment):
            opts = [f"-DHK_DTYPE={DTYPE_CODE[args.dtype]}", f"-DHK_THREADS={p['threads']}", "-DHK_ROWS=1",
                    f"-DHK_VEC={p['vec']}", f"-DHK_ITEMS={p['items']}", "-DHK_HAS_WEIGHT=1"] + extra
            if p["split"] > 1:
                opts.append(f"-DHK_SPLIT={p['split']}")
            name = (f"{p['threads']}x{p['vec']}x{p['items']}" + (f"s{p['split']}" if p["split"] > 1 else "") +
                    (f" [{tag}]" if tag else ""))
            out.append({"name": name, "params": p, "experiment": tag, "options": opts})
    return out


class LoadedFunction:
    """The kernel `name` of a cubin or PTX image, loaded through the driver (load_driver()): module, fn and its
    register count. The probes' kernels derive from it."""

    def __init__(self, cuda, image, name):
        self.cuda, self.image = cuda, image
        self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(cuda.cuModuleLoadData(ctypes.byref(self.module), image), "cuModuleLoadData")
        self.check(cuda.cuModuleGetFunction(ctypes.byref(self.fn), self.module, name), "cuModuleGetFunction")
        regs = ctypes.c_int()
        self.check(cuda.cuFuncGetAttribute(ctypes.byref(regs), 4, self.fn), "cuFuncGetAttribute")  # NUM_REGS
        self.registers = regs.value

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")


class Kernel(LoadedFunction):
    def __init__(self, cuda, image):
        super().__init__(cuda, image, b"hk_rms_norm")

    def launch(self, torch, x, w, out, rstd, eps, threads, split=1, work=None):
        """`work`: a grid split's float32 workspace (rows * split partials, then the counter at 0)."""
        rows, cols = x.shape
        partials = work.data_ptr() if work is not None else None
        counter = partials + 4 * (work.numel() - 1) if work is not None else None
        args = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                ctypes.c_void_p(rstd.data_ptr()), ctypes.c_longlong(rows), ctypes.c_longlong(cols),
                ctypes.c_float(eps), ctypes.c_void_p(partials), ctypes.c_void_p(counter)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        stream = torch.cuda.current_stream().cuda_stream
        if split > 1:
            self.check(self.cuda.cuLaunchCooperativeKernel(self.fn, rows * split, 1, 1, threads, 1, 1, 0,
                                                           ctypes.c_void_p(stream), params),
                       "cuLaunchCooperativeKernel")
        else:
            self.check(self.cuda.cuLaunchKernel(self.fn, rows, 1, 1, threads, 1, 1, 0, ctypes.c_void_p(stream),
                                                params, None), "cuLaunchKernel")


class TritonKernel:
    """torch.compile's own rms_norm kernel, launched from this probe like our
    cubins: its PTX and metadata (block size, dynamic shared memory) as the
    Triton cache holds them after torch.compile ran. Separates what the kernel
    costs from how torch.compile's call launches it. The signature is the one
    inductor generated for this op (x, weight, out, rows, cols, two scratch
    pointers): checked against ATen like every candidate."""

    def __init__(self, cuda, ptx_path, mutation=""):
        with open(ptx_path) as f:
            self.image = mutate_ptx(f.read(), mutation).encode() + b"\0"
        meta_path = os.path.splitext(ptx_path)[0] + ".json"
        with open(meta_path) as f:
            meta = json.load(f)
        self.name = meta["name"].encode()
        self.threads = 32 * int(meta["num_warps"])
        self.shared = int(meta.get("shared", 0))
        loaded = LoadedFunction(cuda, self.image, self.name)
        self.cuda, self.module, self.fn, self.registers = cuda, loaded.module, loaded.fn, loaded.registers

    def launch(self, torch, x, w, out):
        rows, cols = x.shape
        args = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                ctypes.c_uint(rows), ctypes.c_uint(cols), ctypes.c_void_p(0), ctypes.c_void_p(0)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        stream = torch.cuda.current_stream().cuda_stream
        Kernel.check(self.cuda.cuLaunchKernel(self.fn, rows, 1, 1, self.threads, 1, 1, self.shared,
                                              ctypes.c_void_p(stream), params, None), "cuLaunchKernel (Triton)")


# Edits of torch.compile's PTX that take one of its access features away, to
# learn which of them its speed comes from (a probe's bisection, not code of ours).
PTX_MUTATIONS = ("noL1", "noL2", "nohints")


def mutate_ptx(text, mutation):
    import re
    if mutation in ("noL1", "nohints"):
        text = re.sub(r"\.L1::evict_(first|last)", "", text)
    if mutation in ("noL2", "nohints"):
        text = re.sub(r"\.L2::cache_hint(\.v\d\.b32 \{[^}]*\}, \[[^\]]*\]), %rd\d+;", r"\1;", text)
    elif mutation not in ("", "noL1"):
        raise ValueError(f"unknown PTX mutation {mutation!r}")
    return text


def find_triton_ptx():
    """The newest PTX of a Triton rms_norm kernel in the inductor / Triton caches."""
    roots = [os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""), os.environ.get("TRITON_CACHE_DIR", ""),
             f"/tmp/torchinductor_{os.environ.get('USER', 'root')}", "/tmp/torchinductor_root",
             os.path.expanduser("~/.triton/cache")]
    found = []
    for r in roots:
        if r and os.path.isdir(r):
            found += glob.glob(os.path.join(r, "**", "*rms_norm*.ptx"), recursive=True)
    return max(found, key=os.path.getmtime) if found else ""


def triton_configs():
    """The launch configuration torch.compile's autotuner kept for each Triton
    kernel it generated (block sizes, warps, stages, registers). Best effort:
    inductor internals."""
    lines = []
    try:
        from torch._inductor.codecache import PyCodeCache
        modules = list(getattr(PyCodeCache, "modules", [])) or list(getattr(PyCodeCache, "cache", {}).values())
        for mod in modules:
            for name in dir(mod):
                obj = getattr(mod, name, None)
                for launcher in getattr(obj, "launchers", None) or []:
                    cfg = getattr(launcher, "config", None)
                    regs = getattr(launcher, "n_regs", None)
                    spills = getattr(launcher, "n_spills", None)
                    lines.append(f"{name}: {cfg} n_regs={regs} n_spills={spills}")
    except Exception as e:  # noqa: BLE001 - a probe's extra, never fatal
        lines.append(f"could not read the configurations: {e!r}")
    return lines or ["no Triton launcher found"]


def load_driver():
    """libcuda through ctypes, with the argument types of the calls the probes make."""
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    cuda.cuLaunchCooperativeKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    cuda.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    cuda.cuFuncGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_void_p]
    cuda.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return cuda


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


METHOD = ("CUDA events per call, L2 flushed before each, GPU kept busy while enqueued, candidates "
          "interleaved in rotating order; ratios paired per repetition (median, 2.5/97.5 percentiles)")


def paired_ratio(samples, name, base):
    """`name`'s speed-up over `base` from ops_bench.time_interleaved's samples: base / name per round, median and the
    2.5 / 97.5 percentiles."""
    r = [b / a for a, b in zip(samples[name], samples[base])]
    return {"median": statistics.median(r), "low": percentile(r, 0.025), "high": percentile(r, 0.975)}


def write_cubins(folder, cands):
    """--compile-only: each candidate's cubin as FOLDER/<its name, spaces as underscores, no brackets>.cubin."""
    os.makedirs(folder, exist_ok=True)
    for c in cands:
        name = c["name"].replace(" ", "_").replace("[", "").replace("]", "")
        with open(os.path.join(folder, name + ".cubin"), "wb") as f:
            f.write(c["cubin"])
    print(f"wrote {len(cands)} cubins to {folder}")


def write_probe_json(path, fmt, version, machine, fields):
    """A probe's JSON: format, version, date (UTC), machine (ops_bench.machine()), the method, then `fields`."""
    doc = {"format": fmt, "version": version,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": machine, "method": METHOD}
    doc.update(fields)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"written {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPE_CODE))
    ap.add_argument("--points", default="256x8x4,512x8x2,128x8x8")
    ap.add_argument("--experiment", action="append", default=[], help="tag=-DOPT=1,-DOPT2=2 (repeatable)")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--out", default="norm-probe.json")
    ap.add_argument("--inductor-code", default="", help="write torch.compile's generated code here")
    ap.add_argument("--compile-only", default="", help="write the cubins to this folder and stop (no GPU)")
    ap.add_argument("--triton", action="store_true",
                    help="also launch torch.compile's Triton kernel from this probe (its PTX from the cache)")
    ap.add_argument("--triton-mutations", default="",
                    help=f"with --triton, also these edits of its PTX (comma-separated: {', '.join(PTX_MUTATIONS)})")
    args = ap.parse_args()

    nvrtc = find_nvrtc()
    src = source()
    cands = candidates(args)
    for c in cands:
        c["cubin"] = compile_cubin(nvrtc, src, args.arch, c["options"])
    if args.compile_only:
        write_cubins(args.compile_only, cands)
        return 0

    import torch
    import torch.nn.functional as F

    cuda = load_driver()
    torch.cuda.init()

    dt = getattr(torch, args.dtype)
    rows, cols = args.rows, args.cols
    eps = torch.finfo(torch.float32).eps  # ATen's default for eps=None (RmsNormFamily::defaultEps)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float32, generator=gen).to(dt)
    w = torch.randn(cols, device="cuda", dtype=torch.float32, generator=gen).to(dt)
    ref_out, ref_rstd = torch.ops.aten._fused_rms_norm(x, [cols], w, eps)

    eager = lambda: F.rms_norm(x, (cols,), w, eps)  # noqa: E731
    compiled_fn = torch.compile(lambda a, b: F.rms_norm(a, (cols,), b, eps))
    if args.inductor_code:
        from torch._inductor.utils import run_and_get_code
        _, codes = run_and_get_code(compiled_fn, x, w)
        with open(args.inductor_code, "w") as f:
            f.write("\n\n# ----\n\n".join(codes))
            f.write("\n\n# ---- autotuned launch configurations of the generated Triton kernels\n")
            for line in triton_configs():
                f.write(f"# {line}\n")
    for _ in range(3):
        compiled_fn(x, w)

    timed = [("eager", eager), ("compile", lambda: compiled_fn(x, w))]
    report = []
    for c in cands:
        k = Kernel(cuda, c["cubin"])
        out = torch.empty_like(x)
        rstd = torch.empty(rows, device="cuda", dtype=torch.float32)
        split = c["params"]["split"]
        work = torch.zeros(rows * split + 1, device="cuda", dtype=torch.float32) if split > 1 else None
        try:
            k.launch(torch, x, w, out, rstd, eps, c["params"]["threads"], split, work)
        except RuntimeError as e:  # a grid the GPU cannot keep resident: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
            print(f"{c['name']}: {k.registers} registers, not launched ({e}): dropped", flush=True)
            c["dropped"] = str(e)
            continue
        torch.cuda.synchronize()
        if work is not None and work[-1].view(torch.int32).item() != 0:
            raise RuntimeError(f"{c['name']} left its counter at {work[-1].view(torch.int32).item()}")
        err = (out.float() - ref_out.float()).abs().max().item()
        rerr = ((rstd - ref_rstd.reshape(-1)).abs() / ref_rstd.reshape(-1).abs()).max().item()
        c.update(kernel=k, registers=k.registers, maxAbsErr=err, maxRstdRelErr=rerr)
        timed.append((c["name"], (lambda k=k, out=out, rstd=rstd, t=c["params"]["threads"], s=split, wk=work:
                                  k.launch(torch, x, w, out, rstd, eps, t, s, wk))))
        print(f"{c['name']}: {k.registers} registers, max |err| {err:.3g}, rstd rel err {rerr:.3g}", flush=True)

    if args.triton:
        ptx = find_triton_ptx()
        if not ptx:
            raise RuntimeError("--triton: no rms_norm PTX in the inductor / Triton caches")
        for mutation in [""] + [m for m in args.triton_mutations.split(",") if m]:
            tk = TritonKernel(cuda, ptx, mutation)
            tout = torch.empty_like(x)
            tk.launch(torch, x, w, tout)
            torch.cuda.synchronize()
            err = (tout.float() - ref_out.float()).abs().max().item()
            name = "triton-ptx" + (f" [{mutation}]" if mutation else "")
            cands.append({"name": name, "params": {"threads": tk.threads, "shared": tk.shared},
                          "experiment": "triton" + (f"-{mutation}" if mutation else ""), "options": [ptx],
                          "registers": tk.registers, "maxAbsErr": err})
            timed.append((name, lambda tk=tk, tout=tout: tk.launch(torch, x, w, tout)))
            print(f"{name} ({ptx}): {tk.threads} threads, {tk.shared} B shared, {tk.registers} registers, "
                  f"max |err| {err:.3g}", flush=True)

    # The project's benchmark method, as ops_bench.py runs it (same module).
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from ops_bench import Timer, copy_bandwidth, machine, time_interleaved
    timer = Timer()
    copy_gbps = copy_bandwidth(timer) / 1e9

    samples = time_interleaved(timer, timed, args.reps)

    moved = 2 * rows * cols * x.element_size() + cols * x.element_size() + rows * 4
    med = {name: statistics.median(v) for name, v in samples.items()}
    print(f"copy bandwidth {copy_gbps:.0f} GB/s; eager {med['eager']:.1f} us, compile {med['compile']:.1f} us")
    for c in [{"name": "eager"}, {"name": "compile"}] + [c for c in cands if "dropped" not in c]:
        name = c["name"]
        entry = {
            "name": name,
            "params": c.get("params"),
            "experiment": c.get("experiment"),
            "options": c.get("options"),
            "registers": c.get("registers"),
            "medianUs": med[name],
            "copyFraction": moved / (med[name] * 1e-6) / (copy_gbps * 1e9),
            "vsCompile": paired_ratio(samples, name, "compile"),
            "vsEager": paired_ratio(samples, name, "eager"),
            "maxAbsErr": c.get("maxAbsErr"),
            "maxRstdRelErr": c.get("maxRstdRelErr"),
            "samplesUs": samples[name],
        }
        report.append(entry)
        print(f"{name:32s} {med[name]:8.1f} us  {100 * entry['copyFraction']:5.1f}% copy  "
              f"vs compile {entry['vsCompile']['median']:.3f}x [{entry['vsCompile']['low']:.3f}, "
              f"{entry['vsCompile']['high']:.3f}]  regs {c.get('registers')}", flush=True)

    write_probe_json(args.out, "hotkernel-norm-probe", 1, machine(), {
        "op": "rms_norm (weight, eps=None)",
        "dtype": args.dtype,
        "shape": [rows, cols],
        "copyGBps": copy_gbps,
        "reps": args.reps,
        "candidates": report,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
