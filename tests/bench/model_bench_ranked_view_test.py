#!/usr/bin/env python3
"""model_bench.ranked_view on a synthetic profile (no GPU, no model): the fused chains' kernels, which the
profiler charges to no op (Note [Flushes in the profiler]), are a row of their own, not "not attributed";
a real hotkernel::fused_chain op row is not doubled; the served ops' share leaves the chains out; the events'
sums leave out the device-side annotations and take the chains' kernels out of the op that flushed them."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import model_bench  # noqa: E402


def profile(ops, kernels):
    return ops, kernels, sum(kernels.values()), None


class RankedViewTest(unittest.TestCase):
    def test_given_unattributed_chain_kernels_when_ranked_then_they_are_the_fused_chain_row(self):
        ops = {"aten::mm": [800.0, 4], "aten::_softmax": [50.0, 1]}
        kernels = {"gemm_kernel": 800.0, "hk_softmax_lastdim": 50.0, "hk_chain": 140.0, "other_kernel": 10.0}
        view = model_bench.ranked_view(profile(ops, kernels), ({"aten::mm": [800.0, 4]}, {}, 0), {"aten::_softmax"},
                                       [{"op": "aten::_softmax", "overridden": True, "decision": "kernel"}],
                                       True, True, 25)
        by_op = {r["op"]: r for r in view["ops"]}
        self.assertEqual(by_op["hotkernel::fused_chain (hk_chain kernels)"]["usPerStep"], 140.0)
        self.assertEqual(by_op["hotkernel::fused_chain (hk_chain kernels)"]["served"], "hk kernel (fused chains)")
        self.assertEqual(by_op["(not attributed to an op)"]["usPerStep"], 10.0)
        self.assertAlmostEqual(view["unattributedUsPerStep"], 10.0)
        self.assertAlmostEqual(view["servedOpShare"], 50.0 / 1000.0)
        self.assertAlmostEqual(view["fusedChainKernelShare"], 140.0 / 1000.0)
        self.assertAlmostEqual(view["ops"][-1]["cumulativeShare"], 1.0)

    def test_given_a_fused_chain_op_row_when_ranked_then_the_chains_are_not_counted_twice(self):
        ops = {"aten::mm": [800.0, 4], "hotkernel::fused_chain": [140.0, 3]}
        kernels = {"gemm_kernel": 800.0, "hk_chain": 140.0}
        view = model_bench.ranked_view(profile(ops, kernels), ({}, {}, 0), set(), [], True, True, 25)
        names = [r["op"] for r in view["ops"]]
        self.assertIn("hotkernel::fused_chain", names)
        self.assertNotIn("hotkernel::fused_chain (hk_chain kernels)", names)
        self.assertNotIn("(not attributed to an op)", names)


def event(name, cpu, **fields):
    import torch
    device = torch.autograd.DeviceType.CPU if cpu else torch.autograd.DeviceType.CUDA
    base = {"is_async": False, "is_user_annotation": False, "self_device_time_total": 0.0,
            "self_cpu_time_total": 0.0, "device_time_total": 0.0, "kernels": []}
    base.update(fields)
    return types.SimpleNamespace(name=name, device_type=device, **base)


def kernel(name, us):
    return types.SimpleNamespace(name=name, device=0, duration=us)


class AggregateEventsTest(unittest.TestCase):
    def test_given_a_flush_inside_a_gemm_when_summed_then_the_chain_is_neither_the_gemms_nor_counted_twice(self):
        # Two steps: a GEMM whose call flushed a chain (its kernels correlated to the GEMM), the flush's range
        # coming back on the device as an annotation over the chain's kernel, and a softmax.
        events = []
        for _ in range(2):
            events += [
                event("aten::mm", True, self_device_time_total=900.0,
                      kernels=[kernel("nvjet_gemm", 800.0), kernel("hk_chain", 100.0)]),
                event("aten::_softmax", True, self_device_time_total=50.0, kernels=[kernel("softmax_kernel", 50.0)]),
                event("hotkernel::fused_chain", True, is_user_annotation=True),
                event("nvjet_gemm", False, device_time_total=800.0),
                event("hk_chain", False, device_time_total=100.0),
                event("hotkernel::fused_chain", False, is_user_annotation=True, device_time_total=100.0),
                event("softmax_kernel", False, device_time_total=50.0),
            ]
        ops, kernels, total = model_bench.aggregate_events(events, 2, True)
        self.assertAlmostEqual(total, 950.0)  # the annotation is not device time
        self.assertNotIn("hotkernel::fused_chain", kernels)
        self.assertAlmostEqual(ops["aten::mm"][0], 800.0)  # the GEMM's own kernels only
        self.assertAlmostEqual(ops["aten::mm"][1], 1.0)
        view = model_bench.ranked_view((ops, kernels, total, None), (ops, {}, 0), set(), [], True, True, 25)
        by_op = {r["op"]: r for r in view["ops"]}
        self.assertAlmostEqual(by_op["hotkernel::fused_chain (hk_chain kernels)"]["usPerStep"], 100.0)
        self.assertNotIn("(not attributed to an op)", by_op)

    def test_given_no_gpu_when_summed_then_ops_carry_their_cpu_time(self):
        events = [event("aten::mul", True, self_cpu_time_total=30.0), event("aten::add", True, self_cpu_time_total=10.0),
                  event("aten::add", True, is_async=True, self_cpu_time_total=99.0)]
        ops, kernels, total = model_bench.aggregate_events(events, 1, False)
        self.assertEqual(kernels, {})
        self.assertAlmostEqual(total, 40.0)
        self.assertAlmostEqual(ops["aten::add"][0], 10.0)


class DefaultOpsTest(unittest.TestCase):
    def test_given_the_librarys_default_ops_when_the_bench_names_them_then_they_are_the_same(self):
        import re
        config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime", "include",
                              "hotkernel", "runtime", "Config.h")
        with open(config) as f:
            found = re.search(r'kDefaultServedOps =((?:\s*"[^"]*")+);', f.read())
        self.assertIsNotNone(found, "HOTKERNEL_OPS' default (kDefaultServedOps) not found in runtime Config.h")
        self.assertEqual(model_bench.DEFAULT_HOTKERNEL_OPS, "".join(re.findall(r'"([^"]*)"', found.group(1))))


if __name__ == "__main__":
    unittest.main()
