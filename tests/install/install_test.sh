#!/usr/bin/env bash
# Installs a hotkernel build into a fresh prefix and checks the installed tree
# the way a user meets it (Note [Installed layout] in cmake/Install.cmake):
#
#   install_test.sh --source SRC --work DIR --torch-free [--generator G] [--prefix-path P]
#       configures and builds SRC without torch (no tests, no benchmarks) in DIR/build
#   install_test.sh --source SRC --work DIR --build BUILD [--torch-lib TORCH_LIB]
#       installs the existing build tree BUILD (a torch build names its torch's lib folder)
#
# Then, in DIR (wiped first): `cmake --install` into DIR/prefix; every file
# present and executables executable; no RUNPATH entry in the build tree (a
# torch-free tree carries none at all, libhotkernel.so and hotkernel-warmup
# the torch lib folder first); the prefix moved elsewhere (it is
# relocatable), then from there: `hotkernel --version`, `hotkernel doctor
# --json` (one JSON object naming the moved prefix's shim and library),
# `hotkernel run` (LD_PRELOAD holds the moved shim); a consumer project
# (tests/install/consumer) configured and built with find_package(hotkernel)
# against the moved prefix, and run; the prefix laid out as pip installs it
# (python/hotkernel with bin/ and lib/ inside) for `python -m hotkernel run`
# and the `hotkernel` console script. Exits 0 when every check passes, 1 at
# the first that fails (named), 2 on bad usage.
set -euo pipefail

usage() { echo "usage: $0 --source SRC --work DIR (--torch-free [--generator G] [--prefix-path P] | --build BUILD [--torch-lib DIR])" >&2; exit 2; }
SOURCE="" WORK="" BUILD="" TORCH_FREE=0 GENERATOR="" PREFIX_PATH="" TORCH_LIB="" PYTHON="${PYTHON:-python3}"
while [ $# -gt 0 ]; do
  case "$1" in
    --source) SOURCE="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --torch-free) TORCH_FREE=1; shift ;;
    --generator) GENERATOR="$2"; shift 2 ;;
    --prefix-path) PREFIX_PATH="$2"; shift 2 ;;
    --torch-lib) TORCH_LIB="$2"; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$SOURCE" ] && [ -n "$WORK" ] || usage
[ "$TORCH_FREE" = 1 ] && [ -n "$BUILD" ] && usage
[ "$TORCH_FREE" = 1 ] || [ -n "$BUILD" ] || usage

say() { echo "[install_test] $*"; }
fail() { echo "[install_test] FAIL: $*" >&2; exit 1; }

rm -rf "$WORK/prefix" "$WORK/moved" "$WORK/consumer" "$WORK/consumer-library" "$WORK/site"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"

if [ "$TORCH_FREE" = 1 ]; then
  BUILD="$WORK/build"
  args=(-S "$SOURCE" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHOTKERNEL_ENABLE_TORCH=OFF
        -DHOTKERNEL_ENABLE_TESTS=OFF -DHOTKERNEL_ENABLE_BENCH=OFF)
  [ -n "$GENERATOR" ] && args+=(-G "$GENERATOR")
  [ -n "$PREFIX_PATH" ] && args+=("-DCMAKE_PREFIX_PATH=$PREFIX_PATH")
  if command -v ccache >/dev/null; then
    # Paths relative to the source tree, so a later run (or another clone at
    # the same depth) reuses the objects.
    export CCACHE_BASEDIR="$SOURCE" CCACHE_NOHASHDIR=true
    args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  say "configuring the torch-free build in $BUILD"
  cmake "${args[@]}" >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log"; fail "configure"; }
  say "building it"
  cmake --build "$BUILD" -j "${HOTKERNEL_INSTALL_TEST_JOBS:-2}" >"$WORK/build.log" 2>&1 ||
    { tail -50 "$WORK/build.log"; fail "build"; }
fi
BUILD="$(cd "$BUILD" && pwd)"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
WITH_TORCH=0
case "$(cache_value HOTKERNEL_ENABLE_TORCH)" in ON|on|1|TRUE|true|YES|yes) WITH_TORCH=1 ;; esac
VERSION="$(cache_value CMAKE_PROJECT_VERSION)"
[ -n "$VERSION" ] || fail "no CMAKE_PROJECT_VERSION in $BUILD/CMakeCache.txt"
if [ "$WITH_TORCH" = 1 ] && [ -z "$TORCH_LIB" ]; then fail "a torch build needs --torch-lib"; fi

# 1. Install.
PREFIX="$WORK/prefix"
say "installing $BUILD into $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "cmake --install"; }

# 2. The files.
executables=(bin/hotkernel bin/hotkernel-sandbox-compile bin/hotkernel-sandbox-run)
libraries=(lib/libhotkernel_preload.so)
if [ "$WITH_TORCH" = 1 ]; then
  executables+=(bin/hotkernel-warmup)
  libraries+=(lib/libhotkernel.so)
fi
for f in "${executables[@]}"; do [ -f "$PREFIX/$f" ] && [ -x "$PREFIX/$f" ] || fail "$f is missing or not executable"; done
for f in "${libraries[@]}" include/hotkernel/hotkernel.h lib/cmake/hotkernel/hotkernelConfig.cmake \
         lib/cmake/hotkernel/hotkernelConfigVersion.cmake lib/cmake/hotkernel/hotkernelTargets.cmake; do
  [ -f "$PREFIX/$f" ] || fail "$f is missing"
done
[ "$WITH_TORCH" = 1 ] || [ ! -e "$PREFIX/lib/libhotkernel.so" ] || fail "a torch-free build installed lib/libhotkernel.so"
say "files: ${executables[*]} ${libraries[*]} include/hotkernel/hotkernel.h lib/cmake/hotkernel/"

# 3. RUNPATHs: never the build tree; none in a torch-free tree; the torch parts' starts with
# the torch lib folder (then the CUDA runtime's folder).
runpath() { readelf -d "$1" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p'; }
for f in "${executables[@]}" "${libraries[@]}"; do
  rp="$(runpath "$PREFIX/$f")"
  # The torch parts: the library, warm-up and, in a torch build, the sandbox run helper (it runs
  # the harness stages against its own ATen).
  torch_part=0
  case "$f" in
    lib/libhotkernel.so|bin/hotkernel-warmup) torch_part=1 ;;
    bin/hotkernel-sandbox-run) torch_part="$WITH_TORCH" ;;
  esac
  if [ "$torch_part" = 1 ]; then
    case "$rp" in "$TORCH_LIB"|"$TORCH_LIB":*) ;; *) fail "$f: RUNPATH '$rp' does not start with '$TORCH_LIB'" ;; esac
  else
    [ -z "$rp" ] || fail "$f: RUNPATH '$rp', expected none"
  fi
  case ":$rp:" in *":$BUILD"*) fail "$f: RUNPATH '$rp' names the build tree $BUILD" ;; esac
  if ldd "$PREFIX/$f" | grep -q "not found"; then ldd "$PREFIX/$f"; fail "$f: a needed library is not found"; fi
  say "$f: RUNPATH '${rp}'"
done

# 4. Relocatable: everything below runs from a moved copy, the original gone.
MOVED="$WORK/moved/hotkernel-prefix"
mkdir -p "$WORK/moved"
mv "$PREFIX" "$MOVED"
HK="$MOVED/bin/hotkernel"
out="$("$HK" --version)" || fail "hotkernel --version exited $?"
[ "$out" = "hotkernel $VERSION" ] || fail "hotkernel --version printed '$out', expected 'hotkernel $VERSION'"
say "$HK --version: $out"

status=0
env -u HOTKERNEL_LIBRARY "$HK" doctor --json >"$WORK/doctor.json" 2>"$WORK/doctor.err" || status=$?
[ "$status" = 0 ] || [ "$status" = 1 ] || { cat "$WORK/doctor.err"; fail "hotkernel doctor --json exited $status"; }
"$PYTHON" - "$WORK/doctor.json" "$MOVED" "$WITH_TORCH" <<'EOF' || fail "hotkernel doctor --json"
import json, sys
path, prefix, with_torch = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
doc = json.load(open(path))
assert doc["format"] == "hotkernel-doctor", doc["format"]
assert doc["preload"] == {"path": prefix + "/lib/libhotkernel_preload.so", "found": True}, doc["preload"]
assert doc["library"] == {"path": prefix + "/lib/libhotkernel.so", "found": with_torch}, doc["library"]
assert doc["torch"]["built_with"] == with_torch, doc["torch"]
EOF
say "hotkernel doctor --json: exit $status, the moved prefix's shim and library"

out="$(LD_PRELOAD= HOTKERNEL=0 "$HK" run -- sh -c 'printf %s "$LD_PRELOAD"')" || fail "hotkernel run exited $?"
[ "$out" = "$MOVED/lib/libhotkernel_preload.so" ] || fail "hotkernel run set LD_PRELOAD='$out'"
say "hotkernel run: LD_PRELOAD=$out"

# 5. A consumer project through find_package(hotkernel) against the moved prefix.
consumer_args=(-S "$SOURCE/tests/install/consumer" "-DCMAKE_PREFIX_PATH=$MOVED" "-DHK_EXPECT_VERSION=$VERSION")
[ -n "$GENERATOR" ] && consumer_args+=(-G "$GENERATOR")
cmake "${consumer_args[@]}" -B "$WORK/consumer" >"$WORK/consumer.log" 2>&1 || { cat "$WORK/consumer.log"; fail "consumer configure"; }
cmake --build "$WORK/consumer" >>"$WORK/consumer.log" 2>&1 || { cat "$WORK/consumer.log"; fail "consumer build"; }
out="$("$WORK/consumer/consumer")" || fail "consumer exited $?"
expected="preload=$MOVED/lib/libhotkernel_preload.so
cli=$MOVED/bin/hotkernel
loaded=0"
[ "$out" = "$expected" ] || fail "consumer printed '$out', expected '$expected'"
say "consumer (hotkernel::headers, ::preload, ::cli): ok"
torch_version="$(cat "$WORK/consumer/torch_version.txt")"
status=0
cmake "${consumer_args[@]}" -B "$WORK/consumer-library" -DHK_REQUIRE_LIBRARY=ON >"$WORK/consumer-library.log" 2>&1 || status=$?
if [ "$WITH_TORCH" = 1 ]; then
  [ "$status" = 0 ] || { cat "$WORK/consumer-library.log"; fail "find_package(hotkernel COMPONENTS library) failed"; }
  [ -n "$torch_version" ] || fail "hotkernel_TORCH_VERSION is empty in a torch build"
  cmake --build "$WORK/consumer-library" >>"$WORK/consumer-library.log" 2>&1 ||
    { cat "$WORK/consumer-library.log"; fail "consumer_linked build"; }
  out="$("$WORK/consumer-library/consumer_linked")" || fail "consumer_linked exited $? ('$out')"
  [ "$out" = "plans=0" ] || fail "consumer_linked printed '$out'"
  say "consumer_linked (hotkernel::hotkernel, torch $torch_version): ok"
else
  [ "$status" != 0 ] || fail "find_package(hotkernel COMPONENTS library) succeeded without libhotkernel.so"
  grep -q "built without torch" "$WORK/consumer-library.log" || { cat "$WORK/consumer-library.log"; fail "the refusal does not name the component"; }
  [ -z "$torch_version" ] || fail "hotkernel_TORCH_VERSION is '$torch_version' in a torch-free build"
  say "find_package(hotkernel COMPONENTS library): refused without torch, as it should"
fi

# 6. The layout pip installs (pyproject.toml): the package with bin/ and lib/ inside.
PKG="$WORK/site/hotkernel"
mkdir -p "$WORK/site"
cp -r "$SOURCE/python/hotkernel" "$PKG"
cp -a "$MOVED/bin" "$MOVED/lib" "$PKG/"
export PYTHONPATH="$WORK/site" PYTHONDONTWRITEBYTECODE=1
unset HOTKERNEL_HOME
out="$(LD_PRELOAD= HOTKERNEL=0 "$PYTHON" -m hotkernel run -- sh -c 'printf %s "$LD_PRELOAD"')" || fail "python -m hotkernel run exited $?"
[ "$out" = "$PKG/lib/libhotkernel_preload.so" ] || fail "python -m hotkernel run set LD_PRELOAD='$out'"
say "python -m hotkernel run: LD_PRELOAD=$out"
out="$("$PYTHON" -c 'import sys; from hotkernel._launcher import cli; sys.argv[0] = "hotkernel"; sys.exit(cli())' --version)" ||
  fail "the hotkernel console script exited $?"
[ "$out" = "hotkernel $VERSION" ] || fail "the console script's --version printed '$out'"
out="$(LD_PRELOAD= HOTKERNEL=0 "$PYTHON" -c 'import sys; from hotkernel._launcher import cli; sys.exit(cli())' \
       run -- sh -c 'printf %s "$LD_PRELOAD"')" || fail "the console script's run exited $?"
[ "$out" = "$PKG/lib/libhotkernel_preload.so" ] || fail "the console script's run set LD_PRELOAD='$out'"
say "the hotkernel console script: --version, run: ok"
say "all checks passed"
