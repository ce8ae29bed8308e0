"""CommandHookGpuTest's program: under the preload shim (HOTKERNEL=0: the shim
alone), a flush hook in C (libhk_command_hook_probe.so) counts the CUDA
commands torch, cuBLAS and the runtime issue while a chain is marked pending,
by kind and issuing library (Note [Flush before foreign commands]).

    HOTKERNEL=0 LD_PRELOAD=.../libhotkernel_preload.so python command_hook_gpu_probe.py PROBE_LIB

Exit status: 0 every check held, 1 a check failed (each printed), 77 no CUDA device.
"""
import ctypes
import sys

import torch

LAUNCH, COPY, SET, EVENT_RECORD, STREAM_WAIT, SYNCHRONIZE, QUERY, GRAPH_LAUNCH, CAPTURE = range(1, 10)
NAMES = {LAUNCH: "launch", COPY: "copy", SET: "set", EVENT_RECORD: "event record", STREAM_WAIT: "stream wait",
         SYNCHRONIZE: "synchronize", QUERY: "query", GRAPH_LAUNCH: "graph launch", CAPTURE: "capture"}


def main():
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 77
    shim = ctypes.CDLL(None)
    probe = ctypes.CDLL(sys.argv[1])
    probe.hk_probe_libraries.restype = ctypes.c_char_p
    if shim.hotkernel_shim_command_hook_version() != 1 or not probe.hk_probe_install():
        print("FAIL the shim's command hook is not in the process")
        return 1
    failures = []

    def section(name, fn, kinds, library=None, pending=1):
        torch.cuda.synchronize()
        probe.hk_probe_reset()
        shim.hotkernel_shim_set_pending(pending)
        try:
            fn()
        finally:
            shim.hotkernel_shim_set_pending(0)
        counts = {NAMES[k]: probe.hk_probe_count(k) for k in NAMES}
        libraries = probe.hk_probe_libraries().decode()
        print(f"{name}: {counts} from {libraries}")
        for k in kinds:
            if probe.hk_probe_count(k) < 1:
                failures.append(f"{name}: no hook for {NAMES[k]}")
        if pending == 0 and sum(counts.values()) != 0:
            failures.append(f"{name}: hooks with nothing pending")
        if library and library not in libraries:
            failures.append(f"{name}: no command from {library} reached the hook ({libraries})")

    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    section("nothing pending", lambda: x.add(1), [], pending=0)
    section("torch op (x + 1)", lambda: x.add(1), [LAUNCH], library="libtorch_cuda")
    section("cuBLAS matmul (x @ w)", lambda: x @ w, [LAUNCH], library="libcublas")
    section("copy to the host (x.cpu())", lambda: x.cpu(), [COPY])
    section("copy to the device", lambda: torch.ones(4096).to("cuda", non_blocking=True), [COPY])

    def events():
        e = torch.cuda.Event()
        e.record()
        s = torch.cuda.Stream()
        s.wait_event(e)
    section("event record and stream wait", events, [EVENT_RECORD, STREAM_WAIT])
    section("torch.cuda.synchronize()", torch.cuda.synchronize, [SYNCHRONIZE])
    section("stream query", lambda: torch.cuda.current_stream().query(), [QUERY])
    section("item()", lambda: x.sum().item(), [LAUNCH, COPY])

    graph = torch.cuda.CUDAGraph()
    static = torch.randn(256, device="cuda")

    def capture():
        with torch.cuda.graph(graph):
            static.mul_(2)
    section("graph capture", capture, [CAPTURE])
    section("graph replay", graph.replay, [GRAPH_LAUNCH])

    def guarded():
        shim.hotkernel_shim_enter_own()
        try:
            x.add(1)
            x @ w
        finally:
            shim.hotkernel_shim_leave_own()
    torch.cuda.synchronize()
    probe.hk_probe_reset()
    shim.hotkernel_shim_set_pending(1)
    guarded()
    shim.hotkernel_shim_set_pending(0)
    inside = sum(probe.hk_probe_count(k) for k in NAMES)
    print(f"inside the guard: {inside} hooks")
    if inside != 0:
        failures.append(f"inside the guard: {inside} hooks")
    shim.hotkernel_shim_unwrapped_entry_points.restype = ctypes.c_longlong
    unwrapped = shim.hotkernel_shim_unwrapped_entry_points()
    print(f"driver entry points handed out unwrapped: {unwrapped}")
    if unwrapped != 0:
        failures.append(f"{unwrapped} driver entry points handed out unwrapped")
    for f in failures:
        print("FAIL", f)
    print("PASS" if not failures else f"{len(failures)} failures")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
