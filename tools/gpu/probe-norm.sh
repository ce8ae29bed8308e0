#!/usr/bin/env bash
# Investigation run on the GPU machine (not part of CI, no build needed):
# bench/norm_probe.py times rms_norm points and the probe macros of
# kernels/norm/rms_norm.cu (HK_PROBE_*) against eager and torch.compile, side
# by side, on [16384, 8192] (and [4096, 4096]); JSON, logs and torch.compile's
# generated code go to $OUT. PROBE_RESIDENT=0 skips the register-resident
# probes (a, b, c); PROBE_STREAMING=1 and PROBE_STREAMING2=1 run the streaming ones (d, e).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
P=bench/norm_probe.py
if [ "${PROBE_RESIDENT:-1}" != 0 ]; then
timeout 200 python3 $P --points 256x8x4,512x8x2,128x8x8,1024x8x1 \
  --experiment occ=-DHK_PROBE_MIN_CTAS=0 --experiment cs=-DHK_PROBE_CS=1 \
  --experiment occcs=-DHK_PROBE_MIN_CTAS=0,-DHK_PROBE_CS=1 \
  --experiment packedocc=-DHK_PROBE_PACKED=1,-DHK_PROBE_MIN_CTAS=0 \
  --out "$OUT/norm-probe-a.json" --inductor-code "$OUT/inductor-rms-16384x8192.py" > "$OUT/norm-probe-a.log" 2>&1
echo "a rc=$?"; grep -v "^ *$" "$OUT/norm-probe-a.log" | tail -24
timeout 150 python3 $P --points 256x8x4,512x4x4 \
  --experiment m5=-DHK_PROBE_MIN_CTAS=5 --experiment m6=-DHK_PROBE_MIN_CTAS=6 \
  --experiment occ=-DHK_PROBE_MIN_CTAS=0 \
  --experiment packedm5=-DHK_PROBE_PACKED=1,-DHK_PROBE_MIN_CTAS=5 \
  --experiment packedm6=-DHK_PROBE_PACKED=1,-DHK_PROBE_MIN_CTAS=6 \
  --out "$OUT/norm-probe-b.json" > "$OUT/norm-probe-b.log" 2>&1
echo "b rc=$?"; tail -15 "$OUT/norm-probe-b.log"
timeout 150 python3 $P --rows 4096 --cols 4096 --points 128x8x4,256x8x2,512x8x1 \
  --experiment occ=-DHK_PROBE_MIN_CTAS=0 --experiment cs=-DHK_PROBE_CS=1 \
  --out "$OUT/norm-probe-c.json" > "$OUT/norm-probe-c.log" 2>&1
echo "c rc=$?"; tail -13 "$OUT/norm-probe-c.log"
fi
# Second probe: the streaming points (two reads of x, as torch.compile's
# looped reduction does) with other batch sizes and full occupancy; 512x8x2 as
# the register-resident reference (its u* runs are the same kernel: a noise gauge).
if [ "${PROBE_STREAMING:-0}" != 0 ]; then
  timeout 200 python3 $P --points 512x8x2,128x8x0,256x8x0,512x8x0,1024x8x0 \
    --experiment u1=-DHK_STREAM_UNROLL=1,-DHK_STREAM_UNROLL2=1 \
    --experiment u4=-DHK_STREAM_UNROLL=4,-DHK_STREAM_UNROLL2=2 \
    --experiment u2w2=-DHK_STREAM_UNROLL=2,-DHK_STREAM_UNROLL2=2 \
    --experiment occ=-DHK_PROBE_MIN_CTAS=0 \
    --experiment occu1=-DHK_PROBE_MIN_CTAS=0,-DHK_STREAM_UNROLL=1,-DHK_STREAM_UNROLL2=1 \
    --out "$OUT/norm-probe-d.json" > "$OUT/norm-probe-d.log" 2>&1
  echo "d rc=$?"; tail -34 "$OUT/norm-probe-d.log"
fi
# Third probe: 8-byte streaming points (torch.compile's kernel loads 4 bf16 a
# thread per iteration when it runs 512 threads on a 2048-element block), the
# best of the second probe again, and torch.compile's autotuned configuration.
if [ "${PROBE_STREAMING2:-0}" != 0 ]; then
  timeout 250 python3 $P --points 256x8x0,512x4x0,256x4x0,1024x4x0,512x8x2 \
    --experiment u1=-DHK_STREAM_UNROLL=1,-DHK_STREAM_UNROLL2=1 \
    --experiment u2=-DHK_STREAM_UNROLL=2,-DHK_STREAM_UNROLL2=1 \
    --experiment occ=-DHK_PROBE_MIN_CTAS=0 \
    --experiment occu1=-DHK_PROBE_MIN_CTAS=0,-DHK_STREAM_UNROLL=1,-DHK_STREAM_UNROLL2=1 \
    --out "$OUT/norm-probe-e.json" --inductor-code "$OUT/inductor-rms-16384x8192.py" > "$OUT/norm-probe-e.log" 2>&1
  echo "e rc=$?"; tail -28 "$OUT/norm-probe-e.log"; grep "^# .*config\|^# triton\|n_regs" "$OUT/inductor-rms-16384x8192.py"
fi
