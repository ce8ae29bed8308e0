#include "hotkernel/runtime/DeferredCalls.h"

namespace hotkernel {
namespace {

thread_local uint64_t tDeferredCalls = 0;

}  // namespace

uint64_t deferredCallsOnThisThread() noexcept { return tDeferredCalls; }

void noteDeferredCall() noexcept { ++tDeferredCalls; }

}  // namespace hotkernel
