#pragma once
// ATen's implementations of scaled_dot_product_attention, by name (no torch):
// what an attention variant's cached choice names (Note [Choosing an attention
// backend] in kernels/src/SdpaFamily.cpp). AttentionBackendCall.h runs them.

#include <cstdint>
#include <optional>
#include <string>

namespace hotkernel {

// Stable values: a cache entry stores the name, never the number.
enum class AttentionBackend : int32_t {
  Flash = 0,      // aten::_scaled_dot_product_flash_attention (CUDA)
  Efficient = 1,  // aten::_scaled_dot_product_efficient_attention (CUDA)
  Cudnn = 2,      // aten::_scaled_dot_product_cudnn_attention (CUDA)
  Math = 3,       // aten::_scaled_dot_product_attention_math (any device)
  FlashCpu = 4,   // aten::_scaled_dot_product_flash_attention_for_cpu (CPU)
};

inline constexpr AttentionBackend kAllAttentionBackends[] = {AttentionBackend::Flash, AttentionBackend::Efficient,
                                                             AttentionBackend::Cudnn, AttentionBackend::Math,
                                                             AttentionBackend::FlashCpu};

// "flash", "efficient", "cudnn", "math", "flash_cpu".
const char* attentionBackendName(AttentionBackend backend);
// The backend of a name attentionBackendName gives; nullopt for any other text.
std::optional<AttentionBackend> parseAttentionBackend(const std::string& name);
// Whether the backend runs on CUDA tensors (else on CPU ones); Math runs on both.
bool attentionBackendRunsOn(AttentionBackend backend, bool cuda);

}  // namespace hotkernel
