#pragma once
// What the runtime GPU tests (one binary each: norms, cross_entropy,
// reductions) share: the skip without a GPU, the runtime's private cache
// directory, a target with its own budget, and a plan's entry in the status.

#include <gtest/gtest.h>

#include <ATen/cuda/CUDAContext.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "hotkernel/interpose/Engine.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Ranking.h"
#include "hotkernel/runtime/Nvrtc.h"

#define REQUIRE_CUDA_AND_NVRTC()                                    \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }                                                                 \
  if (!nvrtcAvailable()) GTEST_SKIP() << "no NVRTC"

namespace hotkernel::gputest {

// The runtime's cache in a fresh private directory under the test's temp
// dir, set in HOTKERNEL_CACHE_DIR before config() is first read: created by
// the first call in the process (its `prefix` names it), the same after.
inline const std::string& runtimeCacheDir(const std::string& prefix) {
  static const std::string dir = [&prefix] {
    std::string tmpl = ::testing::TempDir() + "/" + prefix + "-XXXXXX";
    const char* made = ::mkdtemp(tmpl.data());
    const std::string d = made ? std::string(made) : ::testing::TempDir() + "/" + prefix;
    ::setenv("HOTKERNEL_CACHE_DIR", d.c_str(), 1);
    return d;
  }();
  return dir;
}

// A ranked target with a budget of its own: the search stops in bounded time.
inline RankedTarget budgetOf(const std::string& op, const VariantKey& key, double seconds) {
  RankedTarget t;
  t.target.op = op;
  t.target.variant = kernels::variantString(key);
  t.budgetSeconds = seconds;
  return t;
}

// The runtime's status entry of the plan published for (op, variant), or null.
inline nlohmann::json planOf(const std::string& op, const std::string& variant) {
  // Keep the status document alive: a range-for over status()["plans"] would
  // iterate a reference into a destroyed temporary.
  const nlohmann::json status = Engine::instance().status();
  for (const auto& p : status["plans"]) {
    if (p["op"] == op && p["variant"] == variant) return p;
  }
  return nullptr;
}

}  // namespace hotkernel::gputest
