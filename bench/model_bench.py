#!/usr/bin/env python3
"""model_bench: unmodified HF transformers models (random weights, built from
configs: nothing is downloaded) under the preload, hotkernel against eager ATen
AND torch.compile, measured side by side in one process on one GPU.

Run under the preload (tools/gpu/run-h200.sh models does):
    LD_PRELOAD=build/lib/libhotkernel_preload.so HOTKERNEL_CACHE_DIR=$(mktemp -d)/c \\
        python3 bench/model_bench.py --out models.json
with the recorder's default sampling (HOTKERNEL_SAMPLE=0.05), as a serving process runs: at
HOTKERNEL_SAMPLE=1 the recorder takes every op's inputs, host time that a host-bound step of
the hotkernel arm (and of eager, which runs in the same process) pays and torch.compile's
graph (few dispatcher calls) does not.

Models (--models, default all), sized so that eager prefill is bound by the GPU,
not by HF's Python (a step's host time is ~8-15 ms on the H200 machine):
  llama       LlamaConfig (Llama-3.2-1B-like, 8 layers: hidden 2048, 16 heads, 8 KV heads,
              MLP 8192, vocab 128256), bf16, SDPA; prefill of 8 x 512 tokens, then a
              greedy decode of 32 tokens (batch 8) with a static KV cache
  gpt2-eager  GPT2Config (GPT-2 small: 12 layers, hidden 768, vocab 50257), fp16, eager
              attention (matmul + softmax); forward of 16 x 512 tokens
  gpt2-sdpa   the same with SDPA attention
  bert        BertConfig (BERT-base: 12 layers, hidden 768, vocab 30522), bf16, SDPA,
              masked-LM head; forward of 32 x 512 tokens
  bit         (opt-in: --models bit) BitConfig (BiT-M R50x1: a pre-activation ResNet-50 whose norms are
              GroupNorm(32) then ReLU, F.group_norm every block), bf16, image classification (1000
              labels); forward of 32 images of 224 x 224 (a "step" is the batch; its tokensPerStep
              counts images). Its group norms are served only with native_group_norm in HOTKERNEL_OPS,
              its convolutions' weight standardization (F.batch_norm of each weight) only with
              native_batch_norm
  resnet      (opt-in: --models resnet) ResNetConfig (ResNet-50: bottleneck blocks of convolutions, each
              followed by an eval-mode BatchNorm2d and ReLU), bf16, image classification (1000 labels);
              forward of 32 images of 224 x 224: a CNN whose eval batch norms, residual adds and ReLUs
              hotkernel fuses into chains between the convolutions
  resnet-fp32 (opt-in: --models resnet-fp32) the same in float32, as a model loads by default: ATen
              runs its eval batch norms as cuDNN's (cudnn_batch_norm)
Per model the script
  1. builds the model on the device and the inputs (seeded), and computes eager
     references (hotkernel switched off): the logits, the loss with labels, the
     greedy tokens of the decode;
  2. makes its variants hot: runs the steps (with labels, so the loss's ops are
     recorded too) until every variant called once a step has passed
     HOTKERNEL_HOT_CALLS, then compiles the torch.compile versions (the
     background optimizer tunes meanwhile: compiling leaves the GPU mostly idle)
     and waits for the optimizer, all within --tune-timeout seconds;
  3. checks the max abs difference of the logits (hotkernel and torch.compile)
     and of the loss (hotkernel) against eager, and whether the greedy tokens agree
     (eagerAgain: eager's own tokens twice, the control of the other two): per
     implementation the sequences that agree throughout, where each other one first
     differs and eager's top-1 minus top-2 logit there (`decodeTokens`; a flip at a
     margin below the logits' difference is a near-tie, not a wrong token);
  4. times each phase (prefill / forward: one call; decode: the greedy loop,
     reported per token) for three implementations of the same step:
       eager     hotkernel switched off (hotkernel_set_enabled(0)): ATen's kernels
       hotkernel hotkernel on (its kernels for the variants it serves, ATen's otherwise)
       compile   torch.compile(step, dynamic=False) (default mode), hotkernel off
     interleaved in rotating order, CUDA events around the step, L2 flushed and
     the GPU idle before it: the time a serving loop sees, host time included
     where the GPU waits for it (next to it the host's time in the same calls,
     `hostUs` medians and `hostSamplesUs`: a step whose time exceeds its host
     time waited for the GPU);
     medians and 95% CIs of each and of the paired ratios come from
     hotkernel_compare_samples (a Python twin of it when the library is absent);
     beside them the ratio of the fastest samples ("best of N": host interference
     only adds time to a host-bound step, so stretches of it that the medians
     cannot escape leave the minimum alone);
  5. profiles a few steps of each implementation with torch.profiler (CPU and
     CUDA activities): GPU time per step (the device activities' durations
     summed: the kernels' own time, which hotkernel changes, whatever the host
     does), the share of it in hotkernel's kernels (names starting with hk_), and
     the ATen ops ranked by self GPU time under hotkernel, each with its eager
     time and whether hotkernel serves it (the Amdahl view of what is left).
     The same steps give each implementation's timeline (profile.timeline:
     Note [A step's timeline]) and its busiest kernels (profile.topKernels).

The hotkernel arm fuses chains of small ops (the deferral engine, HOTKERNEL_FUSION, on by
default in the library); --no-fusion measures the served ops alone (HOTKERNEL_FUSION=0) and
--fusion insists on fusion (the script runs itself again with the variable set, since the
library reads it when it starts; eager is hotkernel_set_enabled(0), which switches fusion off too,
and torch.compile runs with hotkernel off as before). The warm-up then repeats (at most
twice more, within --tune-timeout) while the status's hot or ready chains still change:
a deferred chain can leave the rest of its window to be learned as a new one. Reported
besides: the fusion counters per step of the hotkernel arm (fused and unfused flushes,
deferred calls), the share of GPU time in the fused kernels (hk_chain; torch.profiler leaves them out
of every op's self time, in the ranked view's "not attributed" row), and each chain variant
the process tuned with its decision and speed-up (hotkernel.chains; "strided" for a variant
over strided or broadcast views), and the recurring patterns learning left short of hot
(hotkernel.fusionPatternsShortOfHot: their count, sightings and counts by calls; their chains
ran unfused in the timing, which more steps would change). Each recorded variant
(hotkernel.variants) says how many of its sampled calls fused chains took (deferredCalls).

Nothing about hotkernel is required: without the preload (or when it declines
to serve), the hotkernel parts are skipped or reported as such and eager is
still timed against torch.compile. `--smoke` runs tiny configs (on the GPU when
there is one, else on the CPU, with perf_counter instead of CUDA events and self
CPU time instead of GPU time) to check the script's logic.

Output: "hotkernel-bench" v1 JSON, benchmark "models", one result per model
(written after each model), and Markdown tables on stdout.
"""
import argparse
import collections
import contextlib
import ctypes
import datetime
import inspect
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import warnings

import torch

ALL_MODELS = ("llama", "gpt2-eager", "gpt2-sdpa", "bert")
# Models run only when named (--models): their served ops are not in HOTKERNEL_OPS' default.
OPT_IN_MODELS = ("bit", "resnet", "resnet-fp32")
# HOTKERNEL_OPS' default (README.md): the ops hotkernel overrides when the variable is unset.
DEFAULT_HOTKERNEL_OPS = "_softmax,_log_softmax,_fused_rms_norm,native_layer_norm,cross_entropy_loss,mm,addmm,sum.dim_IntList,mean.dim,amax,argmax,amin,argmin,max.dim,min.dim"
T0 = time.perf_counter()


def progress(msg):
    print(f"[model_bench +{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


# ----------------------------------------------------------------------------
# hotkernel's C API, and the statistics used when it is absent
# ----------------------------------------------------------------------------

def median_ci(samples):
    """Median with a ~95% CI from order statistics: the Python twin of medianWithCi
    (optimizer/measure/Statistics.cpp), used only when the library is not loaded."""
    s = sorted(samples)
    n = len(s)
    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    half = 1.959964 * math.sqrt(n) / 2.0
    lo = max(int(math.floor(n / 2.0 - half)), 1)
    hi = min(int(math.ceil(n / 2.0 + half)) + 1, n)
    return {"median": median, "low": s[lo - 1], "high": s[hi - 1], "n": n}


def compare_python(baseline, candidate):
    return {"baseline": median_ci(baseline), "candidate": median_ci(candidate),
            "speedup": median_ci([a / b for a, b in zip(baseline, candidate)])}


class Hotkernel:
    """The C API of the loaded libhotkernel.so (through the preload shim), or None
    from load() when the library is not in the process."""

    @staticmethod
    def load():
        try:
            return Hotkernel(ctypes.CDLL(None))
        except AttributeError:
            return None

    def __init__(self, lib):
        self.set_enabled = lib.hotkernel_set_enabled
        self.wait_idle = lib.hotkernel_wait_idle
        self._status = lib.hotkernel_status_json
        self._compare = lib.hotkernel_compare_samples
        self.set_enabled.argtypes = [ctypes.c_int]
        self.wait_idle.argtypes = [ctypes.c_double]
        self._status.argtypes = [ctypes.c_char_p, ctypes.c_int]
        dp = ctypes.POINTER(ctypes.c_double)
        self._compare.argtypes = [dp, dp, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]

    def status(self):
        """The status document; {} when the library cannot produce one (it never throws)."""
        n = self._status(None, 0)
        if n <= 0:
            return {}
        buf = ctypes.create_string_buffer(n)
        self._status(buf, n)
        try:
            return json.loads(buf.value)
        except ValueError:
            return {}

    def compare(self, baseline, candidate):
        """Median + 95% CI of each and of the paired ratios baseline/candidate."""
        n = len(baseline)
        arr = ctypes.c_double * n
        a, b = arr(*baseline), arr(*candidate)
        size = self._compare(a, b, n, None, 0)
        if size < 0:
            raise RuntimeError("hotkernel_compare_samples refused the samples")
        buf = ctypes.create_string_buffer(size)
        self._compare(a, b, n, buf, size)
        return json.loads(buf.value)


def compare(hk, baseline, candidate):
    return hk.compare(baseline, candidate) if hk else compare_python(baseline, candidate)


@contextlib.contextmanager
def hotkernel_off(hk):
    """Routes every overridden op to ATen for the duration, then restores the previous
    setting (nesting-safe; a no-op without the library)."""
    previous = hk.set_enabled(0) if hk else 1
    try:
        yield
    finally:
        if hk:
            hk.set_enabled(0 if previous == 0 else 1)


def served_op_names():
    """The ops the trampolines are installed for (HOTKERNEL_OPS or its default), as
    the profiler names them: 'aten::' + the name without its overload."""
    names = os.environ.get("HOTKERNEL_OPS") or DEFAULT_HOTKERNEL_OPS
    return {"aten::" + n.strip().removeprefix("aten::").split(".")[0] for n in names.split(",") if n.strip()}


def short_op(name):
    """'aten::sum.dim_IntList' -> 'aten::sum': RecordFunction and the profiler drop the overload."""
    return name.split(".")[0]


def parse_variant(text):
    """'dtype=bfloat16;rows=512;cols=2048;weight=1' -> {'dtype': 'bfloat16', 'rows': '512', ...}."""
    return dict(kv.split("=", 1) for kv in text.split(";") if "=" in kv)


def recorded_counts(status, field="sampled"):
    """(op, dtype, rows, cols) -> sampled calls, from the recorder's profile in the status; field="deferred": of
    them, those the fusion engine deferred into chains (v3's "deferred_calls", absent when none were)."""
    counts = {}
    profile = status.get("profile", {})
    # hotkernel-profile v3 spells its keys in snake_case, v1 and v2 in camelCase (docs/design/json-style.md).
    v3 = profile.get("version", 0) >= 3
    name = {"sampled": "sampled_calls" if v3 else "sampledCalls", "deferred": "deferred_calls"}[field]
    for v in profile.get("variants", []):
        key = (v.get("op"), v.get("dtype"), str(v.get("rows")), str(v.get("cols")))
        counts[key] = counts.get(key, 0) + v.get(name, 0)
    return counts


def model_variants(before, after):
    """The variants the model's steps were recorded calling (sampled calls that grew
    between two status documents), each with hotkernel's decision for it: "kernel"
    (a plan serves it, named), the tuner's decision ("keep_aten", ...) or "undecided",
    and how many of those sampled calls fused chains took ("deferredCalls")."""
    old, new = recorded_counts(before), recorded_counts(after)
    old_deferred, new_deferred = recorded_counts(before, "deferred"), recorded_counts(after, "deferred")
    plans = [(p.get("op"), parse_variant(p.get("variant", "")), p.get("kernel", "")) for p in after.get("plans", [])]
    tuned = [(t.get("op"), parse_variant(t.get("variant", "")), t.get("decision", "?")) for t in after.get("tuned", [])]

    def same(key, op, fields):
        return op == key[0] and (fields.get("dtype"), fields.get("rows"), fields.get("cols")) == key[1:]

    out = []
    for key, n in sorted(new.items(), key=lambda kv: -kv[1]):
        if n <= old.get(key, 0):
            continue
        # The recorder notes every op of the served-op table; only those in HOTKERNEL_OPS are overridden.
        entry = {"op": key[0], "dtype": key[1], "rows": int(key[2]), "cols": int(key[3]),
                 "sampledCalls": n - old.get(key, 0),
                 "deferredCalls": new_deferred.get(key, 0) - old_deferred.get(key, 0),
                 "overridden": short_op(key[0]) in served_op_names(),
                 "decision": "undecided", "kernel": ""}
        kernels = [k for op, f, k in plans if same(key, op, f)]
        decisions = [d for op, f, d in tuned if same(key, op, f)]
        if kernels:
            entry["decision"], entry["kernel"] = "kernel", kernels[0]
        elif decisions:
            entry["decision"] = decisions[-1]
        out.append(entry)
    return out


# ----------------------------------------------------------------------------
# Environment and timing
# ----------------------------------------------------------------------------

def machine(device):
    import transformers
    info = {"device": device.type, "gpu": None, "driver": None, "torch": torch.__version__,
            "cuda": torch.version.cuda, "transformers": transformers.__version__,
            "python": platform.python_version()}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
            info["driver"] = out.splitlines()[0] if out else "unknown"
        except (OSError, subprocess.SubprocessError):
            info["driver"] = "unknown"
    return info


class CudaTimer:
    """CUDA events around one step, L2 flushed and the GPU idle before it: the events
    time from the step's first launch to its last kernel's end, so host time between
    launches (Python, the dispatcher, hotkernel's trampolines and recorder) counts
    where the GPU waits for it. A sleep kernel that keeps the GPU busy while the
    step is enqueued (ops_bench's way of timing one op's kernels) does not carry
    over to a model: a step's hundreds to thousands of launches fill the launch
    queue and the host blocks; the kernels' own time comes from the profiler."""

    def __init__(self, device):
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device=device)

    def sync(self):
        torch.cuda.synchronize()

    def start(self, fn):
        """Enqueues one timed call; returns what us() resolves after a sync and the host's time in the call
        (us), the GPU idle before it."""
        self.flush.zero_()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        t0 = time.perf_counter()
        fn()
        host = (time.perf_counter() - t0) * 1e6
        e1.record()
        return (e0, e1), host

    @staticmethod
    def us(pending):
        e0, e1 = pending
        return e0.elapsed_time(e1) * 1e3


class CpuTimer:
    """perf_counter around one call (--smoke without a GPU)."""

    def sync(self):
        pass

    def start(self, fn):
        t0 = time.perf_counter()
        fn()
        us = (time.perf_counter() - t0) * 1e6
        return us, us

    @staticmethod
    def us(pending):
        return pending


def time_impls(hk, timer, impls, reps, per):
    """Times each implementation `reps` times, interleaved in rotating order; `per`
    divides each sample (decode: tokens per loop). Medians and CIs of each and of the
    paired ratios: eager / X (X faster when > 1) and compile / hotkernel."""
    names = list(impls)
    samples = {n: [] for n in names}
    host = {n: [] for n in names}  # the host's time in each timed call: beside the step's, host- or GPU-bound
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        pending = []
        for n in order:
            p, h = timer.start(impls[n])
            pending.append((n, p))
            host[n].append(h / per)
            timer.sync()
        for n, p in pending:
            samples[n].append(timer.us(p) / per)
    out = {"hostUs": {n: round(statistics.median(host[n]), 2) for n in names}}
    out["eagerUs"] = median_ci(samples["eager"]) if len(names) == 1 else None
    for n in names[1:]:
        c = compare(hk, samples["eager"], samples[n])
        out["eagerUs"] = c["baseline"]
        out[f"{n}Us"] = c["candidate"]
        out[f"{n}SpeedupVsEager"] = c["speedup"]
    if "hotkernel" in names and "compile" in names:
        out["hotkernelSpeedupVsCompile"] = compare(hk, samples["compile"], samples["hotkernel"])["speedup"]
    # Best of N: the fastest sample of each arm (noise on a host-bound step only adds time).
    for n in names[1:]:
        out[f"{n}BestSpeedupVsEager"] = round(min(samples["eager"]) / min(samples[n]), 4)
    if "hotkernel" in names and "compile" in names:
        out["hotkernelBestSpeedupVsCompile"] = round(min(samples["compile"]) / min(samples["hotkernel"]), 4)
    out["samplesUs"] = {n: [round(v, 2) for v in s] for n, s in samples.items()}
    out["hostSamplesUs"] = {n: [round(v, 2) for v in s] for n, s in host.items()}
    return out


# ----------------------------------------------------------------------------
# Profiles: GPU time by kernel and by ATen op
# ----------------------------------------------------------------------------

GEMM = re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|addmv|mv)$")
ATTENTION = re.compile(r"attention|flash|_efficient|cudnn_attention|sdpa")


def category(op):
    if GEMM.match(op):
        return "gemm"
    return "attention" if ATTENTION.search(op) else "other"


# Note [A step's timeline]
# The profiled steps say where each implementation's wall time goes (profile.timeline, per step): the
# window from the first to the last host event, the device's busy time in it (the union of its kernel,
# copy and memset intervals) and the rest, idle; the host calls that wait for the device (WAIT_CALLS:
# synchronizations and synchronous copies), their count and host time; and the asynchronous copies
# (COPY_CALLS), their count and host time apart: a device-to-device copy returns at once, a copy from or
# to pageable memory (an .item(), a torch.tensor(..., device="cuda")) waits for the stream there, so
# their time, not their count, says how long the host sat waiting. A step whose GPU time drops while
# its wall time does not shows here as idle time or waiting that grew: the overlap of host and device
# lost, not the host's cost (GPT-2 eager under fusion). The idle time is split by the length of its gaps (the
# device's idle intervals in the window, before its first and after its last kernel included): gaps of at least
# LONG_GAP_US (idleLongGaps, their count and time) are the device waiting through a stretch of host work (a
# prologue after a synchronization, a host-bound stretch of Python), the shorter ones (idleShortGapsUs) the
# bubbles between launches a host only just ahead of the device leaves.
LONG_GAP_US = 50.0
WAIT_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyHtoD")
COPY_CALLS = ("cudaMemcpyAsync", "cuMemcpyAsync", "cuMemcpyDtoHAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoDAsync")


def step_timeline(events, steps):
    """What a profiled step's wall time is made of (Note [A step's timeline]), per step. None without
    device events."""
    host, device, waits, copies = [], [], [], []
    for e in events:
        start, end = e.time_range.start, e.time_range.end
        if e.device_type == torch.autograd.DeviceType.CPU:
            host.append((start, end))
            if e.name in WAIT_CALLS:
                waits.append(end - start)
            elif e.name in COPY_CALLS:
                copies.append(end - start)
        else:
            device.append((start, end))
    if not host or not device:
        return None
    first, last = min(start for start, _ in host), max(end for _, end in host)
    window = last - first
    busy, reach = 0.0, None
    gaps = []  # the device's idle intervals inside the host's window
    for start, end in sorted(device):
        if reach is None or start > reach:
            gap_from = first if reach is None else reach
            if min(start, last) > gap_from:
                gaps.append(min(start, last) - gap_from)
            busy += end - start
            reach = end
        elif end > reach:
            busy += end - reach
            reach = end
    if reach is not None and last > reach:
        gaps.append(last - max(reach, first))
    long_gaps = [g for g in gaps if g >= LONG_GAP_US]
    return {"windowUs": window / steps, "gpuBusyUs": busy / steps, "gpuIdleUs": max(0.0, window - busy) / steps,
            "idleLongGaps": len(long_gaps) / steps, "idleLongGapsUs": sum(long_gaps) / steps,
            "idleShortGapsUs": (sum(gaps) - sum(long_gaps)) / steps,
            "syncCalls": len(waits) / steps, "syncWaitUs": sum(waits) / steps,
            "asyncCopyCalls": len(copies) / steps, "asyncCopyUs": sum(copies) / steps}


def profile_steps(fn, steps, use_cuda, sync):
    """Per-step self device time by op and device time by kernel over `steps` calls of fn
    (self CPU time by op when there is no GPU). Returns (ops, kernels, total, timeline): ops maps
    name -> [us per step, calls per step]; timeline is step_timeline's (None without a GPU)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    sync()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            fn()
        sync()
    ops, kernels, total = aggregate_events(prof.events(), steps, use_cuda)
    return ops, kernels, total, step_timeline(prof.events(), steps) if use_cuda else None


# Note [Chain kernels in the op table]
# A range hotkernel opens around a flush (Note [Flushes in the profiler]) comes back on the device too, as a
# user annotation spanning the chain's kernels: it is not device time of its own, so it is left out of the
# kernels and of the total (counted, it doubled the fused chains' time). The profiler charges a kernel to the
# innermost op whose call launched it, so a chain flushed inside an op's call (a GEMM that reads a pending
# value) lands in that op's self time; the hk_chain kernels are taken out of every op's time and ranked as
# the fused chains' own row instead.
def aggregate_events(events, steps, use_cuda):
    """profile_steps' sums over torch.profiler's events: (ops, kernels, total) per step (Note [Chain kernels
    in the op table])."""
    ops, kernels = {}, {}
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CPU:
            if e.is_async:
                continue
            rec = ops.setdefault(e.name, [0.0, 0])
            if use_cuda:
                chains = sum(k.duration for k in (getattr(e, "kernels", None) or []) if k.name.startswith("hk_chain"))
                rec[0] += max(0.0, e.self_device_time_total - chains) / steps
            else:
                rec[0] += e.self_cpu_time_total / steps
            rec[1] += 1 / steps
        elif not getattr(e, "is_user_annotation", False):  # a kernel, memcpy or memset on the device
            kernels[e.name] = kernels.get(e.name, 0.0) + e.device_time_total / steps
    total = sum(kernels.values()) if use_cuda else sum(t for t, _ in ops.values())
    return ops, kernels, total


def ranked_view(hk_prof, eager_prof, served, variants, hk_loaded, use_cuda, top):
    """The Amdahl view: ops by self GPU time under hotkernel, each with its share, the
    running share, its eager time and whether hotkernel serves it."""
    ops, kernels, total, _ = hk_prof
    eager_ops = eager_prof[0]
    decided = {}
    for v in variants:  # op -> the decisions of this model's variants of it
        if v["overridden"]:
            decided.setdefault(short_op(v["op"]), set()).add(v["decision"])

    def served_flag(op):
        if not hk_loaded:
            return "hotkernel not loaded"
        if op == "hotkernel::fused_chain":  # the engine's flush scopes (Note [Flushes in the profiler])
            return "hk kernel (fused chains)"
        if op == "hotkernel::unfused_chain":
            return "chains replayed by ATen"
        if op not in served:
            return "no"
        d = decided.get(op)
        if not d:
            return "overridden; no variant recorded"
        if "kernel" in d:
            return "hk kernel" if d == {"kernel"} else "hk kernel (some variants)"
        return "overridden; ATen kept" if "undecided" not in d else "overridden; undecided"

    rows, running = [], 0.0
    attributed = 0.0
    for op, (us, calls) in sorted(ops.items(), key=lambda kv: -kv[1][0]):
        if us <= 0:
            continue
        attributed += us
        running += us
        rows.append({"op": op, "usPerStep": round(us, 2), "share": us / total if total else 0.0,
                     "cumulativeShare": running / total if total else 0.0,
                     "eagerUsPerStep": round(eager_ops.get(op, [0.0])[0], 2), "callsPerStep": round(calls, 2),
                     "category": category(op), "served": served_flag(op)})
    unattributed = total - attributed
    # The fused chains' kernels run in hotkernel's flush scope (Note [Flushes in the profiler]); where the
    # profiler charged them to no op, they are a row of their own (by kernel name), not "not attributed".
    chain_us = sum(us for name, us in kernels.items() if name.startswith("hk_chain"))
    scope_rows = [r for r in rows if r["op"] == "hotkernel::fused_chain"]
    if use_cuda and chain_us > 0 and not scope_rows and unattributed > 0:
        fused = min(chain_us, unattributed)
        unattributed -= fused
        rows.append({"op": "hotkernel::fused_chain (hk_chain kernels)", "usPerStep": round(fused, 2),
                     "share": fused / total, "cumulativeShare": 0.0, "eagerUsPerStep": 0.0, "callsPerStep": 0,
                     "category": "other", "served": "hk kernel (fused chains)"})
        rows.sort(key=lambda r: -r["usPerStep"])
        running = 0.0
        for r in rows:
            running += r["usPerStep"]
            r["cumulativeShare"] = running / total
    if use_cuda and unattributed > 0.005 * total:
        # Device time no op launched as far as the profiler can tell (a launch it did not
        # correlate): a row of its own, so the shares still add up to the GPU time.
        rows.append({"op": "(not attributed to an op)", "usPerStep": round(unattributed, 2),
                     "share": unattributed / total, "cumulativeShare": 1.0, "eagerUsPerStep": 0.0,
                     "callsPerStep": 0, "category": "other", "served": "-"})
        rows.sort(key=lambda r: -r["usPerStep"])
        running = 0.0
        for r in rows:
            running += r["usPerStep"]
            r["cumulativeShare"] = running / total
    hk_us = sum(us for name, us in kernels.items() if name.startswith("hk_"))
    by_cat = {}
    for r in rows:
        by_cat[r["category"]] = by_cat.get(r["category"], 0.0) + r["share"]
    served_share = sum(r["share"] for r in rows
                       if r["served"].startswith("hk kernel") and not r["op"].startswith("hotkernel::"))
    return {
        "timeBase": "self CUDA time (torch.profiler)" if use_cuda else "self CPU time (no GPU: smoke run)",
        "hkKernelShare": hk_us / total if total and use_cuda else None,
        "fusedChainKernelShare": chain_us / total if total and use_cuda else None,
        "hkKernels": [{"name": n, "usPerStep": round(us, 2)} for n, us in
                      sorted(kernels.items(), key=lambda kv: -kv[1]) if n.startswith("hk_")],
        "servedOpShare": served_share,
        "shareByCategory": by_cat,
        "unattributedUsPerStep": round(unattributed, 2) if use_cuda else None,
        "ops": rows[:top],
        "opsOmitted": max(len(rows) - top, 0),
    }


# ----------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------

def model_specs(smoke):
    """name -> how to build the model and its inputs. Sizes run in seconds on one H200;
    --smoke shrinks every dimension."""
    from transformers import BertConfig, BitConfig, GPT2Config, LlamaConfig, ResNetConfig
    if smoke:
        llama = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)
        gpt2 = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256)
        bert = BertConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          vocab_size=1000, max_position_embeddings=256)
        batch, seq, tokens = 2, 32, 4
        bit = BitConfig(embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1], num_groups=8, num_labels=10)
        resnet = ResNetConfig(embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1], num_labels=10)
        image = 32
    else:
        llama = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=8, num_attention_heads=16,
                            num_key_value_heads=8, vocab_size=128256, max_position_embeddings=2048,
                            tie_word_embeddings=True)
        gpt2 = dict()  # GPT-2 small
        bert = BertConfig()  # BERT-base
        bit = BitConfig(num_labels=1000)  # BiT-M R50x1
        resnet = ResNetConfig(num_labels=1000)  # ResNet-50
        batch, seq, tokens = 8, 512, 32
        image = 224
    # Batches: eager prefill bound by the GPU (see the module's doc); --smoke: 2 everywhere.
    return {
        "llama": dict(config=llama, auto="causal", dtype=torch.bfloat16, attn="sdpa",
                      batch=batch, seq=seq, decode_tokens=tokens, labels="causal"),
        "gpt2-eager": dict(config=GPT2Config(**gpt2), auto="causal", dtype=torch.float16, attn="eager",
                           batch=batch if smoke else 16, seq=seq, decode_tokens=0, labels="causal"),
        "gpt2-sdpa": dict(config=GPT2Config(**gpt2), auto="causal", dtype=torch.float16, attn="sdpa",
                          batch=batch if smoke else 16, seq=seq, decode_tokens=0, labels="causal"),
        "bert": dict(config=bert, auto="masked", dtype=torch.bfloat16, attn="sdpa",
                     batch=batch if smoke else 32, seq=seq, decode_tokens=0, labels="masked"),
        # An image model: seq 1 (a step's "tokens" are its images), pixel_values of image x image.
        "bit": dict(config=bit, auto="image", dtype=torch.bfloat16, attn=None, image=image,
                    batch=batch if smoke else 32, seq=1, decode_tokens=0, labels="class"),
        "resnet": dict(config=resnet, auto="image", dtype=torch.bfloat16, attn=None, image=image,
                       batch=batch if smoke else 32, seq=1, decode_tokens=0, labels="class"),
        "resnet-fp32": dict(config=resnet, auto="image", dtype=torch.float32, attn=None, image=image,
                            batch=batch if smoke else 32, seq=1, decode_tokens=0, labels="class"),
    }


def build_model(spec, device):
    """The model with random weights (HF's init), in eval mode, on the device."""
    from transformers import AutoModelForCausalLM, AutoModelForImageClassification, AutoModelForMaskedLM
    auto = {"causal": AutoModelForCausalLM, "masked": AutoModelForMaskedLM,
            "image": AutoModelForImageClassification}[spec["auto"]]
    kwargs = dict(attn_implementation=spec["attn"]) if spec["attn"] else {}
    try:  # transformers 5 names it dtype; torch_dtype is its deprecated alias
        with device:  # initialize on the device: seconds instead of minutes on the CPU
            model = auto.from_config(spec["config"], dtype=spec["dtype"], **kwargs)
    except TypeError:
        with device:
            model = auto.from_config(spec["config"], torch_dtype=spec["dtype"], **kwargs)
    return model.to(device=device, dtype=spec["dtype"]).eval()


def config_summary(spec, model):
    c = model.config
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "vocab_size", "n_layer", "n_embd", "n_head", "n_inner", "hidden_sizes", "depths", "num_groups",
            "num_labels")
    summary = {k: getattr(c, k) for k in keys if getattr(c, k, None) is not None}
    summary.update(cls=type(model).__name__, dtype=str(spec["dtype"]).removeprefix("torch."),
                   attention=spec["attn"], batch=spec["batch"], seq=spec["seq"],
                   decodeTokens=spec["decode_tokens"],
                   parameters=sum(p.numel() for p in model.parameters()))
    return summary


def static_cache(model, batch, max_len):
    """A StaticCache (fixed shapes: one compiled graph serves every decode step) across
    the transformers 5.x constructor signatures."""
    from transformers import StaticCache
    try:
        return StaticCache(config=model.config, max_cache_len=max_len)
    except TypeError:
        p = next(model.parameters())
        return StaticCache(config=model.config, max_batch_size=batch, max_cache_len=max_len, device=p.device,
                           dtype=p.dtype)


class Decoder:
    """A greedy decode of `tokens` tokens after a prefill, with a static KV cache that
    every implementation rewinds to the prefill's length first, so each timed loop
    starts from the same state. token(ids, pos) is one decode step (what torch.compile
    compiles), the loop stays in Python, tokens stay on the device (no host sync)."""

    def __init__(self, model, ids, tokens):
        self.model, self.tokens = model, tokens
        self.prefill_len = ids.shape[1]
        self.cache = static_cache(model, ids.shape[0], self.prefill_len + tokens)
        params = inspect.signature(model.forward).parameters
        # Later 5.x releases name the cache argument `cache` (past_key_values is its deprecated alias)
        # and take no cache_position; earlier ones need cache_position with a static cache.
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.with_cache_position = "cache_position" in params
        dev = ids.device
        self.positions = [torch.tensor([[self.prefill_len + i]], device=dev) for i in range(tokens)]
        self.cache_positions = [torch.tensor([self.prefill_len + i], device=dev) for i in range(tokens)]
        self.out = torch.empty(ids.shape[0], tokens, dtype=torch.long, device=dev)
        kwargs = {self.cache_arg: self.cache}
        if self.with_cache_position:
            kwargs["cache_position"] = torch.arange(self.prefill_len, device=dev)
        logits = model(input_ids=ids, use_cache=True, **kwargs).logits
        self.first = logits[:, -1:].argmax(-1)

    def token(self, ids, i_pos, i_cpos):
        kwargs = {self.cache_arg: self.cache}
        if self.with_cache_position:
            kwargs["cache_position"] = i_cpos
        return self.model(input_ids=ids, position_ids=i_pos, use_cache=True, **kwargs).logits

    def rewind(self):
        # transformers >= 5.x keeps the write position in the layers (cumulative_length);
        # earlier 5.x releases take cache_position instead and need no rewind.
        for layer in getattr(self.cache, "layers", []):
            length = getattr(layer, "cumulative_length", None)
            if isinstance(length, torch.Tensor):
                length.fill_(self.prefill_len)

    def run(self, step, margins=None):
        """The greedy loop; with a list for `margins`, each step's top-1 minus top-2 logit per sequence is
        appended to it ([batch] float32 on the device: the accuracy runs only, never a timed one)."""
        self.rewind()
        tok, logits = self.first, None
        for i in range(self.tokens):
            logits = step(tok, self.positions[i], self.cache_positions[i])
            tok = logits[:, -1:].argmax(-1)
            self.out[:, i:i + 1] = tok
            if margins is not None:
                top = logits[:, -1].float().topk(2, dim=-1).values
                margins.append(top[:, 0] - top[:, 1])
        return self.out, logits


def token_agreement(ref, got, ref_margins):
    """Greedy tokens `got` [batch, tokens] against eager's `ref`, with eager's top-1 minus top-2 logit at each
    step `ref_margins` [batch, tokens]. Per sequence the first step where the tokens differ (None: the same
    throughout); up to that step both decoded the same prefix, so the step's logits came from the same input and
    a flip there is a near-tie when eager's margin is below the logits' difference between the two (the
    prefill's max abs difference, reported beside). After the first difference a sequence says nothing more."""
    differs = (ref != got).cpu()
    first = [int(row.nonzero()[0]) if bool(row.any()) else None for row in differs]
    margins = ref_margins.float().cpu()
    at = [float(margins[b, i]) for b, i in enumerate(first) if i is not None]
    return {"equal": all(i is None for i in first), "sequences": len(first),
            "sequencesEqual": sum(i is None for i in first), "firstDifference": first,
            "eagerMarginAtFirstDifference": max(at) if at else None}


def env_number(name, default):
    """A HOTKERNEL_* number as the library reads it, or the default when unset or malformed
    (the library warns about those itself)."""
    try:
        v = float(os.environ.get(name, default))
        return v if math.isfinite(v) and v > 0 else default
    except ValueError:
        return default


def recorder_sampling():
    """HOTKERNEL_SAMPLE as the library reads it: a probability in (0, 1], anything else the default 0.05."""
    p = env_number("HOTKERNEL_SAMPLE", 0.05)
    return p if p <= 1 else 0.05


def patterns_short_of_hot(patterns, hot_calls):
    """The fusion patterns (status "fusion.patterns") that recurred (seen at least twice) and were neither reported
    hot nor refused when learning ended: chains the process has not fused yet, which more steps would (Note [Learning
    a pattern that recurs] in interpose/fusion/ChainLearner.h). A pattern seen once is left out (a warm-up's)."""
    short = [p for p in (patterns or {}).values()
             if not p.get("reported") and not p.get("refusal") and 2 <= p.get("seen", 0) < hot_calls]
    by_calls = collections.Counter(p.get("calls", 0) for p in short)
    seen = [p["seen"] for p in short]
    return {"count": len(short), "hotCalls": hot_calls, "seen": [min(seen), max(seen)] if seen else None,
            "byCalls": {str(calls): n for calls, n in sorted(by_calls.items())}}


def max_abs_diff(a, b):
    d = (a.float() - b.float()).abs().max().item()
    return d if math.isfinite(d) else None  # JSON has no NaN / inf: None means non-finite


# ----------------------------------------------------------------------------
# One model
# ----------------------------------------------------------------------------

def run_model(name, spec, hk, timer, device, args):
    result = {"model": name}
    gen = torch.Generator(device=device).manual_seed(1234)
    t0 = time.perf_counter()
    model = build_model(spec, device)
    result["config"] = config_summary(spec, model)
    result["buildSeconds"] = round(time.perf_counter() - t0, 2)
    causal = spec["auto"] == "causal"
    extra = dict(use_cache=False) if causal else {}
    if spec["auto"] == "image":  # pixel_values, one class label an image
        size = spec["image"]
        inputs = dict(pixel_values=torch.randn(spec["batch"], 3, size, size, device=device, generator=gen)
                      .to(spec["dtype"]))
        labels = torch.randint(0, model.config.num_labels, (spec["batch"],), device=device, generator=gen)
        ids = None
    else:
        vocab = model.config.vocab_size
        ids = torch.randint(0, vocab, (spec["batch"], spec["seq"]), device=device, generator=gen)
        inputs = dict(input_ids=ids, **extra)
        labels = ids.clone()
        if spec["labels"] == "masked":  # masked LM: ~15% of the positions carry a label
            labels[torch.rand(ids.shape, device=device, generator=gen) > 0.15] = -100
    progress(f"{name}: built ({result['config']['parameters'] / 1e6:.0f}M parameters) in {result['buildSeconds']} s")

    def forward():
        return model(**inputs).logits

    def loss():
        return model(**inputs, labels=labels).loss

    phases = {("prefill" if causal else "forward"): forward}
    decoder = None
    if spec["decode_tokens"]:
        with hotkernel_off(hk):
            decoder = Decoder(model, ids, spec["decode_tokens"])
        phases["decode"] = lambda: decoder.run(decoder.token)

    # 1. Eager references (hotkernel off).
    with hotkernel_off(hk):
        ref_logits = forward().float()
        ref_loss = loss().float()
        ref_margins = []
        ref_decode = decoder.run(decoder.token, ref_margins)[0].clone() if decoder else None
        ref_margins = torch.stack(ref_margins, dim=1) if ref_margins else None
    timer.sync()

    # 2. Hot variants, compile while the optimizer tunes, wait for it (one time bound).
    status_before = hk.status() if hk else {}
    tune_start = time.perf_counter()
    hot_calls = min(env_number("HOTKERNEL_HOT_CALLS", 50), 10_000)
    # Every variant is called at least once a step; x1.5 (x3 when sampled) covers the
    # recorder's sampling, whose estimate reaches HOT_CALLS after ~HOT_CALLS calls.
    sample = recorder_sampling()
    hot_steps = math.ceil(hot_calls * (1.5 if sample >= 1 else 3)) if hk else 0
    if args.smoke:
        hot_steps = min(hot_steps, 3)

    def make_hot():
        for _ in range(hot_steps):
            loss()
        if decoder:
            for _ in range(math.ceil(hot_steps / decoder.tokens)):
                decoder.run(decoder.token)
        timer.sync()

    make_hot()
    hot_seconds = time.perf_counter() - tune_start
    if hk:
        progress(f"{name}: {hot_steps} hot steps in {hot_seconds:.1f} s; compiling while the optimizer tunes")

    compiled, compile_info = {}, {"ok": not args.no_compile, "seconds": {}}
    if args.no_compile:
        compile_info["note"] = "--no-compile"
    else:
        torch._dynamo.reset()
        counters = torch._dynamo.utils.counters
        graphs0 = counters["stats"]["unique_graphs"]
        breaks0 = sum(counters["graph_break"].values())
        try:
            with hotkernel_off(hk):
                fwd = torch.compile(forward, dynamic=False)
                t = time.perf_counter()
                fwd()
                fwd()  # a second call: a recompile would show up here, not in the timing
                timer.sync()
                compiled[next(iter(phases))] = fwd
                compile_info["seconds"][next(iter(phases))] = round(time.perf_counter() - t, 1)
                if decoder:
                    tok_step = torch.compile(decoder.token, dynamic=False)
                    t = time.perf_counter()
                    decoder.run(tok_step)
                    timer.sync()
                    compiled["decode"] = lambda: decoder.run(tok_step)
                    compile_info["seconds"]["decode"] = round(time.perf_counter() - t, 1)
        except Exception as e:  # compile failing must not lose eager vs hotkernel
            compile_info.update(ok=False, error=f"{type(e).__name__}: {str(e)[:2000]}")
            progress(f"{name}: torch.compile failed: {compile_info['error'][:200]}")
        compile_info["graphs"] = counters["stats"]["unique_graphs"] - graphs0
        compile_info["graphBreaks"] = sum(counters["graph_break"].values()) - breaks0
        progress(f"{name}: torch.compile {compile_info['seconds']} s, {compile_info['graphs']} graphs, "
                 f"{compile_info['graphBreaks']} graph breaks")
    result["compile"] = compile_info

    hk_info = {"loaded": hk is not None, "hotSteps": hot_steps, "hotSeconds": round(hot_seconds, 2)}
    if hk:
        left = max(args.tune_timeout - (time.perf_counter() - tune_start), 0.0)
        time.sleep(0.2)  # idle GPU: the background optimizer's gate opens
        t = time.perf_counter()
        hk_info["optimizerIdle"] = hk.wait_idle(left) == 0
        hk_info["waitedSeconds"] = round(time.perf_counter() - t, 2)
        fusion = hk.status().get("fusion", {})
        if fusion.get("on"):
            # Chains: learn again while the hot or ready chains change (a deferred chain can
            # leave the rest of its window to be learned), within the same time bound.
            hk_info["fusionRounds"] = [{"hotChains": fusion.get("hot_chains"),
                                        "readyChains": fusion.get("ready_chains"),
                                        "optimizerIdle": hk_info["optimizerIdle"]}]
            for _ in range(2):
                left = max(args.tune_timeout - (time.perf_counter() - tune_start), 0.0)
                if not hk_info["optimizerIdle"] or left <= 0:
                    break
                make_hot()
                time.sleep(0.2)
                hk_info["optimizerIdle"] = hk.wait_idle(left) == 0
                now = hk.status().get("fusion", {})
                hk_info["fusionRounds"].append({"hotChains": now.get("hot_chains"),
                                                "readyChains": now.get("ready_chains"),
                                                "optimizerIdle": hk_info["optimizerIdle"]})
                if all(now.get(k) == fusion.get(k) for k in ("hot_chains", "ready_chains")):
                    break
                fusion = now
            progress(f"{name}: fusion: {fusion.get('ready_chains')} of {fusion.get('hot_chains')} hot chains ready "
                     f"after {len(hk_info['fusionRounds'])} learning rounds")
        hk_info["tuneSeconds"] = round(time.perf_counter() - tune_start, 2)
        status = hk.status()
        hk_info["fusion"] = status.get("fusion")
        if (status.get("fusion") or {}).get("on"):
            short = patterns_short_of_hot(status["fusion"].get("patterns"), hot_calls)
            hk_info["fusionPatternsShortOfHot"] = short
            if short["count"]:
                progress(f"{name}: fusion: {short['count']} recurring patterns not hot yet after the learning rounds "
                         f"(seen {short['seen'][0]}-{short['seen'][1]} of {hot_calls} times; by calls "
                         f"{short['byCalls']}): their chains run unfused in the timing")
        # The chains the process tuned (fused chain variants, ";layout=" for strided or broadcast values) and what
        # was decided: which of the learned chains serve, which keep ATen.
        hk_info["chains"] = [{"variant": t.get("variant", ""), "decision": t.get("decision"),
                              "strided": ";layout=" in t.get("variant", ""),
                              "speedup": (t.get("metrics") or {}).get("speedup")}
                             for t in status.get("tuned", []) if t.get("op") == "hotkernel::chain"]
        hk_info["started"] = status.get("started")
        hk_info["variants"] = model_variants(status_before, status)
        hk_info["optimizer"] = status.get("optimizer")
        overridden = [v for v in hk_info["variants"] if v["overridden"]]
        n_kernel = sum(v["decision"] == "kernel" for v in overridden)
        if not status.get("started", False):
            hk_info["note"] = "the library is loaded but did not start (see its log): every op ran ATen's kernel"
        elif not overridden:
            hk_info["note"] = "no variant of an overridden op was recorded: hotkernel serves nothing in this model"
        elif n_kernel == 0:
            hk_info["note"] = "hotkernel serves none of the model's variants (ATen kept or undecided)"
        if not hk_info["optimizerIdle"]:
            hk_info["note"] = (hk_info.get("note", "") + f"; the optimizer was still busy after --tune-timeout "
                               f"{args.tune_timeout:.0f} s").lstrip("; ")
        progress(f"{name}: optimizer {'idle' if hk_info['optimizerIdle'] else 'still busy'} after "
                 f"{hk_info['tuneSeconds']} s; {n_kernel} of {len(overridden)} variants of overridden ops "
                 f"served by a kernel: " + ", ".join(
                     f"{v['op']} {v['dtype']} {v['rows']}x{v['cols']} -> {v['decision']}" for v in overridden))
    else:
        hk_info["note"] = "hotkernel is not loaded (no LD_PRELOAD): eager against torch.compile only"
    result["hotkernel"] = hk_info

    # 3. Correctness against eager.
    accuracy = {"logits": {}, "loss": {"eager": ref_loss.item()}}
    if hk:
        accuracy["logits"]["hotkernel"] = max_abs_diff(forward(), ref_logits)
        hk_loss = loss().float()
        accuracy["loss"]["hotkernel"] = hk_loss.item()
        accuracy["loss"]["hotkernelMaxAbsDiff"] = max_abs_diff(hk_loss, ref_loss)
    first = next(iter(phases))
    if first in compiled:
        with hotkernel_off(hk):
            accuracy["logits"]["compile"] = max_abs_diff(compiled[first](), ref_logits)
    if decoder:
        # The control: eager's own tokens again. Not equal means the model's eager decode is not deterministic run
        # to run (an attention backend's or a GEMM's), and then the other two say nothing about hotkernel or
        # compile. Each with where its sequences first differ and eager's margin there (token_agreement).
        tokens = {}
        with hotkernel_off(hk):
            tokens["eagerAgain"] = token_agreement(ref_decode, decoder.run(decoder.token)[0], ref_margins)
        if hk:
            tokens["hotkernel"] = token_agreement(ref_decode, decoder.run(decoder.token)[0], ref_margins)
        if "decode" in compiled:
            with hotkernel_off(hk):
                tokens["compile"] = token_agreement(ref_decode, compiled["decode"]()[0], ref_margins)
        accuracy["decodeTokens"] = tokens
        accuracy["decodeTokensEqualEager"] = {impl: t["equal"] for impl, t in tokens.items()}
    result["maxAbsDiffVsEager"] = accuracy
    del ref_logits

    # 4 + 5. Timing and profiles, per phase.
    served = served_op_names()
    result["phases"] = []
    for phase, fn in phases.items():
        per = decoder.tokens if phase == "decode" else 1
        impls = {"eager": (lambda f=fn: hotkernel_off_call(hk, f))}
        if hk:
            impls["hotkernel"] = fn
        if phase in compiled:
            impls["compile"] = (lambda f=compiled[phase]: hotkernel_off_call(hk, f))
        for _ in range(2):  # warm-up: allocator, lazy inits
            for f in impls.values():
                f()
        timer.sync()
        entry = {"phase": phase, "unit": "token" if phase == "decode" else "step",
                 "tokensPerStep": spec["batch"] * (1 if phase == "decode" else spec["seq"])}
        if hk and (hk_info.get("fusion") or {}).get("on"):
            # The hotkernel arm's fusion counters per step (per token for the decode).
            before = hk.status().get("fusion", {})
            for _ in range(3):
                fn()
            timer.sync()
            after = hk.status().get("fusion", {})
            # The status's counters (hotkernel-status v2 keys) under this report's names (fusedFlushesPerStep, ...).
            counters = {"fused_flushes": "fusedFlushes", "unfused_flushes": "unfusedFlushes",
                        "deferred_calls": "deferredCalls", "failed_flushes": "failedFlushes",
                        "passed_calls": "passedCalls", "idle_starts": "idleStarts"}
            unit = entry["unit"].capitalize()
            entry["fusion"] = {f"{field}Per{unit}": (after.get(k, 0) - before.get(k, 0)) / (3 * per)
                               for k, field in counters.items()}
        entry["timing"] = time_impls(hk, timer, impls, args.reps, per)
        steps = 1 if phase == "decode" else 3
        try:
            use_cuda = device.type == "cuda"
            profs = {n: profile_steps(f, steps, use_cuda, timer.sync) for n, f in impls.items()}
            profs = {n: scale_profile(p, per) for n, p in profs.items()}  # per decode token, like the timing
            # Without the library, the step as it runs (eager) stands in the ranked view.
            entry["profile"] = ranked_view(profs.get("hotkernel", profs["eager"]), profs["eager"], served,
                                           hk_info.get("variants", []), hk is not None, use_cuda, args.top_ops)
            gpu = {n: round(p[2], 2) for n, p in profs.items()}
            entry["profile"]["totalUsPerStep"] = gpu
            # Note [A step's timeline]: busy, idle and waiting, per implementation.
            entry["profile"]["timeline"] = {n: {k: round(v, 2) for k, v in p[3].items()} if p[3] else None
                                            for n, p in profs.items()}
            # The device's busiest kernels per implementation (names shortened): which kernels an op's time is.
            entry["profile"]["topKernels"] = {
                n: [{"kernel": k[:160], "usPerStep": round(us, 2)}
                    for k, us in sorted(p[1].items(), key=lambda kv: -kv[1])[:args.top_kernels]]
                for n, p in profs.items()} if use_cuda else None
            if use_cuda and "hotkernel" in gpu:
                entry["profile"]["gpuSpeedup"] = {
                    "hotkernelVsEager": gpu["eager"] / gpu["hotkernel"] if gpu["hotkernel"] else None,
                    "hotkernelVsCompile": gpu["compile"] / gpu["hotkernel"] if "compile" in gpu and gpu["hotkernel"]
                    else None}
        except Exception as e:  # a profiler failure loses only the GPU-time view
            entry["profile"] = {"error": f"{type(e).__name__}: {e}"}
        result["phases"].append(entry)
        progress(f"{name} {phase}: {summary_line(entry)}")
    return result


def hotkernel_off_call(hk, fn):
    with hotkernel_off(hk):
        return fn()


def scale_profile(prof, per):
    if per == 1:
        return prof
    ops, kernels, total, timeline = prof
    return ({k: [us / per, calls / per] for k, (us, calls) in ops.items()},
            {k: us / per for k, us in kernels.items()}, total / per,
            {k: v / per for k, v in timeline.items()} if timeline else None)


# ----------------------------------------------------------------------------
# Reporting
# ----------------------------------------------------------------------------

def fmt_ci(m, unit=""):
    return f"{m['median']:.2f}{unit} [{m['low']:.2f}, {m['high']:.2f}]" if m else "-"


def fmt_us(m):
    if not m:
        return "-"
    v = m["median"]
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} us"


def summary_line(entry):
    t = entry["timing"]
    s = f"eager {fmt_us(t.get('eagerUs'))}"
    if "hotkernelUs" in t:
        s += f", hotkernel {fmt_us(t['hotkernelUs'])} (x{t['hotkernelSpeedupVsEager']['median']:.3f} vs eager"
        if "hotkernelSpeedupVsCompile" in t:
            s += f", x{t['hotkernelSpeedupVsCompile']['median']:.3f} vs compile"
        s += ")"
    if "compileUs" in t:
        s += f", compile {fmt_us(t['compileUs'])}"
    s += " (host " + ", ".join(f"{n} {fmt_us({'median': v})}" for n, v in t["hostUs"].items()) + ")"
    prof = entry.get("profile", {})
    if "totalUsPerStep" in prof:
        label = "GPU time" if prof["timeBase"].startswith("self CUDA") else "CPU time"
        s += f" | {label} " + ", ".join(f"{n} {fmt_us({'median': v})}" for n, v in prof["totalUsPerStep"].items())
    if prof.get("hkKernelShare") is not None:
        s += f" | hk kernels {100 * prof['hkKernelShare']:.1f}% of it"
        if prof.get("fusedChainKernelShare"):
            s += f" (fused chains {100 * prof['fusedChainKernelShare']:.1f}%)"
    if "fusion" in entry:
        f = entry["fusion"]
        unit = entry["unit"].capitalize()
        s += (f" | fusion per {entry['unit']}: {f[f'fusedFlushesPer{unit}']:.1f} fused, "
              f"{f[f'unfusedFlushesPer{unit}']:.1f} unfused flushes, {f[f'deferredCallsPer{unit}']:.1f} deferred calls")
    if "error" in prof:
        s += f" | profile error: {prof['error'][:200]}"
    return s


def markdown(results):
    """The ranked views, then the summary table (last, so a log's tail shows it)."""
    lines = []
    for r in results:
        for e in r.get("phases", []):
            prof = e.get("profile", {})
            if "ops" not in prof:
                continue
            under = "under hotkernel" if r["hotkernel"]["loaded"] else "(hotkernel not loaded: eager)"
            label = "GPU time" if prof["timeBase"].startswith("self CUDA") else "CPU time"
            totals = ", ".join(f"{n} {v:.0f} us" for n, v in prof["totalUsPerStep"].items())
            timeline = "; ".join(f"{n}: window {t['windowUs']:.0f} us, GPU busy {t['gpuBusyUs']:.0f} / idle "
                                 f"{t['gpuIdleUs']:.0f} us ({t['idleLongGaps']:g} gaps of >= {LONG_GAP_US:g} us: "
                                 f"{t['idleLongGapsUs']:.0f} us), {t['syncCalls']:g} waits of {t['syncWaitUs']:.0f} us, "
                                 f"{t['asyncCopyCalls']:g} async copies of {t['asyncCopyUs']:.0f} us"
                                 for n, t in (prof.get("timeline") or {}).items() if t)
            lines += ["", f"{r['model']} {e['phase']}: ATen ops by {prof['timeBase']} {under}, per {e['unit']} "
                          f"({label}: {totals})" + (f"; timeline per {e['unit']}: {timeline}" if timeline else ""), "",
                      "| # | op | us | % | cum % | eager us | calls | kind | served |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for i, o in enumerate(prof["ops"], 1):
                lines.append(f"| {i} | {o['op']} | {o['usPerStep']:.1f} | {100 * o['share']:.1f} | "
                             f"{100 * o['cumulativeShare']:.1f} | {o['eagerUsPerStep']:.1f} | {o['callsPerStep']:g} | "
                             f"{o['category']} | {o['served']} |")
    summary = ["| model | phase | eager | hotkernel | compile | hk vs eager | hk vs eager, best of N | hk vs compile | "
               "compile vs eager | GPU time eager / hk / compile | GPU hk vs eager | GPU hk vs compile | "
               "hk kernels % GPU | served ops % GPU | max abs diff logits hk / compile | loss diff hk |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            summary.append(f"| {r['model']} | error: {r['error'][:200]} |")
            continue
        acc = r.get("maxAbsDiffVsEager", {})
        logits = acc.get("logits", {})
        for e in r["phases"]:
            t, prof = e["timing"], e.get("profile", {})
            total = prof.get("totalUsPerStep", {})
            gpu = " / ".join(fmt_us({"median": total[n]}) if n in total else "-"
                             for n in ("eager", "hotkernel", "compile"))
            speed = prof.get("gpuSpeedup", {})
            first = e is r["phases"][0]
            summary.append(
                f"| {r['model']} | {e['phase']} (per {e['unit']}) | {fmt_us(t.get('eagerUs'))} | "
                f"{fmt_us(t.get('hotkernelUs'))} | {fmt_us(t.get('compileUs'))} | "
                f"{fmt_ci(t.get('hotkernelSpeedupVsEager'), 'x')} | {fmt_x(t.get('hotkernelBestSpeedupVsEager'))} | "
                f"{fmt_ci(t.get('hotkernelSpeedupVsCompile'), 'x')} | "
                f"{fmt_ci(t.get('compileSpeedupVsEager'), 'x')} | {gpu} | {fmt_x(speed.get('hotkernelVsEager'))} | "
                f"{fmt_x(speed.get('hotkernelVsCompile'))} | {fmt_pct(prof.get('hkKernelShare'))} | "
                f"{fmt_pct(prof.get('servedOpShare')) if r['hotkernel']['loaded'] else '-'} | "
                f"{fmt_num(logits.get('hotkernel')) + ' / ' + fmt_num(logits.get('compile')) if first else '-'} | "
                f"{fmt_num(acc.get('loss', {}).get('hotkernelMaxAbsDiff')) if first else '-'} |")
    return "\n".join(lines + [""] + summary)


def fmt_x(v):
    return "-" if v is None else f"{v:.3f}x"


def fmt_num(v):
    return "-" if v is None else f"{v:.3g}"


def fmt_pct(v):
    return "-" if v is None else f"{100 * v:.1f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(ALL_MODELS),
                    help=f"comma list of {', '.join(ALL_MODELS + OPT_IN_MODELS)} (default: {', '.join(ALL_MODELS)})")
    ap.add_argument("--reps", type=int, default=15, help="timed rounds per mode (each times every implementation)")
    ap.add_argument("--tune-timeout", type=float, default=60.0,
                    help="seconds per model from its first hot step to the optimizer's decisions (compiling included)")
    ap.add_argument("--top-ops", type=int, default=25, help="ops kept in each ranked view")
    ap.add_argument("--top-kernels", type=int, default=15, help="kernels kept per implementation in profile.topKernels")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny configs, on the GPU if there is one else the CPU; the preload is optional")
    ap.add_argument("--fusion", action="store_true",
                    help="the hotkernel arm fuses chains (HOTKERNEL_FUSION=1, the library's default; needs the preload)")
    ap.add_argument("--no-fusion", action="store_true",
                    help="the hotkernel arm does not fuse chains (HOTKERNEL_FUSION=0: the served ops only)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.fusion and args.no_fusion:
        sys.exit("model_bench: --fusion and --no-fusion exclude each other")
    if args.no_fusion and os.environ.get("HOTKERNEL_FUSION") != "0":
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                  dict(os.environ, HOTKERNEL_FUSION="0"))
    if args.fusion and os.environ.get("HOTKERNEL_FUSION") != "1":
        # The library reads HOTKERNEL_FUSION when it starts (with torch): run again with it set.
        if "libhotkernel_preload" not in os.environ.get("LD_PRELOAD", ""):
            sys.exit("model_bench: --fusion needs the preload (LD_PRELOAD=.../libhotkernel_preload.so)")
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                  dict(os.environ, HOTKERNEL_FUSION="1"))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in ALL_MODELS + OPT_IN_MODELS]
    if unknown:
        sys.exit(f"model_bench: unknown model(s) {', '.join(unknown)} "
                 f"(models: {', '.join(ALL_MODELS + OPT_IN_MODELS)})")
    if args.reps < 7:
        sys.exit("model_bench: --reps must be >= 7 (the confidence interval needs them)")
    if not torch.cuda.is_available() and not args.smoke:
        sys.exit("model_bench: no CUDA device (--smoke runs tiny configs on the CPU)")
    import transformers
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
    # Prefill and decode graphs of several models in one process: more than dynamo's default.
    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 64)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    hk = Hotkernel.load()
    hk_top = {"loaded": hk is not None, "ops": sorted(served_op_names())}
    if hk:
        st = hk.status()
        hk_top.update(started=st.get("started"), enabled=st.get("enabled"), cache=st.get("cache"),
                      fusion=st.get("fusion"))
        progress(f"hotkernel loaded (started: {st.get('started')}), overriding {', '.join(hk_top['ops'])}")
    else:
        hk_top["note"] = "not loaded (run under LD_PRELOAD=.../libhotkernel_preload.so): eager vs torch.compile only"
        progress("hotkernel is not loaded: timing eager against torch.compile only")
    timer = CudaTimer(device) if device.type == "cuda" else CpuTimer()
    specs = model_specs(args.smoke)
    machine_info = machine(device)
    environment = {k: v for k, v in sorted(os.environ.items()) if k.startswith("HOTKERNEL_") or k == "LD_PRELOAD"}
    results = []

    def document():
        doc = {"format": "hotkernel-bench", "version": 1, "benchmark": "models",
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "machine": machine_info, "smoke": args.smoke,
               # Whether the hotkernel arm fused chains: the library's state (on by default), not only --fusion.
               "fusion": bool((hk_top.get("fusion") or {}).get("on")) if hk else False,
               "method": "per model and phase: eager (hotkernel_set_enabled(0)), hotkernel and torch.compile "
                         "(dynamic=False, default mode) of the same step interleaved in rotating order, CUDA events "
                         "around the step, L2 flushed and the GPU idle before it; medians and 95% CIs of paired "
                         f"ratios ({'hotkernel_compare_samples' if hk else 'its Python twin'}); GPU time per step and "
                         "ops ranked by self CUDA time from torch.profiler (CPU and CUDA activities)",
               "reps": args.reps, "tuneTimeoutSeconds": args.tune_timeout, "environment": environment,
               # The recorder's sampling the arms ran with (the environment's, else the library's default).
               "recorderSampling": recorder_sampling() if hk else None,
               "hotkernel": hk_top, "results": results, "seconds": round(time.perf_counter() - T0, 1)}
        if hk:
            doc["hotkernel"]["optimizer"] = hk.status().get("optimizer")
        return doc

    def write():
        if args.out:  # after every model: a crash later loses nothing measured
            with open(args.out + ".tmp", "w") as f:
                json.dump(document(), f, indent=1)
            os.replace(args.out + ".tmp", args.out)

    for name in models:
        progress(f"{name}: start")
        with torch.no_grad():
            try:
                r = run_model(name, specs[name], hk, timer, device, args)
            except Exception as e:  # one broken model must not lose the others
                r = {"model": name, "error": f"{type(e).__name__}: {str(e)[:2000]}"}
                progress(f"{name}: ERROR {r['error'][:300]}")
        results.append(r)
        torch._dynamo.reset()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        write()
    print()
    print(markdown(results))
    write()
    if args.out:
        print(f"\nwritten {args.out}")
    progress("done")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
