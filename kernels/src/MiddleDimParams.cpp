#include "hotkernel/kernels/MiddleDimParams.h"

#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {

nlohmann::json MiddleDimParams::toJson() const { return {{"tx", tx}, {"ty", ty}, {"vec", vec}, {"unroll", unroll}}; }

MiddleDimParams MiddleDimParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "middle-dim params must be a JSON object: ", j.dump());
  for (const char* key : {"tx", "ty", "vec"}) {
    HOTKERNEL_CHECK(j.contains(key) && j.at(key).is_number_integer(), "middle-dim params need an integer '", key,
                    "': ", j.dump());
  }
  MiddleDimParams p;
  p.tx = j.at("tx").get<int>();
  p.ty = j.at("ty").get<int>();
  p.vec = j.at("vec").get<int>();
  if (j.contains("unroll")) {
    HOTKERNEL_CHECK(j.at("unroll").is_number_integer(), "middle-dim params' 'unroll' must be an integer: ", j.dump());
    p.unroll = j.at("unroll").get<int>();
  }
  return p;
}

std::string MiddleDimParams::describe() const {
  return "tx=" + std::to_string(tx) + " ty=" + std::to_string(ty) + " vec=" + std::to_string(vec) +
         " unroll=" + std::to_string(unroll);
}

}  // namespace hotkernel::kernels
