#pragma once
// The environment fingerprint: everything that decides whether a compiled
// kernel and its measured speed-up are valid in this process. It is part of
// every cache key, so a driver, torch or GPU change never reuses stale entries.

#include <string>

namespace hotkernel {

struct Fingerprint {
  std::string gpuName;            // "NVIDIA H200", or "none" without a device
  std::string computeCapability;  // "9.0"
  int driverVersion = 0;          // cuDriverGetVersion, e.g. 13000
  int nvrtcVersion = 0;           // major*1000 + minor*10, like CUDA_VERSION
  std::string torchVersion;       // e.g. "2.11.0+cu130"
  std::string hotkernelVersion;   // HOTKERNEL_VERSION
  // SHA-256 over the embedded kernel templates (kernels::allKernelSources), so a
  // changed template never reuses cubins or measurements of the old one, even
  // within one hotkernel version.
  std::string kernelSources;

  // Canonical one-line JSON of all fields (stable key order).
  std::string canonicalJson() const;
  // First 16 hex digits of SHA-256(canonicalJson()): the cache key part.
  std::string key() const;
  static Fingerprint fromCanonicalJson(const std::string& json);  // throws Error on malformed input
};

}  // namespace hotkernel
