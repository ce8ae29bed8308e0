#!/usr/bin/env bash
# One device call that looks for the GPU fuzz's unwritten reads (Note [Stale memory in the GPU fuzz]):
# the same seeds with the caching allocator poisoned, replays of their first failures with --trace and the
# engine's debug log, and (HOTKERNEL_DIAG_TESTS=1) the gpu-labelled tests alongside.
#   OUT=... tools/gpu/fuzz-gpu-diagnose.sh [seed...]   (default seeds 401 402)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT/diag"
SEEDS=("$@"); [ ${#SEEDS[@]} -gt 0 ] || SEEDS=(401 402)
PROGRAMS="${HOTKERNEL_DIAG_PROGRAMS:-2000}"
POISON="${HOTKERNEL_DIAG_POISON_MIB:-1024}"
"$ROOT/tools/gpu/run-h200.sh" build | tail -3
B="${HOTKERNEL_BUILD_DIR:-$ROOT/build-gpu}/bin/fusion_fuzz_gpu"
D="$OUT/diag"
if [ "${HOTKERNEL_DIAG_TESTS:-0}" = 1 ]; then
  (cd "${HOTKERNEL_BUILD_DIR:-$ROOT/build-gpu}" && timeout --signal=INT "${HOTKERNEL_DIAG_TESTS_S:-300}" \
    ctest -L gpu --output-on-failure -j 3 --timeout 300 ${HOTKERNEL_CTEST_ARGS:-}) >"$D/ctest-gpu.log" 2>&1 &
fi
# HOTKERNEL_DIAG_REPLAY="401:2774 ...": replays of failures seen without the poison, traced, as they were.
for spec in ${HOTKERNEL_DIAG_REPLAY:-}; do
  HOTKERNEL_LOG_LEVEL=debug timeout 120 "$B" --seed "${spec%%:*}" --programs-per-pool 1000 \
    --first-program "${spec##*:}" --programs 1 --trace >"$D/trace-plain-${spec%%:*}-${spec##*:}.log" 2>&1 &
done
PIDS=()
for s in "${SEEDS[@]}"; do
  timeout 200 "$B" --seed "$s" --programs "$PROGRAMS" --programs-per-pool 1000 --poison-allocator "$POISON" \
    --json "$D/poison-$s.json" >"$D/poison-$s.log" 2>&1 &
  PIDS+=($!)
done
wait "${PIDS[@]}"
for s in "${SEEDS[@]}"; do
  echo "== poisoned seed $s"; tail -6 "$D/poison-$s.log"
  python3 - "$D/poison-$s.json" <<'PY' >"$D/replay-$s.txt"
import json, re, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
seen = []
for f in r.get("failures", []):
    m = re.match(r"seed (\d+) pool \d+ program (\d+)", f)
    if m and m.group(2) not in seen:
        seen.append(m.group(2))
print("\n".join(seen[:3]))
PY
  while read -r p; do
    [ -n "$p" ] || continue
    HOTKERNEL_LOG_LEVEL=debug timeout 90 "$B" --seed "$s" --programs-per-pool 1000 --first-program "$p" --programs 1 \
      --poison-allocator "$POISON" --trace >"$D/trace-$s-$p.log" 2>&1
    echo "replay seed $s program $p: rc $? $(grep -c . "$D/trace-$s-$p.log") lines; $(grep -E '^  seed' "$D/trace-$s-$p.log" | head -3)"
  done <"$D/replay-$s.txt"
done
wait
[ -f "$D/ctest-gpu.log" ] && tail -25 "$D/ctest-gpu.log" && grep -E "\*\*\*Failed|FAIL" "$D/ctest-gpu.log" | head -20
tar czf "$OUT/000-diag.tgz" -C "$OUT" diag
