#!/usr/bin/env python3
"""model_bench.step_timeline on synthetic profiler events (no GPU, no model): the device's busy time is the
union of its intervals, idle the rest of the host's window, and only the host calls that wait for the
device count as waits, asynchronous copies apart (Note [A step's timeline])."""
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

    def test_given_no_device_events_when_summed_then_there_is_no_timeline(self):
        self.assertIsNone(model_bench.step_timeline([event("aten::mm", 0, 10)], steps=1))


if __name__ == "__main__":
    unittest.main()
