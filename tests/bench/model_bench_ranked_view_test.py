#!/usr/bin/env python3
"""model_bench.ranked_view on a synthetic profile (no GPU, no model): the fused chains' kernels, which the
profiler charges to no op (Note [Flushes in the profiler]), are a row of their own, not "not attributed";
a real hotkernel::fused_chain op row is not doubled; the served ops' share leaves the chains out."""
import os
import sys
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


if __name__ == "__main__":
    unittest.main()
