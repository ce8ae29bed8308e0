#!/usr/bin/env python3
"""The Python package `hotkernel` (python/hotkernel): the API without and with the preload, and `python -m hotkernel`.

Run by ctest (python_package_test) with PYTHONPATH=<repo>/python and:
  HOTKERNEL_TEST_PRELOAD  the built shim (libhotkernel_preload.so; libhotkernel.so beside it when built with torch)
  HOTKERNEL_TEST_HOME     the build directory (lib/ and bin/hotkernel), for `run` and `doctor`
  HOTKERNEL_TEST_TORCH    1 when the build has torch: the tests under the preload must run, not skip
The tests in this process run without the preload; the others run subprocesses.
"""
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings

import hotkernel
from hotkernel import _launcher, _library

PACKAGE_DIR = os.path.dirname(os.path.abspath(hotkernel.__file__))
PYTHON_ROOT = os.path.dirname(PACKAGE_DIR)
SHIM = os.path.realpath(os.environ.get("HOTKERNEL_TEST_PRELOAD", ""))
HOME = os.environ.get("HOTKERNEL_TEST_HOME", "")
TORCH_REQUIRED = os.environ.get("HOTKERNEL_TEST_TORCH") == "1"


def has_torch():
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


def engine_available():
    """torch importable and libhotkernel.so beside the shim; a failure instead of a skip when the build has torch."""
    missing = []
    if not os.path.isfile(os.path.join(os.path.dirname(SHIM), "libhotkernel.so")):
        missing.append("libhotkernel.so beside " + SHIM)
    if not has_torch():
        missing.append("torch in " + sys.executable)
    if missing and TORCH_REQUIRED:
        raise AssertionError("the build has torch but the test lacks: " + ", ".join(missing))
    return not missing, ", ".join(missing)


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HOTKERNEL", "HOTKERNEL_HOME")}
    env["PYTHONPATH"] = PYTHON_ROOT
    env.update(extra)
    return env


def non_snake_case_keys(document, data_maps, path=""):
    """The paths of the keys of `document` that are not snake_case (tests/JsonKeyCase.h in Python); the objects at
    the paths in `data_maps` are maps of data, not checked. An array's elements share the segment "*"."""
    if path in data_maps:
        return []
    out = []
    if isinstance(document, dict):
        for key, value in document.items():
            if not re.fullmatch(r"[a-z0-9_]+", key):
                out.append(path + "/" + key)
            out += non_snake_case_keys(value, data_maps, path + "/" + key)
    elif isinstance(document, list):
        for element in document:
            out += non_snake_case_keys(element, data_maps, path + "/*")
    return out


# The status document's maps of data and the cache's stored metrics (Note [Status document, version 2]).
STATUS_DATA_MAPS = ("/fingerprints", "/fusion/patterns", "/tuned/*/metrics")


def run_module(args, env, **kw):
    return subprocess.run([sys.executable, "-m", "hotkernel"] + args, env=env, capture_output=True, text=True,
                          timeout=300, **kw)


def setUpModule():
    if not os.path.isfile(SHIM):
        raise AssertionError("HOTKERNEL_TEST_PRELOAD does not name the built shim: " + repr(SHIM))
    if hasattr(ctypes.CDLL(None), "hotkernel_captures_in_progress"):
        raise AssertionError("this test process must run without the preload shim")


class WithoutThePreloadTest(unittest.TestCase):
    def setUp(self):
        hotkernel._warned = False

    def test_given_no_preload_when_asked_then_not_loaded_and_the_status_says_why(self):
        self.assertFalse(hotkernel.loaded())
        status = hotkernel.status()
        self.assertEqual(status["loaded"], False)
        self.assertIn("preload shim is not in this process", status["reason"])
        self.assertIn("python -m hotkernel run", status["reason"])

    def test_given_no_preload_when_enabled_is_a_context_manager_then_the_block_runs_and_one_warning(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ran = []
            with hotkernel.enabled(False) as switch:
                ran.append(1)
            self.assertIsNone(switch.previous)
            with self.assertRaises(KeyError):  # the user's exception passes through untouched
                with hotkernel.enabled(True):
                    raise KeyError("mine")
            hotkernel.enabled(False)
        self.assertEqual(ran, [1])
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIs(caught[0].category, RuntimeWarning)
        self.assertIn("enabled() does nothing", str(caught[0].message))
        self.assertEqual(caught[0].filename, __file__)  # points at the user's line

    def test_given_no_preload_when_counted_or_waited_then_neutral_values(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.assertEqual(hotkernel.plan_count(), 0)
            self.assertTrue(hotkernel.wait_idle(0.1))

    def test_given_strict_when_not_loaded_then_every_call_raises_with_the_reason(self):
        for call in (lambda: hotkernel.status(strict=True), lambda: hotkernel.enabled(False, strict=True),
                     lambda: hotkernel.plan_count(strict=True), lambda: hotkernel.wait_idle(1, strict=True)):
            with self.assertRaises(hotkernel.HotkernelNotLoaded) as raised:
                call()
            self.assertIn("preload shim is not in this process", str(raised.exception))
        self.assertTrue(issubclass(hotkernel.HotkernelNotLoaded, RuntimeError))

    def test_given_the_package_when_imported_then_torch_is_not(self):
        code = "import sys, hotkernel; print('torch' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True)
        self.assertEqual(out.stdout.strip(), "False", out.stderr)


class PreloadValueTest(unittest.TestCase):
    """preload_with: `hotkernel run`'s preloadWith (RunCommand.cpp) in Python."""

    def test_given_values_when_the_shim_is_added_then_appended_once(self):
        self.assertEqual(_launcher.preload_with("", SHIM), (SHIM, ""))
        self.assertEqual(_launcher.preload_with("libm.so.6", SHIM), ("libm.so.6:" + SHIM, ""))
        self.assertEqual(_launcher.preload_with("a.so: ", SHIM), ("a.so:" + SHIM, ""))
        self.assertEqual(_launcher.preload_with("a.so " + SHIM, SHIM), ("a.so " + SHIM, ""))

    def test_given_another_hotkernel_shim_when_added_then_replaced_with_a_note(self):
        value, note = _launcher.preload_with("a.so:/elsewhere/libhotkernel_preload.so", SHIM)
        self.assertEqual(value, "a.so:" + SHIM)
        self.assertIn("/elsewhere/libhotkernel_preload.so", note)


class UnderThePreloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        available, why = engine_available()
        if not available:
            raise unittest.SkipTest("no engine: " + why)
        cls.cache = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.cache, ignore_errors=True)

    def run_script(self, script, **extra):
        env = child_env(LD_PRELOAD=SHIM, HOTKERNEL_CACHE_DIR=os.path.join(self.cache, "c"), **extra)
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                             text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
        return json.loads(lines[-1])

    def test_given_the_preload_when_torch_is_imported_then_status_and_enabled_drive_the_engine(self):
        result = self.run_script("""
            import ctypes, json, hotkernel
            r = {"before_torch": hotkernel.status()}
            import torch
            r["loaded"] = hotkernel.loaded()
            r["status"] = hotkernel.status()
            c_api = ctypes.CDLL(None).hotkernel_set_enabled
            with hotkernel.enabled(False) as off:
                r["previous"] = off.previous
                r["inside"] = hotkernel.status()["enabled"]
                torch.softmax(torch.randn(4, 8), -1)
                with hotkernel.enabled(True):
                    r["nested"] = hotkernel.status()["enabled"]
                r["after_nested"] = hotkernel.status()["enabled"]
            r["after"] = hotkernel.status()["enabled"]
            try:
                with hotkernel.enabled(False):
                    raise ValueError("inside")
            except ValueError:
                r["after_exception"] = hotkernel.status()["enabled"]
            hotkernel.enabled(False)                # a plain call: stays off
            r["c_api_after_plain_off"] = c_api(1)   # returns the previous setting, and turns it back on
            r["plain_on_previous"] = hotkernel.enabled(True).previous
            r["plan_count"] = hotkernel.plan_count()
            r["idle"] = hotkernel.wait_idle(30)
            print(json.dumps(r))
            """)
        self.assertFalse(result["before_torch"]["loaded"])
        self.assertIn("torch is not loaded yet", result["before_torch"]["reason"])
        self.assertTrue(result["loaded"])
        status = result["status"]
        print("\nthe engine's status under the preload:", json.dumps(status), file=sys.stderr)
        for key in ("loaded", "started", "enabled", "plans", "tuned", "optimizer", "hits", "misses", "cache",
                    "fingerprint", "profile"):
            self.assertIn(key, status)
        self.assertEqual((status["format"], status["version"]), ("hotkernel-status", 2))
        self.assertEqual(non_snake_case_keys(status, STATUS_DATA_MAPS), [])
        self.assertTrue(status["started"])
        self.assertTrue(status["enabled"])
        self.assertIs(status["forked_child"], False)
        self.assertEqual(status["profile"]["format"], "hotkernel-profile")
        self.assertEqual(sorted(status["optimizer"]), ["done", "failed", "queued", "running"])
        self.assertIs(result["previous"], True)
        self.assertIs(result["inside"], False)
        self.assertIs(result["nested"], True)
        self.assertIs(result["after_nested"], False)
        self.assertIs(result["after"], True)
        self.assertIs(result["after_exception"], True)
        self.assertEqual(result["c_api_after_plain_off"], 0)
        self.assertIs(result["plain_on_previous"], True)
        self.assertEqual(result["plan_count"], len(status["plans"]))
        self.assertTrue(result["idle"])

    def test_given_fusion_on_when_the_status_is_asked_then_its_fusion_counters_have_snake_case_keys(self):
        # HOTKERNEL_FUSION=1 installs the fusion engine on the CPU too (its trampolines on the CUDA key).
        result = self.run_script("""
            import json, torch, hotkernel
            torch.softmax(torch.randn(4, 8), -1)
            print(json.dumps(hotkernel.status()))
            """, HOTKERNEL_FUSION="1")
        self.assertEqual((result["format"], result["version"]), ("hotkernel-status", 2))
        self.assertEqual(non_snake_case_keys(result, STATUS_DATA_MAPS), [], json.dumps(result["fusion"]))
        fusion = result["fusion"]
        self.assertIs(fusion["on"], True)
        self.assertEqual(sorted(fusion), ["covered", "deferred_calls", "failed_flushes", "fused_flushes",
                                          "hook_gave_up", "hot_chains", "idle_starts", "last_unfused", "on",
                                          "passed_calls",
                                          "patterns", "ready_chains", "retired_chains", "unfused_flushes",
                                          "windows"])
        self.assertEqual(fusion["failed_flushes"], 0)

    def test_given_hotkernel_0_when_torch_is_imported_then_the_reason_names_it(self):
        result = self.run_script("""
            import json, torch, hotkernel
            print(json.dumps({"loaded": hotkernel.loaded(), "status": hotkernel.status()}))
            """, HOTKERNEL="0")
        self.assertFalse(result["loaded"])
        self.assertIn("HOTKERNEL=0", result["status"]["reason"])

    def test_given_run_when_the_command_imports_torch_then_hotkernel_is_loaded_in_it(self):
        code = "import torch, hotkernel; print(hotkernel.loaded(), hotkernel.status()['started'])"
        out = run_module(["run", "--", sys.executable, "-c", code],
                         child_env(HOTKERNEL_HOME=HOME, HOTKERNEL_CACHE_DIR=os.path.join(self.cache, "r")))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "True True")


class RunTest(unittest.TestCase):
    """`python -m hotkernel run`: LD_PRELOAD as `hotkernel run` sets it, exit statuses, where the shim is found."""

    PRINT_PRELOAD = [sys.executable, "-c", "import os; print(os.environ['LD_PRELOAD'])"]

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.home_shim = os.path.realpath(os.path.join(HOME, "lib", "libhotkernel_preload.so"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_given_a_preload_value_when_run_then_the_shim_is_appended_to_it(self):
        libm = ctypes.util.find_library("m") or "libm.so.6"
        out = run_module(["run", "--"] + self.PRINT_PRELOAD, child_env(HOTKERNEL_HOME=HOME, LD_PRELOAD=libm))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), libm + ":" + self.home_shim)
        self.assertTrue(os.path.isabs(self.home_shim))

    def test_given_the_shim_already_preloaded_when_run_then_not_twice(self):
        out = run_module(["run"] + self.PRINT_PRELOAD, child_env(HOTKERNEL_HOME=HOME, LD_PRELOAD=self.home_shim))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), self.home_shim)

    def test_given_commands_when_run_then_their_status_or_run_s_codes(self):
        env = child_env(HOTKERNEL_HOME=HOME)
        self.assertEqual(run_module(["run", "--", sys.executable, "-c", "import sys; sys.exit(7)"], env).returncode, 7)
        missing = run_module(["run", "--", "hotkernel-no-such-command", "x"], env)
        self.assertEqual(missing.returncode, 127)
        self.assertIn("hotkernel-no-such-command: command not found", missing.stderr)
        self.assertEqual(run_module(["run", "--", os.path.join(self.tmp, "absent")], env).returncode, 127)
        not_executable = os.path.join(self.tmp, "script")
        with open(not_executable, "w") as f:
            f.write("#!/bin/sh\n")
        self.assertEqual(run_module(["run", "--", not_executable], env).returncode, 126)
        self.assertEqual(run_module(["run"], env).returncode, 125)
        self.assertEqual(run_module(["run", "--"], env).returncode, 125)
        unknown = run_module(["run", "-x", "true"], env)
        self.assertEqual(unknown.returncode, 125)
        self.assertIn("unknown option '-x'", unknown.stderr)
        self.assertEqual(run_module(["nonsense"], env).returncode, 2)

    def test_given_hotkernel_home_without_the_shim_when_run_then_125_naming_where_it_looked(self):
        out = run_module(["run", "--", "true"], child_env(HOTKERNEL_HOME=self.tmp))
        self.assertEqual(out.returncode, 125)
        self.assertIn(os.path.join(self.tmp, "lib", "libhotkernel_preload.so"), out.stderr)
        self.assertIn("HOTKERNEL_HOME", out.stderr)

    def copy_package(self, root):
        shutil.copytree(PACKAGE_DIR, os.path.join(root, "hotkernel"), ignore=shutil.ignore_patterns("__pycache__"))

    def test_given_an_installed_layout_when_run_then_the_package_s_lib_is_used(self):
        self.copy_package(self.tmp)
        os.makedirs(os.path.join(self.tmp, "hotkernel", "lib"))
        shim = os.path.join(self.tmp, "hotkernel", "lib", "libhotkernel_preload.so")
        shutil.copy(SHIM, shim)
        env = child_env(PYTHONPATH=self.tmp)
        out = run_module(["run", "--"] + self.PRINT_PRELOAD, env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), os.path.realpath(shim))
        # HOTKERNEL_HOME comes first.
        env["HOTKERNEL_HOME"] = HOME
        self.assertEqual(run_module(["run", "--"] + self.PRINT_PRELOAD, env).stdout.strip(), self.home_shim)
        # No bin/hotkernel beside this shim: doctor says so, as a doctor document with --json.
        del env["HOTKERNEL_HOME"]
        doctor = run_module(["doctor", "--json"], env)
        self.assertEqual(doctor.returncode, 1)
        document = json.loads(doctor.stdout)
        self.assertEqual((document["format"], document["ready"]), ("hotkernel-doctor", False))
        self.assertIn(os.path.join("bin", "hotkernel"), document["problems"][0])

    def test_given_a_repository_checkout_when_run_then_its_build_lib_is_used(self):
        self.copy_package(os.path.join(self.tmp, "python"))
        os.makedirs(os.path.join(self.tmp, "build", "lib"))
        shim = os.path.join(self.tmp, "build", "lib", "libhotkernel_preload.so")
        shutil.copy(SHIM, shim)
        out = run_module(["run", "--"] + self.PRINT_PRELOAD, child_env(PYTHONPATH=os.path.join(self.tmp, "python")))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), os.path.realpath(shim))

    def test_given_the_build_s_binary_when_doctor_then_its_json_document(self):
        if not os.path.isfile(os.path.join(HOME, "bin", "hotkernel")):
            self.skipTest("no bin/hotkernel in " + HOME)
        out = run_module(["doctor", "--json"], child_env(HOTKERNEL_HOME=HOME))
        self.assertIn(out.returncode, (0, 1), out.stderr)
        document = json.loads(out.stdout)
        self.assertEqual(document["format"], "hotkernel-doctor")
        self.assertEqual(os.path.realpath(document["preload"]["path"]), self.home_shim)


if __name__ == "__main__":
    unittest.main(verbosity=2)
