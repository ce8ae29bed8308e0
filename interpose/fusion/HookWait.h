#pragma once
// How long the shim's hook waits for the fusion engine's lock before a
// foreign command goes on (Note [The fusion engine's lock] in
// hotkernel/interpose/FusionEngine.h): by the command's kind
// (HotkernelCommandKind) and whether it is issued on the owner thread.

#include <chrono>

namespace hotkernel::fusion {

inline constexpr std::chrono::microseconds kOtherThreadHookWait{500};  // another thread's command
inline constexpr std::chrono::microseconds kOwnerEventHookWait{50'000};  // the owner's event, wait, sync, query
inline constexpr std::chrono::microseconds kOwnerDataHookWait{10'000'000};  // the owner's launch, copy, set, ...

// The longest the hook of a command of `kind` waits for the lock; `owner`: the command is issued on the
// thread that defers chains. An unknown kind is taken as an event's (bounded, never the long wait).
std::chrono::microseconds hookWait(int kind, bool owner);

}  // namespace hotkernel::fusion
