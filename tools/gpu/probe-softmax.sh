#!/usr/bin/env bash
# Investigation run on the GPU machine (not part of CI): builds, reruns the
# softmax/norm/cross-entropy GPU tests, checks and times softmax points
# (tests/kernels/gpu/check_softmax.py on the cubins of dump_softmax_cubins,
# with side-by-side template experiments), then the ops benchmark. Logs to $OUT.
#   PROBE_TAGS    experiments for dump_softmax_cubins, e.g. "smem=-DHK_SMEM=1" (default none)
#   PROBE_POINTS  regex on the points' descriptions to check and time (default all)
#   PROBE_TESTS   0: skip the GPU test reruns (default 1)
#   PROBE_OPS     0: skip the ops benchmark (default 1)
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT=$OUT tools/gpu/run-h200.sh build > $OUT/run.log 2>&1; tail -2 $OUT/run.log
export LD_LIBRARY_PATH=$ROOT/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
B=build-gpu/bin
if [ "${PROBE_TESTS:-1}" != 0 ]; then
  timeout 150 $B/gpu_tests --gtest_filter='SoftmaxGpuTest.*:SoftmaxCudaOverrideTest.*:PlantedNormKernelsTest.*' > $OUT/gpu1.log 2>&1
  grep -E "^\[  FAILED|PASSED|FAILED TEST|faulted" $OUT/gpu1.log | head
  timeout 120 $B/cross_entropy_gpu_tests > $OUT/gpu-ce.log 2>&1; grep -E "^\[  FAILED|PASSED|FAILED TEST" $OUT/gpu-ce.log | head
fi
mkdir -p /tmp/cub && $B/dump_softmax_cubins /tmp/cub sm_90a ${PROBE_TAGS:-} > $OUT/dump.log 2>&1; tail -1 $OUT/dump.log
POINTS=(); [ -n "${PROBE_POINTS:-}" ] && POINTS=(--points "$PROBE_POINTS")
timeout 120 python3 tests/kernels/gpu/check_softmax.py /tmp/cub --quick --max-numel $((1 << 26)) "${POINTS[@]}" \
  --report $OUT/check-quick.json > $OUT/check-quick.log 2>&1; echo "quick check rc=$?"; tail -1 $OUT/check-quick.log
timeout 200 python3 tests/kernels/gpu/check_softmax.py /tmp/cub --no-check --bench "${POINTS[@]}" \
  --report $OUT/check-report.json > $OUT/check.log 2>&1; echo "bench rc=$?"
if [ "${PROBE_OPS:-1}" != 0 ]; then
  OUT=$OUT timeout 280 tools/gpu/run-h200.sh ops > $OUT/ops-run.log 2>&1; tail -14 $OUT/ops-run.log
fi
