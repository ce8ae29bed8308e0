#include "ServedOps.h"

#include "CrossEntropyOverride.h"
#include "LayerNormOverride.h"
#include "ReduceOverride.h"
#include "RmsNormOverride.h"
#include "SoftmaxOverride.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel {

std::optional<ServedOp> servedOpOf(const std::string& name) {
  const std::string shortName = name.rfind("aten::", 0) == 0 ? name.substr(6) : name;
  if (shortName == "_softmax") return ServedOp::Softmax;
  if (shortName == "_log_softmax") return ServedOp::LogSoftmax;
  if (shortName == "_fused_rms_norm") return ServedOp::RmsNorm;
  if (shortName == "native_layer_norm") return ServedOp::LayerNorm;
  if (shortName == "cross_entropy_loss") return ServedOp::CrossEntropy;
  if (shortName == "sum.dim_IntList" || shortName == "sum") return ServedOp::Sum;
  if (shortName == "mean.dim" || shortName == "mean") return ServedOp::Mean;
  if (shortName == "amax") return ServedOp::Amax;
  if (shortName == "argmax") return ServedOp::Argmax;
  return std::nullopt;
}

std::optional<kernels::ReduceOp> reduceOpOf(ServedOp op) {
  switch (op) {
    case ServedOp::Sum:
      return kernels::ReduceOp::Sum;
    case ServedOp::Mean:
      return kernels::ReduceOp::Mean;
    case ServedOp::Amax:
      return kernels::ReduceOp::Amax;
    case ServedOp::Argmax:
      return kernels::ReduceOp::Argmax;
    default:
      return std::nullopt;
  }
}

const char* servedOpName(ServedOp op) {
  switch (op) {
    case ServedOp::Softmax:
      return SoftmaxOverride::kOpName;
    case ServedOp::LogSoftmax:
      return SoftmaxOverride::kLogOpName;
    case ServedOp::RmsNorm:
      return RmsNormOverride::kOpName;
    case ServedOp::LayerNorm:
      return LayerNormOverride::kOpName;
    case ServedOp::CrossEntropy:
      return CrossEntropyOverride::kOpName;
    case ServedOp::Sum:
    case ServedOp::Mean:
    case ServedOp::Amax:
    case ServedOp::Argmax:
      return ReduceOverride::opName(*reduceOpOf(op));
  }
  return "";
}

const char* servedOpFamily(ServedOp op) {
  switch (op) {
    case ServedOp::Softmax:
      return kernels::softmaxFamilyName(kernels::SoftmaxOp::Softmax);
    case ServedOp::LogSoftmax:
      return kernels::softmaxFamilyName(kernels::SoftmaxOp::LogSoftmax);
    case ServedOp::RmsNorm:
      return kernels::RmsNormFamily::kName;
    case ServedOp::LayerNorm:
      return kernels::LayerNormFamily::kName;
    case ServedOp::CrossEntropy:
      return kernels::CrossEntropyFamily::kName;
    case ServedOp::Sum:
    case ServedOp::Mean:
    case ServedOp::Amax:
    case ServedOp::Argmax:
      return kernels::reduceFamilyName(*reduceOpOf(op));
  }
  return "";
}

void installServedOp(ServedOp op, c10::DispatchKey key, bool (*deviceHook)(int device)) {
  switch (op) {
    case ServedOp::Softmax:
    case ServedOp::LogSoftmax: {
      const auto softmaxOp = op == ServedOp::Softmax ? SoftmaxOverride::Op::Softmax : SoftmaxOverride::Op::LogSoftmax;
      SoftmaxOverride::install(key, softmaxOp);
      if (deviceHook) SoftmaxOverride::setDeviceHook(deviceHook);
      return;
    }
    case ServedOp::RmsNorm:
      RmsNormOverride::install(key);
      if (deviceHook) RmsNormOverride::setDeviceHook(deviceHook);
      return;
    case ServedOp::LayerNorm:
      LayerNormOverride::install(key);
      if (deviceHook) LayerNormOverride::setDeviceHook(deviceHook);
      return;
    case ServedOp::CrossEntropy:
      CrossEntropyOverride::install(key);
      if (deviceHook) CrossEntropyOverride::setDeviceHook(deviceHook);
      return;
    case ServedOp::Sum:
    case ServedOp::Mean:
    case ServedOp::Amax:
    case ServedOp::Argmax:
      ReduceOverride::install(key, *reduceOpOf(op));
      if (deviceHook) ReduceOverride::setDeviceHook(*reduceOpOf(op), deviceHook);
      return;
  }
}

bool servedOpInstalled(ServedOp op, c10::DispatchKey key) {
  switch (op) {
    case ServedOp::Softmax:
      return SoftmaxOverride::installed(key, SoftmaxOverride::Op::Softmax);
    case ServedOp::LogSoftmax:
      return SoftmaxOverride::installed(key, SoftmaxOverride::Op::LogSoftmax);
    case ServedOp::RmsNorm:
      return RmsNormOverride::installed(key);
    case ServedOp::LayerNorm:
      return LayerNormOverride::installed(key);
    case ServedOp::CrossEntropy:
      return CrossEntropyOverride::installed(key);
    case ServedOp::Sum:
    case ServedOp::Mean:
    case ServedOp::Amax:
    case ServedOp::Argmax:
      return ReduceOverride::installed(key, *reduceOpOf(op));
  }
  return false;
}

PlanSlot& plansOf(ServedOp op) {
  switch (op) {
    case ServedOp::Softmax:
      return SoftmaxOverride::plans(SoftmaxOverride::Op::Softmax);
    case ServedOp::LogSoftmax:
      return SoftmaxOverride::plans(SoftmaxOverride::Op::LogSoftmax);
    case ServedOp::RmsNorm:
      return RmsNormOverride::plans();
    case ServedOp::LayerNorm:
      return LayerNormOverride::plans();
    case ServedOp::CrossEntropy:
      return CrossEntropyOverride::plans();
    case ServedOp::Sum:
    case ServedOp::Mean:
    case ServedOp::Amax:
    case ServedOp::Argmax:
      return ReduceOverride::plans(*reduceOpOf(op));
  }
  return SoftmaxOverride::plans();  // unreachable
}

uint64_t hitsOf(ServedOp op) {
  switch (op) {
    case ServedOp::Softmax:
      return SoftmaxOverride::hits(SoftmaxOverride::Op::Softmax);
    case ServedOp::LogSoftmax:
      return SoftmaxOverride::hits(SoftmaxOverride::Op::LogSoftmax);
    case ServedOp::RmsNorm:
      return RmsNormOverride::hits();
    case ServedOp::LayerNorm:
      return LayerNormOverride::hits();
    case ServedOp::CrossEntropy:
      return CrossEntropyOverride::hits();
    case ServedOp::Sum:
    case ServedOp::Mean:
    case ServedOp::Amax:
    case ServedOp::Argmax:
      return ReduceOverride::hits(*reduceOpOf(op));
  }
  return 0;
}

uint64_t missesOf(ServedOp op) {
  switch (op) {
    case ServedOp::Softmax:
      return SoftmaxOverride::misses(SoftmaxOverride::Op::Softmax);
    case ServedOp::LogSoftmax:
      return SoftmaxOverride::misses(SoftmaxOverride::Op::LogSoftmax);
    case ServedOp::RmsNorm:
      return RmsNormOverride::misses();
    case ServedOp::LayerNorm:
      return LayerNormOverride::misses();
    case ServedOp::CrossEntropy:
      return CrossEntropyOverride::misses();
    case ServedOp::Sum:
    case ServedOp::Mean:
    case ServedOp::Amax:
    case ServedOp::Argmax:
      return ReduceOverride::misses(*reduceOpOf(op));
  }
  return 0;
}

bool setServedOpsEnabled(bool enabled) {
  const bool previous = SoftmaxOverride::setEnabled(enabled);  // both softmax ops
  RmsNormOverride::setEnabled(enabled);
  LayerNormOverride::setEnabled(enabled);
  CrossEntropyOverride::setEnabled(enabled);
  ReduceOverride::setEnabled(enabled);  // all four reductions
  return previous;
}

bool servedOpsEnabled() { return SoftmaxOverride::enabled(); }

size_t servedPlanCount() {
  size_t n = 0;
  for (ServedOp op : kServedOps) n += plansOf(op).load()->size();
  return n;
}

}  // namespace hotkernel
