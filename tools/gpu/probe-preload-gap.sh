#!/usr/bin/env bash
# Investigation run on the GPU machine (not part of CI): does the preloaded
# process itself slow the GPU time of a call? The same cubins (dumped on the
# CPU machine into .deps/cub by dump_softmax_cubins, carried) and ATen's
# softmax are timed by tests/kernels/gpu/check_softmax.py (the project's
# method, interleaved) in four processes back to back: plain, under the
# preload with an empty cache and no optimizer (HOTKERNEL_OPTIMIZE=0, every
# call recorded: HOTKERNEL_SAMPLE=1, as ops_bench.py runs), plain again, and
# under the preload with the default sampling. Under the preload ATen's call
# goes through the trampoline (no plan: the original kernel); the direct
# launches do not. Reports and logs to $OUT.
#   PROBE_POINTS  regex on the points' descriptions (default: the decode cluster points)
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
OUT=$OUT tools/gpu/run-h200.sh build > "$OUT/run.log" 2>&1 || { tail -20 "$OUT/run.log"; exit 1; }
rm -f "$OUT/build.log"
export LD_LIBRARY_PATH=$ROOT/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
POINTS="${PROBE_POINTS:-^threads=256 vec=8 items=(4|8) cluster=(8|16) \(register}"
PRE="$ROOT/build-gpu/lib/libhotkernel_preload.so"
run() {  # label, env...
  local label=$1; shift
  env "$@" timeout 120 python3 tests/kernels/gpu/check_softmax.py .deps/cub --no-check --bench --points "$POINTS" \
    --report "$OUT/gap-$label.json" > "$OUT/gap-$label.log" 2>&1
  local rc=$?
  echo "== $label rc=$rc"; grep "^bench" "$OUT/gap-$label.log"
  [ $rc = 0 ] && rm -f "$OUT/gap-$label.log"  # the device tool returns few files: the JSON holds the numbers
}
run plain1
run preload1 LD_PRELOAD="$PRE" HOTKERNEL_CACHE_DIR="$(mktemp -d)/c" HOTKERNEL_OPTIMIZE=0 HOTKERNEL_SAMPLE=1
run plain2
run preload2 LD_PRELOAD="$PRE" HOTKERNEL_CACHE_DIR="$(mktemp -d)/c" HOTKERNEL_OPTIMIZE=0
