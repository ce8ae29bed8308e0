// The list of families (Note [Family descriptors]): one line per cache family.
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel::kernels {

const std::vector<const FamilyDescriptor*>& allFamilies() {
  static const std::vector<const FamilyDescriptor*> kFamilies = {
      &softmaxDescriptor(SoftmaxOp::Softmax), &softmaxDescriptor(SoftmaxOp::LogSoftmax),
      &rmsNormDescriptor(),                   &layerNormDescriptor(),
      &crossEntropyDescriptor(),              &reduceDescriptor(ReduceOp::Sum),
      &reduceDescriptor(ReduceOp::Mean),      &reduceDescriptor(ReduceOp::Amax),
      &reduceDescriptor(ReduceOp::Argmax),
  };
  return kFamilies;
}

const FamilyDescriptor* familyNamed(const std::string& name) {
  for (const FamilyDescriptor* f : allFamilies()) {
    if (name == f->name) return f;
  }
  return nullptr;
}

const FamilyDescriptor* familyForOp(const std::string& atenOp) {
  for (const FamilyDescriptor* f : allFamilies()) {
    if (atenOp == f->atenOp) return f;
  }
  return nullptr;
}

}  // namespace hotkernel::kernels
