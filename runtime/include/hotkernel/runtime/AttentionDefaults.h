#pragma once
// The attention switches a served attention call must find as PyTorch left
// them (Note [The user's backend switches] in interpose/serving/SdpaOverride.cpp):
// each backend's enable_*_sdp switch on, and the priority order the one
// PyTorch settles on by itself (Note [PyTorch's settled priority order]).

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>

#include "hotkernel/runtime/AttentionBackend.h"

namespace hotkernel {

// Note [PyTorch's settled priority order]
// PyTorch starts with one priority order of its attention backends (flash,
// efficient, math, cuDNN) and replaces it at its first backend selection on a
// CUDA device (cuDNN first on recent GPUs with a recent cuDNN). The override
// is installed before that selection ever runs, so the order it sees at
// install is not the one every later call runs under. The baseline is read
// twice: at install (remember), then before the first PyTorch selection that
// hotkernel makes or sees (settle: a trampoline's first call, or the tuner's
// first run of PyTorch's pick), which runs that selection and reads the order
// it leaves. A changed order found at settle time was not PyTorch's doing
// (its selection had not run yet): the baseline stays the install order and
// the changed one keeps PyTorch's choice.
class AttentionDefaults {
 public:
  using Order = std::array<at::SDPBackend, at::num_sdp_backends>;

  // The process's baseline (leaked: trampolines run during exit).
  static AttentionDefaults& process();

  // The order PyTorch starts with (the override's install). Idempotent.
  void remember();
  // Runs `select` (PyTorch's backend selection for a call) once, unless the
  // order already differs from the remembered one, and takes the order then
  // as the baseline. An exception from `select` reaches the caller and
  // leaves it unsettled (the next call tries again) unless the order changed
  // before it.
  void settle(const std::function<void()>& select);
  // settle() on PyTorch's own selection for this call (at::_fused_sdp_choice,
  // host work only). Every hotkernel path that may run PyTorch's first
  // selection settles first: the trampolines, the attention tuner.
  void settleOn(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal, std::optional<double> scale,
                bool enableGqa);
  bool settled() const noexcept { return settled_.load(std::memory_order_acquire); }
  // Whether PyTorch itself may use `backend` now and the order is the
  // baseline's; false before settle().
  bool allows(AttentionBackend backend) const;

 private:
  mutable std::mutex mu_;
  bool remembered_ = false;  // Precondition: mu_ held
  // Written under mu_ before settled_ is set (release); read after settled_
  // is seen (acquire) without mu_, never written again.
  Order order_{};
  std::atomic<bool> settled_{false};
};

}  // namespace hotkernel
