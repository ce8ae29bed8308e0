#!/usr/bin/env bash
# Investigation run on the GPU machine (not part of CI, no build needed):
# bench/experiments/rms-norm/norm_probe.py times rms_norm points as the optimizer compiles them
# (`cols`: specialized columns, Note [Specialized columns] in
# kernels/norm/rms_norm.cu), and with the probe overrides of Note [Norm
# occupancy probe] (HK_PROBE_MIN_CTAS, HK_STREAM_UNROLL / HK_STREAM_UNROLL2),
# against eager and torch.compile, side by side. JSON, log and torch.compile's
# generated code (with its autotuned configuration) go to $OUT. The committed
# probe files name their experiments' defines in each candidate's options
# (probes i-k used macros since deleted: the note says what they measured).
#   PROBE_SHAPE   ROWSxCOLS (default 16384x8192)
#   PROBE_POINTS  THREADSxVECxITEMS,... (default 512x8x0,256x8x0,512x8x2,256x8x4)
#   PROBE_TRITON  1: also torch.compile's own kernel launched from the probe, and
#                 its PTX without its L1 / L2 hints (probes m and n)
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
SHAPE="${PROBE_SHAPE:-16384x8192}"
POINTS="${PROBE_POINTS:-512x8x0,256x8x0,512x8x2,256x8x4}"
C="${SHAPE#*x}"
timeout 400 python3 bench/experiments/rms-norm/norm_probe.py --rows "${SHAPE%x*}" --cols "$C" --points "$POINTS" --reps 41 \
  --experiment cols=-DHK_COLS=${C}LL \
  --experiment occ=-DHK_COLS=${C}LL,-DHK_PROBE_MIN_CTAS=0 \
  --experiment u1=-DHK_COLS=${C}LL,-DHK_STREAM_UNROLL=1,-DHK_STREAM_UNROLL2=1 \
  ${PROBE_TRITON:+--triton --triton-mutations noL1,noL2,nohints} \
  --out "$OUT/norm-probe.json" --inductor-code "$OUT/inductor-rms-$SHAPE.py" > "$OUT/norm-probe.log" 2>&1
echo "rc=$?"; tail -20 "$OUT/norm-probe.log"
