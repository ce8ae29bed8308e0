#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/):
small valid inputs of each parser, as the programs that produce them write
them. Run it again after a format changes; its output is checked in."""
import hashlib
import hmac
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def dump(obj):
    """nlohmann::json::dump(): sorted keys, no blanks."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


FINGERPRINT = {"cc": "9.0", "driver": 13000, "gpu": "NVIDIA H200", "hotkernel": "0.1.0",
               "kernels": "ab12cd34", "nvrtc": 13000, "torch": "2.11.0+cu130"}
KERNEL = 'extern "C" __global__ void my_softmax(const void* in, void* out, long long rows, long long cols) {}'
LAUNCH = {"block": 256, "rowsPerBlock": 1, "sharedBytes": 0}
REPLY = {"format": "hotkernel-agent-reply", "version": 1, "source": KERNEL, "kernelName": "my_softmax",
         "launch": LAUNCH, "notes": "first try"}


def fingerprint():
    write("fuzz_fingerprint", "h200.json", dump(FINGERPRINT))
    write("fuzz_fingerprint", "none.json", dump(dict(FINGERPRINT, gpu="none", cc="0.0", driver=0, nvrtc=0)))
    write("fuzz_fingerprint", "shortest.json", dump({k: 0 if isinstance(v, int) else "" for k, v in FINGERPRINT.items()}))


def profile():
    def variant(op, dtype, rows, cols, **extra):
        v = {"op": op, "dtype": dtype, "device": 0, "rows": rows, "cols": cols, "sampledCalls": 12,
             "estimatedCalls": 240.0}
        v.update(extra)
        return v
    doc = {"format": "hotkernel-profile", "version": 1, "samplingProb": 0.05,
           "ops": [{"op": "aten::_softmax", "sampledCalls": 12}],
           "variants": [variant("aten::_softmax", "bfloat16", 4096, 32000),
                        variant("aten::_log_softmax", "float32", 32, 128256),
                        variant("aten::_fused_rms_norm", "bfloat16", 4096, 4096, weight=True),
                        variant("aten::native_layer_norm", "float16", 32, 4096, weight=True, bias=True),
                        variant("aten::cross_entropy_loss", "bfloat16", 32, 128256, reduction="mean"),
                        variant("aten::sum.dim_IntList", "float32", 8192, 1024)]}
    write("fuzz_profile", "all-ops.json", json.dumps(doc, indent=1))
    write("fuzz_profile", "empty.json", dump({"format": "hotkernel-profile", "version": 1, "variants": []}))
    # Version 2 with GPU time (Note [GPU time in the profile]): every entry carries it.
    gpu = {"gpuNs": 120000, "gpuSampledCalls": 12, "estimatedGpuNs": 2400000.0}
    timed = dict(doc, version=2, ops=[dict(o, **gpu) for o in doc["ops"]],
                 variants=[dict(v, **gpu) for v in doc["variants"]],
                 gpuTime={"source": "cupti", "state": "started", "kernelNs": 9000000, "kernels": 700,
                          "attributedNs": 240000, "droppedRecords": 0, "evicted": 0})
    write("fuzz_profile", "gpu-time-v2.json", json.dumps(timed, indent=1))
    # Version 3: version 2 with its keys in snake_case (Note [Profile versions]).
    snake = {"samplingProb": "sampling_prob", "sampledCalls": "sampled_calls", "estimatedCalls": "estimated_calls",
             "gpuNs": "gpu_ns", "gpuSampledCalls": "gpu_sampled_calls", "estimatedGpuNs": "estimated_gpu_ns",
             "gpuTime": "gpu_time", "kernelNs": "kernel_ns", "attributedNs": "attributed_ns",
             "droppedRecords": "dropped_records", "takenOver": "taken_over"}

    def snake_cased(value):
        if isinstance(value, dict):
            return {snake.get(k, k): snake_cased(v) for k, v in value.items()}
        if isinstance(value, list):
            return [snake_cased(v) for v in value]
        return value
    write("fuzz_profile", "gpu-time-v3.json", json.dumps(dict(snake_cased(timed), version=3), indent=1))


def agent_reply():
    write("fuzz_agent_reply", "reply.json", dump(REPLY))
    write("fuzz_agent_reply", "no-notes.json", dump({k: v for k, v in REPLY.items() if k != "notes"}))


def agent_task():
    timing = {"atenUs": 12.5, "kernelUs": 10.0, "speedup": 1.25}
    task = {"format": "hotkernel-agent-task", "version": 1, "op": "aten::_softmax",
            "variant": {"dtype": "bfloat16", "rows": 4096, "cols": 32000},
            "semantics": "out = torch.softmax(in, dim=-1)", "tolerance": 0.00390625,
            "target": {"arch": "sm_90a", "compileOptions": ["--gpu-architecture=sm_90a", "-std=c++17"]},
            "abi": {"signature": "extern \"C\" __global__ void <kernelName>(...)", "rules": ["rows >= 1"]},
            "limits": {"maxSourceBytes": 1048576},
            "family": {"name": "softmax_lastdim", "kernelName": "hk_softmax", "source": "/* template */",
                       "points": [{"params": {"threads": 256, "vec": 8, "items": 0},
                                   "defines": {"HK_THREADS": "256", "HK_VEC": "8"}, "launch": LAUNCH}]},
            "best": None, "lastAttempt": None, "attempt": 1}
    write("fuzz_agent_task", "first.json", dump(task))
    later = dict(task, attempt=2,
                 best={"origin": "agent", "kernel": REPLY, "timing": timing},
                 lastAttempt={"stage": "benchmark", "passed": True, "error": "", "log": "ptxas info",
                              "timing": timing, "reply": REPLY})
    write("fuzz_agent_task", "with-feedback.json", dump(later))


def frame(status, micros, message, log, cubin):
    out = b"HKSC" + struct.pack("<IIIQ", 1, status, 0, micros)
    for blob in (message, log, cubin):
        out += struct.pack("<Q", len(blob)) + blob
    return out


def sandbox():
    write("fuzz_sandbox_frame", "compiled.bin", frame(0, 1234, b"", b"ptxas info: 0 bytes spill", b"\x7fELF" + bytes(60)))
    write("fuzz_sandbox_frame", "compile-error.bin", frame(1, 99, b"NVRTC failed to compile", b"error: x", b""))
    write("fuzz_sandbox_frame", "bad-request.bin", frame(2, 0, b"sandbox compile request is not JSON", b"", b""))
    request = {"format": "hotkernel-sandbox-compile-request", "version": 1, "source": KERNEL,
               "programName": "agent.cu", "arch": "sm_90a", "options": ["-lineinfo"]}
    write("fuzz_sandbox_request", "request.json", dump(request))
    write("fuzz_sandbox_request", "no-options.json", dump(dict(request, options=[])))
    header = {"format": "hotkernel-sandbox-run", "version": 2, "kernelName": "my_softmax", "block": 256,
              "gridX": 4096, "sharedBytes": 0, "rows": 4096, "cols": 32000, "elementSize": 2, "half": False,
              "device": 0, "cubinBytes": 64}
    # First byte: even = the helper's request line, odd = the parent's reading of the reply (2: it exited 0).
    write("fuzz_sandbox_run", "request.bin", "\x00" + dump(header))
    write("fuzz_sandbox_run", "request-fp32.bin", "\x00" + dump(dict(header, elementSize=4, rows=1, cols=7)))
    write("fuzz_sandbox_run", "reply-ok.bin", "\x03" + dump({"ok": True, "seconds": 0.0012}) + "\n")
    write("fuzz_sandbox_run", "reply-error.bin", "\x01" + dump({"ok": False, "error": "no CUDA driver"}) + "\n")
    # Version 2: the harness's five stages after the first run (Note [Sandbox run wire format]); 4: stages expected.
    write("fuzz_sandbox_run", "request-v1.bin", "\x00" + dump(dict(header, version=1)))
    write("fuzz_sandbox_run", "request-harness.bin", "\x00" + dump(dict(header, harness={"launch": LAUNCH, "seed": 42})))
    stages = [{"stage": s, "passed": True, "detail": ""} for s in
              ("smoke", "sweep", "stability", "determinism", "edge-cases")]
    write("fuzz_sandbox_run", "reply-stages-ok.bin",
          "\x07" + dump({"ok": True, "seconds": 1.5, "stages": stages}) + "\n")
    failed = stages[:2] + [{"stage": "stability", "passed": False, "detail": "row 3: NaN where ATen has 0.25"}]
    write("fuzz_sandbox_run", "reply-stages-failed.bin",
          "\x05" + dump({"ok": False, "error": "stability stage: row 3", "stages": failed}) + "\n")


def command_line():
    write("fuzz_command_line", "plain.txt", "python3 tools/agent/reference_agent.py --mode good")
    write("fuzz_command_line", "quoted.txt", "'/opt/my agent/run' --name \"a \\\"b\\\" c\" x\\ y ''")


def experiment_log():
    def line(**kw):
        e = {"format": "hotkernel-experiment", "version": 1, "time": 1764547200.25, "fingerprint": "0123456789abcdef",
             "op": "aten::_softmax", "variant": "dtype=bfloat16;rows=4096;cols=32000", "candidateId": 3,
             "parentId": 1, "params": {"threads": 256, "vec": 8, "items": 0}, "compileSeconds": 0.4,
             "stages": {"compile": "ok", "correctness": "ok"},
             "timings": {"atenUs": 40.1, "kernelUs": 18.2, "speedup": 2.2, "speedupCi": [2.1, 2.3]},
             "decision": "accepted", "reason": "", "extra": {}}
        e.update(kw)
        return dump(e) + "\n"
    write("fuzz_experiment_log", "accepted.jsonl", line())
    write("fuzz_experiment_log", "mixed.jsonl",
          line(decision="rejected", reason="correctness: max error 0.5", candidateId=None, parentId=None,
               timings={"atenUs": None, "kernelUs": None, "speedup": None, "speedupCi": None})
          + line(decision="kept_aten", time=1764547300.0) + "{\"format\":\"hotkernel-experiment\",\"vers\n")
    # Version 2: version 1 with its keys in snake_case (Note [Experiment line versions]).
    v2 = {"format": "hotkernel-experiment", "version": 2, "time": 1764547400.5, "fingerprint": "0123456789abcdef",
          "op": "aten::_softmax", "variant": "dtype=bfloat16;rows=4096;cols=32000", "candidate_id": 4,
          "parent_id": 3, "params": {"threads": 512, "vec": 8, "items": 0}, "compile_seconds": 0.5,
          "stages": {"smoke": "pass"},
          "timings": {"aten_us": 40.1, "kernel_us": 17.9, "speedup": 2.24, "speedup_ci": [2.2, 2.3]},
          "decision": "accepted", "reason": "", "extra": {"budget_level": 1, "target": {"spent_seconds": 2.5}}}
    write("fuzz_experiment_log", "accepted-v2.jsonl", dump(v2) + "\n")


def variant_string():
    for name, text in [("softmax.txt", "dtype=bfloat16;rows=4096;cols=32000"),
                       ("norm.txt", "dtype=float16;rows=32;cols=4096;weight=1;bias=1"),
                       ("cross-entropy.txt", "dtype=bfloat16;rows=32;cols=128256;reduction=mean"),
                       ("reduce-dim.txt", "dtype=float32;rows=64;cols=4096;inner=1024"),
                       ("attention.txt",
                        "dtype=bfloat16;rows=1;cols=4096;inner=4096;more=32,8,128,128;layouts=111;causal=1;gqa=1")]:
        write("fuzz_variant_string", name, text)


def cache_row():
    fp_json = dump(FINGERPRINT)
    fp = hashlib.sha256(fp_json.encode()).hexdigest()[:16]

    def row(op, variant, decision, family, params, kernel_name, cubin, metrics, signed=True):
        fields = [fp, op, variant, fp_json, decision, family, params, kernel_name,
                  hashlib.sha256(cubin).hexdigest(), metrics, "1764547200"]
        encoded = b""
        for f in fields:
            b = f.encode()
            encoded += str(len(b)).encode() + b":" + b + b"\n"
        record = hashlib.sha256(b"hotkernel-cache-record-v1\n" + encoded).hexdigest()
        # Note [Entry signature, v1], under the fuzz target's fixed key (32 bytes of 'k').
        message = b"hotkernel-cache-signature-v1\n" + encoded + str(len(record)).encode() + b":" + record.encode() + b"\n"
        signature = "hmac-sha256-v1:" + hmac.new(b"k" * 32, message, hashlib.sha256).hexdigest() if signed else ""
        return "\n".join(fields + [record, signature]).encode() + b"\n" + cubin

    write("fuzz_cache_row", "softmax-kernel.bin",
          row("aten::_softmax", "dtype=bfloat16;rows=4096;cols=32000", "kernel", "softmax_lastdim",
              dump({"threads": 256, "vec": 8, "items": 0, "rowsPerCta": 1, "cluster": 1, "smem": False}),
              "hk_softmax_lastdim", b"\x7fELF" + bytes(60), dump({"speedup": 2.3})))
    write("fuzz_cache_row", "norm-kernel.bin",
          row("aten::native_layer_norm", "dtype=float16;rows=32;cols=4096;weight=1;bias=1", "kernel", "layer_norm",
              dump({"threads": 128, "vec": 8, "items": 4}), "hk_layer_norm", b"\x7fELF" + bytes(28), "{}"))
    write("fuzz_cache_row", "keep-aten.bin",
          row("aten::cross_entropy_loss", "dtype=bfloat16;rows=32;cols=128256;reduction=mean", "keep_aten", "",
              "{}", "", b"", dump({"reason": "no candidate beat ATen"}), signed=False))


def cache_bundle():
    """Note [Cache bundle format, version 1], written from its documentation (BundleTest reads these back)."""
    fp_json = dump(FINGERPRINT)
    fp = hashlib.sha256(fp_json.encode()).hexdigest()[:16]

    def blob(data):
        data = data.encode() if isinstance(data, str) else data
        return struct.pack("<Q", len(data)) + data

    def entry(op, variant, decision, family, params, kernel_name, cubin, metrics, created):
        fields = [fp, op, variant, fp_json, decision, family, params, kernel_name,
                  hashlib.sha256(cubin).hexdigest(), metrics, str(created)]
        encoded = b"".join(str(len(f.encode())).encode() + b":" + f.encode() + b"\n" for f in fields)
        record = hashlib.sha256(b"hotkernel-cache-record-v1\n" + encoded).hexdigest()
        return fields, record, cubin

    def bundle(entries, key=None):
        entries = sorted(entries, key=lambda e: (e[0][0], e[0][1], e[0][2]))
        # The header's keys in the documented order, as the writer dumps them.
        header = json.dumps({"format": "hotkernel-cache-bundle", "version": 1, "hotkernel_version": "0.1.0",
                             "created_unix": 1764547300, "fingerprints": sorted({e[0][0] for e in entries}),
                             "entries": len(entries)}, separators=(",", ":"))
        body = blob(header)
        for fields, record, cubin in entries:
            body += b"".join(blob(f) for f in fields) + blob(record) + blob(cubin)
        out = b"HKBUNDLE" + struct.pack("<IQ", 1, len(body)) + body
        digest = hashlib.sha256(out).digest()
        signature = b""
        if key is not None:
            mac = hmac.new(key, b"hotkernel-cache-bundle-signature-v1\n" + digest.hex().encode(), hashlib.sha256)
            signature = b"hmac-sha256-bundle-v1:" + mac.hexdigest().encode()
        return out + digest + blob(signature)

    softmax = entry("aten::_softmax", "dtype=bfloat16;rows=4096;cols=32000", "kernel", "softmax_lastdim",
                    dump({"threads": 256, "vec": 8, "items": 0, "rowsPerCta": 1, "cluster": 1, "smem": False}),
                    "hk_softmax_lastdim", b"\x7fELF" + bytes(60), dump({"speedup": 2.3}), 1764547200)
    keep = entry("aten::cross_entropy_loss", "dtype=bfloat16;rows=32;cols=128256;reduction=mean", "keep_aten", "",
                 "{}", "", b"", dump({"reason": "no candidate beat ATen"}), 1764547201)
    # Signed under the fuzz target's fixed key (32 bytes of 'k').
    write("fuzz_cache_bundle", "signed.bin", bundle([softmax, keep], key=b"k" * 32))
    write("fuzz_cache_bundle", "unsigned-keep-aten.bin", bundle([keep]))
    write("fuzz_cache_bundle", "empty.bin", bundle([]))


if __name__ == "__main__":
    fingerprint()
    profile()
    agent_reply()
    agent_task()
    sandbox()
    command_line()
    experiment_log()
    variant_string()
    cache_row()
    cache_bundle()
