// hookWait (interpose/fusion/HookWait.h): how long the shim's hook waits for
// the fusion engine's lock, by command kind and thread (Note [The fusion
// engine's lock]).
#include "HookWait.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "hotkernel/hotkernel_shim.h"

namespace hotkernel::fusion {
namespace {

TEST(HookWaitTest, GivenTheOwnersCommandsThatReadDataWhenTheLockIsHeldThenTheyWaitTheLongBound) {
  for (int kind : std::initializer_list<int>{HOTKERNEL_COMMAND_LAUNCH, HOTKERNEL_COMMAND_COPY, HOTKERNEL_COMMAND_SET,
                   HOTKERNEL_COMMAND_GRAPH_LAUNCH, HOTKERNEL_COMMAND_CAPTURE, HOTKERNEL_COMMAND_HOST_CALLBACK,
                   HOTKERNEL_COMMAND_STREAM_MEMORY_OP}) {
    EXPECT_EQ(hookWait(kind, /*owner=*/true), kOwnerDataHookWait) << "kind " << kind;
  }
}

TEST(HookWaitTest, GivenTheOwnersEventsSyncsAndQueriesWhenTheLockIsHeldThenTheyWaitTheShortBound) {
  // The caching allocator issues these under its mutex: never the long wait (Note [The fusion engine's lock]).
  for (int kind : std::initializer_list<int>{HOTKERNEL_COMMAND_EVENT_RECORD, HOTKERNEL_COMMAND_STREAM_WAIT,
                                             HOTKERNEL_COMMAND_SYNCHRONIZE,
                   HOTKERNEL_COMMAND_QUERY, 0, 99}) {
    EXPECT_EQ(hookWait(kind, /*owner=*/true), kOwnerEventHookWait) << "kind " << kind;
  }
  EXPECT_LT(kOwnerEventHookWait, kOwnerDataHookWait);
}

TEST(HookWaitTest, GivenAnotherThreadsCommandOfAnyKindThenItWaitsTheShortestBound) {
  for (int kind = 0; kind <= HOTKERNEL_COMMAND_STREAM_MEMORY_OP + 1; ++kind) {
    EXPECT_EQ(hookWait(kind, /*owner=*/false), kOtherThreadHookWait) << "kind " << kind;
  }
  EXPECT_LT(kOtherThreadHookWait, kOwnerEventHookWait);
}

}  // namespace
}  // namespace hotkernel::fusion
