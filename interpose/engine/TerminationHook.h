#pragma once
// The profile of a process ended by SIGTERM (Note [The profile on SIGTERM]).
//
// Note [The profile on SIGTERM]
// A process ended by SIGTERM's default action runs no exit hook, so a server
// stopped by its orchestrator would never write HOTKERNEL_PROFILE. When a
// profile is asked for and SIGTERM still has its default action at start, the
// engine installs a handler that only writes a byte to a pipe (async-signal-
// safe). A thread waiting on that pipe runs the exit shutdown (served ops
// back to ATen, the optimizer parked within the exit wait, the profile
// written), restores the default action and sends SIGTERM again: the process
// ends as it would have, by SIGTERM, at most the exit wait later. A handler
// the host installs (before: nothing is installed; after: it replaces this
// one) is never touched, and the host's own exit path runs the exit hook. A
// forked child has no waiting thread: its SIGTERM goes back to the default.

namespace hotkernel {

// Installs the hook if SIGTERM's action is the default; `onTerm` runs on the
// waiting thread. Returns whether it is installed. Idempotent.
bool installTerminationHook(void (*onTerm)());

// In a forked child (pthread_atfork): the default action again, if the hook
// is installed and still SIGTERM's handler.
void resetTerminationHookInChild();

}  // namespace hotkernel
