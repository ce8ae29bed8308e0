#pragma once
// The element types the kernel families serve.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hotkernel::kernels {

// Invariant: the values are stable. They are the HK_DTYPE codes of the CUDA
// templates and the dtype of hotkernel::VariantKey, and they are persisted in
// the cache.
enum class DType : int32_t { Float32 = 0, Float16 = 1, BFloat16 = 2 };

inline constexpr std::array<DType, 3> kAllDTypes = {DType::Float32, DType::Float16, DType::BFloat16};

// "float32", "float16", "bfloat16" (torch's names without "torch.").
const char* dtypeName(DType dtype);

// Bytes per element: 4, 2, 2.
size_t elementSize(DType dtype);

// Accepts dtypeName() and the usual aliases: float/fp32/f32, half/fp16/f16,
// bf16, with or without a "torch." prefix. Throws Error on anything else.
DType parseDType(const std::string& text);

// The DType with value `code`; throws Error for an unknown code.
DType dtypeFromCode(int32_t code);

}  // namespace hotkernel::kernels
