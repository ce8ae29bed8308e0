#!/usr/bin/env python3
"""ops_bench's case parsing and variant strings (no GPU): every preset parses; the group_norm cases' variants are
the strings kernels::variantString gives a group_norm key (GroupNormFamilyTest pins the C++ side to the same text),
so hotkernel's status names the plan the benchmark looks for; malformed group_norm cases are refused; the std_weight (weight standardization) cases' variants are batch_norm keys'
strings."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import ops_bench  # noqa: E402


class OpsBenchCasesTest(unittest.TestCase):
    def test_given_every_preset_when_parsed_then_cases_with_a_variant_each(self):
        for name in ops_bench.PRESETS:
            cases = ops_bench.parse_cases(name)
            self.assertTrue(cases, name)
            for op, dtype, shape in cases:
                self.assertTrue(ops_bench.variant_of(op, dtype, shape).startswith(f"dtype={dtype};"), (name, op))

    def test_given_a_group_norm_case_when_keyed_then_group_rows_channels_times_hw_and_the_extents(self):
        self.assertEqual(ops_bench.variant_of("group_norm", "bfloat16", [2, 320, 64, 64]),
                         "dtype=bfloat16;rows=64;cols=40960;more=32,4096,1,1;weight=1;bias=1")
        self.assertEqual(ops_bench.variant_of("group_norm", "float16", [1, 512, 128, 128]),
                         "dtype=float16;rows=32;cols=262144;more=32,16384,1,1;weight=1;bias=1")

    def test_given_a_std_weight_case_when_keyed_then_channel_rows_of_the_channels_elements_without_flags(self):
        # BatchNormKeyTest pins the C++ key: rows = C, cols = a channel's elements, no options.
        self.assertEqual(ops_bench.variant_of("std_weight", "bfloat16", [512, 4608]),
                         "dtype=bfloat16;rows=512;cols=4608")
        self.assertEqual(ops_bench.OPS["std_weight"][1], "aten::native_batch_norm")

    def test_given_malformed_group_norm_cases_when_parsed_then_refused(self):
        for bad in ("group_norm:float16:2x320x64", "group_norm:float16:2x48x8x8", "group_norm:float16:2x320x1x1"):
            with self.assertRaises(SystemExit, msg=bad):
                ops_bench.parse_cases(bad)


if __name__ == "__main__":
    unittest.main()
