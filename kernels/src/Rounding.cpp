#include "hotkernel/kernels/Rounding.h"

#include <cmath>
#include <cstring>

namespace hotkernel::kernels {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

uint16_t floatToHalfBits(float f) {
  const uint32_t x = bitsOf(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (a < 0x38800000u) {
    // Below 2^-14: a subnormal (or zero) with 2^-24 steps. The scaling is
    // exact; nearbyint rounds to nearest even (the default rounding mode).
    const auto m = static_cast<uint32_t>(std::nearbyint(std::fabs(f) * 16777216.0f));
    return static_cast<uint16_t>(sign | m);  // m == 0x400 is the smallest normal
  }
  // Normal: round the 23-bit mantissa to 10 bits (to nearest even), then
  // rebias the exponent (127 -> 15); a carry out of the mantissa bumps it.
  const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return floatOf(sign | 0x7f800000u | (m << 13));  // inf / NaN
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);  // exact
    return sign ? -v : v;
  }
  return floatOf(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t floatToBFloat16Bits(float f) {
  const uint32_t x = bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u);  // NaN
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bfloat16BitsToFloat(uint16_t bits) { return floatOf(static_cast<uint32_t>(bits) << 16); }

float roundTo(DType dtype, float f) {
  switch (dtype) {
    case DType::Float32:
      return f;
    case DType::Float16:
      return halfBitsToFloat(floatToHalfBits(f));
    case DType::BFloat16:
      return bfloat16BitsToFloat(floatToBFloat16Bits(f));
  }
  return f;
}

bool representable(DType dtype, float f) {
  if (std::isnan(f)) return true;
  return bitsOf(roundTo(dtype, f)) == bitsOf(f);
}

}  // namespace hotkernel::kernels
