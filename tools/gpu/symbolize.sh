#!/usr/bin/env bash
# The frames of a segv-backtrace.c report in LOG ("/lib/x.so(+0x1234)" or "/bin/x(symbol+0x12)") as functions,
# one line each: the library, the offset and what addr2line (or c++filt for a named symbol) says it is.
set -u
grep -oE '[^ (]+\([^)]*\+0x[0-9a-f]+\)' "$1" | while IFS='(' read -r lib rest; do
  [ -f "$lib" ] || continue
  sym="${rest%%+*}"; off="${rest#*+}"; off="${off%)}"
  if [ -z "$sym" ]; then
    echo "$lib +$off: $(addr2line -f -C -i -e "$lib" "$off" 2>/dev/null | paste -sd" " | cut -c1-400)"
  else
    echo "$lib $(echo "$sym" | c++filt)+$off"
  fi
done
