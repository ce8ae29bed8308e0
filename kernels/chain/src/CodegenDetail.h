#pragma once
// What ChainCodegen's parts share (internal).

#include <string>

#include "hotkernel/chain/ChainTypes.h"

namespace hotkernel::chain::detail {

// The device functions every chain kernel uses, after its HK_* defines
// (Note [Self-contained chain sources]).
std::string chainDeviceLibrary();

// The storage type and access suffix of a dtype: "float" / "unsigned short", "f32" / "f16" / "bf16".
const char* storageType(DType dtype);
const char* accessTag(DType dtype);

// An exact float literal: "__uint_as_float(0x3f000000u) /* 0.5 */".
std::string floatLiteral(float value);

}  // namespace hotkernel::chain::detail
