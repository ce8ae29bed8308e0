#pragma once
// Reading a sampled call's arguments (RecordFunction inputs) as the
// trampolines would receive them: the overrides' recordedKey functions.

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace hotkernel {

// An int / SymInt argument as a concrete value; nullopt for anything else
// (a symbolic size: no variant to record).
std::optional<int64_t> recordedInt(const c10::IValue& v);

// An int[] / SymInt[] argument as concrete sizes; nullopt for anything else
// (a symbolic size: no variant to record).
std::optional<std::vector<int64_t>> recordedSizes(const c10::IValue& v);

// An optional Tensor argument into `out` (nullopt for None); false when the
// argument is neither a tensor nor None.
bool recordedOptionalTensor(const c10::IValue& v, std::optional<at::Tensor>& out);

}  // namespace hotkernel
