#!/usr/bin/env python3
"""GPU time in the profile with HOTKERNEL_CUPTI=1, under the preload (ctest
cupti_gpu_test, label gpu; Note [GPU time from CUPTI]).

Three children run this script again under the preload (HOTKERNEL_SAMPLE=1,
HOTKERNEL_OPTIMIZE=0, a fresh cache, HOTKERNEL_PROFILE written at exit):
  attributed      matmuls and softmaxes: the profile's gpu_time is "started",
                  aten::mm and aten::_softmax carry GPU time, the matmul more;
                  `hotkernel profile --json` ranks by GPU time with aten::mm first;
  profiler-first  torch.profiler (CUDA activity) runs before the first CUDA op:
                  hotkernel backs off (gpu_time "held-elsewhere", one log line
                  says so) and torch.profiler still sees the matmul's kernels;
  profiler-after  hotkernel attributes first, then torch.profiler runs:
                  hotkernel hands CUPTI over at the profiler's first sampled op
                  (Note [Handing CUPTI to the PyTorch profiler]), torch.profiler
                  sees the kernels, and the profile says the records were
                  taken over.
Exit 77 (ctest SKIP_RETURN_CODE) without a CUDA device.
"""
import json
import os
import subprocess
import sys
import tempfile

MODE = os.environ.get("HOTKERNEL_CUPTI_TEST_MODE")


def child():
    import torch

    if not torch.cuda.is_available():
        sys.exit(77)

    def work():
        a = torch.randn(2048, 2048, device="cuda")
        x = torch.randn(1024, 8192, device="cuda")
        for _ in range(20):
            torch.mm(a, a)
            torch.softmax(x, -1)
        torch.cuda.synchronize()

    def profiled():
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            work()
        device_us = 0.0
        for event in prof.key_averages():
            if event.key == "aten::mm":
                device_us = getattr(event, "device_time_total", getattr(event, "cuda_time_total", 0.0))
        print(json.dumps({"torch_profiler_mm_device_us": device_us}), flush=True)

    if MODE == "attributed":
        work()
    elif MODE == "profiler-first":
        profiled()
    elif MODE == "profiler-after":
        work()
        profiled()


def run_child(mode, tmp):
    env = dict(os.environ)
    profile = os.path.join(tmp, mode + ".json")
    env.update({
        "HOTKERNEL_CUPTI_TEST_MODE": mode,
        "LD_PRELOAD": os.environ["HOTKERNEL_TEST_PRELOAD"],
        "HOTKERNEL_CUPTI": "1",
        "HOTKERNEL_SAMPLE": "1",
        "HOTKERNEL_OPTIMIZE": "0",
        "HOTKERNEL_PROFILE": profile,
        "HOTKERNEL_CACHE_DIR": os.path.join(tmp, "cache-" + mode),
        "HOTKERNEL_LOG_LEVEL": "info",
    })
    r = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode == 77:
        print("no CUDA device")
        sys.exit(77)
    assert r.returncode == 0, f"{mode}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    with open(profile) as f:
        doc = json.load(f)
    seen = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            seen.update(json.loads(line))
    return doc, seen, r.stderr


def op(doc, name):
    for entry in doc["ops"]:
        if entry["op"] == name:
            return entry
    raise AssertionError(f"{name} not in the profile: {[e['op'] for e in doc['ops']]}")


def main():
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        doc, _, log = run_child("attributed", tmp)
        gpu = doc.get("gpu_time", {})
        check(doc["version"] == 3 and gpu.get("state") == "started", f"attributed: gpu_time started ({gpu})")
        if gpu.get("state") == "started":
            mm, softmax = op(doc, "aten::mm"), op(doc, "aten::_softmax")
            check(mm["gpu_ns"] > 0 and softmax["gpu_ns"] > 0,
                  f"attributed: mm {mm['gpu_ns']} ns, _softmax {softmax['gpu_ns']} ns "
                  f"(api_records {gpu.get('api_records')}, correlations {gpu.get('correlations')})")
            check(mm["gpu_ns"] > softmax["gpu_ns"], "attributed: the 2048^3 matmul outweighs the [1024, 8192] softmax")
            check(gpu["attributed_ns"] <= gpu["kernel_ns"], f"attributed: {gpu['attributed_ns']} <= {gpu['kernel_ns']}")
            cli = os.path.join(os.environ["HOTKERNEL_TEST_HOME"], "bin", "hotkernel")
            view = subprocess.run([cli, "profile", os.path.join(tmp, "attributed.json"), "--json", "--dir",
                                   os.path.join(tmp, "cache-attributed")], capture_output=True, text=True)
            check(view.returncode == 0, f"hotkernel profile: exit {view.returncode} {view.stderr.strip()}")
            if view.returncode == 0:
                v = json.loads(view.stdout)
                check(v["ranked_by"] == "gpu_time" and v["ops"][0]["op"] == "aten::mm",
                      f"hotkernel profile: ranked by {v['ranked_by']}, first {v['ops'][0]['op']}")

        doc, seen, log = run_child("profiler-first", tmp)
        gpu = doc.get("gpu_time", {})
        check(gpu.get("state") == "held-elsewhere", f"profiler-first: hotkernel backed off ({gpu})")
        check("held by another tool" in log, "profiler-first: the log says why")
        check(seen.get("torch_profiler_mm_device_us", 0) > 0,
              f"profiler-first: torch.profiler still sees the matmul's kernels ({seen})")

        doc, seen, log = run_child("profiler-after", tmp)
        gpu = doc.get("gpu_time", {})
        check(gpu.get("state") == "started", f"profiler-after: hotkernel attributed first ({gpu})")
        check(seen.get("torch_profiler_mm_device_us", 0) > 0,
              f"profiler-after: torch.profiler sees the matmul's kernels ({seen})")
        check("taken_over" in gpu, "profiler-after: the profile says the records were taken over")
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    if MODE:
        child()
    else:
        main()
