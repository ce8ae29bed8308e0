#!/usr/bin/env bash
# Fills .deps/prebuilt with what run-h200.sh's fuzz_gpu, models and fusion steps, the CUPTI tests and the mm_pad_n
# and sdpa_backend runtime GPU tests run (HOTKERNEL_PREBUILT_DIR), built here against the project venv's torch: a device call that carries `.deps`
# then skips the build.
#   tools/gpu/prebuild.sh            (build folder: $HOTKERNEL_BUILD_DIR or build/)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${HOTKERNEL_BUILD_DIR:-$ROOT/build}"
TARGETS=(fusion_fuzz_gpu fusion_fuzz hotkernel_cli cupti_gpu_tests mm_pad_runtime_gpu_tests sdpa_runtime_gpu_tests softmax_dim_gpu_tests
         chain_kernel_tool hotkernel hotkernel_preload)
cmake --build "$BUILD" -j "${HOTKERNEL_JOBS:-2}" --target "${TARGETS[@]}"
DEST="$ROOT/.deps/prebuilt"
mkdir -p "$DEST/bin" "$DEST/lib"
cp "$BUILD"/bin/{fusion_fuzz_gpu,fusion_fuzz,hotkernel,cupti_gpu_tests,mm_pad_runtime_gpu_tests,sdpa_runtime_gpu_tests,softmax_dim_gpu_tests} \
  "$BUILD"/bin/chain_kernel_tool "$DEST/bin/"
cp "$BUILD"/lib/libhotkernel.so "$BUILD"/lib/libhotkernel_preload.so "$DEST/lib/"
git -C "$ROOT" rev-parse --short HEAD >"$DEST/BUILT_AT"
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] || echo "(with uncommitted changes)" >>"$DEST/BUILT_AT"
echo "prebuilt at $(head -1 "$DEST/BUILT_AT") in $DEST ($(du -sh "$DEST" | cut -f1)); carry .deps"
