#include "hotkernel/runtime/AttentionBackendCall.h"

#include <ATen/Context.h>
#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>

#include <array>
#include <atomic>
#include <mutex>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

// The priority order PyTorch had when the override was installed: `order` is
// written once, under `once`, then `known` is set (release); readers check
// `known` (acquire) before reading `order`.
struct DefaultOrder {
  std::once_flag once;
  std::atomic<bool> known{false};
  std::array<at::SDPBackend, at::num_sdp_backends> order{};
};
DefaultOrder& defaults() {
  static DefaultOrder d;
  return d;
}

}  // namespace

at::Tensor runAttentionBackend(AttentionBackend backend, const at::Tensor& query, const at::Tensor& key,
                               const at::Tensor& value, bool isCausal, std::optional<double> scale, bool enableGqa) {
  switch (backend) {
    case AttentionBackend::Flash:
      return std::get<0>(at::_scaled_dot_product_flash_attention(query, key, value, /*dropout_p=*/0.0, isCausal,
                                                                 /*return_debug_mask=*/false, scale));
    case AttentionBackend::Efficient:
      return std::get<0>(at::_scaled_dot_product_efficient_attention(query, key, value, /*attn_bias=*/std::nullopt,
                                                                     /*compute_log_sumexp=*/false,
                                                                     /*dropout_p=*/0.0, isCausal, scale));
    case AttentionBackend::Cudnn:
      return std::get<0>(at::_scaled_dot_product_cudnn_attention(query, key, value, /*attn_bias=*/std::nullopt,
                                                                 /*compute_log_sumexp=*/false, /*dropout_p=*/0.0,
                                                                 isCausal, /*return_debug_mask=*/false, scale));
    case AttentionBackend::Math:
      return std::get<0>(at::_scaled_dot_product_attention_math(query, key, value, /*attn_mask=*/std::nullopt,
                                                                /*dropout_p=*/0.0, isCausal,
                                                                /*dropout_mask=*/std::nullopt, scale, enableGqa));
    case AttentionBackend::FlashCpu:
      return std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(query, key, value, /*dropout_p=*/0.0,
                                                                         isCausal, /*attn_mask=*/std::nullopt,
                                                                         scale));
  }
  HOTKERNEL_THROW("unknown attention backend ", static_cast<int32_t>(backend));
}

void rememberAttentionDefaults() {
  DefaultOrder& d = defaults();
  std::call_once(d.once, [&d] {
    d.order = at::globalContext().sDPPriorityOrder();
    d.known.store(true, std::memory_order_release);
  });
}

bool attentionBackendAllowed(AttentionBackend backend) {
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
  const DefaultOrder& d = defaults();
  if (!enabled || !d.known.load(std::memory_order_acquire)) return false;
  return at::globalContext().sDPPriorityOrder() == d.order;
}

}  // namespace hotkernel
