// The C API of libhotkernel.so (include/hotkernel/hotkernel.h). Every entry
// point catches everything: nothing may unwind into the host process.
#include <algorithm>
#include <cstring>

#include "Runtime.h"
#include "SoftmaxOverride.h"
#include "hotkernel/hotkernel.h"

#define HOTKERNEL_EXPORT extern "C" __attribute__((visibility("default")))

HOTKERNEL_EXPORT int hotkernel_start(void) {
  try {
    return hotkernel::Runtime::instance().start();
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_set_enabled(int enabled) {
  try {
    return hotkernel::SoftmaxOverride::setEnabled(enabled != 0) ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_wait_idle(double timeout_seconds) {
  try {
    return hotkernel::Runtime::instance().waitIdle(timeout_seconds) ? 0 : 1;
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_plan_count(void) {
  try {
    return static_cast<int>(hotkernel::SoftmaxOverride::plans().load()->size());
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_status_json(char* buf, int size) {
  try {
    const std::string s = hotkernel::Runtime::instance().status().dump();
    if (buf && size > 0) {
      const size_t n = std::min(s.size(), static_cast<size_t>(size - 1));
      std::memcpy(buf, s.data(), n);
      buf[n] = '\0';
    }
    return static_cast<int>(s.size() + 1);
  } catch (...) {
    return -1;
  }
}
