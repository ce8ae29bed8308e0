#include "CallWrites.h"

#include <algorithm>

#include "CallArgs.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {

void refuseOutAndViewOps(const std::string& schema) {
  const std::string base = schema.rfind("aten::", 0) == 0 ? schema.substr(6) : schema;
  const std::string name = base.substr(0, base.find('.'));
  const std::string overload = base.find('.') == std::string::npos ? "" : base.substr(base.find('.') + 1);
  HOTKERNEL_REQUIRE(overload != "out" && (overload.size() < 4 || overload.substr(overload.size() - 4) != "_out"),
                    "out= op: it writes a caller's tensor, which ends a chain");
  for (const char* view : rules::kViewOps) {
    HOTKERNEL_REQUIRE(name != view, "view op: its result aliases its argument, which ends a chain");
  }
}

std::string functionalOfInPlace(const std::string& schema) {
  const size_t ns = schema.rfind("::");
  const size_t dot = schema.find('.', ns == std::string::npos ? 0 : ns);
  const std::string name = schema.substr(0, dot);
  if (name.size() < 2 || name.back() != '_' || name.compare(name.size() - 2, 2, "__") == 0) return "";
  return name.substr(0, name.size() - 1) + (dot == std::string::npos ? "" : schema.substr(dot));
}

void checkInPlaceStep(const RecordedCall& call, const rules::OpRule* rule, const std::vector<int64_t>& produced,
                      const TensorMetas& metas) {
  using rules::Form;
  const bool form = rule != nullptr && (rule->form == Form::Unary || rule->form == Form::Gelu ||
                                        rule->form == Form::LeakyRelu || rule->form == Form::Pow ||
                                        rule->form == Form::BinaryTensor || rule->form == Form::BinaryScalar ||
                                        rule->form == Form::Clamp);
  HOTKERNEL_REQUIRE(form, "in-place op: no chain step writes its argument in place (Note [In-place steps])");
  HOTKERNEL_REQUIRE(!call.args.empty() && call.args[0].kind == RecordedArg::Kind::Tensor,
                    "in-place op without a tensor to write");
  HOTKERNEL_REQUIRE(call.outputs.size() == 1, "in-place op returning ", call.outputs.size(), " tensors");
  const int64_t self = call.args[0].value;
  HOTKERNEL_REQUIRE(std::find(produced.begin(), produced.end(), self) != produced.end(), "in-place op on %", self,
                    ", which no earlier call returned: it writes a chain input, which ends a chain");
  const TensorMeta& was = metaOf(metas, self);
  const TensorMeta& is = metaOf(metas, call.outputs[0]);
  HOTKERNEL_REQUIRE(was.scalarType == is.scalarType && was.sizes == is.sizes && was.strides == is.strides,
                    "the in-place result %", call.outputs[0], " is not laid out as %", self, ", the tensor it writes");
}

}  // namespace hotkernel::chain::detail
