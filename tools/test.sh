#!/usr/bin/env bash
# The test command: set up (tools/setup.sh), then run every test with ctest.
# GPU tests (label `gpu`) skip themselves without a CUDA device.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/tools/setup.sh"
BUILD="${HOTKERNEL_BUILD_DIR:-$ROOT/build}"
cd "$BUILD"
ctest --output-on-failure -j "${HOTKERNEL_TEST_JOBS:-2}" --timeout 600 "$@"
"$ROOT/tools/fuzz.sh"  # fuzz: the libFuzzer targets of tests/fuzz, 15 s each (tests/fuzz/README.md)
