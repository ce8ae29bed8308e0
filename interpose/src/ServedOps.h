#pragma once
// The ops hotkernel can override, in one place: their names (HOTKERNEL_OPS
// takes "_softmax" or "aten::_softmax"), the family that serves each, and each
// op's trampoline, plan table, switch and counters, whichever override class
// holds them (SoftmaxOverride, RmsNormOverride, LayerNormOverride,
// CrossEntropyOverride, ReduceOverride). The
// runtime, the C API and the recorder go through here, so an op added to a
// family is wired everywhere by adding it to this list.

#include <c10/core/DispatchKey.h>

#include <cstdint>
#include <optional>
#include <string>

#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

enum class ServedOp { Softmax, LogSoftmax, RmsNorm, LayerNorm, CrossEntropy, Sum, Mean, Amax, Argmax };

inline constexpr ServedOp kServedOps[] = {ServedOp::Softmax,      ServedOp::LogSoftmax, ServedOp::RmsNorm,
                                          ServedOp::LayerNorm,    ServedOp::CrossEntropy, ServedOp::Sum,
                                          ServedOp::Mean,         ServedOp::Amax,       ServedOp::Argmax};

// "aten::_softmax" / "_softmax", "aten::_log_softmax", "aten::_fused_rms_norm",
// "aten::native_layer_norm", "aten::cross_entropy_loss", "aten::sum.dim_IntList" (or "sum"),
// "aten::mean.dim" (or "mean"), "aten::amax", "aten::argmax" (with or without "aten::"); nullopt for any other name.
std::optional<ServedOp> servedOpOf(const std::string& name);
// The dispatcher's name, with its overload: "aten::_fused_rms_norm", "aten::sum.dim_IntList" (what the cache,
// the profile and the recorder use).
const char* servedOpName(ServedOp op);
// The cache family of the op's kernels: "softmax_lastdim", "log_softmax_lastdim", "rms_norm", "layer_norm",
// "cross_entropy", "sum_lastdim", "mean_lastdim", "amax_lastdim", "argmax_lastdim".
const char* servedOpFamily(ServedOp op);
// The reduction of a last-dim reduction op (Sum, Mean, Amax, Argmax); nullopt for the others.
std::optional<kernels::ReduceOp> reduceOpOf(ServedOp op);

// Registers the op's trampoline for `key` and, for CUDA, its device hook
// (Note [Lazy GPU start] in Runtime.h); cross_entropy_loss, a composite op,
// also on the key's autograd key (Note [Overriding a composite op]).
// Idempotent. Throws Error.
void installServedOp(ServedOp op, c10::DispatchKey key, bool (*deviceHook)(int device));
// Whether the op's trampoline is registered for `key` (for CUDA: the op is in HOTKERNEL_OPS).
bool servedOpInstalled(ServedOp op, c10::DispatchKey key);
PlanSlot& plansOf(ServedOp op);
uint64_t hitsOf(ServedOp op);
uint64_t missesOf(ServedOp op);

// Routes every served op to hotkernel kernels (true) or to the originals
// (false); returns the softmax op's previous state (all ops move together).
bool setServedOpsEnabled(bool enabled);
bool servedOpsEnabled();
// Plans published for all served ops together.
size_t servedPlanCount();

}  // namespace hotkernel
