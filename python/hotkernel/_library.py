"""The C API of the loaded libhotkernel.so, through ctypes.

The preload shim (libhotkernel_preload.so) loads libhotkernel.so with
RTLD_GLOBAL once libtorch is in the process, so its hotkernel_* symbols are
found in the process's global scope (ctypes.CDLL(None)); this module never
loads a library itself. Whether it is loaded is asked again on every call
until it is (a process may import hotkernel before torch), then remembered.
"""
import ctypes
import json
import os
import threading

_SHIM_SYMBOL = "hotkernel_captures_in_progress"  # exported by the shim only
_lock = threading.Lock()
_api = None  # the bound functions, once the library is found


class _Api:
    def __init__(self, process):
        self.set_enabled = process.hotkernel_set_enabled
        self.set_enabled.argtypes = [ctypes.c_int]
        self.set_enabled.restype = ctypes.c_int
        self.wait_idle = process.hotkernel_wait_idle
        self.wait_idle.argtypes = [ctypes.c_double]
        self.wait_idle.restype = ctypes.c_int
        self.plan_count = process.hotkernel_plan_count
        self.plan_count.argtypes = []
        self.plan_count.restype = ctypes.c_int
        self.status_json = process.hotkernel_status_json
        self.status_json.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.status_json.restype = ctypes.c_int


def _process():
    return ctypes.CDLL(None)


def api():
    """The bound C API, or None when libhotkernel.so is not in the process."""
    global _api
    if _api is not None:
        return _api
    with _lock:
        if _api is None:
            try:
                _api = _Api(_process())
            except (AttributeError, OSError):
                return None
    return _api


def _torch_loaded():
    # RTLD_NOLOAD only asks; it never loads libtorch (nor makes the shim load hotkernel).
    try:
        ctypes.CDLL("libtorch_cpu.so", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        return True
    except OSError:
        return False


def not_loaded_reason():
    """Why the library is not in the process (call when api() is None)."""
    try:
        shim = hasattr(_process(), _SHIM_SYMBOL)
    except OSError:
        shim = False
    if not shim:
        return ("the hotkernel preload shim is not in this process: start the program with "
                "`python -m hotkernel run -- ...`, `hotkernel run -- ...` or "
                "LD_PRELOAD=<prefix>/lib/libhotkernel_preload.so")
    if os.environ.get("HOTKERNEL", "") in ("0", "off", "false"):
        return "HOTKERNEL={}: the preload shim loads nothing".format(os.environ["HOTKERNEL"])
    if not _torch_loaded():
        return "torch is not loaded yet: the preload shim loads hotkernel when torch is imported (import torch first)"
    return ("the preload shim could not load libhotkernel.so (its one-line warning is on stderr; "
            "HOTKERNEL_LIBRARY names another path)")


def status_document(api_):
    """The engine's status JSON as a dict; None when the C API reports a failure."""
    size = 4096
    for _ in range(8):  # the document may grow between the calls
        buf = ctypes.create_string_buffer(size)
        needed = api_.status_json(buf, size)
        if needed < 0:
            return None
        if needed <= size:
            return json.loads(buf.value.decode("utf-8"))
        size = needed + 4096
    return None
