#!/usr/bin/env bash
# Downloads the Debian packages the GPU machine lacks into .deps/debs (ignored
# by git, carried to the GPU machine), where tools/gpu/run-h200.sh extracts them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$ROOT/.deps/debs"
cd "$ROOT/.deps/debs"
apt-get download libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15 libcli11-dev \
  libsqlite3-dev libsqlite3-0 libssl-dev libssl3 nlohmann-json3-dev libgtest-dev \
  libhiredis-dev libhiredis0.14 redis-server redis-tools libjemalloc2 liblzf1
ls -1 "$ROOT/.deps/debs"
