#pragma once
// The chain's names for the float16 / bfloat16 conversions of
// hotkernel/kernels/Rounding.h (Note [Round to nearest even] there).

#include "hotkernel/chain/ChainTypes.h"
#include "hotkernel/kernels/Rounding.h"

namespace hotkernel::chain {

using kernels::bfloat16BitsToFloat;
using kernels::floatToBFloat16Bits;
using kernels::floatToHalfBits;
using kernels::halfBitsToFloat;
using kernels::representable;
using kernels::roundTo;

}  // namespace hotkernel::chain
