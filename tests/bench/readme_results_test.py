#!/usr/bin/env python3
"""readme_results.ops_rows on synthetic ops_bench documents (no GPU, no torch): every measured case once, in the
order first seen, and a case measured in several documents with the newest document's row."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import readme_results  # noqa: E402


def row(op, dtype, shape, speedup):
    ratio = {"median": speedup, "low": speedup, "high": speedup}
    return {"op": op, "dtype": dtype, "shape": shape, "speedupVsEager": ratio, "decision": "kernel"}


def doc(date, *rows):
    return ("bench/results/x.json", {"date": date, "results": list(rows)})


class OpsRowsTest(unittest.TestCase):
    def test_given_a_case_in_an_older_and_a_newer_document_when_listed_then_the_newer_row_in_the_first_place(self):
        older = doc("2026-12-02T16:03:48Z", row("amin", "bfloat16", [4096, 32000], 1.5),
                    row("softmax", "float32", [4096, 400000], 1.51))
        newer = doc("2026-12-06T08:40:00Z", row("softmax", "float32", [4096, 400000], 1.62),
                    row("log_softmax", "float32", [4096, 400000], 1.64))
        rows = readme_results.ops_rows([older, newer])
        self.assertEqual([(r["op"], r["speedupVsEager"]["median"]) for r in rows],
                         [("amin", 1.5), ("softmax", 1.62), ("log_softmax", 1.64)])

    def test_given_an_older_document_listed_last_when_listed_then_the_newer_row_stays(self):
        newer = doc("2026-12-06T08:40:00Z", row("softmax", "float32", [4096, 400000], 1.62))
        older = doc("2026-12-02T16:03:48Z", row("softmax", "float32", [4096, 400000], 1.51))
        rows = readme_results.ops_rows([newer, older])
        self.assertEqual([r["speedupVsEager"]["median"] for r in rows], [1.62])

    def test_given_the_same_op_at_other_shapes_or_dtypes_when_listed_then_each_is_its_own_case(self):
        rows = readme_results.ops_rows([doc("2026-12-06T08:40:00Z", row("softmax", "float32", [4096, 32000], 1.7),
                                            row("softmax", "bfloat16", [4096, 32000], 2.3),
                                            row("softmax", "float32", [4096, 400000], 1.6),
                                            {"op": "softmax", "dtype": "float32", "shape": [1, 2]})])  # not measured
        self.assertEqual(len(rows), 3)


if __name__ == "__main__":
    unittest.main()
