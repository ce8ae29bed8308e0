#include "hotkernel/runtime/ActivitySource.h"

namespace hotkernel {

const char* activityStartStateName(ActivityStartState state) {
  switch (state) {
    case ActivityStartState::Started:
      return "started";
    case ActivityStartState::Unavailable:
      return "unavailable";
    case ActivityStartState::HeldElsewhere:
      return "held-elsewhere";
    case ActivityStartState::Failed:
      return "failed";
  }
  return "failed";
}

}  // namespace hotkernel
