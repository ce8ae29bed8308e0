#pragma once
// The table of served ops: one row per ATen op hotkernel can override.
//
// Note [The served-op table]
// A row says everything the serving path, the recorder and the engine need
// of one op: its dispatcher name (the cache's, the profile's and
// HOTKERNEL_OPS' spelling), the family that serves it (a kernels descriptor:
// variant options, bytes, plans), its override state (plan table, counters,
// device hook, install bookkeeping), how to register its trampoline, and how
// a sampled call becomes its variant key. Code that needs something of an op
// looks up its row; nothing switches over ops. Adding an op of an existing
// family is one row here plus its trampoline; a trampoline for a schema
// already served (amin beside amax) is a template instance.

#include <c10/core/DispatchKey.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/runtime/PlanTable.h"

namespace at {
struct RecordFunction;
}  // namespace at

namespace hotkernel {

struct OverrideState;

struct ServedOp {
  const char* name;                         // "aten::sum.dim_IntList": the dispatcher's name with its overload
  const kernels::FamilyDescriptor& family;  // what serves it (Note [Family descriptors])
  OverrideState& state;                     // its trampoline's state (leaked: used during exit)
  // Registers the trampoline for `key` (a composite op also on the key's
  // autograd key, Note [Overriding a composite op]). Idempotent. Throws Error.
  void (*install)(c10::DispatchKey key);
  // The key a sampled call would be looked up under, or nullopt when the
  // trampoline would never serve it (another overload, unsupported arguments).
  std::optional<VariantKey> (*recordedKey)(const at::RecordFunction& call);
  // What RecordFunction names the op: "aten::" and the name without its
  // overload ("aten::sum" for every sum).
  std::string recordName;
};

// Every served op.
const std::vector<ServedOp>& servedOps();
// The op of a name as HOTKERNEL_OPS takes it: the dispatcher name, with or
// without "aten::", or without its overload ("sum", "aten::mean"); nullptr
// for any other name.
const ServedOp* servedOpOf(const std::string& name);
// The same; throws Error for a name no row has.
const ServedOp& servedOp(const std::string& name);

// Registers the op's trampoline for `key` and sets its device hook (Note
// [Lazy GPU start] in Engine.h) when one is given. Idempotent. Throws Error.
void installServedOp(const ServedOp& op, c10::DispatchKey key, bool (*deviceHook)(int device));
// Whether the op's trampoline is registered for `key` (for CUDA: the op is in HOTKERNEL_OPS).
bool servedOpInstalled(const ServedOp& op, c10::DispatchKey key);
PlanSlot& plansOf(const ServedOp& op);
uint64_t hitsOf(const ServedOp& op);
uint64_t missesOf(const ServedOp& op);

// Routes every served op to hotkernel kernels (true) or to the originals
// (false); returns the previous state (all ops move together).
bool setServedOpsEnabled(bool enabled);
bool servedOpsEnabled();
// Plans published for all served ops together.
size_t servedPlanCount();

}  // namespace hotkernel
