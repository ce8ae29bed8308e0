#pragma once
// What the rest of hotkernel knows of a kernel family, by lookup instead of a
// switch over families.
//
// Note [Family descriptors]
// A descriptor stands for one cache family: one kernel template compiled for
// one ATen op ("softmax_lastdim" for aten::_softmax, "sum_lastdim" for
// aten::sum.dim_IntList). It says which op it reproduces (its ATen reference),
// which option fields its variant keys carry (Note [Variant options]), whether
// it serves a key (the options and the family's guardVariant), the bytes one
// call moves (the roofline and the ranking's cost), and how a validated
// parameter point becomes a plan (Note [A family's plan]). The serving path
// adds how a call becomes a key and its trampoline (interpose's served-op
// table); the optimizer adds how the family is tuned (FamilyTuning.h). Adding
// a family is its folder under kernels/, its Family class and descriptor, one
// line in allFamilies(), a tuner row and a served-op row.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel::kernels {

struct FamilyDescriptor {
  const char* name;        // the cache's family: "softmax_lastdim", "rms_norm", ...
  const char* atenOp;      // the op whose results it reproduces, overload included: "aten::_softmax"
  const char* kernelName;  // the entry point of its cubins: "hk_softmax_lastdim"
  int32_t optionFields;    // the variant_options bits its keys may carry (0: none)

  // Whether the family serves `key`: no option outside optionFields (and those
  // it requires present), no inner extent unless the family has a layout for
  // it (innerKernelName), and the family's guardVariant.
  bool (*servesKey)(const VariantKey& key);
  // The bytes one call of `key` moves (the family's bytesMoved). Precondition: servesKey(key).
  double (*bytesMoved)(const VariantKey& key);
  // The plan of a validated point: `params` (the family's Params as JSON) must
  // pass the family's guards for `key`, then `cubin` is loaded on `device` with
  // the family's launch geometry and alignment. Throws Error otherwise.
  Plan (*makePlan)(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device);
  // The entry point of its cubins for keys with an inner extent (the
  // reductions' middle-dim layout: Note [Two layouts, one family] in
  // src/ReduceDescriptor.cpp); nullptr: the family serves no such key.
  const char* innerKernelName = nullptr;
};

// The entry point of `family`'s cubins for `key`: innerKernelName for a key
// with an inner extent, kernelName otherwise.
inline const char* kernelNameFor(const FamilyDescriptor& family, const VariantKey& key) {
  return key.inner != 0 && family.innerKernelName != nullptr ? family.innerKernelName : family.kernelName;
}

// Every family, one descriptor per cache family name.
const std::vector<const FamilyDescriptor*>& allFamilies();
// The family of a cache family name, or nullptr.
const FamilyDescriptor* familyNamed(const std::string& name);
// The family that reproduces `atenOp` (overload included, e.g. "aten::sum.dim_IntList"), or nullptr.
const FamilyDescriptor* familyForOp(const std::string& atenOp);

}  // namespace hotkernel::kernels
