#!/usr/bin/env bash
# Investigation run on the GPU machine (not part of CI): compiles
# bench/experiments/ce-decode/ce_decode_probe.cu with nvcc beside the production
# cross_entropy template at the configurations below, runs it, and writes
# ce-decode-probe.json and its log to $OUT. Needs no project build.
#   CE_PROBE_REPS       repetitions per variant (default 41)
#   CE_PROBE_NVCC_ONLY  1: compile only (the CPU machine has nvcc too)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
NVCC="${NVCC:-/usr/local/cuda/bin/nvcc}"
TMP="$(mktemp -d)"
FLAGS=(-O3 -std=c++17 -arch=sm_90a -DNDEBUG -I "$ROOT/kernels/common" -I "$ROOT/kernels/cross_entropy"
  -I "$ROOT/kernels/softmax" -I "$TMP")
# rows cluster threads unroll reduction(0 none, 1 mean)
# (CE_PROBE_CONFIGS="rows cluster threads unroll reduction;..." replaces the list)
CONFIGS=(
  "32 16 256 2 1"
  "32 16 256 2 0"
  "32 8 256 4 1"
  "32 16 128 4 1"
  "1 16 512 2 1"
)
if [ -n "${CE_PROBE_CONFIGS:-}" ]; then IFS=';' read -r -a CONFIGS <<<"$CE_PROBE_CONFIGS"; fi
: >"$TMP/ce_prod_list.h"
: >"$TMP/ce_prod_add.h"
OBJS=()
for spec in cur ${CE_PROBE_CE_TREES:-}; do
  tree="${spec%%=*}"
  INC=()
  [ "$spec" != cur ] && INC=(-I "$(cd "${spec#*=}" && pwd)")
  for c in "${CONFIGS[@]}"; do
    read -r R C T U RED <<<"$c"
    REDNAME=$([ "$RED" = 0 ] && echo none || echo mean)
    NAME="p${tree}${R}_c${C}_${T}_u${U}_${REDNAME}"
    echo "PROD($NAME)" >>"$TMP/ce_prod_list.h"
    echo "ADD_PROD($R, $C, $T, $U, $REDNAME, \"$tree\", $NAME)" >>"$TMP/ce_prod_add.h"
    "$NVCC" "${INC[@]}" "${FLAGS[@]}" -DHK_DTYPE=2 -DHK_VEC=8 -DHK_ROWS=1 -DHK_THREADS=$T -DHK_UNROLL=$U -DHK_CLUSTER=$C \
      -DHK_REDUCTION=$RED -Dhk_cross_entropy=k_$NAME -Dhk_reduce_losses=r_$NAME -Dhk_finish=f_$NAME -Dhk_finish_row=fr_$NAME \
      -DPROBE_LAUNCHER=$NAME -c "$ROOT/bench/experiments/ce-decode/ce_prod_launcher.cu" -o "$TMP/$NAME.o" &
    OBJS+=("$TMP/$NAME.o")
  done
done
# softmax: rows cluster threads items; each compiled from the tree and from
# every dir of CE_PROBE_TREES="name=dir ..." (copies of softmax_lastdim.cu and
# hk_prelude.cuh from other trees; CE_PROBE_CE_TREES the same for
# cross_entropy.cu): A/B in one run.
SM_CONFIGS=(
  "32 8 256 8"
  "32 16 128 8"
  "32 16 256 4"
  "1 16 256 4"
)
: >"$TMP/sm_prod_list.h"
: >"$TMP/sm_prod_add.h"
for spec in cur ${CE_PROBE_TREES:-}; do
  tree="${spec%%=*}"
  INC=()
  [ "$spec" != cur ] && INC=(-I "$(cd "${spec#*=}" && pwd)")
  for c in "${SM_CONFIGS[@]}"; do
    read -r R C T I <<<"$c"
    NAME="s${tree}${R}_c${C}_${T}_i${I}"
    echo "SMPROD($NAME)" >>"$TMP/sm_prod_list.h"
    echo "ADD_SMPROD($R, $C, $T, $I, \"$tree\", $NAME)" >>"$TMP/sm_prod_add.h"
    "$NVCC" "${INC[@]}" "${FLAGS[@]}" -DHK_DTYPE=2 -DHK_VEC=8 -DHK_ROWS=1 -DHK_THREADS=$T -DHK_ITEMS=$I -DHK_CLUSTER=$C \
      -Dhk_softmax_lastdim=k_$NAME -DPROBE_LAUNCHER=$NAME -c "$ROOT/bench/experiments/ce-decode/sm_prod_launcher.cu" -o "$TMP/$NAME.o" &
    OBJS+=("$TMP/$NAME.o")
  done
done
"$NVCC" "${FLAGS[@]}" -c "$ROOT/bench/experiments/ce-decode/ce_decode_probe.cu" -o "$TMP/probe.o" &
wait
"$NVCC" -arch=sm_90a "$TMP/probe.o" "${OBJS[@]}" -o "$TMP/ce_decode_probe"
echo "built $TMP/ce_decode_probe"
# CE_PROBE_SASS="name ...": the SASS of those objects (e.g. scur32_c8_256_i8) to $OUT.
for n in ${CE_PROBE_SASS:-}; do
  /usr/local/cuda/bin/cuobjdump -sass "$TMP/$n.o" >"$OUT/sass-$n.txt" 2>&1 || true
done
[ "${CE_PROBE_NVCC_ONLY:-0}" = 1 ] && exit 0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/ce-probe-machine.txt"
timeout 120 "$TMP/ce_decode_probe" "$OUT/ce-decode-probe.json" "${CE_PROBE_REPS:-41}" 2>&1 | tee "$OUT/ce-decode-probe.log"
