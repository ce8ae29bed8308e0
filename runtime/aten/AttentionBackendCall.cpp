#include "hotkernel/runtime/AttentionBackendCall.h"

#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

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

}  // namespace hotkernel
