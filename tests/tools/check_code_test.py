#!/usr/bin/env python3
"""tools/check_code.py's layering rules on made-up files: each rule finds what it forbids, and only that."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import check_code  # noqa: E402


class VariableTest(unittest.TestCase):
    HEADER = "// | HOTKERNEL_A | 1 | 0 .. 2 | a |\n// | HOTKERNEL_B_MS | 5 | 1 .. 9 | b |\n"

    def test_given_every_variable_shown_and_documented_when_checked_then_nothing_found(self):
        doctor = '{"HOTKERNEL_A", a}, {"HOTKERNEL_B_MS", b},'
        readme = "| `HOTKERNEL_A` | ... |\n| `HOTKERNEL_B_MS` | ... |"
        self.assertEqual(check_code.variable_findings(self.HEADER, doctor, readme), [])

    def test_given_a_variable_missing_from_doctor_and_the_readme_when_checked_then_each_found(self):
        found = check_code.variable_findings(self.HEADER, '{"HOTKERNEL_A", a},', "| `HOTKERNEL_A` |")
        self.assertEqual(len(found), 2)
        self.assertTrue(all("HOTKERNEL_B_MS" in f for f in found))
        self.assertIn("doctor", found[0])
        self.assertIn("README", found[1])


class LayeringTest(unittest.TestCase):
    def test_given_serving_code_when_it_includes_an_optimizer_header_then_found(self):
        found = check_code.layering_findings("interpose/serving/X.cpp", ['#include "hotkernel/optimizer/Search.h"'])
        self.assertEqual(len(found), 1)
        self.assertIn("above its layer", found[0])

    def test_given_serving_code_when_it_includes_runtime_and_kernels_then_nothing_found(self):
        lines = ['#include "hotkernel/runtime/IdleGate.h"', '#include "hotkernel/kernels/FamilyDescriptor.h"',
                 '#include "OverrideState.h"']
        self.assertEqual(check_code.layering_findings("interpose/serving/X.cpp", lines), [])

    def test_given_the_engine_when_it_includes_the_optimizer_then_nothing_found(self):
        lines = ['#include "hotkernel/optimizer/FamilyTuning.h"']
        self.assertEqual(check_code.layering_findings("interpose/engine/Engine.cpp", lines), [])

    def test_given_runtime_or_kernels_when_they_include_upwards_then_found(self):
        self.assertEqual(len(check_code.layering_findings("runtime/src/A.cpp", ['#include "hotkernel/kernels/DType.h"'])), 1)
        self.assertEqual(len(check_code.layering_findings("kernels/src/A.cpp", ['#include "hotkernel/optimizer/A.h"'])), 1)

    def test_given_a_benchmark_when_it_includes_a_private_header_then_found(self):
        found = check_code.layering_findings("bench/A.cpp", ['#include "SoftmaxOverride.h"'])
        self.assertEqual(len(found), 1)
        self.assertIn("private header", found[0])
        self.assertEqual(check_code.layering_findings("bench/A.cpp", ['#include "hotkernel/interpose/ServedOps.h"']), [])

    def test_given_a_long_production_file_when_checked_then_found_and_a_long_test_is_not(self):
        lines = ["int x;"] * 502
        self.assertEqual(len(check_code.layering_findings("optimizer/src/Long.cpp", lines)), 1)
        self.assertEqual(check_code.layering_findings("tests/optimizer/LongTest.cpp", lines), [])

    def test_given_library_code_when_it_reads_the_environment_then_found_and_config_is_not(self):
        line = ['  const char* v = std::getenv("HOTKERNEL_X");']
        found = check_code.layering_findings("optimizer/agent/A.cpp", line)
        self.assertEqual(len(found), 1)
        self.assertIn("outside Config", found[0])
        self.assertEqual(check_code.layering_findings("runtime/src/Config.cpp", line), [])
        self.assertEqual(check_code.layering_findings("interpose/preload/Preload.c", ['getenv("HOTKERNEL");']), [])
        self.assertEqual(check_code.layering_findings("optimizer/agent/A.cpp", ['// std::getenv("X") is not read']), [])
        self.assertEqual(check_code.layering_findings("optimizer/agent/A.cpp", ['std::getenv("PATH");']), [])

    def test_given_filesystem_when_production_includes_it_or_any_file_calls_remove_all_then_found(self):
        self.assertEqual(len(check_code.layering_findings("cache/src/A.cpp", ["#include <filesystem>"])), 1)
        self.assertEqual(check_code.layering_findings("tests/cache/ATest.cpp", ["#include <filesystem>"]), [])
        self.assertEqual(len(check_code.layering_findings("tests/cache/ATest.cpp", ["  fs::remove_all(dir, ec);"])), 1)
        self.assertEqual(len(check_code.layering_findings("bench/a.cpp", ["std::filesystem::remove_all(d);"])), 1)
        self.assertEqual(check_code.layering_findings("tests/a.cpp", ["removeTree(d);  // not fs::remove_all"]), [])


if __name__ == "__main__":
    unittest.main()
