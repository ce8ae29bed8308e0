#!/usr/bin/env python3
"""Code-hygiene check: production code states decisions, not history; Notes resolve.

Production code is every source file (.h .hpp .c .cc .cpp .cu .cuh .py .sh and
CMakeLists.txt) under runtime/ interpose/ optimizer/ cache/ kernels/ tools/.
A finding is printed as `path:line: what`; the last line is
`check_code: N findings`, and the exit status is 0 only when N is 0.

Production code (comments, code and strings alike) holds no date (ISO
year-month[-day], year/month/day, a month name with a day or a year), no
benchmark results path or GPU-prefixed results file name, and no run name
(`run` and a number, an ordinal session). Measurements, dates, results files
and history belong in docs/design/<area>.md under the Note's title, or in
commit messages.

Layers: the serving path (interpose/serving/ and the public headers it
implements, interpose/include/hotkernel/interpose/{ServedOps,Recorder}.h)
includes no optimizer header; runtime/, cache/ and kernels/ include nothing
from the modules above them; only runtime/src/Config.cpp (and the shim and
the tools) reads the environment; tools/ and bench/ include only public headers
(a quoted include without a path names a file of their own
folder; bench/experiments/ is exempt); no production
.cpp file is over 500 lines; production code includes no <filesystem> and no
C++ file calls std::filesystem::remove_all (Note [No std::filesystem::remove_all
next to libtorch]).

Variables: every HOTKERNEL_* variable of the table in
runtime/include/hotkernel/runtime/Config.h is shown by `hotkernel doctor`
(tools/cli/EnvironmentVariables.cpp) and documented in README.md.

Notes, over the whole repository (code, tests, bench, docs, READMEs): a Note's
title is written in square brackets after the word Note.
  - In code, a definition is a comment line holding the Note and its title
    alone (after `//`, `#`, `/*` or ` * `; an optional colon after it) whose
    next line continues the comment with the explanation. In docs/design/*.md
    a level-2 or level-3 heading holding the Note alone is a definition.
  - Every other occurrence is a reference (a title may wrap across comment
    lines), including a title line alone above the code it explains; each
    reference must name a definition.
  - A title is defined at most once in code and at most once in docs/design
    (a design section repeats the code's title by intent: it holds the
    measurements and history behind the decision the code states).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCTION_DIRS = ("runtime", "interpose", "optimizer", "cache", "kernels", "tools")
SOURCE_EXT = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".py", ".sh")
TEXT_EXT = SOURCE_EXT + (".md", ".txt", ".cmake", ".in")
SKIP_DIRS = {".git", "__pycache__", ".venv", ".deps", ".whl", "out", "node_modules"}

MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
HISTORY_RULES = [
    ("a date", re.compile(r"(?<![\d.])20[1-3]\d[-/](?:0[1-9]|1[0-2])(?:[-/](?:0[1-9]|[12]\d|3[01]))?(?!\d|\.\d)")),
    ("a date", re.compile(r"\b" + MONTH + r" (?:[0-3]?\d\b(?!\.\d)|20[1-3]\d\b)")),
    ("a date", re.compile(r"\b[0-3]?\d " + MONTH + r"(?= 20[1-3]\d\b)")),
    ("a results path", re.compile(r"bench/" + r"results|(?<![\w-])results/(?:h|a|b)\d")),
    ("a results file name", re.compile(r"(?i)\b(?:h100|h200|a100|b200|gh200|l40s?|l4)-[\w.-]*\.(?:json|log|csv|txt|svg)\b")),
    ("a run name", re.compile(r"(?i)\brun[_-]?\d+[a-z]?\b")),
    ("a run name", re.compile(r"(?i)\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
                              r"thirteenth|fourteenth|fifteenth|\d+(?:st|nd|rd|th)|last|previous|earlier) session\b")),
    ("a run name", re.compile(r"(?i)\bsession of\b")),
]

# A Note's title may wrap onto the next comment line (so may the gap before it).
NOTE = "Note"
CONT = r"(?:[ \t]*\n[ \t]*(?://+!?|#+|\*(?!/)|>)?)?[ \t]*"
NOTE_REF = re.compile(r"\bNote" + CONT + r"\[([^\[\]\n]+(?:\n[^\[\]\n]*){0,2})\]")
CODE_DEF = re.compile(r"^[ \t]*(?://+|#+|/\*+|\*)[ \t]*Note \[([^\[\]]+)\][ \t]*:?[ \t]*(?:\*/)?[ \t]*$")
DOC_DEF = re.compile(r"^#{2,3} Note \[([^\[\]]+)\][ \t]*$")
WRAP = re.compile(r"[ \t]*\n[ \t]*(?://+!?|#+|\*(?!/)|>)?[ \t]*")


def continues_comment(line, following, hash_comments):
    """Whether `following` continues the comment that `line` (a Note's title) is in."""
    following = following.strip()
    if hash_comments:
        return following.startswith("#")
    if line.lstrip().startswith(("/*", "*")) and not line.rstrip().endswith("*/"):
        return bool(following) and not following.startswith("*/")
    return following.startswith("//")


def walk(top):
    for dirpath, dirnames, filenames in os.walk(top):
        rel = os.path.relpath(dirpath, ROOT)
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not (rel == "." and d.startswith("build")))
        for name in sorted(filenames):
            yield os.path.join(dirpath, name)


def is_production(rel):
    parts = rel.split(os.sep)
    if parts[0] not in PRODUCTION_DIRS:
        return False
    name = parts[-1]
    return name.endswith(SOURCE_EXT) or name == "CMakeLists.txt"


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
# (path prefix, forbidden include prefixes): a module includes nothing from the layers above it.
LAYER_RULES = [
    ("interpose/serving/", ("hotkernel/optimizer/", "hotkernel/interpose/Engine.h", "hotkernel/cache/")),
    ("interpose/include/hotkernel/interpose/ServedOps.h", ("hotkernel/optimizer/",)),
    ("interpose/include/hotkernel/interpose/Recorder.h", ("hotkernel/optimizer/",)),
    ("runtime/", ("hotkernel/kernels/", "hotkernel/cache/", "hotkernel/optimizer/", "hotkernel/interpose/")),
    ("kernels/", ("hotkernel/cache/", "hotkernel/optimizer/", "hotkernel/interpose/")),
    ("cache/", ("hotkernel/kernels/", "hotkernel/optimizer/", "hotkernel/interpose/")),
]
MAX_CPP_LINES = 500
# Note [Variables read on first need]: the library reads its variables in Config.cpp only; the shim (C, libc only)
# and the tools (command lines that report or set the environment) read them themselves.
# The process's own PATH (how a command resolves) is not a setting of hotkernel's.
GETENV = re.compile(r"\b(?:std::)?(?:getenv|secure_getenv)\s*\((?!\s*\"PATH\")")
GETENV_ALLOWED = ("runtime/src/Config.cpp", "interpose/preload/", "tools/")
# Note [No std::filesystem::remove_all next to libtorch]: production code, which runs in processes that load
# libtorch, uses no std::filesystem; no C++ file anywhere calls its remove_all.
FILESYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s*<filesystem>")
REMOVE_ALL = re.compile(r"\b(?:std::filesystem|fs)::remove_all\b")


def layering_findings(rel, lines):
    """Includes that point up the layers, private headers used by tools and benchmarks, long files."""
    found = []
    if not rel.endswith((".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh")):
        return found
    for number, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        target = m.group(1)
        for prefix, forbidden in LAYER_RULES:
            if rel.startswith(prefix) and target.startswith(forbidden):
                found.append(f"{rel}:{number}: includes '{target}', above its layer")
        top = rel.split(os.sep)[0]
        experiment = rel.startswith(os.path.join("bench", "experiments") + os.sep)
        if top in ("tools", "bench") and not experiment and "/" not in target:
            own = [d for d, _, names in os.walk(os.path.join(ROOT, top)) if target in names]
            if not own:
                found.append(f"{rel}:{number}: includes '{target}', a private header of another module")
    if is_production(rel) and not rel.startswith(GETENV_ALLOWED):
        for number, line in enumerate(lines, 1):
            if GETENV.search(line.split("//")[0]):
                found.append(f"{rel}:{number}: reads the environment outside Config (runtime/src/Config.cpp)")
    for number, line in enumerate(lines, 1):
        if is_production(rel) and FILESYSTEM_INCLUDE.match(line):
            found.append(f"{rel}:{number}: includes <filesystem> in code that runs next to libtorch")
        if REMOVE_ALL.search(line.split("//")[0]):
            found.append(f"{rel}:{number}: std::filesystem::remove_all (tests/TempDir.h's removeTree instead)")
    if is_production(rel) and rel.endswith(".cpp") and len(lines) > MAX_CPP_LINES + 1:
        found.append(f"{rel}:1: {len(lines) - 1} lines, over {MAX_CPP_LINES}: split it by concept")
    return found


VARIABLE_ROW = re.compile(r"^// \| (HOTKERNEL_[A-Z0-9_]+) +\|", re.M)
CONFIG_HEADER = os.path.join("runtime", "include", "hotkernel", "runtime", "Config.h")
DOCTOR_LIST = os.path.join("tools", "cli", "EnvironmentVariables.cpp")


def variable_findings(config_header, doctor_list, readme):
    """The variables of Config.h's table that doctor's list or the README leave out."""
    findings = []
    for name in VARIABLE_ROW.findall(config_header):
        if f'"{name}"' not in doctor_list:
            findings.append(f"{DOCTOR_LIST}: {name} (Config.h's table) is not shown by hotkernel doctor")
        if f"`{name}" not in readme:
            findings.append(f"README.md: {name} (Config.h's table) is not documented")
    return findings


def main():
    findings = []
    findings.extend(variable_findings(read(os.path.join(ROOT, CONFIG_HEADER)), read(os.path.join(ROOT, DOCTOR_LIST)),
                                      read(os.path.join(ROOT, "README.md"))))
    definitions = {}  # title -> [(rel, line, kind)]
    references = []   # (rel, line, title)
    for path in walk(ROOT):
        rel = os.path.relpath(path, ROOT)
        name = os.path.basename(path)
        if not (name.endswith(TEXT_EXT) or name == "CMakeLists.txt"):
            continue
        text = read(path)
        lines = text.split("\n")
        findings.extend(layering_findings(rel, lines))
        if is_production(rel):
            for number, line in enumerate(lines, 1):
                for what, rule in HISTORY_RULES:
                    m = rule.search(line)
                    if m:
                        findings.append(f"{rel}:{number}: {what} in production code: '{m.group(0)}'")
        design = rel.startswith(os.path.join("docs", "design") + os.sep) and name.endswith(".md")
        code = not name.endswith(".md")
        definition_lines = set()
        hash_comments = name.endswith((".py", ".sh", ".txt", ".cmake"))
        for number, line in enumerate(lines, 1):
            m = (CODE_DEF if code else DOC_DEF if design else None)
            m = m.match(line) if m else None
            if m and code and not continues_comment(line, lines[number] if number < len(lines) else "",
                                                    hash_comments):
                m = None  # a title line above the code it explains: a reference
            if m:
                kind = "design" if design else "code"
                definitions.setdefault(m.group(1).strip(), []).append((rel, number, kind))
                definition_lines.add(number)
        if "Note" not in text:
            continue
        line_starts = [0]
        for line in lines:
            line_starts.append(line_starts[-1] + len(line) + 1)
        for m in NOTE_REF.finditer(text):
            number = text.count("\n", 0, m.start()) + 1
            if number in definition_lines and "\n" not in m.group(0):
                continue
            title = " ".join(WRAP.sub(" ", m.group(1)).split())
            references.append((rel, number, title))
    for title, where in sorted(definitions.items()):
        for kind in ("code", "design"):
            same = [w for w in where if w[2] == kind]
            for rel, number, _ in same[1:]:
                findings.append(f"{rel}:{number}: {NOTE} [{title}] defined again "
                                f"(first at {same[0][0]}:{same[0][1]})")
    for rel, number, title in references:
        if title not in definitions:
            findings.append(f"{rel}:{number}: {NOTE} [{title}] is referenced but defined nowhere")
    for finding in findings:
        print(finding)
    print(f"check_code: {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
