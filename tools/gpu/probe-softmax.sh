#!/usr/bin/env bash
# Investigation run on the GPU machine (not part of CI): builds, reruns the
# softmax/norm/cross-entropy GPU tests, times every softmax point of the
# large variants (tests/kernels/gpu/check_softmax.py --bench, with a
# side-by-side template experiment), then the ops benchmark. Logs to $OUT.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT=$OUT tools/gpu/run-h200.sh build > $OUT/run.log 2>&1; tail -2 $OUT/run.log
export LD_LIBRARY_PATH=$ROOT/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
B=build-gpu/bin
timeout 150 $B/gpu_tests --gtest_filter='SoftmaxGpuTest.*:SoftmaxCudaOverrideTest.*:PlantedNormKernelsTest.*' > $OUT/gpu1.log 2>&1
grep -E "^\[  FAILED|PASSED|FAILED TEST|faulted" $OUT/gpu1.log | head
[ -x $B/cross_entropy_gpu_tests ] && timeout 120 $B/cross_entropy_gpu_tests > $OUT/gpu-ce.log 2>&1; grep -E "^\[  FAILED|PASSED|FAILED TEST" $OUT/gpu-ce.log | head
mkdir -p /tmp/cub && $B/dump_softmax_cubins /tmp/cub sm_90a soft=-DHK_BF16_SOFT_CVT > $OUT/dump.log 2>&1; tail -1 $OUT/dump.log
timeout 150 python3 tests/kernels/gpu/check_softmax.py /tmp/cub --no-check --bench --report $OUT/check-report.json > $OUT/check.log 2>&1; echo "check rc=$?"
OUT=$OUT timeout 280 tools/gpu/run-h200.sh ops > $OUT/ops-run.log 2>&1; tail -14 $OUT/ops-run.log
