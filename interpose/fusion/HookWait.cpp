#include "HookWait.h"

#include "hotkernel/hotkernel_shim.h"

namespace hotkernel::fusion {

std::chrono::microseconds hookWait(int kind, bool owner) {
  switch (kind) {
    case HOTKERNEL_COMMAND_LAUNCH:
    case HOTKERNEL_COMMAND_COPY:
    case HOTKERNEL_COMMAND_SET:
    case HOTKERNEL_COMMAND_GRAPH_LAUNCH:
    case HOTKERNEL_COMMAND_CAPTURE:
    case HOTKERNEL_COMMAND_HOST_CALLBACK:
    case HOTKERNEL_COMMAND_STREAM_MEMORY_OP:
      return kDataHookWait;
    default:
      return owner ? kOwnerEventHookWait : kOtherThreadEventHookWait;
  }
}

}  // namespace hotkernel::fusion
