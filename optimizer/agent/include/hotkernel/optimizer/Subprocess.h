#pragma once
// Runs another program to completion from any thread of a large, multi-threaded
// process (the serving process): argv without a shell, bytes on its stdin,
// stdout and stderr captured up to a cap, a wall-clock timeout that kills the
// program's whole process group.
//
// Note [Spawning from a serving process]
// The child is started with posix_spawn (glibc: clone(CLONE_VM | CLONE_VFORK)),
// not fork: fork copies the page tables of a process that may map tens of GiB
// and write-protects every page of it, so every thread of the serving process
// would take copy-on-write faults until the child execs; and after fork in a
// multi-threaded process only async-signal-safe calls are allowed. posix_spawn
// does the whole child side (dup2, chdir, close, exec) inside the C library.
// The child gets:
//   - a new process group of its own (pgid = its pid), so a timeout can kill
//     everything it started with one kill(-pid, SIGKILL);
//   - stdin, stdout and stderr on pipes (stdin may be closed early by the child:
//     the parent never dies of SIGPIPE, see Subprocess.cpp);
//   - no other file descriptor of the parent: every fd >= 3 is closed
//     (posix_spawn_file_actions_addclosefrom_np, glibc >= 2.34; on an older
//     glibc only the parent's O_CLOEXEC descriptors are closed);
//   - an empty signal mask and every signal at its default action (a parent
//     that ignores SIGPIPE, as Python does, does not pass that on);
//   - the parent's environment plus `env` (later entries win).
//
// Note [No zombies, no stragglers]
// runSubprocess always reaps its child before it returns, also on timeout and
// on exceptions. When the child has exited, whatever is left of its process
// group (background processes it started that still hold its stdout, say) is
// killed with SIGKILL: a run never leaves processes behind, unless one of them
// left the group itself (setsid/setpgid). Exit is detected with a pidfd
// (Linux >= 5.3; otherwise a 10 ms poll of waitid(WNOWAIT)), so a child that
// closes its stdout and keeps running still ends at the timeout. A process
// that reaps children it does not own (waitpid(-1), SIGCHLD set to SIG_IGN)
// can take the exit status away: the result then says so (statusUnknown).
//
// Note [Output caps]
// stdout beyond maxStdoutBytes ends the run: the process group is killed and
// stdoutLimitExceeded is set (an oversized reply is useless, and waiting for
// it costs time). stderr beyond maxStderrBytes is read and dropped, so a noisy
// program cannot block on a full pipe.

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace hotkernel {

struct SubprocessOptions {
  // argv[0] is the program: a name without '/' is looked up in $PATH (execvp
  // rules), anything else is used as a path. Must not be empty.
  std::vector<std::string> argv;
  std::string stdinData;                                 // written, then stdin is closed
  std::vector<std::pair<std::string, std::string>> env;  // set on top of the parent's environment
  std::string workingDirectory;                          // "" keeps the parent's
  double timeoutSeconds = 60.0;                          // wall clock; must be > 0
  size_t maxStdoutBytes = size_t{2} << 20;               // Note [Output caps]
  size_t maxStderrBytes = size_t{64} << 10;
};

struct SubprocessResult {
  bool started = false;    // false: it could not be started (spawnError says why)
  std::string spawnError;  // "posix_spawn(/no/such): No such file or directory"
  pid_t pid = -1;          // the child's pid (already reaped)
  bool exited = false;     // ended through exit(): exitCode is valid
  int exitCode = -1;
  int signal = 0;              // > 0: ended by this signal (SIGKILL after a timeout or a cap)
  bool statusUnknown = false;  // reaped by someone else (Note [No zombies, no stragglers])
  bool timedOut = false;
  bool stdoutLimitExceeded = false;
  bool stderrTruncated = false;
  std::string out;  // stdout, at most maxStdoutBytes
  std::string err;  // stderr, at most maxStderrBytes
  double wallSeconds = 0;

  // True when it ran, exited with 0, and no limit was hit.
  bool succeeded() const;
  // "exited with status 3", "killed by signal 11 (SIGSEGV)", "timed out after 2.0 s (killed)",
  // "stdout exceeded 2097152 bytes (killed)", "could not be started: ...".
  std::string describe() const;
};

// Runs the program to completion (Note [Spawning from a serving process]).
// Never throws for anything the child does, including failing to start; throws
// Error only for misuse: empty argv, a NUL byte in argv or env, a timeout <= 0,
// an env name that is empty or holds '='. Thread-safe; blocks the calling thread.
SubprocessResult runSubprocess(const SubprocessOptions& options);

// Splits a command line (HOTKERNEL_AGENT_CMD) into argv the way a POSIX shell
// splits words, without any expansion; nothing is ever run through a shell.
//   - words are separated by unquoted spaces, tabs and newlines;
//   - '...' keeps everything inside literally (no escapes inside);
//   - "..." keeps everything inside, except that \" \\ \$ \` stand for the
//     second character (any other backslash is kept as is);
//   - outside quotes a backslash keeps the next character literally (a
//     backslash-newline is removed);
//   - quoted parts join their neighbours into one word ("a"'b'c is abc);
//     "" alone is an empty word;
//   - $VAR, ~, globs, ;, |, >, < and friends have no special meaning.
// Throws Error on an unterminated quote or a trailing backslash.
std::vector<std::string> splitCommandLine(const std::string& commandLine);

namespace detail {
// For tests: true makes runSubprocess ignore pidfds and poll waitid(WNOWAIT)
// instead, the path taken where pidfd_open is missing (Linux < 5.3) or blocked
// (an older container seccomp profile). Process-wide.
void forceSubprocessPollingForTesting(bool force);
}  // namespace detail

}  // namespace hotkernel
