"""What the fusion GPU tests share: running the test script again under the preload with fusion on, in a
fresh cache, and reading the library's status in that child.

    import fusion_child
    lib = fusion_child.start(__file__)   # the parent exits with the child's status; without CUDA, 77
    st = fusion_child.status(lib)
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

CHILD = "HOTKERNEL_FUSION_TEST_CHILD"


def rerun_under_preload(script):
    """In the parent (the test as ctest starts it): the script again under the preload with
    HOTKERNEL_FUSION=1, a fresh cache and hot calls after 5 windows; exits with its status. Returns in the
    child."""
    if os.environ.get(CHILD) == "1":
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.update({
            CHILD: "1",
            "LD_PRELOAD": os.environ["HOTKERNEL_TEST_PRELOAD"],
            "HOTKERNEL_FUSION": "1",
            "HOTKERNEL_HOT_CALLS": "5",
            "HOTKERNEL_CACHE_DIR": os.path.join(tmp, "cache"),
            "HOTKERNEL_LOG_LEVEL": env.get("HOTKERNEL_LOG_LEVEL", "info"),
        })
        sys.exit(subprocess.run([sys.executable, script], env=env).returncode)


def library():
    """libhotkernel.so as the preload loaded it, with the C API's argument types."""
    lib = ctypes.CDLL(os.environ["HOTKERNEL_TEST_LIBRARY"], mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    lib.hotkernel_set_enabled.argtypes = [ctypes.c_int]
    lib.hotkernel_wait_idle.argtypes = [ctypes.c_double]
    lib.hotkernel_status_json.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return lib


def status(lib):
    """The status document (Note [Status document, version 2])."""
    buf = ctypes.create_string_buffer(1 << 22)
    n = lib.hotkernel_status_json(buf, len(buf))
    assert n > 0, n
    return json.loads(buf.value.decode())


def start(script):
    """The parent re-runs `script` (rerun_under_preload) and exits; the child exits 77 (ctest's skip) without a
    CUDA device, else gets the library."""
    rerun_under_preload(script)
    import torch
    if not torch.cuda.is_available():
        print("no CUDA device")
        sys.exit(77)
    return library()


def eager_then_fused(lib, run, wait_seconds, learn_calls=12):
    """The eager reference (hotkernel off), then `learn_calls` runs to learn (HOTKERNEL_HOT_CALLS windows of each
    chain), the optimizer's tuning awaited, then three runs with the fused chains; returns (eager, last fused)."""
    import torch
    lib.hotkernel_set_enabled(0)
    want = run()
    torch.cuda.synchronize()
    lib.hotkernel_set_enabled(1)
    for _ in range(learn_calls):
        run()
    torch.cuda.synchronize()
    assert lib.hotkernel_wait_idle(wait_seconds) == 0, "the optimizer did not finish"  # 0: idle, 1: timed out
    for _ in range(3):
        got = run()
    torch.cuda.synchronize()
    return want, got
