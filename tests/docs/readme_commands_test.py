#!/usr/bin/env python3
"""The commands README.md shows, run against this build tree on a machine without a GPU.

Every fenced block of the README carries a marker, an HTML comment right before it (the convention is
documented in tests/README.md, "README commands"):

  <!-- readme-test: run -->        each line of the block runs in bash, from a scratch directory
  <!-- readme-test: python -->     the block is one Python program, run under `build/bin/hotkernel run`
  <!-- readme-test: cmake -->      the block is the CMakeLists.txt of a program `server`, built against
                                   `cmake --install build --prefix PREFIX` and run
  <!-- readme-test: skip REASON --> the block is not run; REASON is printed
  <!-- readme-test: inline -->     the paragraph after it (not a block) shows the commands the marker names

A block without a marker fails the test, so that a new block is either run or skipped with a reason.
Lines after the mode, inside the comment, refine it (shell-quoted words):

  expect "PART" STATUS "OUTPUT"   a command holding PART exits STATUS and prints OUTPUT (stdout or stderr);
                                  any other command must exit 0
  skip "PART" REASON...           commands holding PART are not run
  given "CODE"                    (python) Python run before the block, for the names it leaves undefined
  command "CMD"                   (inline) CMD, which the paragraph must show verbatim, runs like a `run` line

Each `expect` and `skip` must match a command of its block, and each `command` must be in its paragraph,
so a marker never outlives the text it describes.

The scratch directory holds `build` (a link to this build tree), `python` (a link to the checkout's
python/), `serve.py` (a small torch script on the CPU that fails unless libhotkernel.so is in its
process) and the cache (HOTKERNEL_CACHE_DIR); `python` on PATH is the build's Python with torch, the
build's bin/ is on PATH and python/ on PYTHONPATH (what `pip install` would provide: the `hotkernel`
command and package). Every command runs with
CUDA_VISIBLE_DEVICES= and no other HOTKERNEL_* variable, so the expectations are those of a machine
without a GPU; where a CUDA device is visible anyway the test exits 77 (skipped).

Exits 0 when every command met its expectation, 1 otherwise (each failure named), 2 on bad usage.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

MARKER = re.compile(r"^<!--\s*readme-test:(.*?)(-->\s*)?$")
FENCE = re.compile(r"^```(\S*)\s*$")
MODES = ("run", "python", "cmake", "skip", "inline")
COMMAND_TIMEOUT_S = 180

# Note [A script that shows it was served]
# serve.py stands for the user's serving script; it fails when
# the command that ran it did not put hotkernel into the process, so `hotkernel run` and the LD_PRELOAD
# route are checked for what they are for, not only for their exit status.
SERVE_PY = """\
import torch
x = torch.randn(64, 128)
for _ in range(200):
    y = torch.softmax(x, -1)
with open("/proc/self/maps") as maps:
    if "libhotkernel.so" not in maps.read():
        raise SystemExit("serve.py: libhotkernel.so is not loaded in this process")
print("serve.py: ok", float(y.sum()))
"""

SERVER_CPP = """\
#include <cstdio>

#include "hotkernel/hotkernel.h"

int main() {
  std::printf("plans=%d\\n", hotkernel_plan_count());
  return 0;
}
"""


class Marker:
    def __init__(self, line_no, mode, reason, rules):
        self.line_no = line_no
        self.mode = mode
        self.reason = reason
        self.expects = []   # (part, status, output)
        self.skips = []     # (part, reason)
        self.given = []
        self.commands = []
        for words in rules:
            kind = words[0]
            if kind == "expect" and len(words) == 4 and words[2].isdigit():
                self.expects.append((words[1], int(words[2]), words[3]))
            elif kind == "skip" and len(words) >= 3:
                self.skips.append((words[1], " ".join(words[2:])))
            elif kind == "given" and len(words) == 2:
                self.given.append(words[1])
            elif kind == "command" and len(words) == 2:
                self.commands.append(words[1])
            else:
                raise ValueError("README.md:%d: a marker line that is not expect/skip/given/command: %s"
                                 % (line_no, " ".join(words)))


class Section:
    """A marker and what it applies to: a fenced block's lines or a paragraph's text."""

    def __init__(self, marker, start_line, language, lines):
        self.marker = marker
        self.start_line = start_line
        self.language = language
        self.lines = lines


def parse_readme(text):
    """Returns (sections, errors): every fenced block and inline paragraph with its marker."""
    lines = text.split("\n")
    sections, errors = [], []
    pending = None
    i = 0
    while i < len(lines):
        line = lines[i]
        match = MARKER.match(line.strip())
        if match:
            body = [match.group(1)]
            start = i
            while not match.group(2):
                i += 1
                if i == len(lines):
                    errors.append("README.md:%d: the marker is not closed" % (start + 1))
                    return sections, errors
                match = re.match(r"^(.*?)(-->\s*)?$", lines[i].strip())
                body.append(match.group(1))
            try:
                head = shlex.split(body[0])
                rules = [words for words in (shlex.split(b, comments=True) for b in body[1:]) if words]
                if not head or head[0] not in MODES:
                    raise ValueError("README.md:%d: the marker's mode is not one of %s" % (start + 1, ", ".join(MODES)))
                if head[0] == "skip" and len(head) < 2:
                    raise ValueError("README.md:%d: a skipped block needs a reason" % (start + 1))
                pending = Marker(start + 1, head[0], " ".join(head[1:]), rules)
            except ValueError as error:
                message = str(error)
                errors.append(message if message.startswith("README.md:") else
                              "README.md:%d: the marker does not parse: %s" % (start + 1, message))
                pending = None
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if pending is None or pending.mode == "inline":
                errors.append("README.md:%d: a fenced block without a readme-test marker before it" % (i + 1))
            else:
                sections.append(Section(pending, i + 2, fence.group(1), lines[i + 1:end]))
            pending = None
            i = end + 1
            continue
        if pending is not None and pending.mode == "inline" and line.strip():
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            sections.append(Section(pending, i + 1, "", lines[i:end]))
            pending = None
            i = end
            continue
        if pending is not None and line.strip():
            errors.append("README.md:%d: the marker is not followed by a fenced block" % pending.line_no)
            pending = None
        i += 1
    return sections, errors


class Runner:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.failures = []
        self.ran = 0
        self.skipped = []

    def fail(self, where, what):
        self.failures.append("%s: %s" % (where, what))
        print("  FAIL " + what, flush=True)

    def prepare(self):
        if os.path.lexists(self.work):
            shutil.rmtree(self.work)
        os.makedirs(self.work)
        os.chmod(self.work, 0o700)
        os.symlink(os.path.abspath(self.args.build), os.path.join(self.work, "build"))
        os.symlink(os.path.join(os.path.abspath(self.args.source), "python"), os.path.join(self.work, "python"))
        with open(os.path.join(self.work, "serve.py"), "w") as f:
            f.write(SERVE_PY)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HOTKERNEL") and k not in ("LD_PRELOAD", "PYTHONPATH", "CUDA_VISIBLE_DEVICES")}
        python_bin = os.path.dirname(os.path.abspath(self.args.python))
        env["PATH"] = os.pathsep.join([python_bin, os.path.join(self.work, "build", "bin"), env.get("PATH", "")])
        env["HOTKERNEL_CACHE_DIR"] = os.path.join(self.work, "cache")
        env["PYTHONPATH"] = os.path.join(self.work, "python")
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env = env

    def gpu_visible(self):
        out = subprocess.run([os.path.join(self.work, "build", "bin", "hotkernel"), "doctor", "--json"],
                             cwd=self.work, env=self.env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        try:
            return bool(json.loads(out.stdout).get("devices"))
        except ValueError:
            return False  # doctor's own failure shows up when the README's doctor lines run

    def execute(self, argv, where, expected_status=0, expected_output="", env=None, cwd=None):
        self.ran += 1
        try:
            done = subprocess.run(argv, cwd=cwd or self.work, env=env or self.env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.fail(where, "did not finish within %d s" % COMMAND_TIMEOUT_S)
            return None
        output = done.stdout + done.stderr
        ok = done.returncode == expected_status and expected_output in output
        print("  %s exit %d%s" % ("ok  " if ok else "FAIL", done.returncode,
                                  "" if not expected_status else " (expected %d)" % expected_status), flush=True)
        if not ok:
            wanted = "exit %d" % expected_status + (" and %r in the output" % expected_output if expected_output else "")
            self.failures.append("%s: expected %s, got exit %d:\n%s" % (where, wanted, done.returncode,
                                                                        indent(output.strip() or "(no output)")))
        return done

    def shell_commands(self, section, commands):
        """Runs each command (a README line) in bash, after the marker's skip and expect rules."""
        used = set()
        for line_no, command in commands:
            where = "README.md:%d `%s`" % (line_no, command.split("  #")[0].strip())
            print("README.md:%d $ %s" % (line_no, command), flush=True)
            skip = next((s for s in section.marker.skips if s[0] in command), None)
            if skip:
                used.add(("skip", skip[0]))
                self.skipped.append("README.md:%d `%s`: %s" % (line_no, command.split("#")[0].strip(), skip[1]))
                print("  skipped: " + skip[1], flush=True)
                continue
            expect = next((e for e in section.marker.expects if e[0] in command), None)
            if expect:
                used.add(("expect", expect[0]))
            self.execute(["bash", "-c", command], where, *(expect[1:] if expect else ()))
        for part, _ in section.marker.skips:
            if ("skip", part) not in used:
                self.fail("README.md:%d" % section.marker.line_no, "skip %r matches no command of its block" % part)
        for part, _, _ in section.marker.expects:
            if ("expect", part) not in used:
                self.fail("README.md:%d" % section.marker.line_no, "expect %r matches no command of its block" % part)

    def run_section(self, section):
        mode = section.marker.mode
        if mode == "skip":
            print("README.md:%d ```%s block: skipped: %s" % (section.start_line - 1, section.language,
                                                             section.marker.reason), flush=True)
            self.skipped.append("README.md:%d block: %s" % (section.start_line - 1, section.marker.reason))
        elif mode == "run":
            commands = [(section.start_line + k, line) for k, line in enumerate(section.lines)
                        if line.strip() and not line.strip().startswith("#")]
            self.shell_commands(section, commands)
        elif mode == "inline":
            paragraph = " ".join(line.strip() for line in section.lines)
            commands = []
            for command in section.marker.commands:
                if "`" + command not in paragraph:
                    self.fail("README.md:%d" % section.marker.line_no,
                              "the paragraph at line %d shows no `%s`" % (section.start_line, command))
                else:
                    commands.append((section.start_line, command))
            self.shell_commands(section, commands)
        elif mode == "python":
            program = os.path.join(self.work, "readme_block_%d.py" % section.start_line)
            with open(program, "w") as f:
                f.write("\n".join(section.marker.given + section.lines) + "\n")
            print("README.md:%d python block under `build/bin/hotkernel run`" % section.start_line, flush=True)
            self.execute(["build/bin/hotkernel", "run", "--", "python", program],
                         "README.md:%d python block" % section.start_line)
        elif mode == "cmake":
            self.cmake_consumer(section)

    def cmake_consumer(self, section):
        where = "README.md:%d cmake block" % section.start_line
        prefix = os.path.join(self.work, "prefix")
        project = os.path.join(self.work, "server")
        os.makedirs(project)
        with open(os.path.join(project, "server.cpp"), "w") as f:
            f.write(SERVER_CPP)
        with open(os.path.join(project, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.22)\nproject(server LANGUAGES CXX)\n"
                    "set(CMAKE_CXX_STANDARD 17)\nadd_executable(server server.cpp)\n")
            f.write("\n".join(section.lines) + "\n")
        print("README.md:%d cmake block: `cmake --install build --prefix PREFIX`, then a program `server` "
              "whose CMakeLists.txt is the block" % section.start_line, flush=True)
        steps = [
            (["cmake", "--install", "build", "--prefix", prefix], self.work),
            (["cmake", "-S", project, "-B", os.path.join(project, "build"), "-G", self.args.generator,
              "-DCMAKE_PREFIX_PATH=" + prefix], self.work),
            (["cmake", "--build", os.path.join(project, "build")], self.work),
            ([os.path.join(project, "build", "server")], self.work),
        ]
        for argv, cwd in steps:
            print("  $ " + " ".join(shlex.quote(a) for a in argv), flush=True)
            done = self.execute(argv, where + " (%s)" % " ".join(argv[:2]), cwd=cwd)
            if done is None or done.returncode != 0:
                return
        if "plans=0" not in done.stdout:
            self.fail(where, "server printed %r, not plans=0" % done.stdout.strip())


def indent(text):
    return "\n".join("    " + line for line in text.split("\n")[-40:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="the checkout (README.md, python/)")
    parser.add_argument("--build", required=True, help="the build tree (bin/hotkernel, lib/)")
    parser.add_argument("--python", required=True, help="the Python with the torch the build was made against")
    parser.add_argument("--work", required=True, help="a scratch directory (emptied first)")
    parser.add_argument("--generator", default="Ninja", help="CMake generator of the consumer program")
    parser.add_argument("--readme", help="the README to run (default: SOURCE/README.md)")
    args = parser.parse_args()
    with open(args.readme or os.path.join(args.source, "README.md")) as f:
        sections, errors = parse_readme(f.read())
    for error in errors:
        print("FAIL " + error)
    if errors:
        return 1
    runner = Runner(args)
    runner.prepare()
    if runner.gpu_visible():
        print("a CUDA device is visible despite CUDA_VISIBLE_DEVICES=: the expectations are a GPU-less machine's")
        return 77
    for section in sections:
        runner.run_section(section)
    print("\n%d commands run, %d skipped:" % (runner.ran, len(runner.skipped)))
    for skipped in runner.skipped:
        print("  " + skipped)
    if runner.failures:
        print("\n%d failed:" % len(runner.failures))
        for failure in runner.failures:
            print("- " + failure)
        return 1
    print("all README commands met their expectations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
