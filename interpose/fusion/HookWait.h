#pragma once
// How long the shim's hook waits for the fusion engine's lock before a
// foreign command goes on (Note [The fusion engine's lock] in
// hotkernel/interpose/FusionEngine.h): by the command's kind
// (HotkernelCommandKind) and, for events, whether it is issued on the owner
// thread.

#include <chrono>

namespace hotkernel::fusion {

inline constexpr std::chrono::microseconds kDataHookWait{10'000'000};       // any thread's launch, copy, set, ...
inline constexpr std::chrono::microseconds kOwnerEventHookWait{50'000};      // the owner's event, wait, sync, query
inline constexpr std::chrono::microseconds kOtherThreadEventHookWait{500};  // another thread's event, ...

// The longest the hook of a command of `kind` waits for the lock; `owner`: the command is issued on the
// thread that defers chains. An unknown kind is taken as an event's (bounded short, never the long wait).
std::chrono::microseconds hookWait(int kind, bool owner);

}  // namespace hotkernel::fusion
