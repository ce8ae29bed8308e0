/*
 * The command hook of libhotkernel_preload.so (the libc-only shim): the C API
 * through which libhotkernel.so asks the shim to flush its pending chains
 * before any CUDA command that hotkernel did not issue itself.
 *
 * Note [The command hook protocol]
 * Version 1 (HOTKERNEL_SHIM_COMMAND_HOOK_VERSION; hotkernel_shim_command_hook_version()).
 * The shim exports the functions below with C linkage. libhotkernel.so finds
 * them with dlsym(RTLD_DEFAULT, name) at start; a process without the shim
 * (a binary linked to libhotkernel.so, no preload) has none of them, and then
 * nothing may be deferred (no preload, no fusion). A version other than 1,
 * or no hotkernel_shim_command_hook_version (a program that carries only
 * the shim's capture wrappers), means the same.
 *
 *   - hotkernel_shim_set_flush_hook(hook): the function the shim calls before
 *     a foreign command while something is pending (NULL: none). It is called
 *     on the thread that issues the command, before the command reaches the
 *     CUDA library, with the command's kind (HotkernelCommandKind), inside the
 *     own-command guard (so the commands it issues reach CUDA without calling
 *     it again). It must launch every pending chain on its own stream (the
 *     command may read any of them, on any stream) and then publish
 *     hotkernel_shim_set_pending(0), or leave the count as it is when a chain
 *     could not be flushed (the next command calls it again). It must not
 *     throw, must not block on the optimizer, and may be called concurrently
 *     from several threads.
 *   - hotkernel_shim_set_pending(n): the number of pending chains, n >= 0.
 *     A command checks it with one relaxed atomic load; with 0 the command
 *     is forwarded at once. Relaxed is enough: a thread can only issue a
 *     command that reads a pending tensor after it learned of that tensor
 *     through some synchronization with the thread that deferred it (or is
 *     that thread), and the store of n happened before that point.
 *   - hotkernel_shim_enter_own() / hotkernel_shim_leave_own(): a per-thread,
 *     nestable guard around commands hotkernel issues itself (a chain's
 *     launch, the optimizer's work): inside it no command calls the hook.
 *   - hotkernel_shim_unwrapped_entry_points(): driver entry points the shim
 *     handed out unwrapped because its table for that entry point was full
 *     (Note [Driver entry points handed out by pointer] in the shim). Non-zero
 *     means a command may bypass the hook: the library must not defer.
 *
 * What is covered and what is not: docs/design/fusion.md, "Flush triggers".
 */
#ifndef HOTKERNEL_SHIM_H
#define HOTKERNEL_SHIM_H

#ifdef __cplusplus
extern "C" {
#endif

#define HOTKERNEL_SHIM_COMMAND_HOOK_VERSION 1

/* The kind of command a hook is called for. */
enum HotkernelCommandKind {
  HOTKERNEL_COMMAND_LAUNCH = 1,           /* a kernel launch (runtime, driver, cooperative, Ex) */
  HOTKERNEL_COMMAND_COPY = 2,             /* a memcpy of any shape, sync or async, peer, symbol, batch */
  HOTKERNEL_COMMAND_SET = 3,              /* a memset */
  HOTKERNEL_COMMAND_EVENT_RECORD = 4,     /* an event record */
  HOTKERNEL_COMMAND_STREAM_WAIT = 5,      /* a stream waiting on an event */
  HOTKERNEL_COMMAND_SYNCHRONIZE = 6,      /* a stream, event, context or device synchronize */
  HOTKERNEL_COMMAND_QUERY = 7,            /* a stream query */
  HOTKERNEL_COMMAND_GRAPH_LAUNCH = 8,     /* a CUDA graph launch */
  HOTKERNEL_COMMAND_CAPTURE = 9,          /* a graph capture's begin or end */
  HOTKERNEL_COMMAND_HOST_CALLBACK = 10,   /* a host function or callback enqueued on a stream */
  HOTKERNEL_COMMAND_STREAM_MEMORY_OP = 11 /* a stream wait / write value or batch of them */
};

typedef void (*HotkernelFlushHook)(int kind);

/* The shim's exports (Note [The command hook protocol]); look them up with
 * dlsym(RTLD_DEFAULT, "hotkernel_shim_..."), never link to them. */
typedef int (*HotkernelShimVersionFn)(void);
typedef void (*HotkernelShimSetFlushHookFn)(HotkernelFlushHook hook);
typedef void (*HotkernelShimSetPendingFn)(int pending);
typedef int (*HotkernelShimPendingFn)(void);
typedef void (*HotkernelShimGuardFn)(void);
typedef long long (*HotkernelShimUnwrappedFn)(void);

int hotkernel_shim_command_hook_version(void);
void hotkernel_shim_set_flush_hook(HotkernelFlushHook hook);
void hotkernel_shim_set_pending(int pending);
int hotkernel_shim_pending(void);
void hotkernel_shim_enter_own(void);
void hotkernel_shim_leave_own(void);
long long hotkernel_shim_unwrapped_entry_points(void);

#ifdef __cplusplus
}
#endif
#endif
