#!/usr/bin/env bash
# Checks `pip install --no-build-isolation .` end to end (pyproject.toml): a
# fresh venv that sees a torch, the wheel built against that torch and
# installed, then the installed package run as a user runs it. Not part of
# ctest: the build compiles every torch-facing file (minutes to tens of
# minutes on two cores, much less when ccache has the objects).
#
#   tools/check-pip-install.sh
#
# Environment:
#   HOTKERNEL_PYTHON           a python whose torch to build against (default: the project venv's,
#                              ~/.cache/hotkernel-dev/venv-torch-2.11.0, made by tools/setup.sh)
#   HOTKERNEL_PIP_CHECK_DIR    work folder (default: <repo>/build-pip-check): venv/, the CMake build
#                              folder build/ (kept, so a second run rebuilds only what changed), logs
#   HOTKERNEL_JOBS             parallel compile jobs (default: nproc)
#
# The venv is made with --system-site-packages; when the torch is itself in a
# venv (whose packages --system-site-packages does not reach), a .pth file in
# the new venv adds that venv's site-packages instead. The venv gets
# scikit-build-core from the package index when it lacks it. Exits 0 when every
# check passes, 1 at the first that fails (named).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${HOTKERNEL_PIP_CHECK_DIR:-$ROOT/build-pip-check}"
BASE_PY="${HOTKERNEL_PYTHON:-$HOME/.cache/hotkernel-dev/venv-torch-2.11.0/bin/python}"
say() { echo "[check-pip-install] $*"; }
fail() { echo "[check-pip-install] FAIL: $*" >&2; exit 1; }

"$BASE_PY" -c 'import torch' 2>/dev/null || fail "$BASE_PY cannot import torch (run tools/setup.sh, or set HOTKERNEL_PYTHON)"
torch_site="$("$BASE_PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"

# 1. The venv.
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
VENV="$WORK/venv"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
  say "creating $VENV"
  "$BASE_PY" -m venv --system-site-packages "$VENV"
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
  site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$torch_site" >"$site/hotkernel-check-torch.pth"
  say "the venv sees $torch_site through $site/hotkernel-check-torch.pth"
fi
"$PY" -c 'import torch' || fail "the venv cannot import torch"
if ! "$PY" -c 'import scikit_build_core' 2>/dev/null; then
  say "installing scikit-build-core into the venv"
  "$PY" -m pip install -q "scikit-build-core>=0.10" || fail "pip install scikit-build-core"
fi
TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__)')"
TORCH_LIB="$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
say "torch $TORCH_VERSION ($TORCH_LIB)"

# 2. pip install --no-build-isolation . (the README's command), into the venv.
config=(-C "build-dir=$WORK/build")
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
  config+=(-C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${HOTKERNEL_JOBS:-$(nproc)}"
say "pip install --no-build-isolation $ROOT (log: $WORK/pip.log)"
start=$SECONDS
"$PY" -m pip install --no-build-isolation -v "${config[@]}" "$ROOT" >"$WORK/pip.log" 2>&1 ||
  { tail -40 "$WORK/pip.log"; fail "pip install (log: $WORK/pip.log)"; }
say "installed in $((SECONDS - start)) s"

# 3. The installed package, used from outside the checkout (no PYTHONPATH, no HOTKERNEL_HOME).
cd "$WORK"
unset PYTHONPATH HOTKERNEL_HOME HOTKERNEL_LIBRARY
export PATH="$VENV/bin:$PATH"
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
say "package $PKG: bin/, lib/ (libhotkernel.so RUNPATH $rp), include/, lib/cmake/"

out="$(hotkernel --version)" || fail "hotkernel --version exited $?"
say "hotkernel --version (console script $(command -v hotkernel)): $out"
[ "$out" = "hotkernel $("$PY" -c 'import hotkernel; print(hotkernel.__version__)')" ] || fail "version mismatch: $out"

status=0
"$PY" -m hotkernel doctor --json >"$WORK/doctor.json" || status=$?
[ "$status" = 0 ] || [ "$status" = 1 ] || fail "python -m hotkernel doctor --json exited $status"
"$PY" - "$WORK/doctor.json" "$PKG" "$TORCH_VERSION" <<'EOF' || fail "python -m hotkernel doctor --json"
import json, sys
doc, pkg, torch_version = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
assert doc["format"] == "hotkernel-doctor", doc["format"]
assert doc["preload"] == {"path": pkg + "/lib/libhotkernel_preload.so", "found": True}, doc["preload"]
assert doc["library"] == {"path": pkg + "/lib/libhotkernel.so", "found": True}, doc["library"]
assert doc["torch"]["built_with"] is True and doc["torch"]["full_version"] == torch_version, doc["torch"]
print("[check-pip-install] python -m hotkernel doctor --json: ready={} torch={} problems={}".format(
    doc["ready"], doc["torch"]["full_version"], doc["problems"]))
EOF

hotkernel run -- "$PY" -c 'import torch' || fail "hotkernel run -- python -c 'import torch' exited $?"
say "hotkernel run -- python -c 'import torch': exit 0"
probe='import json, torch, hotkernel; s = hotkernel.status(); print(json.dumps({"loaded": hotkernel.loaded(), "started": s.get("started")}))'
for launcher in "hotkernel run" "$PY -m hotkernel run"; do
  out="$($launcher -- "$PY" -c "$probe")" || fail "$launcher exited $?"
  [ "$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["loaded"])' "$out")" = True ] ||
    fail "$launcher: the library is not loaded in the command ($out)"
  say "$launcher -- python -c '<import torch, hotkernel>': $out"
done

# 4. A libtorch C++ program through find_package(hotkernel) against the package's prefix.
version="$("$PY" -c 'import hotkernel; print(hotkernel.__version__)')"
cmake -S "$ROOT/tests/install/consumer" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PKG" \
  -DHK_EXPECT_VERSION="$version" -DHK_REQUIRE_LIBRARY=ON >"$WORK/consumer.log" 2>&1 &&
  cmake --build "$WORK/consumer" >>"$WORK/consumer.log" 2>&1 || { cat "$WORK/consumer.log"; fail "consumer build"; }
out="$("$WORK/consumer/consumer_linked")" || fail "consumer_linked exited $?"
[ "$out" = "plans=0" ] || fail "consumer_linked printed '$out'"
say "find_package(hotkernel COMPONENTS library) consumer linked to the package's libhotkernel.so: $out"

# 5. The same build folder through `cmake --install` (the torch build's installed tree).
bash "$ROOT/tests/install/install_test.sh" --source "$ROOT" --work "$WORK/install-test" --build "$WORK/build" \
  --torch-lib "$TORCH_LIB" || fail "tests/install/install_test.sh on the torch build"
say "all checks passed"
