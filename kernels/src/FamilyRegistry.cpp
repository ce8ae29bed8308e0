// The list of families (Note [Family descriptors]): one line per cache family.
#include "hotkernel/kernels/BatchNormFamily.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel::kernels {

const std::vector<const FamilyDescriptor*>& allFamilies() {
  static const std::vector<const FamilyDescriptor*> kFamilies = [] {
    std::vector<const FamilyDescriptor*> f = {&softmaxDescriptor(SoftmaxOp::Softmax),
                                              &softmaxDescriptor(SoftmaxOp::LogSoftmax), &rmsNormDescriptor(),
                                              &layerNormDescriptor(), &crossEntropyDescriptor()};
    f.push_back(&groupNormDescriptor());
    f.push_back(&batchNormDescriptor());
    for (ReduceOp op : kAllReduceOps) f.push_back(&reduceDescriptor(op));
    f.push_back(&mmPadDescriptor());
    f.push_back(&addmmPadDescriptor());
    f.push_back(&sdpaDescriptor());
    return f;
  }();
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
