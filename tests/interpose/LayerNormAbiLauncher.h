#pragma once
// A launcher that plays hk_layer_norm's argument list on the host for float32
// (the layer / group / batch norm trampolines' tests on the CPU key): out =
// 0.25 everywhere, each statistic its row index; it records what it got, and
// fails on request or for a stream or an argument list not the kernel's.

#include <ATen/ATen.h>

#include <atomic>
#include <string>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class LayerNormAbiLauncher : public KernelLauncher {
 public:
  bool launch(const RowKernelArgs&, void*) const noexcept override { return false; }
  bool launchArgs(const KernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (fail || stream != nullptr || a.size() != 11u) return false;
    rows = a.int64At(6);
    cols = a.int64At(7);
    weight = a.pointerAt(1);
    bias = a.pointerAt(2);
    eps = a.float32At(8);
    float* out = static_cast<float*>(const_cast<void*>(a.pointerAt(3)));
    for (int64_t i = 0; i < rows * cols; ++i) out[i] = 0.25f;
    for (size_t s = 4; s < 6; ++s) {
      float* stat = static_cast<float*>(const_cast<void*>(a.pointerAt(s)));
      for (int64_t r = 0; r < rows; ++r) stat[r] = static_cast<float>(r);
    }
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "layer_norm abi"; }
  mutable std::atomic<int> calls{0};
  mutable int64_t rows = 0, cols = 0;
  mutable const void* weight = reinterpret_cast<const void*>(1);
  mutable const void* bias = reinterpret_cast<const void*>(1);
  mutable float eps = 0;
  std::atomic<bool> fail{false};
};

// Whether every element of `t` is the launcher's 0.25.
inline bool isLayerNormAbiPattern(const at::Tensor& t) { return at::all(t == 0.25).item<bool>(); }

}  // namespace hotkernel
