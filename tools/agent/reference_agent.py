#!/usr/bin/env python3
"""The reference external agent of hotkernel (Python 3 standard library only).

Reads one "hotkernel-agent-task" version 1 document on stdin and writes one
"hotkernel-agent-reply" version 1 document on stdout (tools/agent/PROTOCOL.md).

It answers with the task's family template specialised to one parameter point:
the point's #define lines prepended to the template, and the point's launch.
It is stateless, like every agent (one process per request): it keeps what it
has tried in the reply's "notes", which hotkernel echoes back in the next
task's lastAttempt.reply.notes, and it also skips the point that is already the
best so far. So successive requests walk through the points, best guess first.

Usage: reference_agent.py [--mode MODE]   (or HOTKERNEL_REFERENCE_AGENT_MODE=MODE)
Modes other than "good" misbehave on purpose, for hotkernel's tests:
  good           a valid, correct kernel (the default)
  malformed      output that is not JSON
  timeout        never answers (sleeps forever)
  hang-with-child  starts a child that holds stdout open, writes the child's pid
                 to $HOTKERNEL_REFERENCE_AGENT_PIDFILE, then sleeps forever
  crash          kills itself with SIGSEGV
  exit           exits with status 3 after a message on stderr
  huge           writes 16 MiB on stdout
  compile-error  a valid reply whose source does not compile
  include        a valid-looking reply whose source has an #include
  bad-launch     a reply whose launch.block is 100 (not a multiple of 32)
  missing-field  a reply without "kernelName"
"""

import json
import os
import signal
import sys
import time

TASK_FORMAT = "hotkernel-agent-task"
REPLY_FORMAT = "hotkernel-agent-reply"
VERSION = 1
AGENT = "reference"

DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}

MODES = ("good", "malformed", "timeout", "hang-with-child", "crash", "exit", "huge",
         "compile-error", "include", "bad-launch", "missing-field")


def specialize(source, defines):
    """The #define lines in name order, then the template (hotkernel's specializeSource)."""
    return "".join("#define %s %s\n" % (k, defines[k]) for k in sorted(defines)) + source


def fallback_point(variant):
    """A point for any row length when the task lists none: streaming, one element per access."""
    cols = variant["cols"]
    threads = 32
    while threads < 1024 and threads * 8 <= cols:
        threads *= 2
    defines = {"HK_DTYPE": str(DTYPE_CODES[variant["dtype"]]), "HK_THREADS": str(threads),
               "HK_ROWS": "1", "HK_VEC": "1", "HK_ITEMS": "0"}
    return {"params": {"threads": threads, "vec": 1, "items": 0, "rowsPerCta": 1},
            "defines": defines, "launch": {"block": threads, "rowsPerBlock": 1, "sharedBytes": 0}}


def previous_state(task):
    """What this agent noted in its last reply, if the last attempt was ours."""
    last = task.get("lastAttempt")
    if not last or not last.get("reply"):
        return {}
    try:
        state = json.loads(last["reply"].get("notes", ""))
    except ValueError:
        return {}
    return state if isinstance(state, dict) and state.get("agent") == AGENT else {}


def choose(task):
    family = task["family"]
    points = family["points"] or [fallback_point(task["variant"])]
    tried = set(previous_state(task).get("tried", []))
    best = task.get("best")
    best_source = best["kernel"]["source"] if best else None
    for i, p in enumerate(points):
        if specialize(family["source"], p["defines"]) == best_source:
            tried.add(i)  # already measured: it is the best
    untried = [i for i in range(len(points)) if i not in tried]
    if not untried:  # every point tried: start over
        tried = set()
        untried = list(range(len(points)))
    i = untried[0]
    return i, points[i], sorted(tried | {i})


def good_reply(task):
    i, point, tried = choose(task)
    family = task["family"]
    notes = {"agent": AGENT, "point": i, "params": point["params"], "tried": tried}
    last = task.get("lastAttempt")
    if last and not last.get("passed"):
        notes["previousFailure"] = last.get("stage")
    return {
        "format": REPLY_FORMAT,
        "version": VERSION,
        "source": specialize(family["source"], point["defines"]),
        "kernelName": family["kernelName"],
        "launch": point["launch"],
        "notes": json.dumps(notes, sort_keys=True),
    }


def sleep_forever():
    while True:
        time.sleep(3600)


def main(argv):
    mode = os.environ.get("HOTKERNEL_REFERENCE_AGENT_MODE", "good")
    if len(argv) >= 3 and argv[1] == "--mode":
        mode = argv[2]
    elif len(argv) > 1:
        sys.stderr.write("usage: reference_agent.py [--mode MODE]\n")
        return 2
    if mode not in MODES:
        sys.stderr.write("unknown mode %r; modes: %s\n" % (mode, ", ".join(MODES)))
        return 2

    task = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    if task.get("format") != TASK_FORMAT or task.get("version") != VERSION:
        sys.stderr.write("not a %s version %d document\n" % (TASK_FORMAT, VERSION))
        return 2

    out = sys.stdout
    if mode == "malformed":
        out.write("{this is not json")
        return 0
    if mode == "timeout":
        sleep_forever()
    if mode == "hang-with-child":
        pid = os.fork()
        if pid == 0:
            sleep_forever()
        pidfile = os.environ.get("HOTKERNEL_REFERENCE_AGENT_PIDFILE")
        if pidfile:
            with open(pidfile, "w") as f:
                f.write("%d\n" % pid)
        sleep_forever()
    if mode == "crash":
        out.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
        sleep_forever()
    if mode == "exit":
        sys.stderr.write("reference agent: exiting with status 3 as asked\n")
        return 3
    if mode == "huge":
        chunk = "x" * (1 << 20)
        for _ in range(16):
            out.write(chunk)
        return 0

    reply = good_reply(task)
    if mode == "compile-error":
        reply["source"] = ('extern "C" __global__ void %s(const void* in, void* out, long long rows, '
                           'long long cols) { this is not CUDA; }\n' % reply["kernelName"])
    elif mode == "include":
        reply["source"] = '#include "/etc/passwd"\n' + reply["source"]
    elif mode == "bad-launch":
        reply["launch"] = dict(reply["launch"], block=100)
    elif mode == "missing-field":
        del reply["kernelName"]
    json.dump(reply, out)
    out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
