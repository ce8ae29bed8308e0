"""hotkernel from Python: ask the loaded engine what it does, and switch serving off and on.

hotkernel is loaded into a process by its preload shim (``python -m hotkernel run
-- python serve.py``, ``hotkernel run -- ...`` or ``LD_PRELOAD=<prefix>/lib/libhotkernel_preload.so``),
once torch is imported. This package talks to that already-loaded library
through ctypes; it loads nothing itself and never imports torch::

    import torch, hotkernel
    hotkernel.loaded()              # True under the preload, after `import torch`
    hotkernel.status()["plans"]     # the variants served by a hotkernel kernel
    with hotkernel.enabled(False):  # every op runs ATen's kernel in here
        reference = model(x)

Without the library in the process nothing here raises: ``loaded()`` is False,
``status()`` is ``{"loaded": False, "reason": ...}``, ``plan_count()`` is 0,
``wait_idle()`` returns True at once and ``enabled()`` changes nothing, warning
once (a RuntimeWarning). Pass ``strict=True`` to get HotkernelNotLoaded instead.
"""
import threading
import warnings

from . import _library
from ._launcher import preload_library

__all__ = ["HotkernelNotLoaded", "enabled", "loaded", "plan_count", "preload_library", "status", "wait_idle"]
__version__ = "0.1.0"


class HotkernelNotLoaded(RuntimeError):
    """Raised by a call made with strict=True when libhotkernel.so is not in the process (or its C API fails)."""


_warned_lock = threading.Lock()
_warned = False


def _warn_once(message):
    global _warned
    with _warned_lock:
        if _warned:
            return
        _warned = True
    warnings.warn("hotkernel: " + message, RuntimeWarning, stacklevel=4)  # the caller of the public call


def _api_or_none(strict, what):
    api = _library.api()
    if api is None:
        reason = _library.not_loaded_reason()
        if strict:
            raise HotkernelNotLoaded("hotkernel is not loaded: " + reason)
        if what:
            _warn_once("not loaded, {} does nothing: {}".format(what, reason))
    return api


def _failed(strict, what):
    message = "the C API call behind {} failed (the engine's log says why)".format(what)
    if strict:
        raise HotkernelNotLoaded(message)
    warnings.warn("hotkernel: " + message, RuntimeWarning, stacklevel=3)


def loaded():
    """Whether libhotkernel.so is in this process (the shim loads it when torch is imported).

    Asked again on each call until it is. Loaded does not mean serving: a process whose torch
    is not the build's keeps the engine off (``status()["started"]`` is False).
    """
    return _library.api() is not None


def status(strict=False):
    """The engine's status document (hotkernel_status_json) as a dict, with "loaded": True added.

    ``{"format": "hotkernel-status", "version": 2, ...}`` with snake_case keys, among them
    "started", "enabled", "plans" (the variants served), "tuned", "optimizer" ({"queued",
    "running", "done", "failed"}), "hits", "misses", "cache", "fingerprint", "forked_child",
    "profile" (the recorded ops and variants, a "hotkernel-profile" document) and "fusion"
    ({"on": ...}; with HOTKERNEL_FUSION=1 also "deferred_calls", "fused_flushes", "hot_chains",
    "ready_chains", ...). Without the library: ``{"loaded": False, "reason": "<why, and what
    to do>"}``, no format (HotkernelNotLoaded with strict=True).
    """
    api = _api_or_none(strict, None)
    if api is None:
        return {"loaded": False, "reason": _library.not_loaded_reason()}
    document = _library.status_document(api)
    if document is None:
        _failed(strict, "status()")
        return {"loaded": True, "reason": "hotkernel_status_json failed"}
    document["loaded"] = True
    return document


def plan_count(strict=False):
    """How many variants a hotkernel kernel serves now; 0 without the library."""
    api = _api_or_none(strict, "plan_count()")
    if api is None:
        return 0
    count = api.plan_count()
    if count < 0:
        _failed(strict, "plan_count()")
        return 0
    return count


def wait_idle(timeout, strict=False):
    """Block until the background optimizer has no queued or running work, at most `timeout` seconds.

    Returns True when idle, False on timeout; True at once without the library (nothing runs).
    """
    api = _api_or_none(strict, "wait_idle()")
    if api is None:
        return True
    result = api.wait_idle(float(timeout))
    if result < 0:
        _failed(strict, "wait_idle()")
        return True
    return result == 0


class enabled:  # noqa: N801 (a function to its callers)
    """Route the overridden ops to hotkernel's kernels (True) or always to ATen's (False).

    Takes effect at the call, so it works as a plain call, ``hotkernel.enabled(False)``,
    and as a context manager that puts the previous setting back on exit, whether
    the block returns or raises::

        with hotkernel.enabled(False):
            baseline = model(x)     # ATen's kernels only

    The setting is process-wide, not per thread: other threads' ops follow it while
    the block runs, and blocks in several threads at once restore in the order they
    exit (nest them in one thread, or keep the switching to one thread). Each call
    is safe from any thread. ``previous`` holds the setting before the call (None
    when nothing was changed). Without the library it changes nothing and warns once;
    with strict=True it raises HotkernelNotLoaded instead.
    """

    def __init__(self, flag, strict=False):
        self.previous = None
        self._strict = strict
        api = _api_or_none(strict, "enabled()")
        if api is None:
            return
        previous = api.set_enabled(1 if flag else 0)
        if previous < 0:
            _failed(strict, "enabled()")
            return
        self.previous = bool(previous)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.previous is not None:
            api = _library.api()
            if api is not None and api.set_enabled(1 if self.previous else 0) < 0:
                _failed(self._strict, "enabled()'s restore")
        return False

    def __repr__(self):
        return "hotkernel.enabled(previous={!r})".format(self.previous)
