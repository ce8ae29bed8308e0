#include "RecordedArgs.h"

namespace hotkernel {

std::optional<int64_t> recordedInt(const c10::IValue& v) {
  if (v.isInt()) return v.toInt();
  if (v.isSymInt()) return v.toSymInt().maybe_as_int();
  return std::nullopt;
}

std::optional<std::vector<int64_t>> recordedSizes(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  if (!v.isList()) return std::nullopt;
  std::vector<int64_t> out;
  for (const c10::IValue& e : v.toListRef()) {
    const std::optional<int64_t> i = recordedInt(e);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

bool recordedOptionalTensor(const c10::IValue& v, std::optional<at::Tensor>& out) {
  if (v.isNone()) {
    out = std::nullopt;
    return true;
  }
  if (!v.isTensor()) return false;
  out = v.toTensor();
  return true;
}

}  // namespace hotkernel
