#!/usr/bin/env bash
# Builds tools/gpu/segv-backtrace.c with this machine's cc into a fresh temporary folder and prints the
# library's path (nothing, and status 1, when cc fails): append it to a command's LD_PRELOAD.
set -u
so="$(mktemp -d)/segv-backtrace.so"
cc -shared -fPIC -O1 -o "$so" "$(dirname "$0")/segv-backtrace.c" -ldl -lpthread || exit 1
echo "$so"
