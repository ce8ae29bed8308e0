#pragma once
// A boxed dispatcher call read as a chain::RecordedCall, with the tensors
// numbered canonically (Note [Chain patterns]) in a ValueTable.
//
// Note [What a chain may hold]
// A call takes part in a chain only when everything it touches is plain:
// its tensors are strided, on the chain's device, without the conjugate or
// negative bit, and none requires grad while grad mode is on (autograd
// would save them for a backward that reads their data); a 0-dim CPU
// tensor is taken only when it is a wrapped number (a Python scalar), and
// then as a number; every other argument is a number, a bool, an int list,
// a string, a ScalarType / MemoryFormat (numbers) or None. A device
// argument is recorded as its text; a tensor list (cat's) as the ids of its
// tensors, each taken as a tensor argument is. Anything else (a generator,
// a complex number, a symbolic size, an undefined tensor or a number in a
// list) ends the chain, and so does a tensor of the chain whose metadata
// changed in place since the chain took it (Note [Values as a chain took
// them]).
//
// Note [Views of a chain's values]
// A view made in Python (a slice, a transpose) reaches no trampoline: it
// arrives as a tensor argument with its own TensorImpl and data pointer on
// the storage of the tensor it views. A view of a chain input is an input of
// its own (rotary's x1 and x2 are halves of x): inputs are only read, by
// the fused kernel through each one's data pointer and strides, by the
// replay through the view itself, so inputs may share memory. A view of a
// value a call of the chain returned ends the chain: deferred, that value is
// not computed until the flush, and the kernel would read it unwritten. A
// result that shares storage with any value of the chain is no plain result
// (ChainLearner::append): the plan's guard keeps outputs off the inputs.

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <optional>
#include <string>
#include <vector>

#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::fusion {

// The tensors of a chain or a learning window, by canonical value id.
class ValueTable {
 public:
  // `strong`: the table keeps every value's storage alive through its own
  // TensorImpl (a pending chain: the caching allocator cannot hand out their
  // storage); else it keeps weak references only (a learning window).
  explicit ValueTable(bool strong) : strong_(strong) {
    spareMetas_.reserve(kMaxSpareMetas);  // recycle() never allocates: clear() runs in noexcept flushes
  }

  // The id of `t`'s TensorImpl (its latest value: Note [In-place steps in the table]), or -1 when the table does
  // not hold it.
  int64_t find(const at::Tensor& t) const;
  // Adds `t` under the next id and returns it; `produced`: a call of the
  // chain or window returned it (Note [Views of a chain's values]).
  int64_t add(const at::Tensor& t, bool produced = false);
  // Note [In-place steps in the table]
  // An in-place call's result is the TensorImpl it wrote, holding a new value:
  // addInPlace numbers it as the next id, on the storage (and, in a strong
  // table, the TensorImpl as taken) of value `overwrites`, which a call of
  // the chain or window returned. From then on the TensorImpl is the new
  // value (find), and the overwritten one is referenced by no one: its
  // contents are gone in eager too, so no kernel writes it. Returns -1 (the
  // table unchanged) when `overwrites` is not such a value of `t`.
  int64_t addInPlace(const at::Tensor& t, int64_t overwrites);
  size_t size() const { return entries_.size(); }
  const chain::TensorMetas& metas() const { return metas_; }
  // Whether anything but this table refers to the value: its TensorImpl is
  // alive (the table holds none: Note [A pending chain holds no caller's
  // TensorImpl]), or its storage is held by another TensorImpl (a view).
  bool referencedElsewhere(int64_t id) const;
  // Note [Values as a chain took them]
  // A call's tensors may change after the chain took them without any
  // command: an in-place metadata op (`t_`, `unsqueeze_`, `squeeze_`,
  // `as_strided_`, `set_`) issues no kernel, so nothing flushes, and the
  // owner thread may be making one while another thread's call flushes the
  // chain. Eager ran the call before the change, so a strong table keeps its
  // own TensorImpl of each value (a shallow copy when taken: the same
  // storage, the sizes, strides and offset it had) and the flush reads and
  // writes only those: it never reads the caller's TensorImpls' metadata,
  // only whether they are alive. Strong tables only.
  //
  // Note [A pending chain holds no caller's TensorImpl]
  // A strong table holds its own TensorImpl of each value (and so the
  // storage) and only a weak reference to the caller's. Holding the
  // caller's would make every value look referenced: with PyTorch's PyObject
  // preservation the Python wrapper of a TensorImpl holds a strong reference
  // to it for as long as any other C++ reference exists, so a temporary the
  // Python program dropped stays alive through the table's reference, and no
  // chain run from Python would fuse. A weak reference lets the caller's
  // TensorImpl (and its wrapper) die when the program drops it, and keeps
  // its memory, so its address is not reused while the chain pends.
  const at::Tensor& taken(int64_t id) const;
  // Whether `t` (the TensorImpl of `id`) still has the storage, offset, sizes
  // and strides it had when added: an in-place metadata op may have changed
  // them since, and then it is no longer the value the chain or window knows.
  bool unchangedSinceAdded(int64_t id, const at::Tensor& t) const;
  // Whether `t` shares storage with a value of the table without being it
  // (`producedOnly`: with a value a call returned).
  bool aliasesAValue(const at::Tensor& t, bool producedOnly = false) const;
  // Forgets the values numbered from `size` on.
  void truncate(size_t size);
  void clear();

 private:
  struct Entry {
    const c10::TensorImpl* impl = nullptr;
    const c10::StorageImpl* storage = nullptr;
    int64_t offset = 0;  // the storage offset when added
    bool produced = false;  // returned by a call, not a chain input
    bool overwritten = false;  // an in-place call wrote its TensorImpl since (Note [In-place steps in the table])
    int64_t overwrites = -1;   // the value this in-place result overwrote; -1 for any other
    at::Tensor taken;  // strong tables: the value as taken (Note [Values as a chain took them])
    std::optional<c10::weak_intrusive_ptr<c10::TensorImpl>> weakImpl;  // the caller's, in both kinds
    std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> weakStorage;
  };
  // Note [Recycled metadata nodes]
  // Each value's metadata is a map node holding two vectors: three
  // allocations a value, on the deferral's hot path. The nodes of values
  // the table forgets (truncate, clear) are kept, up to kMaxSpareMetas, and
  // the next values reuse them, their vectors' capacity included. The spare
  // list's capacity is reserved up front, so forgetting never allocates (a
  // chain's flush, noexcept, clears its table).
  static constexpr size_t kMaxSpareMetas = 64;
  void recycle(chain::TensorMetas::node_type node) noexcept;
  // `t`'s metadata under `id`, in a recycled node when there is one.
  void addMeta(int64_t id, const at::Tensor& t);

  bool strong_;
  std::vector<Entry> entries_;
  chain::TensorMetas metas_;
  std::vector<chain::TensorMetas::node_type> spareMetas_;
};

chain::TensorMeta metaOf(const at::Tensor& t);
// The ScalarType of a TensorMeta's name (metaOf's spelling: the floating
// types, the integer types, bool); nullopt for another. A deferred call's
// outputs are allocated from it (an unused uint8 result too: cuDNN's batch
// norm reserve).
std::optional<c10::ScalarType> scalarTypeOf(const std::string& name);

// The tensor arguments' device (the first tensor, alone or in a list, that
// is not a wrapped number), or nullopt when there is none.
std::optional<c10::Device> callDevice(c10::ArrayRef<c10::IValue> args);

// Reads a call's arguments (the schema's, in order) into `call.args`,
// numbering new tensors in `values`. Returns "" or why the call cannot take
// part in a chain (Note [What a chain may hold]); on a refusal `values` may
// hold tensors added for this call (the caller drops the table).
std::string captureArgs(c10::ArrayRef<c10::IValue> args, c10::Device device, ValueTable& values,
                        chain::RecordedCall& call);

// Whether a tensor of `args` (or of a list among them) is a value of
// `values` or shares storage with one.
bool readsAValue(c10::ArrayRef<c10::IValue> args, const ValueTable& values);

}  // namespace hotkernel::fusion
