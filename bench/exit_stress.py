#!/usr/bin/env python3
"""Exit stress: a program under the preload must return exactly the exit
status it returns without it, however it ends, with the optimizer mid-job.

    python bench/exit_stress.py --device cuda --runs 200 --jobs 8 --out exit-stress.json
    python bench/exit_stress.py --device cpu --runs 20 --jobs 2      # what CI runs (no tuning on a CPU)

For every way of ending (bench/exit_stress_host.py lists them) the host
program first runs without the preload (`--baseline` runs each) to learn the
status that way returns; then `--runs` runs under the preload are spread over
the ways, each with a fresh cache directory so that the optimizer has work.
On a CUDA device each run waits until the optimizer reports a job in flight
("mid-job") and then waits a random 0-300 ms more, so that the exit lands in
every phase of a job (compiling, validating, timing, storing). A run
"mismatches" when its status differs from the baseline's, and "aborts" when it
dies of SIGABRT or SIGSEGV or prints "terminate called" where the program
without the preload does not. After each run the
cache database must pass SQLite's integrity check, and a run that ends through
the interpreter's finalization must leave a valid profile (HOTKERNEL_PROFILE).

Output (JSON, format "hotkernel-exit-stress" version 1):
  {"format", "version", "date", "device", "gpu", "driver", "torch", "runs",
   "mismatched_exit_status", "aborts", "mid_job", "cache_integrity_failures", "profile_failures",
   "exit_seconds": {"median", "max"},          # from "EXIT" to the process's end, under the preload
   "baseline_exit_seconds": {"median", "max"},
   "by_way": {way: {"expected_status", "runs", "statuses": {status: n}, "mismatched", "aborts",
                    "mid_job", "exit_seconds_max"}},
   "failures": [{"way", "status", "expected", "stderr_tail"}...]}
Exit code: 0 when nothing mismatched or aborted, else 1; 2 when the program without the preload is
unstable or ends a way otherwise than exit_stress_host.py documents (nothing to compare with).
"""
import argparse
import concurrent.futures as futures
import datetime
import glob
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HOST = os.path.join(HERE, "exit_stress_host.py")
CPU_WAYS = ["return", "sys_exit", "exception", "os_exit", "sigterm", "sigterm_handler", "sigint", "fork", "threads"]
CUDA_WAYS = CPU_WAYS + ["capture"]
# What each way returns without the preload (exit_stress_host.py's table; "capture" is left to its baseline).
# A baseline that differs means the host program is broken on this machine (a hung fork child returns 8),
# and comparing the preload's runs with it would test nothing.
HOST_STATUSES = {"return": 0, "sys_exit": 3, "exception": 1, "os_exit": 7, "sigterm": -15, "sigterm_handler": 143,
                 "sigint": -2, "fork": 0, "threads": 0}
# Ways that end through the interpreter's finalization: the profile is written at exit.
PROFILE_WAYS = {"return", "sys_exit", "exception", "sigterm_handler", "sigint", "fork", "threads", "capture"}


def default_shim():
    build = os.environ.get("HOTKERNEL_BUILD_DIR", os.path.join(ROOT, "build"))
    return os.path.join(build, "lib", "libhotkernel_preload.so")


def run_host(python, way, device, preload, mid_job, delay_ms, timeout_s):
    cache = tempfile.mkdtemp(prefix="hk-exit-")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update({"HOTKERNEL_CACHE_DIR": os.path.join(cache, "cache"), "HOTKERNEL_HOT_CALLS": "3",
                "HOTKERNEL_SAMPLE": "1", "HOTKERNEL_IDLE_MS": "1", "HOTKERNEL_OPT_MEM_MB": "4096",
                "HOTKERNEL_LOG_LEVEL": "info", "PYTHONUNBUFFERED": "1",
                "HOTKERNEL_PROFILE": os.path.join(cache, "profile.json")})
    if preload:
        env["LD_PRELOAD"] = preload
    args = [python, HOST, way, device, "--delay-ms", str(delay_ms)]
    if mid_job:
        args.append("--mid-job")
    t0 = time.monotonic()
    try:
        p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout_s,
                           stdin=subprocess.DEVNULL)
        status, out, err = p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        status, out, err = "timeout", (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(
            errors="replace")
    end = time.monotonic()
    exit_at = None
    saw_mid_job = False
    for line in out.splitlines():
        if line.startswith("EXIT "):
            exit_at = float(line.split()[1])
        if line.strip() == "MIDJOB 1":
            saw_mid_job = True
    integrity = "no database"
    for db in glob.glob(os.path.join(cache, "cache", "*.db")) + glob.glob(os.path.join(cache, "cache", "*.sqlite")):
        try:
            con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
            integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
            con.close()
        except sqlite3.Error as e:
            integrity = "error: %s" % e
        if integrity != "ok":
            break
    profile = "not expected"
    if preload and way in PROFILE_WAYS:
        try:
            with open(os.path.join(cache, "profile.json")) as f:
                doc = json.load(f)
            profile = "ok" if doc.get("format") == "hotkernel-profile" else "wrong format"
        except (OSError, ValueError) as e:
            profile = "missing or invalid: %s" % e
    subprocess.run(["rm", "-rf", cache])
    aborted = status in (-6, -11, 134, 139) or "terminate called" in err
    return {"way": way, "status": status, "exit_seconds": (end - exit_at) if exit_at else None,
            "mid_job": saw_mid_job, "aborted": aborted, "integrity": integrity, "profile": profile, "stderr_tail": err[-2000:]}


def environment(device):
    info = {"device": device, "gpu": None, "driver": None}
    try:
        import torch
        info["torch"] = torch.__version__
        if device == "cuda" and torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception as e:  # the driver records what it can
        info["torch"] = "unavailable: %s" % e
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
        info["driver"] = q.stdout.decode().strip().splitlines()[0] if q.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        pass
    return info


def summary(xs):
    xs = [x for x in xs if x is not None]
    return {"median": statistics.median(xs) if xs else None, "max": max(xs) if xs else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--runs", type=int, default=20, help="runs under the preload, spread over the ways")
    ap.add_argument("--baseline", type=int, default=1, help="runs without the preload per way")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    ap.add_argument("--ways", default="", help="comma list (default: every way for the device)")
    ap.add_argument("--preload", default=default_shim(), help="libhotkernel_preload.so")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per run")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.runs < 1 or a.baseline < 1 or a.jobs < 1:
        ap.error("--runs, --baseline and --jobs must be at least 1")
    if not os.path.isfile(a.preload):
        ap.error("no preload library at %s (build first, or pass --preload)" % a.preload)
    ways = [w for w in a.ways.split(",") if w] or (CUDA_WAYS if a.device == "cuda" else CPU_WAYS)
    rng = random.Random(a.seed)
    mid_job = a.device == "cuda"

    with futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        base = list(pool.map(lambda w: run_host(a.python, w, a.device, None, False, 0, a.timeout),
                             [w for w in ways for _ in range(a.baseline)]))
        expected = {}
        for r in base:
            expected.setdefault(r["way"], set()).add(r["status"])
        unstable = {w: sorted(map(str, s)) for w, s in expected.items() if len(s) != 1}
        if unstable:
            print("baseline statuses are not stable: %s" % unstable, file=sys.stderr)
            return 2
        expected = {w: next(iter(s)) for w, s in expected.items()}
        broken = {w: "%s (documented %s)" % (st, HOST_STATUSES[w]) for w, st in expected.items()
                  if w in HOST_STATUSES and st != HOST_STATUSES[w]}
        if broken:
            print("the host program ends differently without the preload: %s" % broken, file=sys.stderr)
            for r in base:
                if r["way"] in broken:
                    print("%s without the preload:\n%s" % (r["way"], r["stderr_tail"]), file=sys.stderr)
            return 2
        base_aborted = {}
        for r in base:
            base_aborted[r["way"]] = base_aborted.get(r["way"], False) or r["aborted"]
        plan = [(ways[i % len(ways)], rng.randint(0, 300) if mid_job else rng.randint(0, 50)) for i in range(a.runs)]
        runs = list(pool.map(lambda p: run_host(a.python, p[0], a.device, a.preload, mid_job, p[1], a.timeout), plan))

    by_way = {}
    failures = []
    for r in runs:
        w = by_way.setdefault(r["way"], {"expected_status": expected[r["way"]], "runs": 0, "statuses": {},
                                         "mismatched": 0, "aborts": 0, "mid_job": 0, "exit_seconds_max": None})
        w["runs"] += 1
        w["statuses"][str(r["status"])] = w["statuses"].get(str(r["status"]), 0) + 1
        w["mid_job"] += int(r["mid_job"])
        if r["exit_seconds"] is not None:
            w["exit_seconds_max"] = max(w["exit_seconds_max"] or 0.0, r["exit_seconds"])
        bad = r["status"] != expected[r["way"]]
        w["mismatched"] += int(bad)
        # An abort the program has without the preload too is the program's (and equal statuses).
        r["aborted"] = r["aborted"] and not base_aborted.get(r["way"], False)
        w["aborts"] += int(r["aborted"])
        if bad or r["aborted"] or r["integrity"] not in ("ok", "no database") or r["profile"] not in (
                "ok", "not expected"):
            failures.append({"way": r["way"], "status": r["status"], "expected": expected[r["way"]],
                             "integrity": r["integrity"], "profile": r["profile"], "stderr_tail": r["stderr_tail"]})
    result = {
        "format": "hotkernel-exit-stress", "version": 1,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **environment(a.device),
        "runs": len(runs),
        "mismatched_exit_status": sum(w["mismatched"] for w in by_way.values()),
        "aborts": sum(w["aborts"] for w in by_way.values()),
        "mid_job": sum(w["mid_job"] for w in by_way.values()),
        "cache_integrity_failures": sum(1 for r in runs if r["integrity"] not in ("ok", "no database")),
        "profile_failures": sum(1 for r in runs if r["profile"] not in ("ok", "not expected")),
        "exit_seconds": summary([r["exit_seconds"] for r in runs]),
        "baseline_exit_seconds": summary([r["exit_seconds"] for r in base]),
        "by_way": by_way,
        "failures": failures[:20],
    }
    text = json.dumps(result, indent=2)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(json.dumps({k: result[k] for k in ("runs", "mismatched_exit_status", "aborts", "mid_job",
                                             "cache_integrity_failures", "exit_seconds")}))
    for f in failures[:5]:
        print("FAILED %s: status %s, expected %s\n%s" % (f["way"], f["status"], f["expected"], f["stderr_tail"]),
              file=sys.stderr)
    ok = not failures
    # The plain closing line CI reads.
    print("exit-stress: %d passed, %d failed" % (len(runs) - len(failures), len(failures)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
