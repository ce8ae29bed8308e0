#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (one per parser; README.md there):
# installs clang if missing, configures and builds the fuzz build directory
# (clang, ASan + UBSan, ccache; idempotent and quick once built), then runs
# every target over its seed corpus for a bounded time. Exits 1 if any target
# crashes, leaks, hits undefined behaviour or breaks an invariant.
#
#   tools/fuzz.sh                    short run: 15 s a target (what tools/test.sh runs)
#   tools/fuzz.sh --long 3600        long run: 3600 s a target
#   tools/fuzz.sh --only fuzz_profile [--long 600]
#
# Environment: HOTKERNEL_FUZZ_BUILD_DIR (default build-fuzz), HOTKERNEL_FUZZ_SECONDS
# (short run, per target), HOTKERNEL_FUZZ_JOBS (targets run at once, default 2).
# Prints one line per target and a last line "fuzz: N passed, M failed".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HOTKERNEL_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_EACH="${HOTKERNEL_FUZZ_SECONDS:-15}"
JOBS="${HOTKERNEL_FUZZ_JOBS:-2}"
ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --long) SECONDS_EACH="${2:?--long needs seconds}"; shift 2 ;;
    --only) ONLY="${2:?--only needs a target name}"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

# clang (libFuzzer and the sanitizer runtimes come with Debian's clang package).
if ! command -v clang++ >/dev/null 2>&1; then
  SUDO=""; [[ "$(id -u)" != 0 ]] && SUDO="sudo"
  echo "fuzz: installing clang"
  $SUDO apt-get install -y -qq clang >/dev/null 2>&1 || {
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq clang >/dev/null
  }
fi

# Configure once (the cache remembers clang), then build only the fuzz targets
# and the libraries they link (Note [Fuzz build] in CMakeLists.txt).
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  LAUNCHER=()
  if command -v ccache >/dev/null 2>&1; then
    LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DHOTKERNEL_ENABLE_FUZZ=ON -DHOTKERNEL_ENABLE_TORCH=OFF \
    -DHOTKERNEL_ENABLE_BENCH=OFF -DHOTKERNEL_ENABLE_TESTS=OFF "${LAUNCHER[@]}" >/dev/null
fi
nice -n 10 cmake --build "$BUILD" -j "${HOTKERNEL_BUILD_JOBS:-2}" --target hotkernel_fuzz >"$BUILD/fuzz-build.log" 2>&1 || {
  tail -n 40 "$BUILD/fuzz-build.log"; echo "fuzz: build failed (log: $BUILD/fuzz-build.log)"; exit 1
}

SEEDS="$ROOT/tests/fuzz/corpus"
TARGETS=()
for dir in "$SEEDS"/*/; do
  t="$(basename "$dir")"
  [[ -z "$ONLY" || "$t" == "$ONLY" ]] && TARGETS+=("$t")
done
[[ ${#TARGETS[@]} -gt 0 ]] || { echo "fuzz: no target named '$ONLY'"; exit 2; }

# Inputs libFuzzer finds go to build-fuzz/fuzz-corpus/<target> (kept between
# runs, so a later run starts from them); the checked-in seeds are only read.
# Crashing inputs land in build-fuzz/fuzz-artifacts.
mkdir -p "$BUILD/fuzz-logs" "$BUILD/fuzz-artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
runOne() {
  local t="$1" log="$BUILD/fuzz-logs/$1.log"
  mkdir -p "$BUILD/fuzz-corpus/$t"
  rm -f "$BUILD/fuzz-artifacts/$t-"*
  if "$BUILD/bin/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict="$ROOT/tests/fuzz/fuzz.dict" \
      -artifact_prefix="$BUILD/fuzz-artifacts/$t-" "$BUILD/fuzz-corpus/$t" "$SEEDS/$t" >"$log" 2>&1; then
    local runs corpus
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    corpus="$(ls "$BUILD/fuzz-corpus/$t" | wc -l)"
    echo "$t: ok, ${runs:-?} runs in ${SECONDS_EACH} s, $corpus inputs found so far"
  else
    echo "$t: FAILED (log $log; input $(ls "$BUILD/fuzz-artifacts/$t-"* 2>/dev/null | head -n 1))"
    grep -E "ERROR: |runtime error|fuzz invariant failed|SUMMARY" "$log" | head -n 5 | sed 's/^/    /'
    return 1
  fi
}

passed=0 failed=0 running=0
RESULTS="$(mktemp -d)"
trap 'rm -rf "$RESULTS"' EXIT
for t in "${TARGETS[@]}"; do
  ( if runOne "$t" >"$RESULTS/$t"; then touch "$RESULTS/$t.ok"; fi ) &
  running=$((running + 1))
  if [[ $running -ge $JOBS ]]; then wait -n || true; running=$((running - 1)); fi
done
wait || true
for t in "${TARGETS[@]}"; do
  cat "$RESULTS/$t"
  if [[ -f "$RESULTS/$t.ok" ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
