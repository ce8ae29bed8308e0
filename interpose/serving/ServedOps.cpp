#include "hotkernel/interpose/ServedOps.h"

#include "AddmmPadOverride.h"
#include "CrossEntropyOverride.h"
#include "BatchNormOverride.h"
#include "GroupNormOverride.h"
#include "LayerNormOverride.h"
#include "MmPadOverride.h"
#include "OverrideState.h"
#include "ReduceOverride.h"
#include "RmsNormOverride.h"
#include "SdpaOverride.h"
#include "SoftmaxOverride.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/BatchNormFamily.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using kernels::ReduceOp;
using kernels::SoftmaxOp;

std::string withoutPrefix(const std::string& name) { return name.rfind("aten::", 0) == 0 ? name.substr(6) : name; }
std::string withoutOverload(const std::string& name) { return name.substr(0, name.find('.')); }

ServedOp row(const char* name, const kernels::FamilyDescriptor& family, OverrideState& state,
             void (*install)(c10::DispatchKey), std::optional<VariantKey> (*recordedKey)(const at::RecordFunction&)) {
  HOTKERNEL_INTERNAL_ASSERT(std::string(name) == family.atenOp, name, " is not what ", family.name, " reproduces");
  return ServedOp{name, family, state, install, recordedKey, "aten::" + withoutOverload(withoutPrefix(name))};
}

template <SoftmaxOp kOp>
void installSoftmax(c10::DispatchKey key) {
  SoftmaxOverride::install(key, kOp);
}

template <ReduceOp kOp>
void installReduce(c10::DispatchKey key) {
  ReduceOverride::install(key, kOp);
}

template <ReduceOp kOp>
std::optional<VariantKey> recordedReduceKey(const at::RecordFunction& call) {
  return ReduceOverride::recordedKey(call, kOp);
}

}  // namespace

const std::vector<ServedOp>& servedOps() {
  // Leaked: the rows hold the override states, which trampolines use during exit.
  static const std::vector<ServedOp>* rows = new std::vector<ServedOp>{
      row(SoftmaxOverride::kOpName, kernels::softmaxDescriptor(SoftmaxOp::Softmax),
          SoftmaxOverride::state(SoftmaxOp::Softmax), &installSoftmax<SoftmaxOp::Softmax>,
          &SoftmaxOverride::recordedKey),
      row(SoftmaxOverride::kLogOpName, kernels::softmaxDescriptor(SoftmaxOp::LogSoftmax),
          SoftmaxOverride::state(SoftmaxOp::LogSoftmax), &installSoftmax<SoftmaxOp::LogSoftmax>,
          &SoftmaxOverride::recordedKey),
      row(RmsNormOverride::kOpName, kernels::rmsNormDescriptor(), RmsNormOverride::state(), &RmsNormOverride::install,
          &RmsNormOverride::recordedKey),
      row(LayerNormOverride::kOpName, kernels::layerNormDescriptor(), LayerNormOverride::state(),
          &LayerNormOverride::install, &LayerNormOverride::recordedKey),
      row(CrossEntropyOverride::kOpName, kernels::crossEntropyDescriptor(), CrossEntropyOverride::state(),
          &CrossEntropyOverride::install, &CrossEntropyOverride::recordedKey),
      row(GroupNormOverride::kOpName, kernels::groupNormDescriptor(), GroupNormOverride::state(),
          &GroupNormOverride::install, &GroupNormOverride::recordedKey),
      row(BatchNormOverride::kOpName, kernels::batchNormDescriptor(), BatchNormOverride::state(),
          &BatchNormOverride::install, &BatchNormOverride::recordedKey),
      row(kernels::reduceAtenOpName(ReduceOp::Sum), kernels::reduceDescriptor(ReduceOp::Sum),
          ReduceOverride::state(ReduceOp::Sum), &installReduce<ReduceOp::Sum>, &recordedReduceKey<ReduceOp::Sum>),
      row(kernels::reduceAtenOpName(ReduceOp::Mean), kernels::reduceDescriptor(ReduceOp::Mean),
          ReduceOverride::state(ReduceOp::Mean), &installReduce<ReduceOp::Mean>, &recordedReduceKey<ReduceOp::Mean>),
      row(kernels::reduceAtenOpName(ReduceOp::Amax), kernels::reduceDescriptor(ReduceOp::Amax),
          ReduceOverride::state(ReduceOp::Amax), &installReduce<ReduceOp::Amax>, &recordedReduceKey<ReduceOp::Amax>),
      row(kernels::reduceAtenOpName(ReduceOp::Argmax), kernels::reduceDescriptor(ReduceOp::Argmax),
          ReduceOverride::state(ReduceOp::Argmax), &installReduce<ReduceOp::Argmax>,
          &recordedReduceKey<ReduceOp::Argmax>),
      row(kernels::reduceAtenOpName(ReduceOp::Amin), kernels::reduceDescriptor(ReduceOp::Amin),
          ReduceOverride::state(ReduceOp::Amin), &installReduce<ReduceOp::Amin>, &recordedReduceKey<ReduceOp::Amin>),
      row(kernels::reduceAtenOpName(ReduceOp::Argmin), kernels::reduceDescriptor(ReduceOp::Argmin),
          ReduceOverride::state(ReduceOp::Argmin), &installReduce<ReduceOp::Argmin>,
          &recordedReduceKey<ReduceOp::Argmin>),
      row(kernels::reduceAtenOpName(ReduceOp::Max), kernels::reduceDescriptor(ReduceOp::Max),
          ReduceOverride::state(ReduceOp::Max), &installReduce<ReduceOp::Max>, &recordedReduceKey<ReduceOp::Max>),
      row(kernels::reduceAtenOpName(ReduceOp::Min), kernels::reduceDescriptor(ReduceOp::Min),
          ReduceOverride::state(ReduceOp::Min), &installReduce<ReduceOp::Min>, &recordedReduceKey<ReduceOp::Min>),
      row(MmPadOverride::kOpName, kernels::mmPadDescriptor(), MmPadOverride::state(), &MmPadOverride::install,
          &MmPadOverride::recordedKey),
      row(AddmmPadOverride::kOpName, kernels::addmmPadDescriptor(), AddmmPadOverride::state(),
          &AddmmPadOverride::install, &AddmmPadOverride::recordedKey),
      row(SdpaOverride::kOpName, kernels::sdpaDescriptor(), SdpaOverride::state(), &SdpaOverride::install,
          &SdpaOverride::recordedKey),
  };
  return *rows;
}

const ServedOp* servedOpOf(const std::string& name) {
  const std::string shortName = withoutPrefix(name);
  for (const ServedOp& op : servedOps()) {
    const std::string opShort = withoutPrefix(op.name);
    if (shortName == opShort || shortName == withoutOverload(opShort)) return &op;
  }
  return nullptr;
}

const ServedOp& servedOp(const std::string& name) {
  const ServedOp* op = servedOpOf(name);
  HOTKERNEL_CHECK(op != nullptr, "no served op is named '", name, "'");
  return *op;
}

void installServedOp(const ServedOp& op, c10::DispatchKey key, bool (*deviceHook)(int device)) {
  if (deviceHook) op.state.deviceHook.store(deviceHook);
  op.install(key);
}

bool servedOpInstalled(const ServedOp& op, c10::DispatchKey key) { return op.state.installedFor(key); }
PlanSlot& plansOf(const ServedOp& op) { return op.state.plans; }
uint64_t hitsOf(const ServedOp& op) { return op.state.hits.load(); }
uint64_t missesOf(const ServedOp& op) { return op.state.misses.load(); }
bool setServedOpsEnabled(bool enabled) { return setServingEnabled(enabled); }
bool servedOpsEnabled() { return servingEnabled(); }

size_t servedPlanCount() {
  size_t n = 0;
  for (const ServedOp& op : servedOps()) n += plansOf(op).load()->size();
  return n;
}

}  // namespace hotkernel
