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
# HOTKERNEL_DIAG_PREBUILT=<fusion_fuzz_gpu built on a machine with the same torch>: no build (minutes saved);
# its libraries come from this machine's torch and the carried .deb files.
if [ -n "${HOTKERNEL_DIAG_PREBUILT:-}" ]; then
  B="$HOTKERNEL_DIAG_PREBUILT"
  DEPS="$ROOT/.deps/root"; mkdir -p "$DEPS"
  for d in "$ROOT"/.deps/debs/*.deb; do dpkg -x "$d" "$DEPS"; done
  SITE="$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
  LIBS="$SITE/torch/lib:$(ls -d "$SITE"/nvidia/*/lib "$SITE"/nvidia/cu13/lib 2>/dev/null | tr '\n' ':')"
  export LD_LIBRARY_PATH="$LIBS$DEPS/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ldd "$B" | grep -q "not found"; then ldd "$B" | grep "not found"; echo "prebuilt binary lacks libraries"; exit 1; fi
  [ "${HOTKERNEL_DIAG_TESTS:-0}" = 1 ] && { echo "HOTKERNEL_DIAG_TESTS needs the build: off"; HOTKERNEL_DIAG_TESTS=0; }
else
  "$ROOT/tools/gpu/run-h200.sh" build | tail -3
  B="${HOTKERNEL_BUILD_DIR:-$ROOT/build-gpu}/bin/fusion_fuzz_gpu"
fi
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
# HOTKERNEL_DIAG_PLAIN_SEEDS="401 ...": those seeds again, 5000 programs, no poison: do the failures recur?
for s in ${HOTKERNEL_DIAG_PLAIN_SEEDS:-}; do
  timeout 200 "$B" --seed "$s" --programs 5000 --programs-per-pool 1000 --json "$D/plain-$s.json" \
    >"$D/plain-$s.log" 2>&1 &
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
for s in ${HOTKERNEL_DIAG_PLAIN_SEEDS:-}; do echo "== plain seed $s"; tail -8 "$D/plain-$s.log"; done
for f in "$D"/trace-plain-*.log; do [ -f "$f" ] && echo "== $f: $(grep -E '^  seed|programs in' "$f" | head -3)"; done
[ -f "$D/ctest-gpu.log" ] && tail -25 "$D/ctest-gpu.log" && grep -E "\*\*\*Failed|FAIL" "$D/ctest-gpu.log" | head -20
tar czf "$OUT/000-diag.tgz" -C "$OUT" diag
