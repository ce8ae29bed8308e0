#!/usr/bin/env python3
"""model_bench.model_variants on synthetic status documents (no GPU, no model): the variants whose sampled calls
grew between two statuses, with the share fused chains took (the recorder's "deferred_calls",
Note [Deferred calls in the recorder]) and the decision for each."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import model_bench  # noqa: E402


def variant(op, rows, sampled, deferred=None):
    v = {"op": op, "dtype": "float32", "device": 0, "rows": rows, "cols": 2048, "sampled_calls": sampled}
    if deferred is not None:
        v["deferred_calls"] = deferred
    return v


def status(variants, plans=()):
    return {"profile": {"format": "hotkernel-profile", "version": 3, "variants": variants}, "plans": list(plans),
            "tuned": []}


class ModelVariantsTest(unittest.TestCase):
    def test_given_calls_fused_chains_took_when_listed_then_each_variant_carries_its_deferred_calls(self):
        before = status([variant("aten::mean.dim", 4096, 10, 4)])
        after = status([variant("aten::mean.dim", 4096, 110, 94), variant("aten::mean.dim", 8, 30)],
                       plans=[{"op": "aten::mean.dim", "variant": "dtype=float32;rows=8;cols=2048", "kernel": "k"}])
        got = {v["rows"]: v for v in model_bench.model_variants(before, after)}
        self.assertEqual(got[4096]["sampledCalls"], 100)
        self.assertEqual(got[4096]["deferredCalls"], 90)
        self.assertEqual(got[4096]["decision"], "undecided")
        self.assertEqual(got[8]["deferredCalls"], 0)  # absent: none deferred
        self.assertEqual(got[8]["decision"], "kernel")

    def test_given_an_older_profile_when_listed_then_no_call_counts_as_deferred(self):
        before = {"profile": {"version": 2, "variants": []}}
        after = {"profile": {"version": 2, "variants": [{"op": "aten::_softmax", "dtype": "float16", "rows": 4,
                                                         "cols": 8, "sampledCalls": 5}]}}
        [v] = model_bench.model_variants(before, after)
        self.assertEqual(v["sampledCalls"], 5)
        self.assertEqual(v["deferredCalls"], 0)


if __name__ == "__main__":
    unittest.main()
