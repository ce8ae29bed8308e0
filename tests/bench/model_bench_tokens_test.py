#!/usr/bin/env python3
"""model_bench.token_agreement on synthetic greedy decodes (no GPU, no model): per sequence the first step where the
tokens differ from eager's, the sequences that agree throughout, and eager's top-1 minus top-2 logit at the first
differences (the largest of them), which tells a near-tie flip from a wrong token; Decoder.run's margins; the
recorder's sampling the results report (recorder_sampling: HOTKERNEL_SAMPLE as the library reads it)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import model_bench  # noqa: E402
import torch  # noqa: E402


class TokenAgreementTest(unittest.TestCase):
    def test_given_the_same_tokens_when_compared_then_equal_with_no_difference_and_no_margin(self):
        ref = torch.tensor([[5, 6, 7], [1, 2, 3]])
        a = model_bench.token_agreement(ref, ref.clone(), torch.ones(2, 3))
        self.assertTrue(a["equal"])
        self.assertEqual(a["sequences"], 2)
        self.assertEqual(a["sequencesEqual"], 2)
        self.assertEqual(a["firstDifference"], [None, None])
        self.assertIsNone(a["eagerMarginAtFirstDifference"])

    def test_given_sequences_that_differ_when_compared_then_each_first_difference_and_the_largest_margin_there(self):
        ref = torch.tensor([[5, 6, 7, 8], [1, 2, 3, 4], [9, 9, 9, 9]])
        got = torch.tensor([[5, 0, 0, 0], [1, 2, 3, 4], [9, 9, 9, 0]])
        margins = torch.tensor([[3.0, 0.25, 9.0, 9.0], [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 0.5]])
        a = model_bench.token_agreement(ref, got, margins)
        self.assertFalse(a["equal"])
        self.assertEqual(a["sequencesEqual"], 1)
        self.assertEqual(a["firstDifference"], [1, None, 3])
        # Only the first differing step of each sequence counts (the 9.0 after it in sequence 0 does not).
        self.assertEqual(a["eagerMarginAtFirstDifference"], 0.5)

    def test_given_a_flip_at_a_wide_margin_when_compared_then_that_margin_is_reported(self):
        ref = torch.tensor([[4, 4]])
        a = model_bench.token_agreement(ref, torch.tensor([[3, 4]]), torch.tensor([[7.5, 0.0]]))
        self.assertEqual(a["firstDifference"], [0])
        self.assertEqual(a["eagerMarginAtFirstDifference"], 7.5)


class DecoderMarginsTest(unittest.TestCase):
    def test_given_a_margins_list_when_the_greedy_loop_runs_then_each_step_appends_top1_minus_top2(self):
        # A stand-in decoder: no model, the step returns fixed logits [batch, 1, vocab].
        d = model_bench.Decoder.__new__(model_bench.Decoder)
        d.tokens = 2
        d.first = torch.tensor([[0], [0]])
        d.positions = [None, None]
        d.cache_positions = [None, None]
        d.out = torch.empty(2, 2, dtype=torch.long)
        d.rewind = lambda: None
        logits = torch.tensor([[[1.0, 4.0, 2.5]], [[0.0, -1.0, 3.0]]])
        margins = []
        out, _ = d.run(lambda tok, pos, cpos: logits, margins)
        self.assertEqual(out.tolist(), [[1, 1], [2, 2]])
        self.assertEqual(len(margins), 2)
        self.assertEqual(margins[0].tolist(), [1.5, 3.0])
        out, _ = d.run(lambda tok, pos, cpos: logits)  # no list: nothing recorded, the same tokens
        self.assertEqual(out.tolist(), [[1, 1], [2, 2]])


class RecorderSamplingTest(unittest.TestCase):
    def test_given_each_setting_when_read_then_as_the_library_reads_it(self):
        cases = {None: 0.05, "1": 1.0, "0.25": 0.25, "2": 0.05, "0": 0.05, "-1": 0.05, "x": 0.05, "nan": 0.05}
        saved = os.environ.get("HOTKERNEL_SAMPLE")
        try:
            for value, want in cases.items():
                if value is None:
                    os.environ.pop("HOTKERNEL_SAMPLE", None)
                else:
                    os.environ["HOTKERNEL_SAMPLE"] = value
                self.assertEqual(model_bench.recorder_sampling(), want, value)
        finally:
            if saved is None:
                os.environ.pop("HOTKERNEL_SAMPLE", None)
            else:
                os.environ["HOTKERNEL_SAMPLE"] = saved


if __name__ == "__main__":
    unittest.main()
