#!/usr/bin/env python3
"""model_bench.patterns_short_of_hot on synthetic status patterns (no GPU, no model): the recurring patterns that
learning left short of hot (neither reported nor refused, seen at least twice and fewer than hotCalls times), their
sighting range and their counts by calls; patterns seen once, reported or refused are left out."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import model_bench  # noqa: E402


def pattern(calls, seen, reported=False, refusal=""):
    return {"calls": calls, "seen": seen, "reported": reported, "refusal": refusal, "segments": []}


class PatternsShortOfHotTest(unittest.TestCase):
    def test_given_once_a_step_patterns_below_hot_when_summarized_then_each_is_counted_with_its_sightings(self):
        patterns = {"a": pattern(4, 40), "b": pattern(2, 42), "c": pattern(2, 44), "d": pattern(3, 120, reported=True)}
        s = model_bench.patterns_short_of_hot(patterns, 50)
        self.assertEqual(s["count"], 3)
        self.assertEqual(s["hotCalls"], 50)
        self.assertEqual(s["seen"], [40, 44])
        self.assertEqual(s["byCalls"], {"2": 2, "4": 1})

    def test_given_reported_refused_once_seen_or_hot_patterns_when_summarized_then_none_is_short(self):
        patterns = {"hot": pattern(2, 200, reported=True), "one": pattern(1, 273, refusal="a single call"),
                    "warmup": pattern(3, 1), "atHot": pattern(2, 50)}
        s = model_bench.patterns_short_of_hot(patterns, 50)
        self.assertEqual(s["count"], 0)
        self.assertIsNone(s["seen"])
        self.assertEqual(s["byCalls"], {})

    def test_given_no_patterns_when_summarized_then_nothing_is_short(self):
        self.assertEqual(model_bench.patterns_short_of_hot(None, 50)["count"], 0)
        self.assertEqual(model_bench.patterns_short_of_hot({}, 3)["count"], 0)


if __name__ == "__main__":
    unittest.main()
