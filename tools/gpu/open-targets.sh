#!/usr/bin/env bash
# The open issues' GPU measurements in one device call, from a prebuilt folder (tools/gpu/prebuild.sh; carry
# .deps), within a time budget: issue 19's softmax / log_softmax [4096, 400000], the float32 middle-dim
# argmax / max / argmin / min, the models (issue 20's llama prefill against torch.compile) and the few-rows norms.
# The targets are the H200's: on another GPU nothing runs unless OPEN_TARGETS_ANY_GPU=1.
#
#   CALL_LIMIT=560 tools/gpu/open-targets.sh        # seconds this call may take (default 560)
# Steps, in order, each skipped when the budget left is too small for it: softmax_400k (<= 170 s),
# reductions (<= 110 s), norms_long (<= 150 s, with >= 70 s left), models (the rest: all four with >= 230 s
# left, cut where the time ends, else llama alone with >= 100 s). Each step's JSON, log and experiments land in
# $OUT under the step's name (softmax-400k-bench-ops.json, ...); everything is packed into $OUT/000-all.tgz.
# OPEN_TARGETS_STEPS picks and orders the steps (default "softmax reductions norms models"); "probe" is
# bench/experiments/softmax-400k/softmax_probe.py on the current template (<= 130 s, with >= 90 s left); "fuzz"
# is issue 20's GPU fuzz on the H200 (OPEN_TARGETS_FUZZ_PROGRAMS, default 100008, in 12 processes, seeds from
# OPEN_TARGETS_FUZZ_SEED, default 2001, each process stopping after OPEN_TARGETS_FUZZ_SECONDS, default 250, or 20 s
# before the budget ends); "fusion" is issue 20's fused chain kernels against eager and torch.compile
# (fusion_bench.py's cases, HOTKERNEL_FUSION_CASES or its default, <= OPEN_TARGETS_FUSION_SECONDS, default 120 s,
# with >= 60 s left); "lm_heads" the padded GEMMs of GPT-2's and BERT's heads through the tuner (ops_bench.py
# --cases lm_heads, HOTKERNEL_OPS=mm,addmm, <= 120 s, with >= 50 s left);
# "group_norm", "std_weight": ops_bench.py's presets with native_group_norm / native_batch_norm (<= 150 s / 110 s);
# "bit": BiT in the model benchmark with both served (<= 145 s, with >= 80 s left);
# "pad_probe" bench/experiments/gemm-padding/pad_rows_probe.py against OPEN_TARGETS_PAD_BASE (an earlier
# pad_rows.cu, default none: the current template alone; <= 75 s, with >= 50 s left);
# "gpu_tests": the prebuilt folder's GPU test binaries (run-h200.sh gpu_bins, <= OPEN_TARGETS_GPU_TESTS_SECONDS,
# default 200 s, with >= 60 s left); "resnet": ResNet-50 bf16 and float32 at the defaults (<= 130 s, with >= 100 s
# left), then bf16 with HOTKERNEL_FUSION_PASS_CONVOLUTIONS=0 (<= 75 s, with >= 60 s left), e.g.
#   OPEN_TARGETS_STEPS="fuzz models" tools/gpu/open-targets.sh
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1
export HOTKERNEL_PREBUILT_DIR="${HOTKERNEL_PREBUILT_DIR:-.deps/prebuilt}"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
T0=$(date +%s)
LIMIT=${CALL_LIMIT:-560}
el() { echo "[open-targets +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
keep() {  # keep the ops step's files under the step's name
  for f in bench-ops.json bench-ops.log bench-ops-experiments.txt; do mv "$OUT/$f" "$OUT/$1-$f" 2>/dev/null; done
}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
el "gpu: $GPU (prebuilt: $(head -1 "$HOTKERNEL_PREBUILT_DIR/BUILT_AT" 2>/dev/null))"
if ! echo "$GPU" | grep -q H200 && [ "${OPEN_TARGETS_ANY_GPU:-0}" != 1 ]; then
  el "not an H200: nothing run (OPEN_TARGETS_ANY_GPU=1 runs the steps anyway)"
  exit 0
fi
# One ops_bench.py step: ops_step LABEL CASES KEEP_AS MIN_LEFT MAX_SECONDS TABLE_LINES (run when more than MIN_LEFT
# seconds are left, for at most MAX_SECONDS; its files kept under KEEP_AS).
ops_step() {
  R=$(left)
  if [ "$R" -gt "$4" ]; then
    el "$1"
    HOTKERNEL_OPS_CASES="$2" timeout $(( R < $5 + 5 ? R - 5 : $5 )) tools/gpu/run-h200.sh ops 2>&1 | grep -v "^tar" |
      grep "^|" | tail -"$6"
    keep "$3"
  fi
}
step_softmax() { ops_step softmax_400k softmax_400k softmax-400k 60 170 3; }
step_reductions() {
  local s=float32:64x2048x4096
  HOTKERNEL_OPS=sum.dim_IntList,mean.dim,amax,argmax,amin,argmin,max.dim,min.dim ops_step \
    "float32 middle-dim reductions" "argmax_dim1:$s,max_dim1:$s,argmin_dim1:$s,min_dim1:$s" reductions-dim 60 110 4
}
step_norms() { ops_step norms_long norms_long norms-long 70 150 5; }
step_models() {
  R=$(left)
  el "models ($R s left)"
  if [ "$R" -gt 230 ]; then
    timeout $(( R - 10 )) tools/gpu/run-h200.sh models 2>&1 | grep -v "^tar" | grep -A8 "^| model"
  elif [ "$R" -gt 100 ]; then
    HOTKERNEL_MODELS=llama timeout $(( R - 10 )) tools/gpu/run-h200.sh models 2>&1 | grep -v "^tar" |
      grep -A4 "^| model"
  fi
}
step_probe() {
  R=$(left)
  if [ "$R" -gt 90 ]; then
    el "softmax [4096, 400000] probe"
    timeout $(( R < 135 ? R - 5 : 130 )) python3 bench/experiments/softmax-400k/softmax_probe.py \
      --out "$OUT/softmax-400k-probe.json" >"$OUT/softmax-400k-probe.log" 2>&1
    tail -9 "$OUT/softmax-400k-probe.log"
  fi
}
step_fuzz() {
  R=$(left)
  if [ "$R" -gt 90 ]; then
    el "GPU fuzz ($R s left)"
    local budget=$(( R - 20 < ${OPEN_TARGETS_FUZZ_SECONDS:-250} ? R - 20 : ${OPEN_TARGETS_FUZZ_SECONDS:-250} ))
    HOTKERNEL_FUZZ_GPU_PROGRAMS=${OPEN_TARGETS_FUZZ_PROGRAMS:-100008} HOTKERNEL_FUZZ_GPU_PROCS=12 \
      HOTKERNEL_FUZZ_GPU_SEED=${OPEN_TARGETS_FUZZ_SEED:-2001} HOTKERNEL_FUZZ_GPU_DEADLINE_S=$budget \
      timeout $(( budget + 15 )) tools/gpu/run-h200.sh fuzz_gpu 2>&1 | grep -v "^tar" | grep "programs" | tail -3
  fi
}
step_fusion() {
  R=$(left)
  if [ "$R" -gt 60 ]; then
    el "fused chain kernels"
    local most=${OPEN_TARGETS_FUSION_SECONDS:-120}
    timeout $(( R < most + 5 ? R - 5 : most )) tools/gpu/run-h200.sh fusion 2>&1 | grep -v "^tar" | grep "^|" |
      tail -12
  fi
}
step_lm_heads() { ops_step "LM heads (padded GEMMs)" lm_heads lm-heads 50 120 3; }
# The opt-in norms that join the default after an H200 run (Note [Default served ops]): group_norm's diffusion shapes,
# batch_norm's weight standardization, and BiT end to end with both served.
step_group_norm() { HOTKERNEL_OPS=native_group_norm ops_step "group_norm (diffusion shapes)" group_norm group-norm 60 150 9; }
step_std_weight() { HOTKERNEL_OPS=native_batch_norm ops_step "batch_norm (weight standardization)" std_weight std-weight 50 110 6; }
step_bit() {
  R=$(left)
  if [ "$R" -gt 80 ]; then
    el "BiT with group_norm and batch_norm ($R s left)"
    HOTKERNEL_OPS="_softmax,_log_softmax,_fused_rms_norm,native_layer_norm,cross_entropy_loss,mm,addmm,sum.dim_IntList,mean.dim,amax,argmax,amin,argmin,max.dim,min.dim,native_group_norm,native_batch_norm" \
      HOTKERNEL_MODELS=bit HOTKERNEL_MODELS_TAG=bit timeout $(( R < 150 ? R - 5 : 145 )) tools/gpu/run-h200.sh models \
      2>&1 | grep -v "^tar" | grep -A3 "^| model"
  fi
}
step_pad_probe() {
  R=$(left)
  if [ "$R" -gt 50 ]; then
    el "pad_rows probe"
    timeout $(( R < 80 ? R - 5 : 75 )) python3 bench/experiments/gemm-padding/pad_rows_probe.py \
      ${OPEN_TARGETS_PAD_BASE:+--base "$OPEN_TARGETS_PAD_BASE"} --out "$OUT/pad-rows-probe.json" \
      >"$OUT/pad-rows-probe.log" 2>&1
    grep -v "registers" "$OUT/pad-rows-probe.log" | tail -16
  fi
}
# The GPU test binaries the prebuilt folder carries (tools/gpu/prebuild.sh's HOTKERNEL_PREBUILT_GPU_TESTS), one
# process a test, each test's gtest XML and the binaries' logs in $OUT.
step_gpu_tests() {
  R=$(left)
  if [ "$R" -gt 60 ]; then
    el "GPU test binaries of the prebuilt folder ($R s left)"
    timeout $(( R < ${OPEN_TARGETS_GPU_TESTS_SECONDS:-200} + 5 ? R - 5 : ${OPEN_TARGETS_GPU_TESTS_SECONDS:-200} )) \
      tools/gpu/run-h200.sh gpu_bins 2>&1 | grep -v "^tar" | grep -E "PASSED|FAILED|SKIPPED|OK \]|missing" | tail -30
  fi
}
# ResNet-50 (bf16 and float32: eval batch norms, ATen's own and cuDNN's) at the defaults, then bf16 with
# HOTKERNEL_FUSION_PASS_CONVOLUTIONS=0 (convolutions flush first: no downsampling tail is one chain), the comparison
# for that default; each run's hotkernel.fusionPatternsShortOfHot says which recurring patterns learning left short
# of hot.
step_resnet() {
  R=$(left)
  if [ "$R" -gt 100 ]; then
    el "ResNet-50 bf16 and float32 at the defaults ($R s left)"
    HOTKERNEL_MODELS=resnet,resnet-fp32 HOTKERNEL_MODELS_TAG=resnet HOTKERNEL_MODELS_ARGS="--tune-timeout 90" \
      timeout $(( R < 135 ? R - 5 : 130 )) tools/gpu/run-h200.sh models 2>&1 | grep -v "^tar" | grep -A3 "^| model"
  fi
  R=$(left)
  if [ "$R" -gt 60 ]; then
    el "ResNet-50 bf16 with convolutions flushing first ($R s left)"
    HOTKERNEL_FUSION_PASS_CONVOLUTIONS=0 HOTKERNEL_MODELS=resnet HOTKERNEL_MODELS_TAG=resnet-convolutions-flush \
      HOTKERNEL_MODELS_ARGS="--tune-timeout 90" timeout $(( R < 80 ? R - 5 : 75 )) tools/gpu/run-h200.sh models \
      2>&1 | grep -v "^tar" | grep -A2 "^| model"
  fi
}
STEPS_KNOWN="softmax reductions norms models fuzz probe fusion lm_heads pad_probe group_norm std_weight bit gpu_tests resnet"
for step in ${OPEN_TARGETS_STEPS:-softmax reductions norms models}; do
  if echo " $STEPS_KNOWN " | grep -q " $step "; then
    "step_$step"
  else
    el "unknown step '$step' ($STEPS_KNOWN): skipped"
  fi
done
el "done"
tar czf /tmp/000-all.tgz -C "$OUT" . && mv /tmp/000-all.tgz "$OUT/000-all.tgz"
