#!/usr/bin/env bash
# `pip install --no-build-isolation .` (pyproject.toml) checked end to end, as a
# user runs it: a fresh venv that sees a torch, the package built against that
# torch and installed, then used from outside the checkout.
#
#   pip_install_test.sh --source SRC --work DIR --python PY [--build-dir DIR]
#                       [--generator G] [--c-compiler CC] [--cxx-compiler CXX] [--launcher L]
#
#   --python       a python whose torch the package is built against; its
#                  environment must hold scikit-build-core (tools/setup.sh puts
#                  it into the project venv)
#   --work         the work folder: venv/ (made afresh every run), logs
#   --build-dir    pip's CMake build folder, kept: a later run recompiles only
#                  what changed (default: WORK/build)
#   --generator, --c-compiler, --cxx-compiler, --launcher
#                  the CMake generator, compilers and compiler launcher (ccache)
#                  of the pip build; ctest passes those of the project's build
#                  tree, so that ccache holds the objects of a first pip build
#                  too (Note [A pip build that compiles nothing new])
#
# Environment: HOTKERNEL_JOBS, parallel compile jobs (default 2).
#
# The venv is made with --system-site-packages and a .pth file that adds the
# site-packages of --python's environment (a venv's packages are out of reach
# of --system-site-packages): torch and scikit-build-core come from there, and
# pip runs with --no-index, so nothing is downloaded. Exits 0 when every check
# passes, 1 at the first that fails (named), 2 on bad usage, 77 (skipped) when
# --python's environment lacks scikit-build-core.
#
# Note [A pip build that compiles nothing new]
# pip builds the package in a CMake build folder of its own, configured
# without tests and benchmarks; every object it compiles is one of the
# project's build, with the same flags, compiler and launcher, but the
# commands name the build folder (the generated headers and sources live
# there). ccache's key is the command line, so with CCACHE_BASEDIR at the
# source tree, which makes ccache see every path relative to the build folder,
# a build folder that is a sibling of the project's (ctest:
# <build>-pip-test) compiles with the same keys as the project's build, which
# tools/setup.sh runs with the same CCACHE_BASEDIR: a first pip build after it
# finds every object in ccache (direct mode: no preprocessing) and only links.
# The folder is kept, so a later run recompiles only what changed.
set -euo pipefail

usage() { echo "usage: $0 --source SRC --work DIR --python PY [--build-dir DIR] [--generator G] [--c-compiler CC] [--cxx-compiler CXX] [--launcher L]" >&2; exit 2; }
SOURCE="" WORK="" BASE_PY="" PIP_BUILD="" GENERATOR="" CC_PATH="" CXX_PATH="" LAUNCHER=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --source) SOURCE="$2" ;;
    --work) WORK="$2" ;;
    --python) BASE_PY="$2" ;;
    --build-dir) PIP_BUILD="$2" ;;
    --generator) GENERATOR="$2" ;;
    --c-compiler) CC_PATH="$2" ;;
    --cxx-compiler) CXX_PATH="$2" ;;
    --launcher) LAUNCHER="$2" ;;
    *) usage ;;
  esac
  shift 2
done
[ -n "$SOURCE" ] && [ -n "$WORK" ] && [ -n "$BASE_PY" ] || usage
say() { echo "[pip_install_test] $*"; }
fail() { echo "[pip_install_test] FAIL: $*" >&2; exit 1; }
SOURCE="$(cd "$SOURCE" && pwd)"
test_start=$SECONDS

"$BASE_PY" -c 'import torch' 2>/dev/null || fail "$BASE_PY cannot import torch"
if ! "$BASE_PY" -c 'import scikit_build_core' 2>/dev/null; then
  say "SKIP: $BASE_PY's environment has no scikit-build-core (tools/setup.sh installs it into the project venv)"
  exit 77
fi
base_site="$("$BASE_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

# 1. A fresh venv that sees --python's packages.
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
VENV="$WORK/venv"
PY="$VENV/bin/python"
rm -rf "$VENV" "$WORK/consumer" "$WORK/cwd"
"$BASE_PY" -m venv --system-site-packages "$VENV" || fail "python -m venv $VENV"
if ! "$PY" -c 'import torch, scikit_build_core' 2>/dev/null; then
  echo "$base_site" >"$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/hotkernel-test-base.pth"
fi
"$PY" -c 'import torch, scikit_build_core' || fail "the venv cannot import torch and scikit_build_core"
! "$PY" -c 'import hotkernel' 2>/dev/null || fail "the fresh venv already imports a hotkernel package"
TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__)')"
TORCH_LIB="$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
say "venv $VENV: torch $TORCH_VERSION ($TORCH_LIB)"

# 2. pip install --no-build-isolation . (the README's command), from no index.
PIP_BUILD="${PIP_BUILD:-$WORK/build}"
config=(-C "build-dir=$PIP_BUILD")
[ -n "$GENERATOR" ] && export CMAKE_GENERATOR="$GENERATOR"
[ -n "$CC_PATH" ] && config+=(-C "cmake.define.CMAKE_C_COMPILER=$CC_PATH")
[ -n "$CXX_PATH" ] && config+=(-C "cmake.define.CMAKE_CXX_COMPILER=$CXX_PATH")
[ -n "$LAUNCHER" ] && config+=(-C "cmake.define.CMAKE_C_COMPILER_LAUNCHER=$LAUNCHER"
                              -C "cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=$LAUNCHER")
case "$(basename "${LAUNCHER:-none}")" in
  ccache) export CCACHE_BASEDIR="$SOURCE" CCACHE_NOHASHDIR=true ;;
esac
export CMAKE_BUILD_PARALLEL_LEVEL="${HOTKERNEL_JOBS:-2}"
say "pip install --no-build-isolation --no-index $SOURCE (log: $WORK/pip.log)"
start=$SECONDS
"$PY" -m pip install --no-build-isolation --no-index --disable-pip-version-check -v "${config[@]}" "$SOURCE" \
  >"$WORK/pip.log" 2>&1 || { tail -40 "$WORK/pip.log"; fail "pip install (log: $WORK/pip.log)"; }
compiled="$(grep -c 'Building CXX object\|Building C object' "$WORK/pip.log" || true)"
say "installed in $((SECONDS - start)) s ($compiled objects built in $PIP_BUILD)"

# 3. The installed package, used from outside the checkout (no PYTHONPATH, no HOTKERNEL_HOME).
mkdir -p "$WORK/cwd"
cd "$WORK/cwd"
unset PYTHONPATH HOTKERNEL_HOME HOTKERNEL_LIBRARY
export PATH="$VENV/bin:$PATH" HOTKERNEL_CACHE_DIR="$WORK/cwd/cache"
PKG="$("$PY" -c 'import os, hotkernel; print(os.path.dirname(hotkernel.__file__))')"
case "$PKG" in "$VENV"/*) ;; *) fail "import hotkernel found $PKG, not the venv's package" ;; esac
for f in bin/hotkernel bin/hotkernel-sandbox-compile bin/hotkernel-sandbox-run bin/hotkernel-warmup; do
  [ -x "$PKG/$f" ] || fail "$PKG/$f is missing or not executable"
done
for f in lib/libhotkernel_preload.so lib/libhotkernel.so include/hotkernel/hotkernel.h \
         lib/cmake/hotkernel/hotkernelConfig.cmake; do
  [ -f "$PKG/$f" ] || fail "$PKG/$f is missing"
done
rp="$(readelf -d "$PKG/lib/libhotkernel.so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
case "$rp" in "$TORCH_LIB"|"$TORCH_LIB":*) ;; *) fail "libhotkernel.so's RUNPATH '$rp' does not start with '$TORCH_LIB'" ;; esac
case "$rp" in *"$PIP_BUILD"*) fail "libhotkernel.so's RUNPATH '$rp' names the build folder" ;; esac
say "package $PKG: bin/, lib/ (libhotkernel.so RUNPATH $rp), include/, lib/cmake/"

[ "$(command -v hotkernel)" = "$VENV/bin/hotkernel" ] || fail "hotkernel on PATH is $(command -v hotkernel), not the venv's console script"
out="$(hotkernel --version)" || fail "hotkernel --version exited $?"
[ "$out" = "hotkernel $("$PY" -c 'import hotkernel; print(hotkernel.__version__)')" ] || fail "version mismatch: $out"
say "hotkernel --version: $out"

# doctor --json, through the console script and through python -m: one valid JSON
# object naming the package's shim and library and the torch found; exit 0 (ready)
# or 1 (something missing, e.g. no GPU).
check_doctor() {
  "$PY" - "$1" "$PKG" "$TORCH_VERSION" <<'PYEOF'
import json, sys
with open(sys.argv[1]) as f:
    doc = json.load(f)
pkg, torch_version = sys.argv[2], sys.argv[3]
assert doc["format"] == "hotkernel-doctor" and isinstance(doc["version"], int), (doc.get("format"), doc.get("version"))
assert doc["preload"] == {"path": pkg + "/lib/libhotkernel_preload.so", "found": True}, doc["preload"]
assert doc["library"] == {"path": pkg + "/lib/libhotkernel.so", "found": True}, doc["library"]
assert doc["torch"]["built_with"] is True and doc["torch"]["full_version"] == torch_version, doc["torch"]
print("ready={} torch={} problems={}".format(doc["ready"], doc["torch"]["full_version"], doc["problems"]))
PYEOF
}
for doctor in "hotkernel doctor" "$PY -m hotkernel doctor"; do
  status=0
  $doctor --json >"$WORK/doctor.json" || status=$?
  [ "$status" = 0 ] || [ "$status" = 1 ] || fail "$doctor --json exited $status"
  verdict="$(check_doctor "$WORK/doctor.json")" || fail "$doctor --json: not the expected JSON object ($WORK/doctor.json)"
  say "$doctor --json (exit $status): $verdict"
done

# hotkernel run: the command runs with the package's shim in LD_PRELOAD, after what
# was there (libm.so.6 stands for another preload: it interposes nothing the shim
# does), and the library is loaded once torch is imported.
probe='import json, os, torch, hotkernel; s = hotkernel.status(); print(json.dumps({"loaded": hotkernel.loaded(), "started": s.get("started"), "preload": os.environ["LD_PRELOAD"]}))'
for launcher in "hotkernel run" "$PY -m hotkernel run"; do
  out="$(LD_PRELOAD=libm.so.6 $launcher -- "$PY" -c "$probe")" || fail "$launcher -- python -c ... exited $?"
  "$PY" - "$out" "$PKG" <<'PYEOF' || fail "$launcher: $out"
import json, sys
out, pkg = json.loads(sys.argv[1]), sys.argv[2]
assert out["loaded"] is True and out["started"] is True, out
assert out["preload"] == "libm.so.6:" + pkg + "/lib/libhotkernel_preload.so", out["preload"]
PYEOF
  say "$launcher -- python -c '<import torch, hotkernel>': $out"
done
status=0
hotkernel run -- "$PY" -c 'import sys; sys.exit(7)' || status=$?
[ "$status" = 7 ] || fail "hotkernel run -- python -c 'sys.exit(7)' exited $status, not the command's 7"

# 4. A libtorch C++ program through find_package(hotkernel) against the package's prefix.
version="$("$PY" -c 'import hotkernel; print(hotkernel.__version__)')"
consumer_args=(-S "$SOURCE/tests/install/consumer" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PKG"
               -DHK_EXPECT_VERSION="$version" -DHK_REQUIRE_LIBRARY=ON)
[ -n "$GENERATOR" ] && consumer_args+=(-G "$GENERATOR")
[ -n "$CXX_PATH" ] && consumer_args+=(-DCMAKE_CXX_COMPILER="$CXX_PATH")
cmake "${consumer_args[@]}" >"$WORK/consumer.log" 2>&1 &&
  cmake --build "$WORK/consumer" >>"$WORK/consumer.log" 2>&1 || { cat "$WORK/consumer.log"; fail "consumer build"; }
out="$("$WORK/consumer/consumer_linked")" || fail "consumer_linked exited $?"
[ "$out" = "plans=0" ] || fail "consumer_linked printed '$out'"
say "find_package(hotkernel COMPONENTS library) consumer linked to the package's libhotkernel.so: $out"
say "all checks passed in $((SECONDS - test_start)) s"
