#!/usr/bin/env bash
# Fills .deps/prebuilt with what run-h200.sh's fuzz_gpu, models and fusion steps and its gpu_bins step (the GPU test
# binaries in GPU_TESTS) run (HOTKERNEL_PREBUILT_DIR), built here against the project venv's torch: a device call that
# carries `.deps` then skips the build.
#   tools/gpu/prebuild.sh            (build folder: $HOTKERNEL_BUILD_DIR or build/)
# HOTKERNEL_PREBUILT_GPU_TESTS: the GPU test binaries to carry, space-separated (default the list below; a call
#   carries at most 64 MiB, so a few at a time).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${HOTKERNEL_BUILD_DIR:-$ROOT/build}"
GPU_TESTS=(cupti_gpu_tests mm_pad_runtime_gpu_tests sdpa_runtime_gpu_tests softmax_dim_gpu_tests reduce_dim_runtime_gpu_tests
           reduce_pair_runtime_gpu_tests chain_gpu_tests chain_tuner_gpu_tests fusion_engine_gpu_tests)
if [ -n "${HOTKERNEL_PREBUILT_GPU_TESTS:-}" ]; then read -r -a GPU_TESTS <<<"$HOTKERNEL_PREBUILT_GPU_TESTS"; fi
# The sandbox helpers go beside the binaries: the agent and sandbox tests in gpu_tests look for them there (a
# prebuilt folder has no build tree).
TARGETS=(fusion_fuzz_gpu fusion_fuzz hotkernel_cli "${GPU_TESTS[@]}" chain_kernel_tool hotkernel hotkernel_preload
         hotkernel_sandbox_compile hotkernel_sandbox_run)
cmake --build "$BUILD" -j "${HOTKERNEL_JOBS:-2}" --target "${TARGETS[@]}"
DEST="$ROOT/.deps/prebuilt"
# Binaries of an earlier prebuild that this one does not rebuild would run against this build's libraries (another
# ABI): the folder holds only what this run copies.
rm -rf "$DEST/bin"
mkdir -p "$DEST/bin" "$DEST/lib"
for b in fusion_fuzz_gpu fusion_fuzz hotkernel chain_kernel_tool hotkernel-sandbox-compile hotkernel-sandbox-run \
         "${GPU_TESTS[@]}"; do cp "$BUILD/bin/$b" "$DEST/bin/"; done
cp "$BUILD"/lib/libhotkernel.so "$BUILD"/lib/libhotkernel_preload.so "$DEST/lib/"
# The binaries lose their static symbol tables (a fifth of their size; the dynamic ones stay): a call carries 64 MiB.
# The libraries keep theirs (under 1 MB): a profiler on the device (py-spy --native in probe-host-time.py) names
# hotkernel's frames only from them.
strip --strip-unneeded "$DEST"/bin/*
git -C "$ROOT" rev-parse --short HEAD >"$DEST/BUILT_AT"
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] || echo "(with uncommitted changes)" >>"$DEST/BUILT_AT"
echo "prebuilt at $(head -1 "$DEST/BUILT_AT") in $DEST ($(du -sh "$DEST" | cut -f1)); carry .deps"
