#pragma once
// An external agent: a program (an LLM client, a search script, the reference
// agent in tools/agent/) that reads an AgentTask on stdin and writes an
// AgentReply on stdout. tools/agent/PROTOCOL.md describes both documents.
//
// | variable                | default | meaning |
// |-------------------------|---------|---------|
// | HOTKERNEL_AGENT_CMD     | unset   | the agent's command line, split by splitCommandLine (Subprocess.h): no shell |
// | HOTKERNEL_AGENT_TIMEOUT | 60      | seconds one request may take, in (0, 86400]; the agent's process group is then killed |
//
// Note [A malformed agent configuration]
// fromEnvironment() never throws: the variables are read inside a serving
// process, where a throw would fail the tuning job (or start()) that reads
// them. It returns nullopt, with one line in *problem that names the variable,
// its value and what is wrong, when HOTKERNEL_AGENT_CMD is set but
//   - splits into no words ("   "), or its program word is empty ('""');
//   - cannot be split (an unterminated quote, a trailing backslash);
//   - names a program that cannot be executed: a path (a word with '/') that
//     is not an executable regular file, or a name found in no directory of
//     $PATH as an executable regular file (posix_spawnp's rules: an empty
//     entry is the current directory; an unset PATH is /bin:/usr/bin);
// or when HOTKERNEL_AGENT_TIMEOUT is set but is not a number, is <= 0, inf or
// nan. A timeout above kMaxAgentTimeoutSeconds (a day) is clamped to it: the
// agent is returned, and *problem says so. Tuning goes on without an agent
// that was not returned; the caller logs *problem once (a caller that passes
// no `problem` gets it logged here, once per process). The program is looked
// up once, when the variables are read: one installed later is not seen.
//
// Note [One request, one process]
// Every propose() starts the program afresh and waits for it to exit: no
// state survives in hotkernel between requests except what the next task
// carries (best so far, feedback on the last attempt with the agent's own
// notes). The agent runs in its own process group, with HOTKERNEL=0 added to
// its environment (a Python agent must not load hotkernel through an inherited
// LD_PRELOAD) and HOTKERNEL_AGENT_PROTOCOL=1. Its stderr is kept (64 KiB) for
// the rejection reason; its exit status must be 0.
//
// Note [Agent failures are reported, never thrown]
// Whatever the program does — not start, crash, hang, exit non-zero, write
// too much, write something that is not a valid reply — propose() returns
// nullopt, sets a one-line reason and the failure's kind, and logs a warning
// once per kind per process. It throws only for misuse (no command).

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/optimizer/AgentTask.h"

namespace hotkernel {

// Why propose() returned nothing.
enum class AgentFailure {
  None,            // a valid reply came back
  SpawnFailed,     // the program could not be started
  TimedOut,        // it ran past the timeout and was killed
  Crashed,         // it was ended by a signal
  NonZeroExit,     // it exited with a status other than 0
  OutputTooLarge,  // it wrote more than maxReplyBytes and was killed
  InvalidReply,    // it exited 0 but its output broke a reply rule (AgentTask.h)
};
const char* agentFailureName(AgentFailure failure);  // "timed-out", "invalid-reply", ...
// The feedback stage a failure belongs to: InvalidReply -> Reply, the rest -> Agent.
AgentStage agentFailureStage(AgentFailure failure);

struct ExternalAgentOptions {
  std::vector<std::string> command;  // argv; must not be empty
  double timeoutSeconds = 60.0;
  size_t maxReplyBytes = size_t{2} << 20;                // the cap on stdout
  std::vector<std::pair<std::string, std::string>> env;  // extra environment for the agent
};

class ExternalAgent {
 public:
  // Throws Error if options.command is empty or the timeout is not > 0.
  explicit ExternalAgent(ExternalAgentOptions options);

  // The largest HOTKERNEL_AGENT_TIMEOUT used (a day); larger values are clamped to it.
  static constexpr double kMaxAgentTimeoutSeconds = 24 * 3600.0;

  // The agent named by HOTKERNEL_AGENT_CMD (timeout from HOTKERNEL_AGENT_TIMEOUT).
  // Never throws (Note [A malformed agent configuration]). Returns nullopt with
  // *problem cleared when HOTKERNEL_AGENT_CMD is unset or empty; nullopt with
  // *problem set to one line when it is malformed; the agent with *problem
  // cleared, or set to the clamping of an oversized timeout. A null `problem`:
  // a non-empty problem is logged here, once per process.
  static std::optional<ExternalAgent> fromEnvironment(std::string* problem = nullptr);

  // Runs the agent once on `task` (Note [One request, one process]). Returns
  // the validated reply, or nullopt with `*whyRejected` (when non-null) set to
  // one line such as "agent timed out after 60.0 s (killed)" or "agent reply
  // breaks R5: ..." and `*failure` to its kind. Thread-safe: concurrent calls
  // run separate processes.
  std::optional<AgentReply> propose(const AgentTask& task, std::string* whyRejected,
                                    AgentFailure* failure = nullptr) const;

  const ExternalAgentOptions& options() const { return options_; }

 private:
  ExternalAgentOptions options_;
};

}  // namespace hotkernel
