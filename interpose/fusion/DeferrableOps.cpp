#include "DeferrableOps.h"

#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion {

const std::vector<DeferrableOp>& deferrableOps() {
  static const std::vector<DeferrableOp> ops = {
      {"aten::neg", "", "out"},
      {"aten::exp", "", "out"},
      {"aten::log", "", "out"},
      {"aten::rsqrt", "", "out"},
      {"aten::sqrt", "", "out"},
      {"aten::tanh", "", "out"},
      {"aten::sigmoid", "", "out"},
      {"aten::silu", "", "out"},
      {"aten::relu", "", "out"},
      {"aten::abs", "", "out"},
      {"aten::reciprocal", "", "out"},
      {"aten::gelu", "", "out"},
      {"aten::pow", "Tensor_Scalar", "Tensor_Scalar_out"},
      {"aten::add", "Tensor", "out"},
      {"aten::sub", "Tensor", "out"},
      {"aten::mul", "Tensor", "out"},
      {"aten::div", "Tensor", "out"},
      {"aten::add", "Scalar", "Scalar_out"},
      {"aten::sub", "Scalar", "Scalar_out"},
      {"aten::mul", "Scalar", "Scalar_out"},
      {"aten::div", "Scalar", "Scalar_out"},
      {"aten::rsub", "Scalar", "Scalar_out"},
      {"aten::rsub", "Tensor", "Tensor_out"},
      {"aten::_to_copy", "", nullptr},
      {"aten::clone", "", "out"},  // Note [Relayout copies]
      {"aten::sum", "dim_IntList", "IntList_out"},
      {"aten::mean", "dim", "out"},
      {"aten::amax", "", "out"},
      {"aten::cat", "", "out"},  // Tensor[] tensors, int dim: HF's rotate_half
      {"aten::_softmax", "", "out"},  // Note [Softmax in a chain]
      {"aten::_log_softmax", "", "out"},
  };
  return ops;
}

std::string qualifiedName(const DeferrableOp& op) {
  std::string s = op.name;
  if (op.overload[0] != '\0') s += std::string(".") + op.overload;
  return s;
}

std::vector<ResolvedOp> resolveDeferrableOps() {
  std::vector<ResolvedOp> resolved;
  const auto& table = deferrableOps();
  auto& dispatcher = c10::Dispatcher::singleton();
  for (size_t i = 0; i < table.size(); ++i) {
    const DeferrableOp& d = table[i];
    ResolvedOp r;
    r.index = i;
    r.qualified = qualifiedName(d);
    r.op = dispatcher.findSchema({d.name, d.overload});
    if (!r.op) {
      HOTKERNEL_LOG(Debug) << "fusion: " << r.qualified << " is not in this torch";
      continue;
    }
    r.functionalArgs = r.op->schema().arguments().size();
    if (d.outOverload != nullptr) {
      r.out = dispatcher.findSchema({d.name, d.outOverload});
      if (!r.out || r.out->schema().arguments().size() != r.functionalArgs + 1 ||
          r.out->schema().returns().size() != 1) {
        HOTKERNEL_LOG(Debug) << "fusion: " << r.qualified << " has no usable ." << d.outOverload
                             << " overload; it is not deferred";
        continue;
      }
    }
    resolved.push_back(std::move(r));
  }
  return resolved;
}

std::vector<ResolvedOp> resolvePassingOps() {
  static constexpr const char* kNames[] = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"};
  std::vector<ResolvedOp> resolved;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const char* name : kNames) {
    ResolvedOp r;
    r.index = deferrableOps().size() + resolved.size();  // after every deferrable op: never a chain step
    r.qualified = name;
    r.passing = true;
    r.op = dispatcher.findSchema({name, ""});
    if (!r.op) {
      HOTKERNEL_LOG(Debug) << "fusion: " << name << " is not in this torch";
      continue;
    }
    r.functionalArgs = r.op->schema().arguments().size();
    resolved.push_back(std::move(r));
  }
  return resolved;
}

}  // namespace hotkernel::fusion
