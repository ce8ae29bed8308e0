#!/usr/bin/env python3
"""Fleet benchmark (issue 22): N processes under the preload share one
redis-server (HOTKERNEL_REMOTE_CACHE) and run the same small op workload;
each variant should be tuned by one process and served by all of them.

    python bench/fleet_bench.py --procs 4 --out "$OUT/h200-fleet-latest.json"   # on a CUDA machine
    python bench/fleet_bench.py --dry-run                                        # no GPU: Redis up, PING, down

The parent starts redis-server on a Unix socket in a temporary directory (no
persistence), writes a cache key (0600) beside it so that entries are signed,
and starts --procs children of this script (--child) at once, each under
LD_PRELOAD=--preload with its own HOTKERNEL_CACHE_DIR, the shared
HOTKERNEL_REMOTE_CACHE and HOTKERNEL_CACHE_KEY_FILE, a short lease poll. A
child runs the workload (softmax and log_softmax of --cases) until every
variant is served by a hotkernel kernel or decided, or --seconds pass, then
writes hotkernel.status() to a file: "tuned" (the variants this process
tuned) and "plans" (those it serves).

Output (JSON, format "hotkernel-fleet-bench" version 1):
  {"format", "version", "date", "gpu", "driver", "torch", "procs", "seconds",
   "variants": {"op variant": {"tuned_by": n, "served_by": n}},
   "tuned_once": bool,        # every variant tuned by at most one process, and each by one
   "all_serve": bool,         # every variant served by a kernel in one process is served by all
   "children": [{"pid", "exit", "tuned", "plans", "log_tail"}...]}
Exit code: 0 when tuned_once and all_serve hold, 1 otherwise, 2 when it cannot run.
"""
import argparse
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CASES = "float16:4096x4096,bfloat16:2048x8192,float32:1024x1000"


def parse_cases(text):
    cases = []
    for item in text.split(","):
        dtype, _, shape = item.partition(":")
        rows, _, cols = shape.partition("x")
        if dtype not in ("float16", "bfloat16", "float32") or not rows.isdigit() or not cols.isdigit():
            raise argparse.ArgumentTypeError(f"bad case '{item}': DTYPE:ROWSxCOLS, DTYPE float16|bfloat16|float32")
        cases.append((dtype, int(rows), int(cols)))
    if not cases:
        raise argparse.ArgumentTypeError("no cases")
    return cases


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=4, help="processes sharing the Redis (default 4)")
    p.add_argument("--cases", type=parse_cases, default=parse_cases(DEFAULT_CASES),
                   help=f"DTYPE:ROWSxCOLS,... (default {DEFAULT_CASES})")
    p.add_argument("--seconds", type=float, default=300.0, help="the longest a process runs its workload")
    p.add_argument("--preload", default=os.path.join(ROOT, "build", "lib", "libhotkernel_preload.so"))
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    p.add_argument("--out", default="", help="the JSON result (default: stdout only)")
    p.add_argument("--dry-run", action="store_true", help="start Redis, PING it, stop it; no children")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)  # the status file a child writes
    a = p.parse_args(argv)
    if a.procs < 1 or a.procs > 64:
        p.error("--procs must be in 1..64")
    if a.seconds <= 0:
        p.error("--seconds must be positive")
    return a


class Redis:
    """A redis-server of our own on a Unix socket in `workdir`, no persistence."""

    def __init__(self, binary, workdir):
        self.socket = os.path.join(workdir, "redis.sock")
        self.proc = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", self.socket, "--unixsocketperm", "700", "--save", "",
             "--appendonly", "no", "--dir", workdir, "--logfile", os.path.join(workdir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.ping():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on {self.socket}")

    def url(self):
        return f"unix://{self.socket}?db=0"

    def ping(self):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1.0)
                s.connect(self.socket)
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def child(args):
    """One process of the fleet: the workload until every variant is decided, then its status."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import hotkernel
    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    xs = [torch.randn(r, c, device="cuda", dtype=dtypes[d]) for d, r, c in args.cases]
    deadline = time.time() + args.seconds
    wanted = 2 * len(xs)  # softmax and log_softmax of each case
    status = {}
    seen, still_since = set(), time.time()
    while time.time() < deadline:
        for x in xs:
            for _ in range(20):
                torch.softmax(x, -1)
                torch.log_softmax(x, -1)
        torch.cuda.synchronize()
        status = hotkernel.status()
        decided = {(p["op"], p["variant"]) for p in status.get("plans", [])}
        decided |= {(t["op"], t["variant"]) for t in status.get("tuned", [])}
        idle = status.get("optimizer", {}).get("queued", 1) == 0 and not status.get("optimizer", {}).get("running")
        if decided != seen:
            seen, still_since = decided, time.time()
        # Every variant decided here, or (keep-ATen entries of the tier serve no plan) nothing new for 30 s.
        if idle and (len(decided) >= wanted or time.time() - still_since > 30):
            break
        time.sleep(0.2)
    with open(args.child, "w") as f:
        json.dump({"tuned": status.get("tuned", []), "plans": status.get("plans", [])}, f)


def machine():
    info = {"gpu": "", "driver": "", "torch": ""}
    try:
        line = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
        info["gpu"], info["driver"] = [s.strip() for s in line.split(",", 1)]
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        pass
    try:
        import torch
        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def summarize(children, procs):
    variants = {}
    for c in children:
        for t in c["tuned"]:
            variants.setdefault(f'{t["op"]} {t["variant"]}', {"tuned_by": 0, "served_by": 0})["tuned_by"] += 1
        for p in {(p["op"], p["variant"]) for p in c["plans"]}:
            variants.setdefault(f"{p[0]} {p[1]}", {"tuned_by": 0, "served_by": 0})["served_by"] += 1
    tuned_once = bool(variants) and all(v["tuned_by"] == 1 for v in variants.values())
    all_serve = all(v["served_by"] in (0, procs) for v in variants.values()) and any(
        v["served_by"] == procs for v in variants.values())
    return variants, tuned_once, all_serve


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        child(args)
        return 0
    if not os.access(args.redis_server, os.X_OK):
        print(f"fleet_bench: no redis-server at {args.redis_server}", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="hotkernel-fleet-")
    try:
        redis = Redis(args.redis_server, work)
    except RuntimeError as e:
        print(f"fleet_bench: {e}", file=sys.stderr)
        return 2
    try:
        if args.dry_run:
            print(f"fleet_bench: redis-server answers on {redis.url()}")
            return 0
        if not os.path.exists(args.preload):
            print(f"fleet_bench: no preload library at {args.preload}", file=sys.stderr)
            return 2
        key = os.path.join(work, "fleet.key")
        with open(key, "wb") as f:
            f.write(os.urandom(32))
        os.chmod(key, 0o600)
        cases = ",".join(f"{d}:{r}x{c}" for d, r, c in args.cases)
        procs = []
        for i in range(args.procs):
            env = dict(os.environ, LD_PRELOAD=args.preload, HOTKERNEL_REMOTE_CACHE=redis.url(),
                       HOTKERNEL_CACHE_DIR=os.path.join(work, f"cache-{i}"), HOTKERNEL_CACHE_KEY_FILE=key,
                       HOTKERNEL_REMOTE_POLL_MS="200", HOTKERNEL_REMOTE_LEASE_MS="5000", HOTKERNEL_HOT_CALLS="20",
                       HOTKERNEL_LOG_LEVEL="info")
            status = os.path.join(work, f"status-{i}.json")
            log = open(os.path.join(work, f"child-{i}.log"), "w")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", status, "--cases", cases,
                   "--seconds", str(args.seconds)]
            procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), status, log))
        children = []
        for proc, status, log in procs:
            try:
                code = proc.wait(timeout=args.seconds + 120)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            log.close()
            doc = {"tuned": [], "plans": []}
            if os.path.exists(status):
                with open(status) as f:
                    doc = json.load(f)
            with open(log.name) as f:
                tail = f.read()[-2000:]
            children.append({"pid": proc.pid, "exit": code, "tuned": doc["tuned"], "plans": doc["plans"],
                             "log_tail": tail})
        variants, tuned_once, all_serve = summarize(children, args.procs)
        result = {"format": "hotkernel-fleet-bench", "version": 1,
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  **machine(), "procs": args.procs, "seconds": args.seconds, "variants": variants,
                  "tuned_once": tuned_once, "all_serve": all_serve, "children": children}
        for name, v in sorted(variants.items()):
            print(f"{name}: tuned by {v['tuned_by']} of {args.procs}, served by {v['served_by']}")
        print(f"tuned once: {tuned_once}; every process serves the kernels: {all_serve}")
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
        ok = tuned_once and all_serve and all(c["exit"] == 0 for c in children)
        return 0 if ok else 1
    finally:
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
