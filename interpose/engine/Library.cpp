// The C API of libhotkernel.so (include/hotkernel/hotkernel.h). Every entry
// point catches everything: nothing may unwind into the host process.
#include <algorithm>
#include <cstring>

#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/hotkernel.h"
#include "hotkernel/optimizer/Statistics.h"

#define HOTKERNEL_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// Writes `s` NUL-terminated into buf (truncated to size); returns the length
// a caller needs for all of it: the contract of the *_json entry points.
int copyOut(const std::string& s, char* buf, int size) {
  if (buf && size > 0) {
    const size_t n = std::min(s.size(), static_cast<size_t>(size - 1));
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int>(s.size() + 1);
}

nlohmann::json toJson(const hotkernel::MedianCi& m) {
  return {{"median", m.median}, {"low", m.low}, {"high", m.high}, {"n", m.n}};
}

}  // namespace

HOTKERNEL_EXPORT int hotkernel_start(void) {
  try {
    return hotkernel::Engine::instance().start();
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_set_enabled(int enabled) {
  try {
    if (hotkernel::fusion::FusionEngine* fusion = hotkernel::fusion::FusionEngine::process()) {
      fusion->setEnabled(enabled != 0);
    }
    return hotkernel::setServedOpsEnabled(enabled != 0) ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_wait_idle(double timeout_seconds) {
  try {
    return hotkernel::Engine::instance().waitIdle(timeout_seconds) ? 0 : 1;
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_plan_count(void) {
  try {
    return static_cast<int>(hotkernel::servedPlanCount());
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_status_json(char* buf, int size) {
  try {
    return copyOut(hotkernel::Engine::instance().status().dump(), buf, size);
  } catch (...) {
    return -1;
  }
}

HOTKERNEL_EXPORT int hotkernel_compare_samples(const double* baseline, const double* candidate, int n, char* buf,
                                              int size) {
  try {
    if (!baseline || !candidate || n <= 0) return -1;
    const hotkernel::Comparison c = hotkernel::compareSamples(std::vector<double>(baseline, baseline + n),
                                                              std::vector<double>(candidate, candidate + n));
    return copyOut(nlohmann::json{{"baseline", toJson(c.baseline)},
                                  {"candidate", toJson(c.candidate)},
                                  {"speedup", toJson(c.speedup)}}
                       .dump(),
                   buf, size);
  } catch (...) {
    return -1;
  }
}
