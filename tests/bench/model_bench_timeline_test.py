#!/usr/bin/env python3
"""model_bench.step_timeline on synthetic profiler events (no GPU, no model): the device's busy time is the
union of its intervals, idle the rest of the host's window, and only the host calls that wait for the
device count as waits, asynchronous copies apart (Note [A step's timeline]); time_impls reports the host's time
in the same calls it times, per call and as medians."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import model_bench  # noqa: E402
import torch  # noqa: E402


def event(name, start, end, device=False):
    kind = torch.autograd.DeviceType.CUDA if device else torch.autograd.DeviceType.CPU
    return types.SimpleNamespace(name=name, device_type=kind, time_range=types.SimpleNamespace(start=start, end=end))


class StepTimelineTest(unittest.TestCase):
    def test_given_overlapping_kernels_and_a_sync_when_summed_then_busy_is_their_union_and_the_wait_counts(self):
        events = [event("aten::mm", 0, 40), event("cudaLaunchKernel", 5, 8), event("cudaStreamSynchronize", 60, 90),
                  event("aten::add", 90, 100),
                  event("gemm", 10, 50, device=True), event("elementwise", 30, 70, device=True),  # union: 10-70
                  event("hk_chain", 80, 85, device=True)]
        t = model_bench.step_timeline(events, steps=1)
        self.assertEqual(t["windowUs"], 100)
        self.assertEqual(t["gpuBusyUs"], 65)
        self.assertEqual(t["gpuIdleUs"], 35)
        self.assertEqual(t["syncCalls"], 1)
        self.assertEqual(t["syncWaitUs"], 30)

    def test_given_two_steps_when_summed_then_each_number_is_per_step(self):
        events = [event("aten::mm", 0, 100), event("cudaMemcpy", 100, 120), event("cudaMemcpyAsync", 120, 121),
                  event("aten::mm", 121, 200), event("gemm", 0, 100, device=True), event("gemm", 120, 180, device=True)]
        t = model_bench.step_timeline(events, steps=2)
        self.assertEqual(t["windowUs"], 100)
        self.assertEqual(t["gpuBusyUs"], 80)
        self.assertEqual(t["syncCalls"], 0.5)
        self.assertEqual(t["syncWaitUs"], 10)
        # An asynchronous copy is no wait by its name: its count and host time stand apart.
        self.assertEqual(t["asyncCopyCalls"], 0.5)
        self.assertEqual(t["asyncCopyUs"], 0.5)

    def test_given_a_long_wait_and_launch_bubbles_when_summed_then_the_idle_time_splits_by_gap_length(self):
        # Host window 0-1000; device idle 0-300 (a prologue), busy 300-500, 10 us bubbles at 500-510 and
        # 600-610, busy to 900, idle 900-1000 (the tail): 300 + 100 in long gaps, 20 in short ones.
        events = [event("aten::embedding", 0, 290), event("cudaStreamSynchronize", 290, 1000),
                  event("gemm", 300, 500, device=True), event("hk_chain", 510, 600, device=True),
                  event("gemm", 610, 900, device=True)]
        t = model_bench.step_timeline(events, steps=1)
        self.assertEqual(t["gpuIdleUs"], 420)
        self.assertEqual(t["idleLongGaps"], 2)
        self.assertEqual(t["idleLongGapsUs"], 400)
        self.assertEqual(t["idleShortGapsUs"], 20)
        self.assertEqual(t["idleLongGapsUs"] + t["idleShortGapsUs"], t["gpuIdleUs"])

    def test_given_device_work_outside_the_host_window_when_summed_then_only_gaps_inside_it_count(self):
        events = [event("aten::mm", 100, 200), event("gemm", 50, 120, device=True), event("gemm", 150, 260, device=True)]
        t = model_bench.step_timeline(events, steps=1)
        self.assertEqual(t["idleLongGapsUs"] + t["idleShortGapsUs"], 30)  # 120-150 only

    def test_given_no_device_events_when_summed_then_there_is_no_timeline(self):
        self.assertIsNone(model_bench.step_timeline([event("aten::mm", 0, 10)], steps=1))


class FakeTimer:
    """A timer whose step time is the host time plus a fixed wait for the device, per implementation."""

    def __init__(self, host_us, wait_us):
        self.host_us, self.wait_us, self.calls = host_us, wait_us, []

    def sync(self):
        pass

    def start(self, fn):
        name = fn()
        self.calls.append(name)
        return (name, self.host_us[name] + self.wait_us[name]), self.host_us[name]

    @staticmethod
    def us(pending):
        return pending[1]


class TimeImplsTest(unittest.TestCase):
    def test_given_a_host_bound_and_a_gpu_bound_arm_when_timed_then_each_samples_host_time_in_the_same_calls(self):
        timer = FakeTimer({"eager": 800.0, "hotkernel": 600.0}, {"eager": 0.0, "hotkernel": 400.0})
        impls = {"eager": lambda: "eager", "hotkernel": lambda: "hotkernel"}
        out = model_bench.time_impls(None, timer, impls, 7, 2)
        self.assertEqual(len(timer.calls), 14)  # no untimed calls besides the timed ones
        self.assertEqual(out["hostUs"], {"eager": 400.0, "hotkernel": 300.0})  # per token (2 a call)
        self.assertEqual(out["hostSamplesUs"]["hotkernel"], [300.0] * 7)
        self.assertEqual(out["samplesUs"]["hotkernel"], [500.0] * 7)  # the wait for the device on top
        self.assertAlmostEqual(out["hotkernelSpeedupVsEager"]["median"], 0.8)


if __name__ == "__main__":
    unittest.main()
