#include "hotkernel/runtime/AttentionDefaults.h"

#include <ATen/ops/_fused_sdp_choice.h>

namespace hotkernel {

AttentionDefaults& AttentionDefaults::process() {
  static AttentionDefaults* d = new AttentionDefaults();  // leaked: trampolines run during exit
  return *d;
}

void AttentionDefaults::remember() {
  std::lock_guard<std::mutex> guard(mu_);
  if (remembered_ || settled_.load(std::memory_order_relaxed)) return;
  order_ = at::globalContext().sDPPriorityOrder();
  remembered_ = true;
}

void AttentionDefaults::settle(const std::function<void()>& select) {
  if (settled()) return;
  std::lock_guard<std::mutex> guard(mu_);
  if (settled_.load(std::memory_order_relaxed)) return;
  const Order now = at::globalContext().sDPPriorityOrder();
  if (!remembered_) {
    order_ = now;
    remembered_ = true;
  }
  // Note [PyTorch's settled priority order]: only an order PyTorch's own selection leaves is taken.
  if (now == order_) {
    try {
      select();
    } catch (...) {
      // A selection that failed after reordering did run PyTorch's reorder: settled all the same.
      const Order after = at::globalContext().sDPPriorityOrder();
      if (after != now) {
        order_ = after;
        settled_.store(true, std::memory_order_release);
      }
      throw;
    }
    order_ = at::globalContext().sDPPriorityOrder();
  }
  settled_.store(true, std::memory_order_release);
}

void AttentionDefaults::settleOn(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                 const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                                 std::optional<double> scale, bool enableGqa) {
  if (settled()) return;
  settle([&] { (void)at::_fused_sdp_choice(query, key, value, attnMask, dropoutP, isCausal, scale, enableGqa); });
}

bool AttentionDefaults::allows(AttentionBackend backend) const {
  const at::Context& ctx = at::globalContext();
  bool enabled = false;
  switch (backend) {
    case AttentionBackend::Flash:
    case AttentionBackend::FlashCpu:
      enabled = ctx.userEnabledFlashSDP();
      break;
    case AttentionBackend::Efficient:
      enabled = ctx.userEnabledMemEfficientSDP();
      break;
    case AttentionBackend::Cudnn:
      enabled = ctx.userEnabledCuDNNSDP();
      break;
    case AttentionBackend::Math:
      enabled = ctx.userEnabledMathSDP();
      break;
  }
  if (!enabled || !settled()) return false;
  return at::globalContext().sDPPriorityOrder() == order_;
}

}  // namespace hotkernel
