#pragma once
// The kernel families' dtype of a torch dtype, for the trampolines.

#include <c10/core/ScalarType.h>

#include <optional>

#include "hotkernel/kernels/DType.h"

namespace hotkernel {

// float32, float16 and bfloat16; nullopt for any other dtype (the call runs ATen).
inline std::optional<kernels::DType> familyDTypeOf(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return kernels::DType::Float32;
    case c10::ScalarType::Half:
      return kernels::DType::Float16;
    case c10::ScalarType::BFloat16:
      return kernels::DType::BFloat16;
    default:
      return std::nullopt;
  }
}

}  // namespace hotkernel
