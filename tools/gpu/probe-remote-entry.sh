#!/usr/bin/env bash
# Runs remote_entry_gpu_tests with its output streamed (line-buffered) to $OUT/remote-entry.log and a crashing
# thread's backtrace there (tools/gpu/segv-backtrace.c, preloaded); when it is still running after WAIT seconds
# (default 150), writes what each thread of it and of its probe waits in (wchan, syscall, a gdb backtrace where
# gdb exists) to $OUT/remote-entry-threads.txt, then kills both.
set -u
B="${HOTKERNEL_BUILD_DIR:-build-gpu}"
OUT="${OUT:-out}"
SEGV="$("$(dirname "$0")/segv-preload.sh")"
HOTKERNEL_LOG_LEVEL=debug LD_PRELOAD="$SEGV${LD_PRELOAD:+:$LD_PRELOAD}" stdbuf -oL -eL \
  "$B/bin/remote_entry_gpu_tests" >"$OUT/remote-entry.log" 2>&1 &
pid=$!
for _ in $(seq 1 "${WAIT:-150}"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$pid" 2>/dev/null; then
  for p in "$pid" $(pgrep -f remote_entry_gpu_probe); do
    echo "== process $p: $(tr '\0' ' ' </proc/"$p"/cmdline | cut -c1-200)"
    for t in /proc/"$p"/task/*; do
      echo "thread $(basename "$t") $(cat "$t"/comm) wchan=$(cat "$t"/wchan) syscall=$(cut -d' ' -f1-3 "$t"/syscall)"
    done
    if command -v gdb >/dev/null; then
      gdb -batch -p "$p" -ex "thread apply all bt 20" 2>&1 | grep -v "^\[New LWP" | head -400
    fi
  done >"$OUT/remote-entry-threads.txt" 2>&1
  kill -9 "$pid"
  pkill -9 -f remote_entry_gpu_probe
fi
wait "$pid"
echo "exit status $?" >>"$OUT/remote-entry.log"
# The backtrace's frames as functions.
"$(dirname "$0")/symbolize.sh" "$OUT/remote-entry.log" >"$OUT/remote-entry-frames.txt" 2>&1
