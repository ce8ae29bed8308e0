// hookWait (interpose/fusion/HookWait.h): how long the shim's hook waits for
// the fusion engine's lock, by command kind and thread (Note [The fusion
// engine's lock]).
#include "HookWait.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "hotkernel/hotkernel_shim.h"

namespace hotkernel::fusion {
namespace {

TEST(HookWaitTest, GivenCommandsThatReadDataOnAnyThreadWhenTheLockIsHeldThenTheyWaitTheLongBound) {
  for (bool owner : {true, false}) {
    for (int kind : std::initializer_list<int>{HOTKERNEL_COMMAND_LAUNCH, HOTKERNEL_COMMAND_COPY, HOTKERNEL_COMMAND_SET,
                                               HOTKERNEL_COMMAND_GRAPH_LAUNCH, HOTKERNEL_COMMAND_CAPTURE,
                                               HOTKERNEL_COMMAND_HOST_CALLBACK, HOTKERNEL_COMMAND_STREAM_MEMORY_OP}) {
      EXPECT_EQ(hookWait(kind, owner), kDataHookWait) << "kind " << kind << " owner " << owner;
    }
  }
}

TEST(HookWaitTest, GivenEventsSyncsAndQueriesWhenTheLockIsHeldThenTheyWaitAShortBoundShortestOffTheOwner) {
  // The caching allocator issues these under its mutex: never the long wait (Note [The fusion engine's lock]).
  for (int kind : std::initializer_list<int>{HOTKERNEL_COMMAND_EVENT_RECORD, HOTKERNEL_COMMAND_STREAM_WAIT,
                                             HOTKERNEL_COMMAND_SYNCHRONIZE, HOTKERNEL_COMMAND_QUERY, 0, 99}) {
    EXPECT_EQ(hookWait(kind, /*owner=*/true), kOwnerEventHookWait) << "kind " << kind;
    EXPECT_EQ(hookWait(kind, /*owner=*/false), kOtherThreadEventHookWait) << "kind " << kind;
  }
  EXPECT_LT(kOtherThreadEventHookWait, kOwnerEventHookWait);
  EXPECT_LT(kOwnerEventHookWait, kDataHookWait);
}

}  // namespace
}  // namespace hotkernel::fusion
