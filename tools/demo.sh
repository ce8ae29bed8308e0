#!/usr/bin/env bash
# The main job: set up, then run the demo (tools/demo.py) on a small,
# unmodified PyTorch inference script (examples/softmax_inference.py).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/tools/setup.sh"
BUILD="${HOTKERNEL_BUILD_DIR:-$ROOT/build}"
exec "$(cat "$BUILD/.hotkernel-python")" "$ROOT/tools/demo.py" --build "$BUILD" "$@"
