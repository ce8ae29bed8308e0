"""`python -m hotkernel run` and `doctor`, and the pip install's `hotkernel` command (cli).

run and doctor find the preload shim, set up LD_PRELOAD like `hotkernel run`, exec;
cli execs the `hotkernel` binary found the same way.

Where the shim is looked for, first found wins:
  1. $HOTKERNEL_HOME/lib/libhotkernel_preload.so when HOTKERNEL_HOME is set (then
     only there: a prefix named on purpose is never silently replaced by another);
  2. lib/libhotkernel_preload.so inside this package (`pip install
     --no-build-isolation .` puts the libraries there, pyproject.toml);
  3. build/lib/libhotkernel_preload.so of the repository this package sits in
     (<repo>/python/hotkernel, run from a checkout with PYTHONPATH=<repo>/python).
The `hotkernel` binary is looked for beside it, in the prefix's bin/ (the
layout tools/cli/InstallLayout.h describes); libhotkernel.so beside the shim is
what the shim loads (HOTKERNEL_LIBRARY overrides it, read by the shim itself).

Exit statuses are `hotkernel run`'s (tools/cli/ExitStatus.h): the command's own,
125 when this launcher fails (no command, an unknown option before it, the shim
missing), 126 when the command cannot be executed, 127 when it is not found.
"""
import json
import os
import sys

PRELOAD_NAME = "libhotkernel_preload.so"
EXIT_RUN_FAILED = 125
EXIT_CANNOT_EXECUTE = 126
EXIT_COMMAND_NOT_FOUND = 127
RUN_USAGE = "usage: python -m hotkernel run [--] COMMAND [ARGS...]"
USAGE = """usage: python -m hotkernel COMMAND [ARGS...]

commands:
  run [--] COMMAND [ARGS...]   run a command with hotkernel preloaded (LD_PRELOAD appended to)
  doctor [--json]              can this machine serve, and with what (the `hotkernel` binary's doctor)

The preload shim is looked for in $HOTKERNEL_HOME/lib when HOTKERNEL_HOME is set,
else in this package's lib/, else in the build/lib of the repository holding it.
`run` exits with the command's status; 125: run failed (no command, unknown
option, shim missing); 126: the command cannot be executed; 127: not found."""

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def candidate_library_dirs(environ=None):
    """The directories searched for the shim, in order, as (directory, where it came from)."""
    environ = os.environ if environ is None else environ
    home = environ.get("HOTKERNEL_HOME", "")
    if home:
        return [(os.path.join(os.path.abspath(home), "lib"), "HOTKERNEL_HOME")]
    return [(os.path.join(_PACKAGE_DIR, "lib"), "the package's data"),
            (os.path.join(os.path.dirname(os.path.dirname(_PACKAGE_DIR)), "build", "lib"), "the repository's build tree")]


def preload_library(environ=None):
    """The absolute path of libhotkernel_preload.so by the search order above, or None when none is found."""
    for directory, _ in candidate_library_dirs(environ):
        path = os.path.join(directory, PRELOAD_NAME)
        if os.path.isfile(path):
            return os.path.realpath(path)
    return None


def _not_found_message(environ=None):
    tried = ", ".join("{} ({})".format(os.path.join(d, PRELOAD_NAME), why) for d, why in candidate_library_dirs(environ))
    return ("cannot find the preload library {}; looked in: {}. Set HOTKERNEL_HOME to the prefix "
            "holding lib/{} (a build directory works), or build the target hotkernel_preload"
            .format(PRELOAD_NAME, tried, PRELOAD_NAME))


def _same_file(a, b):
    if a == b:
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _preload_entries(value):
    # As the loader splits LD_PRELOAD: on ':' and spaces, empty entries dropped.
    return [e for e in value.replace(" ", ":").split(":") if e]


def preload_with(current, shim):
    """LD_PRELOAD with the shim appended, as `hotkernel run` builds it (tools/cli/RunCommand.cpp preloadWith).

    Returns (value, note): the value unchanged when the shim is already in it; another
    libhotkernel_preload.so in it is replaced (note says so, else note is "").
    """
    kept, replaced = [], []
    for entry in _preload_entries(current):
        if _same_file(entry, shim):
            return current, ""
        (replaced if os.path.basename(entry) == PRELOAD_NAME else kept).append(entry)
    if not replaced:
        value = current.rstrip(": ")
        return (value + ":" + shim if value else shim), ""
    note = "LD_PRELOAD named another hotkernel preload library ({}); using {} instead".format(", ".join(replaced), shim)
    return ":".join(kept + [shim]), note


def _exec(program_argv, environ, who):
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(program_argv[0], program_argv, environ)
    except (FileNotFoundError, NotADirectoryError):
        what = "no such file" if "/" in program_argv[0] else "command not found"
        sys.stderr.write("{}: {}: {}\n".format(who, program_argv[0], what))
        return EXIT_COMMAND_NOT_FOUND
    except OSError as e:
        sys.stderr.write("{}: cannot execute {}: {}\n".format(who, program_argv[0], e.strerror or e))
        return EXIT_CANNOT_EXECUTE
    return EXIT_RUN_FAILED  # not reached: exec replaced the process


def run(args):
    """`python -m hotkernel run [--] COMMAND [ARGS...]`: exec the command under the preload; returns only on failure."""
    who = "python -m hotkernel run"
    if args and args[0] in ("-h", "--help"):
        print(RUN_USAGE)
        print("Exit status: the command's. 125: run failed (no command, unknown option, preload library missing); "
              "126: the command cannot be executed; 127: the command was not found.")
        return 0
    if args and args[0] == "--":
        args = args[1:]
    elif args and args[0].startswith("-"):
        sys.stderr.write("{}: unknown option '{}' before the command (put the command after --)\n{}\n"
                         .format(who, args[0], RUN_USAGE))
        return EXIT_RUN_FAILED
    if not args or not args[0]:
        sys.stderr.write("{}: missing command\n{}\n".format(who, RUN_USAGE))
        return EXIT_RUN_FAILED
    shim = preload_library()
    if shim is None:
        sys.stderr.write("{}: {}\n".format(who, _not_found_message()))
        return EXIT_RUN_FAILED
    environ = dict(os.environ)
    value, note = preload_with(environ.get("LD_PRELOAD", ""), shim)
    if note:
        sys.stderr.write("{}: {}\n".format(who, note))
    environ["LD_PRELOAD"] = value
    return _exec(list(args), environ, who)


def hotkernel_binary():
    """The `hotkernel` CLI beside the shim (<prefix>/bin/hotkernel), or None."""
    shim = preload_library()
    if shim is None:
        return None
    path = os.path.join(os.path.dirname(os.path.dirname(shim)), "bin", "hotkernel")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _binary_missing_message():
    """Why hotkernel_binary() found nothing: no shim, or no binary beside it."""
    shim = preload_library()
    if shim is None:
        return _not_found_message()
    return ("the hotkernel binary is not beside the preload library: {} is missing"
            .format(os.path.join(os.path.dirname(os.path.dirname(shim)), "bin", "hotkernel")))


def doctor(args):
    """`python -m hotkernel doctor [--json]`: exec the `hotkernel` binary's doctor beside the shim.

    Without that binary it says why (with --json as a doctor document) and returns 1,
    doctor's status for "something needed is missing".
    """
    binary = hotkernel_binary()
    if binary is not None:
        return _exec([binary, "doctor"] + list(args), dict(os.environ), "python -m hotkernel doctor")
    problem = _binary_missing_message()
    if "--json" in args:
        print(json.dumps({"format": "hotkernel-doctor", "version": 1, "ready": False, "problems": [problem]}, indent=2))
    else:
        sys.stderr.write("python -m hotkernel doctor: {}\n".format(problem))
    return 1


def cli(argv=None):
    """The `hotkernel` console script of a pip install (pyproject.toml): exec the `hotkernel` binary.

    The binary is the one beside the shim (hotkernel_binary(): the package's bin/ in a
    pip install), so `hotkernel run` finds the package's lib/libhotkernel_preload.so
    from its own location. Returns 125 with a message when there is no binary.
    """
    argv = sys.argv[1:] if argv is None else argv
    binary = hotkernel_binary()
    if binary is None:
        sys.stderr.write("hotkernel: {}\n".format(_binary_missing_message()))
        return EXIT_RUN_FAILED
    return _exec([binary] + list(argv), dict(os.environ), "hotkernel")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(USAGE + "\n")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "run":
        return run(rest)
    if command == "doctor":
        return doctor(rest)
    sys.stderr.write("python -m hotkernel: unknown command '{}'\n{}\n".format(command, USAGE))
    return 2
