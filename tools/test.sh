#!/usr/bin/env bash
# The test command: set up (tools/setup.sh), then run every test with ctest.
# GPU tests (label `gpu`) skip themselves without a CUDA device.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/tools/setup.sh"
BUILD="${HOTKERNEL_BUILD_DIR:-$ROOT/build}"
# The compile tests' NVRTC results kept between runs (Note [Compile results cached across test runs] in
# tests/kernels/CompileCache.h): entries not written for 14 days go.
NVCACHE="${HOTKERNEL_TEST_NVRTC_CACHE-${HOME:-}/.cache/hotkernel-dev/nvrtc-test-cache}"
if [ -n "$NVCACHE" ] && [ "$NVCACHE" != 0 ] && [ -d "$NVCACHE" ]; then
  find "$NVCACHE" -type f -mtime +14 -delete 2>/dev/null || true
fi
cd "$BUILD"
ctest --output-on-failure -j "${HOTKERNEL_TEST_JOBS:-2}" --timeout 600 "$@"
"$ROOT/tools/fuzz.sh"  # fuzz: the libFuzzer targets of tests/fuzz, 15 s each (tests/fuzz/README.md)
