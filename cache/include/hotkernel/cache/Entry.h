#pragma once
// One cached decision: what to run for (environment fingerprint, op, variant).

#include <cstdint>
#include <string>

namespace hotkernel::cache {

// Values of Entry::decision.
inline constexpr const char* kDecisionKernel = "kernel";       // launch the cubin
inline constexpr const char* kDecisionKeepAten = "keep_aten";  // measured: no candidate beat ATen
// Run one of ATen's own implementations, named in params (the attention family's
// backend choice); no cubin, no kernel name.
inline constexpr const char* kDecisionAtenBackend = "aten_backend";

struct Entry {
  // Key: (fingerprint, op, variant).
  std::string fingerprint;  // Fingerprint::key() of the environment it was measured in
  std::string op;           // e.g. "aten::_softmax"
  std::string variant;      // canonical variant, e.g. "dtype=bf16;rows=4096;cols=32000;dev=0"

  std::string fingerprintJson;  // Fingerprint::canonicalJson(); put() checks it hashes to `fingerprint`
  std::string decision;         // kDecisionKernel, kDecisionKeepAten or kDecisionAtenBackend
  std::string family;           // kernel family, e.g. "softmax_lastdim"
  std::string params = "{}";    // JSON text of the parameter point
  std::string kernelName;       // entry symbol in the cubin (empty for keep_aten and aten_backend)
  std::string cubin;            // raw cubin bytes (empty for keep_aten, aten_backend, and in listMetadata results)
  std::string cubinSha256;      // lowercase hex SHA-256 of cubin: computed by put(), verified by every read
  std::string metrics = "{}";   // JSON text: speedup, ci, max error, timings...
  int64_t createdUnix = 0;      // seconds since the epoch; put() sets it when 0

  // Filled by reads: size of the stored cubin, also when `cubin` itself is not loaded. Ignored by put().
  int64_t cubinBytes = 0;
};

}  // namespace hotkernel::cache
