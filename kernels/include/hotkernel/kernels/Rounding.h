#pragma once
// float16 and bfloat16 on the CPU: conversions from and to float32 with the
// rounding of CUDA's cvt.rn (and ATen's c10::Half / c10::BFloat16).
//
// Note [Round to nearest even]
// float32 -> float16 / bfloat16 rounds to the nearest representable value,
// ties to the one whose last mantissa bit is 0; float16 results below 2^-14
// are subnormal (rounded the same way), results at or above the largest
// finite value plus half an ulp overflow to infinity (float16: 65520 and up);
// a NaN stays a NaN (a quiet one; NaN bits are never compared).
// The conversions back to float32 are exact. The chain interpreter rounds
// with these wherever ATen writes a 16-bit tensor; group_norm rounds its eps so.

#include <cstdint>

#include "hotkernel/kernels/DType.h"

namespace hotkernel::kernels {

uint16_t floatToHalfBits(float f);
float halfBitsToFloat(uint16_t bits);
uint16_t floatToBFloat16Bits(float f);
float bfloat16BitsToFloat(uint16_t bits);

// `f` rounded to `dtype` and back (float32: `f` itself).
float roundTo(DType dtype, float f);

// Whether `f` is a value of `dtype` (NaN counts as one).
bool representable(DType dtype, float f);

}  // namespace hotkernel::kernels
