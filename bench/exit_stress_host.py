#!/usr/bin/env python3
"""The host program of bench/exit_stress.py: an ordinary PyTorch script that
knows nothing of hotkernel but ends in one chosen way.

    exit_stress_host.py WAY DEVICE [--mid-job] [--delay-ms N]

It runs a few softmax / layer_norm / cross_entropy calls on DEVICE ("cpu" or
"cuda"), then, with --mid-job, keeps calling until the hotkernel optimizer
reports a job in flight (read through hotkernel_status_json, the library's C
API, when the process runs under the preload), sleeps DELAY ms, and ends in
WAY. It prints "MIDJOB 1" when it saw the optimizer working and "EXIT <t>"
(time.monotonic) right before it starts to end, so that the driver can time
the exit.

Ways and what they return without the preload:
    return           end of the script                      0
    sys_exit         sys.exit(3)                            3
    exception        an uncaught RuntimeError               1
    os_exit          os._exit(7)                            7
    sigterm          SIGTERM, default handler               -15
    sigterm_handler  the host's own SIGTERM handler exits 143
    sigint           SIGINT (KeyboardInterrupt, uncaught)   -2 (130 from a shell)
    fork             a forked child runs CPU ops and exits 5; the parent checks it and returns 0 (9: another
                     status, 8: the child hung)
    threads          four threads still launching ops when main returns (for 0.3-0.6 s)   0
    capture          sys.exit(4) inside a CUDA graph capture (cuda only)
"""
import ctypes
import json
import os
import random
import signal
import sys
import threading
import time

import torch
import torch.nn.functional as F

WAYS = ["return", "sys_exit", "exception", "os_exit", "sigterm", "sigterm_handler", "sigint", "fork", "threads",
        "capture"]


def hotkernel_status():
    """The running hotkernel's status, or None without the preload."""
    lib = None
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith("/libhotkernel.so"):
                lib = line.split()[-1]
                break
    if lib is None:
        return None
    h = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    buf = ctypes.create_string_buffer(1 << 20)
    n = h.hotkernel_status_json(buf, len(buf))
    if n <= 0 or n > len(buf):
        return None
    return json.loads(buf.value.decode())


def workload(device):
    x = torch.randn(512, 4096, device=device)
    y = torch.softmax(x, dim=-1)
    z = F.layer_norm(x, (4096,))
    t = torch.randint(0, 4096, (512,), device=device)
    loss = F.cross_entropy(x, t)
    return float(y.sum() + z.mean() + loss)


def busy_softmax(device):
    # A large variant: its tuning takes seconds, so the optimizer is mid-job for a while.
    x = torch.randn(4096, 32000, device=device, dtype=torch.bfloat16)
    return torch.softmax(x, dim=-1)


def wait_mid_job(device, deadline_s=90.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        busy_softmax(device)
        if device == "cuda":
            torch.cuda.synchronize()
        time.sleep(0.02)  # idle time: the optimizer runs only on an idle GPU
        st = hotkernel_status()
        if st is None:
            return False
        if st.get("optimizer", {}).get("running"):
            return True
    return False


def main():
    way, device = sys.argv[1], sys.argv[2]
    mid_job = "--mid-job" in sys.argv
    delay_ms = 0
    if "--delay-ms" in sys.argv:
        delay_ms = int(sys.argv[sys.argv.index("--delay-ms") + 1])
    if way not in WAYS:
        print("unknown way " + way, file=sys.stderr)
        sys.exit(64)
    for _ in range(8):
        workload(device)
    if mid_job:
        saw = wait_mid_job(device)
        print("MIDJOB %d" % int(saw), flush=True)
    time.sleep(delay_ms / 1000.0)

    def exiting():
        print("EXIT %.6f" % time.monotonic(), flush=True)

    if way == "return":
        exiting()
        return
    if way == "sys_exit":
        exiting()
        sys.exit(3)
    if way == "exception":
        exiting()
        raise RuntimeError("the host's own uncaught exception")
    if way == "os_exit":
        exiting()
        sys.stdout.flush()
        os._exit(7)
    if way == "sigterm":
        exiting()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        sys.exit(99)  # not reached
    if way == "sigterm_handler":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        exiting()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        sys.exit(99)
    if way == "sigint":
        exiting()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
        sys.exit(99)
    if way == "fork":
        pid = os.fork()
        if pid == 0:
            import faulthandler
            faulthandler.dump_traceback_later(50, exit=False)  # a hung child says where (stderr)
            # CPU ops in the child on one intra-op thread: OpenMP's pool does not
            # survive fork, with or without hotkernel (ATen's CPU softmax opens a
            # parallel region whatever the size, which then waits forever for the
            # parent's pool threads).
            torch.set_num_threads(1)
            s = torch.randn(4, 8).softmax(-1).sum()
            sys.exit(5 if abs(float(s) - 4.0) < 1e-3 else 6)
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                # Where the child's threads wait, for the record (stderr).
                for task in sorted(os.listdir("/proc/%d/task" % pid)):
                    try:
                        with open("/proc/%d/task/%s/wchan" % (pid, task)) as f:
                            print("hung child %d thread %s waits in %s" % (pid, task, f.read().strip()),
                                  file=sys.stderr)
                    except OSError:
                        pass
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                sys.exit(8)  # the child hung
            time.sleep(0.01)
        exiting()
        sys.exit(0 if os.waitstatus_to_exitcode(status) == 5 else 9)
    if way == "threads":
        # Non-daemon threads that go on launching ops for a while after main
        # returns: the interpreter waits for them, then finalizes. (Daemon
        # threads inside a torch op at finalization abort the process with
        # and without hotkernel: torch's own limit.)
        stop_at = time.monotonic() + 0.3 + random.random() * 0.3

        def spin():
            x = torch.randn(256, 4096, device=device)
            while time.monotonic() < stop_at:
                torch.softmax(x, dim=-1)
                F.layer_norm(x, (4096,))
        for _ in range(4):
            threading.Thread(target=spin).start()
        time.sleep(0.05 + random.random() * 0.05)
        exiting()
        return
    if way == "capture":
        if device != "cuda":
            exiting()
            return
        g = torch.cuda.CUDAGraph()
        x = torch.randn(512, 4096, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.softmax(x, dim=-1)  # warm-up on the side stream
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            torch.softmax(x, dim=-1)
            exiting()
            sys.exit(4)


if __name__ == "__main__":
    main()
