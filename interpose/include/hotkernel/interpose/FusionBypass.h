#pragma once
// FusionBypass without torch headers (the fusion engine's own header has
// them), for the engine files that stay torch-free.

namespace hotkernel::fusion {

// In its scope, this thread's work is hotkernel's own: its calls of
// deferrable ops run their originals, neither learned nor deferred, and its
// CUDA commands are inside the shim's own-command guard, so they flush
// nothing. For the optimizer's jobs (their ATen references, harness and
// timing) and the engine's flushes; nestable.
class FusionBypass {
 public:
  FusionBypass();
  ~FusionBypass();
  FusionBypass(const FusionBypass&) = delete;
  FusionBypass& operator=(const FusionBypass&) = delete;

 private:
  bool previous_;
};

}  // namespace hotkernel::fusion
