#!/usr/bin/env bash
# Installs what hotkernel needs and builds it. Idempotent; quick when done.
#
#   tools/setup.sh            Debian packages, the project venv with torch==2.11.0 (and scikit-build-core),
#                             configure, build
#
# Environment:
#   HOTKERNEL_BUILD_DIR   build folder (default: <repo>/build)
#   HOTKERNEL_VENV        venv with torch (default: ~/.cache/hotkernel-dev/venv-torch-2.11.0, shared by clones)
#   HOTKERNEL_PYTHON      use this python's torch instead of the venv (the GPU machine: python3)
#   HOTKERNEL_PREFIX_PATH extra CMAKE_PREFIX_PATH entries (the GPU machine: extracted .deb files)
#   HOTKERNEL_JOBS        parallel build jobs (default: nproc)
#   HOTKERNEL_BUILD_TARGETS  build only these targets (space-separated; default: all)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HOTKERNEL_BUILD_DIR:-$ROOT/build}"
TORCH_VERSION=2.11.0
SKBUILD_CORE_VERSION=1.1.2  # pyproject.toml's build backend, in the venv (not with HOTKERNEL_PYTHON)
say() { echo "[setup] $*" >&2; }

# 1. The CUDA toolkit first (NVRTC and the driver API headers; no GPU is needed
# to build or to record): nothing is installed when it is missing.
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  say "ERROR: the CUDA toolkit (13.x) is required at /usr/local/cuda (or nvcc on PATH): hotkernel compiles"
  say "       kernels with its NVRTC and uses its driver API headers. A machine without a GPU needs it too;"
  say "       install it from https://developer.nvidia.com/cuda-downloads, then run this again."
  exit 1
fi

# 2. Debian packages (skipped when every header/tool is already there).
need_apt=()
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
[ -f /usr/include/nlohmann/json.hpp ] || need_apt+=(nlohmann-json3-dev)
[ -f /usr/include/CLI/CLI.hpp ] || need_apt+=(libcli11-dev)
[ -f /usr/include/sqlite3.h ] || need_apt+=(libsqlite3-dev)
[ -f /usr/include/openssl/evp.h ] || need_apt+=(libssl-dev)
[ -f /usr/include/hiredis/hiredis.h ] || need_apt+=(libhiredis-dev)
command -v redis-server >/dev/null || need_apt+=(redis-server)  # the shared tier's tests start their own
[ -f /usr/include/tbb/parallel_for.h ] || [ -f /usr/include/oneapi/tbb/parallel_for.h ] || need_apt+=(libtbb-dev)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v g++ >/dev/null || need_apt+=(g++)
command -v ccache >/dev/null || need_apt+=(ccache)
if [ -z "${HOTKERNEL_PREFIX_PATH:-}" ] && [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    # Not root: sudo without a password prompt, or the exact command for someone who can.
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      SUDO="sudo"
    else
      say "ERROR: these Debian packages are missing and this user cannot install them (not root, no"
      say "       password-less sudo): ${need_apt[*]}"
      say "       Ask an administrator to run:"
      say "         apt-get install -y ${need_apt[*]}"
      say "       or install them elsewhere and point HOTKERNEL_PREFIX_PATH at their prefix; then run this again."
      exit 1
    fi
  fi
  say "installing Debian packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# 3. Python with torch==2.11.0.
if [ -n "${HOTKERNEL_PYTHON:-}" ]; then
  PY="$HOTKERNEL_PYTHON"
else
  VENV="${HOTKERNEL_VENV:-$HOME/.cache/hotkernel-dev/venv-torch-$TORCH_VERSION}"
  PY="$VENV/bin/python"
  if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" 2>/dev/null; then
    say "creating $VENV with torch==$TORCH_VERSION (a few GB, once)"
    command -v python3 >/dev/null || { say "ERROR: python3 is required"; exit 1; }
    python3 -m venv "$VENV" || { apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$VENV"; }
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy
  fi
  # The build backend of `pip install --no-build-isolation .` (pyproject.toml), for the
  # ctest pip_install, which installs from this venv's packages and never reaches an index.
  if ! "$PY" -c 'import scikit_build_core' 2>/dev/null; then
    say "installing scikit-build-core==$SKBUILD_CORE_VERSION into $VENV"
    "$VENV/bin/pip" install -q "scikit-build-core==$SKBUILD_CORE_VERSION"
  fi
fi
TORCH_CMAKE="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"

# 4. Configure (once) and build.
PREFIX="$TORCH_CMAKE${HOTKERNEL_PREFIX_PATH:+;$HOTKERNEL_PREFIX_PATH}"
LAUNCHER=()
if command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Objects keyed by paths relative to the build folder: another build folder at the
  # same depth (another clone's, or the pip build of the ctest pip_install) reuses them.
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
fi
stamp="$PREFIX|$PY"
if [ ! -f "$BUILD/build.ninja" ] || [ "$(cat "$BUILD/.hotkernel-configured" 2>/dev/null)" != "$stamp" ]; then
  say "configuring $BUILD"
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DHOTKERNEL_PYTHON="$PY" "${LAUNCHER[@]}" >"$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log"; exit 1; }
  echo "$stamp" >"$BUILD/.hotkernel-configured"
fi
say "building ($BUILD)"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "${HOTKERNEL_JOBS:-$(nproc)}" ${HOTKERNEL_BUILD_TARGETS:+--target $HOTKERNEL_BUILD_TARGETS}
echo "$PY" >"$BUILD/.hotkernel-python"
