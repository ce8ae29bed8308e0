#!/usr/bin/env bash
# The GPU machine's one call: build against that machine's torch, run every
# test (gpu-labelled included), the benchmarks and the demo; logs and JSON go
# to $OUT (default ./out).
#
# Everything written to $OUT is also packed into $OUT/000-all.tgz at the end (a device call returns only its
# first few files by name).
#
# The machine has no network: libraries it lacks (TBB, CLI11, SQLite, redis-server and
# OpenSSL headers) travel as Debian .deb files in .deps/debs (fetch them here
# with tools/gpu/fetch-debs.sh) and are extracted into .deps/root.
#
#   tools/gpu/run-h200.sh [all|build|test|gpu_bins|ops|models|fusion|fusion_engine|sdpa|fuzz_gpu|bench|overhead|warmup|demo|exit|fleet]...
# HOTKERNEL_CTEST_ARGS: extra ctest arguments for the test step (e.g. "-L gpu -R Fusion|Reduce": split on spaces, no quotes).
# HOTKERNEL_TEST_DEADLINE_S: the test step stops after this many seconds (its logs and junit still come back:
#   keep it under the device call's limit minus the build and what follows); default: no deadline.
# gpu_bins: the GPU test binaries a prebuilt folder carries (HOTKERNEL_GPU_BINS, default: every *_gpu_tests in its
#   bin/), run directly, one process a test as ctest runs them, each with its gtest XML and the binary's log in $OUT
#   (no ctest: a prebuilt folder has no build tree); HOTKERNEL_GPU_FILTER: a gtest filter for all of them.
# HOTKERNEL_MODELS: the models step's --models (default all: llama,gpt2-eager,gpt2-sdpa,bert).
# HOTKERNEL_MODELS_ARGS: extra model_bench.py arguments (e.g. "--fusion": the hotkernel arm fuses chains).
# HOTKERNEL_MODELS_TAG: the models step writes bench-models-TAG.{json,log} and its experiments log so (default no tag),
#   e.g. a second run with HOTKERNEL_FUSION_START=busy beside the first in one call.
# HOTKERNEL_FUSION_CASES: the fusion step's --cases (default fusion_bench.py's: the issue-20 chains);
# HOTKERNEL_FUSION_TOOL: its --tool (default the build's chain_kernel_tool, which a stand-in finds as $CHAIN_TOOL);
# HOTKERNEL_FUSION_ARGS: more fusion_bench.py arguments; HOTKERNEL_FUSION_OUT: its files' name in $OUT
# (default bench-fusion: bench-fusion.json and .log).
# HOTKERNEL_FUSION_ENGINE_ARGS: extra fusion_engine_bench.py arguments for the fusion_engine step
#   (e.g. "--cases rmsnorm:bfloat16:4096 --no-overhead").
# HOTKERNEL_FUZZ_GPU_PROGRAMS / _PROCS / _SEED / _PER_POOL / _DEADLINE_S: the fuzz_gpu step's programs in all
#   (default 100000), split over this many processes (default 4, seeds SEED..SEED+PROCS-1, default 1), programs
#   per learned pool (default 2000), and each process's time budget (default none: fusion_fuzz's --seconds);
#   HOTKERNEL_FUZZ_GPU_SHIM=1: under
#   the preloaded shim (HOTKERNEL=0: its command hook only; Note [The fuzz suite under the shim]).
# HOTKERNEL_PREBUILT_DIR: run the fuzz_gpu step from this prebuilt folder (bin/fusion_fuzz_gpu, bin/fusion_fuzz,
#   lib/libhotkernel_preload.so, built against the same torch: tools/gpu/prebuild.sh) instead of building (minutes of
#   device time saved).
# HOTKERNEL_OPS_CASES: the ops step's --cases: a preset of bench/ops_bench.py (norms, norms_long, cross_entropy, reductions,
#   reductions_dim, softmax_dim, softmax_400k, lm_heads, sdpa, group_norm, std_weight) or op:dtype:shape,... (default: ops_bench.py's default cases).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
STEPS=("$@"); [ ${#STEPS[@]} -gt 0 ] || STEPS=(all)
want() { for s in "${STEPS[@]}"; do [ "$s" = all ] || [ "$s" = "$1" ] && return 0; done; return 1; }
log() { echo "[run-h200 $(date +%T)] $*"; }

DEPS="$ROOT/.deps/root"
if [ -d "$ROOT/.deps/debs" ]; then
  mkdir -p "$DEPS"
  for d in "$ROOT"/.deps/debs/*.deb; do dpkg -x "$d" "$DEPS"; done
fi
export CPATH="$DEPS/usr/include/x86_64-linux-gnu:$DEPS/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$DEPS/usr/bin:$PATH"
# The Redis tests (label redis) and the fleet step look for /usr/bin/redis-server: the carried one, where the
# machine has none.
if [ ! -e /usr/bin/redis-server ] && [ -x "$DEPS/usr/bin/redis-check-rdb" ]; then
  ln -s "$DEPS/usr/bin/redis-check-rdb" /usr/bin/redis-server 2>/dev/null || true
fi
export HOTKERNEL_PYTHON="${HOTKERNEL_PYTHON:-python3}"
export HOTKERNEL_PREFIX_PATH="$DEPS/usr"
export HOTKERNEL_BUILD_DIR="${HOTKERNEL_BUILD_DIR:-$ROOT/build-gpu}"
BUILD="$HOTKERNEL_BUILD_DIR"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$HOTKERNEL_PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

if [ -n "${HOTKERNEL_PREBUILT_DIR:-}" ]; then
  # A build folder made on a machine with the same torch (bin/ and lib/ of what the steps run): no build, the
  # libraries from this machine's torch. The fuzz_gpu step has run from one on the H200; models (the shim, the
  # library, the CLI) and fusion (bin/chain_kernel_tool) need nothing else but have not run that way yet; the test
  # step needs the whole tree.
  BUILD="$(cd "$HOTKERNEL_PREBUILT_DIR" && pwd)"
  SITE="$("$HOTKERNEL_PYTHON" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
  export LD_LIBRARY_PATH="$SITE/torch/lib:$(ls -d "$SITE"/nvidia/*/lib 2>/dev/null | tr '\n' ':')/usr/local/cuda/lib64:$LD_LIBRARY_PATH"
  log "prebuilt: $BUILD (no build)"
elif want build || want test || want gpu_bins || want ops || want models || want fusion || want fusion_engine || want fuzz_gpu || want bench || want overhead || want warmup || want demo || want exit || want fleet; then
  log "build"
  HOTKERNEL_JOBS=16 "$ROOT/tools/setup.sh" >"$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
  log "build ok"
fi
rc=0
if want test; then
  log "ctest (all tests, gpu label included)"
  DEADLINE=()
  [ -n "${HOTKERNEL_TEST_DEADLINE_S:-}" ] && DEADLINE=(timeout --signal=INT "$HOTKERNEL_TEST_DEADLINE_S")
  # shellcheck disable=SC2086  # HOTKERNEL_CTEST_ARGS is a list of arguments
  (cd "$BUILD" && "${DEADLINE[@]}" ctest --output-on-failure -j 4 --timeout 900 --output-junit "$OUT/ctest-junit.xml" \
    ${HOTKERNEL_CTEST_ARGS:-}) >"$OUT/ctest.log" 2>&1
  status=$?
  [ $status -eq 0 ] || rc=1
  tail -15 "$OUT/ctest.log"
  if [ $status -eq 124 ]; then
    # The deadline stopped ctest: name the tests it cut (started, never reported).
    grep -oE 'Start +[0-9]+: [^ ]+' "$OUT/ctest.log" | awk '{print $3}' | while read -r t; do
      grep -qE "Test +#[0-9]+: $t " "$OUT/ctest.log" || echo "cut by HOTKERNEL_TEST_DEADLINE_S: $t"
    done | tee -a "$OUT/ctest.log"
  fi
  (cd "$BUILD" && ctest -L gpu -N) | tail -1
fi
if printf '%s\n' "${STEPS[@]}" | grep -qx gpu_bins; then  # named only: `all`'s test step runs them through ctest
  # Each test in a process of its own, as ctest runs them (a test must not pass on what an earlier one left).
  BINS="${HOTKERNEL_GPU_BINS:-$(cd "$BUILD/bin" && ls -1 ./*_gpu_tests 2>/dev/null | sed 's|^\./||' | tr '\n' ' ')}"
  for t in $BINS; do
    [ -x "$BUILD/bin/$t" ] || { log "GPU test binary: $t missing"; rc=1; continue; }
    log "GPU test binary: $t (one process a test)"
    for name in $("$BUILD/bin/$t" --gtest_list_tests --gtest_filter="${HOTKERNEL_GPU_FILTER:-*}" |
                  awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
      "$BUILD/bin/$t" --gtest_filter="$name" --gtest_output="xml:$OUT/$t-$name.xml" >>"$OUT/$t.log" 2>&1 || rc=1
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK \]" "$OUT/$t.log" | tail -1
    done
  done
fi
if want ops; then
  log "bench: ops (softmax, log_softmax) vs eager and torch.compile, side by side"
  OPSCACHE="$(mktemp -d)/cache"
  # The reductions' and the padded GEMMs' presets name only their own ops, attention's its op (not in the default) (unless the
  # caller set HOTKERNEL_OPS); softmax_dim and softmax_400k need only the default's _softmax and _log_softmax.
  OPS_LIST="${HOTKERNEL_OPS:-}"
  case "${HOTKERNEL_OPS_CASES:-}" in
    reductions|reductions_dim) OPS_LIST="${OPS_LIST:-sum.dim_IntList,mean.dim,amax,argmax,amin,argmin,max.dim,min.dim}" ;;
    lm_heads) OPS_LIST="${OPS_LIST:-mm,addmm}" ;;
    sdpa) OPS_LIST="${OPS_LIST:-scaled_dot_product_attention}" ;;
    group_norm) OPS_LIST="${OPS_LIST:-native_group_norm}" ;;
    std_weight) OPS_LIST="${OPS_LIST:-native_batch_norm}" ;;
  esac
  env ${OPS_LIST:+HOTKERNEL_OPS="$OPS_LIST"} HOTKERNEL_CACHE_DIR="$OPSCACHE" HOTKERNEL_SAMPLE=1 HOTKERNEL_LOG_LEVEL=info \
    LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so" \
    "$HOTKERNEL_PYTHON" "$ROOT/bench/ops_bench.py" ${HOTKERNEL_OPS_CASES:+--cases "$HOTKERNEL_OPS_CASES"} \
    --out "$OUT/bench-ops.json" >"$OUT/bench-ops.log" 2>&1 || rc=1
  "$BUILD/bin/hotkernel" log --dir "$OPSCACHE" >"$OUT/bench-ops-experiments.txt" 2>&1
  grep -v "^\[hotkernel" "$OUT/bench-ops.log" | tail -30
fi
if want models; then
  log "bench: HF transformers models (random weights) under the preload vs eager and torch.compile, side by side"
  MODELSCACHE="$(mktemp -d)/cache"
  MODELS_OUT="$OUT/bench-models${HOTKERNEL_MODELS_TAG:+-$HOTKERNEL_MODELS_TAG}"
  # The recorder's default sampling (HOTKERNEL_SAMPLE unset, unless the caller set it): at 1 it records every
  # op's inputs, host time the hotkernel arm of a host-bound step pays and torch.compile's does not.
  HOTKERNEL_CACHE_DIR="$MODELSCACHE" HOTKERNEL_LOG_LEVEL=info \
    LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so" \
    "$HOTKERNEL_PYTHON" "$ROOT/bench/model_bench.py" ${HOTKERNEL_MODELS:+--models "$HOTKERNEL_MODELS"} ${HOTKERNEL_MODELS_ARGS:-} \
    --out "$MODELS_OUT.json" >"$MODELS_OUT.log" 2>&1 || rc=1
  "$BUILD/bin/hotkernel" log --dir "$MODELSCACHE" >"$MODELS_OUT-experiments.txt" 2>&1
  grep -v "^\[hotkernel" "$MODELS_OUT.log" | tail -80
fi
if want fusion; then
  log "bench: fused chain kernels (hotkernel::chain through the driver API) vs eager and torch.compile, side by side"
  FUSION_OUT="$OUT/${HOTKERNEL_FUSION_OUT:-bench-fusion}"
  CHAIN_TOOL="$BUILD/bin/chain_kernel_tool" "$HOTKERNEL_PYTHON" "$ROOT/bench/fusion_bench.py" \
    --tool "${HOTKERNEL_FUSION_TOOL:-$BUILD/bin/chain_kernel_tool}" ${HOTKERNEL_FUSION_ARGS:-} \
    ${HOTKERNEL_FUSION_CASES:+--cases "$HOTKERNEL_FUSION_CASES"} \
    --out "$FUSION_OUT.json" >"$FUSION_OUT.log" 2>&1 || rc=1
  tail -40 "$FUSION_OUT.log"
fi
if want sdpa; then
  log "bench: each SDPA backend forced against PyTorch's own choice on the model benchmark's attention shapes"
  "$HOTKERNEL_PYTHON" "$ROOT/bench/sdpa_bench.py" --out "$OUT/bench-sdpa.json" >"$OUT/bench-sdpa.log" 2>&1 || rc=1
  tail -8 "$OUT/bench-sdpa.log"
fi
if want fusion_engine; then
  log "bench: the fusion engine (HOTKERNEL_FUSION=1) on HF-style blocks vs eager and torch.compile; its host cost per op"
  # The script starts its own children under the preload (fresh caches); one JSON and one log come back.
  HOTKERNEL_LOG_LEVEL=info "$HOTKERNEL_PYTHON" "$ROOT/bench/fusion_engine_bench.py" \
    --preload "$BUILD/lib/libhotkernel_preload.so" ${HOTKERNEL_FUSION_ENGINE_ARGS:-} \
    --out "$OUT/bench-fusion-engine.json" >"$OUT/bench-fusion-engine.log" 2>&1 || rc=1
  grep -v "^\[hotkernel" "$OUT/bench-fusion-engine.log" | tail -60
fi
if want fuzz_gpu; then
  # Note [The fuzz suite on a GPU]: random programs with real fused kernels against eager, in parallel processes
  # (the GPU is mostly idle under one), merged into one report.
  N="${HOTKERNEL_FUZZ_GPU_PROGRAMS:-100000}"; P="${HOTKERNEL_FUZZ_GPU_PROCS:-4}"; S="${HOTKERNEL_FUZZ_GPU_SEED:-1}"
  log "fuzz: $N programs on the GPU with real fused kernels, $P processes"
  FZ="$(mktemp -d)"; parts=()
  # A deadline is the program's own --seconds (it stops between two programs and writes its report); the
  # timeout behind it (a minute later, SIGINT: the same clean stop) covers a pool still compiling.
  LIMIT=(); BUDGET=()
  if [ -n "${HOTKERNEL_FUZZ_GPU_DEADLINE_S:-}" ]; then
    LIMIT=(timeout --signal=INT $((HOTKERNEL_FUZZ_GPU_DEADLINE_S + 60)))
    BUDGET=(--seconds "$HOTKERNEL_FUZZ_GPU_DEADLINE_S")
  fi
  for ((i = 0; i < P; i++)); do
    parts+=("$FZ/part-$i.json")
    SHIM=(); [ "${HOTKERNEL_FUZZ_GPU_SHIM:-0}" = 1 ] && SHIM=(env HOTKERNEL=0 LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so")
    "${LIMIT[@]}" "${SHIM[@]}" "$BUILD/bin/fusion_fuzz_gpu" --seed $((S + i)) --programs $(((N + P - 1) / P)) \
      ${SHIM[0]:+--shim} "${BUDGET[@]}" --programs-per-pool "${HOTKERNEL_FUZZ_GPU_PER_POOL:-2000}" --json "$FZ/part-$i.json" \
      >"$FZ/fuzz-gpu-$i.log" 2>&1 &
  done
  wait
  existing=(); for f in "${parts[@]}"; do [ -s "$f" ] && existing+=("$f"); done
  if [ ${#existing[@]} -eq "$P" ]; then
    "$BUILD/bin/fusion_fuzz" --merge "${existing[@]}" --json "$OUT/fusion-fuzz-gpu.json" || rc=1
  else
    log "fuzz: only ${#existing[@]} of $P processes wrote a report"; rc=1
  fi
  # The device returns a handful of files: each process's report and log travel in one archive.
  tar czf "$OUT/fuzz-gpu-parts.tgz" -C "$FZ" . && log "fuzz: reports and logs in fuzz-gpu-parts.tgz"
  tail -n 3 "$FZ"/fuzz-gpu-*.log
fi
if want bench; then
  log "bench: softmax under the preload vs eager"
  CACHE="$(mktemp -d)/cache"
  HOTKERNEL_CACHE_DIR="$CACHE" HOTKERNEL_SAMPLE=1 HOTKERNEL_LOG_LEVEL=info \
    LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so" \
    "$BUILD/bin/softmax_preload_bench" --shapes 4096x32000,8192x128256 --dtype bfloat16 \
    --out "$OUT/bench-softmax-bf16.json" 2>&1 | tee "$OUT/bench.log" || rc=1
  "$BUILD/bin/hotkernel" cache ls --dir "$CACHE" >>"$OUT/bench.log" 2>&1
fi
if want bench; then
  log "bench: background optimizer yield latency"
  "$BUILD/bin/yield_latency_bench" --out "$OUT/bench-yield-latency.json" 2>&1 | tail -3 | tee -a "$OUT/bench.log" || rc=1
  log "bench: cold start (empty cache, new variant, swap within 60 s of idle time)"
  HOTKERNEL_CACHE_DIR="$(mktemp -d)/cache" LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so" \
    "$HOTKERNEL_PYTHON" "$ROOT/bench/cold_start.py" --out "$OUT/bench-cold-start.json" >>"$OUT/bench.log" 2>&1 || rc=1
  tail -25 "$OUT/bench.log"
fi
if want overhead; then
  log "bench: host cost per call of small ops: no preload, the preload's default ops (the reductions served), the default without the reductions"
  OC="$(mktemp -d)/cache"
  RUNS="$(mktemp -d)"  # the per-process JSON stay out of $OUT (the device tool returns few files): merged below
  NORED="_softmax,_log_softmax,_fused_rms_norm,native_layer_norm,cross_entropy_loss,mm,addmm"
  runs=()
  for round in 1 2; do
    for cfg in none default no-reductions; do
      f="$RUNS/overhead-$cfg-$round.json"; runs+=("$f")
      case $cfg in
        none) env "$HOTKERNEL_PYTHON" "$ROOT/bench/dispatch_overhead.py" --label none --out "$f" ;;
        default) HOTKERNEL_CACHE_DIR="$OC" HOTKERNEL_OPTIMIZE=0 LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so" \
          "$HOTKERNEL_PYTHON" "$ROOT/bench/dispatch_overhead.py" --label default --out "$f" ;;
        no-reductions) HOTKERNEL_CACHE_DIR="$OC" HOTKERNEL_OPTIMIZE=0 HOTKERNEL_OPS="$NORED" \
          LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so" \
          "$HOTKERNEL_PYTHON" "$ROOT/bench/dispatch_overhead.py" --label no-reductions --out "$f" ;;
      esac >>"$OUT/overhead.log" 2>&1 || rc=1
    done
  done
  "$HOTKERNEL_PYTHON" "$ROOT/bench/dispatch_overhead.py" --merge "${runs[@]}" --out "$OUT/bench-dispatch-overhead.json" \
    2>&1 | tee -a "$OUT/overhead.log" || rc=1
fi
if want warmup; then
  log "warm-up: record a profile of the example workload, then hotkernel warmup on it (twice: resume)"
  W="$(mktemp -d)"
  HOTKERNEL_OPTIMIZE=0 HOTKERNEL_PROFILE="$W/profile.json" HOTKERNEL_CACHE_DIR="$W/record-cache" \
    LD_PRELOAD="$BUILD/lib/libhotkernel_preload.so" \
    "$HOTKERNEL_PYTHON" "$ROOT/examples/softmax_inference.py" --seconds 5 >"$OUT/warmup.log" 2>&1 || rc=1
  cp "$W/profile.json" "$OUT/warmup-profile.json" 2>/dev/null
  "$BUILD/bin/hotkernel" warmup --profile "$W/profile.json" --dir "$W/cache" --budget 5m \
    --json "$OUT/bench-warmup.json" >>"$OUT/warmup.log" 2>&1 || rc=1
  "$BUILD/bin/hotkernel" warmup --profile "$W/profile.json" --dir "$W/cache" --budget 5m \
    >>"$OUT/warmup.log" 2>&1 || rc=1
  "$BUILD/bin/hotkernel" cache ls --dir "$W/cache" >>"$OUT/warmup.log" 2>&1
  cat "$OUT/warmup.log"
fi
if want exit; then
  log "exit stress: exits under the preload with the optimizer mid-job vs the same exits without it"
  "$HOTKERNEL_PYTHON" "$ROOT/bench/exit_stress.py" --device cuda --runs "${HOTKERNEL_EXIT_RUNS:-200}" --baseline 2 \
    --jobs "${HOTKERNEL_EXIT_JOBS:-10}" --preload "$BUILD/lib/libhotkernel_preload.so" \
    --out "$OUT/exit-stress.json" >"$OUT/exit-stress.log" 2>&1 || rc=1
  tail -8 "$OUT/exit-stress.log"
fi
if want fleet; then
  log "fleet: 4 processes under the preload share one redis-server; each variant tuned once, served by all"
  "$HOTKERNEL_PYTHON" "$ROOT/bench/fleet_bench.py" --procs 4 --preload "$BUILD/lib/libhotkernel_preload.so" \
    --out "$OUT/fleet.json" >"$OUT/fleet.log" 2>&1 || rc=1
  tail -12 "$OUT/fleet.log"
fi
if want demo; then
  log "demo"
  "$HOTKERNEL_PYTHON" "$ROOT/tools/demo.py" --build "$BUILD" 2>&1 | tee "$OUT/demo.log" || rc=1
fi
# The device call returns only its first few files (by name): everything also travels in 000-all.tgz, first.
tar czf "$OUT/000-all.tgz.part" -C "$OUT" --exclude=000-all.tgz --exclude=000-all.tgz.part . \
  && mv "$OUT/000-all.tgz.part" "$OUT/000-all.tgz"
log "done rc=$rc"
exit $rc
