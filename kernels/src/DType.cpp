#include "hotkernel/kernels/DType.h"

#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "float32";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

size_t elementSize(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return 4;
    case DType::Float16:
    case DType::BFloat16:
      return 2;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

DType parseDType(const std::string& text) {
  std::string t = text.rfind("torch.", 0) == 0 ? text.substr(6) : text;
  if (t == "float32" || t == "float" || t == "fp32" || t == "f32") return DType::Float32;
  if (t == "float16" || t == "half" || t == "fp16" || t == "f16") return DType::Float16;
  if (t == "bfloat16" || t == "bf16") return DType::BFloat16;
  HOTKERNEL_THROW("unknown dtype '", text, "' (expected float32, float16 or bfloat16)");
}

DType dtypeFromCode(int32_t code) {
  for (DType d : kAllDTypes) {
    if (static_cast<int32_t>(d) == code) return d;
  }
  HOTKERNEL_THROW("unknown dtype code ", code);
}

}  // namespace hotkernel::kernels
