#include "hotkernel/kernels/MiddleDimParams.h"

#include <limits>

#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel::kernels {

nlohmann::json MiddleDimParams::toJson() const { return {{"tx", tx}, {"ty", ty}, {"vec", vec}, {"unroll", unroll}}; }

MiddleDimParams MiddleDimParams::fromJson(const nlohmann::json& j) {
  const std::string where = "middle-dim params";
  constexpr int64_t kMin = std::numeric_limits<int>::min(), kMax = std::numeric_limits<int>::max();
  (void)jsonfield::object(j, where);
  MiddleDimParams p;
  p.tx = static_cast<int>(jsonfield::integer(j, "tx", where, kMin, kMax));
  p.ty = static_cast<int>(jsonfield::integer(j, "ty", where, kMin, kMax));
  p.vec = static_cast<int>(jsonfield::integer(j, "vec", where, kMin, kMax));
  p.unroll = static_cast<int>(jsonfield::optionalInteger(j, "unroll", where, kMin, kMax).value_or(1));
  return p;
}

std::string MiddleDimParams::describe() const {
  return "tx=" + std::to_string(tx) + " ty=" + std::to_string(ty) + " vec=" + std::to_string(vec) +
         " unroll=" + std::to_string(unroll);
}

}  // namespace hotkernel::kernels
