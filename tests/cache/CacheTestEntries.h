#pragma once
// Valid cache entries for tests, without gtest: CacheTestUtil.h (the cache,
// CLI and fault tests) and remote/FleetEntries.h (the fleet chaos test and
// its worker process, which links no gtest) build their entries here.

#include <cstddef>
#include <string>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel::cache::test {

inline Fingerprint testFingerprint(const std::string& gpu = "NVIDIA H200") {
  Fingerprint f;
  f.gpuName = gpu;
  f.computeCapability = "9.0";
  f.driverVersion = 13000;
  f.nvrtcVersion = 13000;
  f.torchVersion = "2.11.0+cu130";
  f.hotkernelVersion = "0.1.0";
  return f;
}

// `bytes` bytes derived from `seed`: a stand-in cubin that differs with its seed.
inline std::string seededCubin(const std::string& seed, size_t bytes) {
  std::string cubin(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) cubin[i] = static_cast<char>(seed[i % seed.size()] ^ (i * 131));
  return cubin;
}

// A valid "kernel" entry; the cubin is derived from the key so entries differ.
inline Entry kernelEntry(const std::string& op, const std::string& variant, const Fingerprint& fp = testFingerprint(),
                         size_t cubinBytes = 256) {
  Entry e;
  e.fingerprint = fp.key();
  e.fingerprintJson = fp.canonicalJson();
  e.op = op;
  e.variant = variant;
  e.decision = kDecisionKernel;
  e.family = "softmax_lastdim";
  e.params = R"({"block":256,"vec":8})";
  e.kernelName = "softmax_lastdim_kernel";
  e.cubin = seededCubin(op + "|" + variant + "|" + e.fingerprint, cubinBytes);
  e.metrics = R"({"speedup":1.42,"ci":[1.38,1.46],"max_abs_err":0.0})";
  return e;
}

inline Entry keepAtenEntry(const std::string& op, const std::string& variant,
                           const Fingerprint& fp = testFingerprint()) {
  Entry e = kernelEntry(op, variant, fp);
  e.decision = kDecisionKeepAten;
  e.cubin.clear();
  e.kernelName.clear();
  e.metrics = R"({"best_speedup":0.97})";
  return e;
}

}  // namespace hotkernel::cache::test
