#include "CallCapture.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/ScalarType.h>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::fusion {
namespace {

bool isWrappedNumber(const at::Tensor& t) { return t.unsafeGetTensorImpl()->is_wrapped_number(); }

std::string tensorProblem(const at::Tensor& t, c10::Device device) {
  if (t.layout() != c10::kStrided) return "a tensor that is not strided";
  if (t.device() != device) return "tensors on more than one device";
  if (t.is_conj() || t.is_neg()) return "a tensor with the conjugate or negative bit";
  if (t.requires_grad() && at::GradMode::is_enabled()) return "a tensor that requires grad under grad mode";
  if (!t.has_storage()) return "a tensor without storage";
  return "";
}

}  // namespace

namespace {

// `t`'s metadata into `m`, whose vectors keep their capacity (Note [Recycled metadata nodes]).
// torch's names: "Float" -> "float32" and so on, as chain::dtypeName spells them; torch's own for the rest
// ("Byte": cuDNN's batch norm reserve).
const char* scalarTypeName(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Bool: return "bool";
    default: return c10::toString(type);
  }
}

void fillMeta(const at::Tensor& t, chain::TensorMeta& m) {
  m.scalarType = scalarTypeName(t.scalar_type());
  m.sizes.assign(t.sizes().begin(), t.sizes().end());
  m.strides.assign(t.strides().begin(), t.strides().end());
}

}  // namespace

chain::TensorMeta metaOf(const at::Tensor& t) {
  chain::TensorMeta m;
  fillMeta(t, m);
  return m;
}

std::optional<c10::ScalarType> scalarTypeOf(const std::string& name) {
  if (name == "float32") return c10::ScalarType::Float;  // the chains' dtypes first: a deferred call's outputs
  if (name == "float16") return c10::ScalarType::Half;
  if (name == "bfloat16") return c10::ScalarType::BFloat16;
  for (c10::ScalarType type : {c10::ScalarType::Double, c10::ScalarType::Long, c10::ScalarType::Int,
                               c10::ScalarType::Short, c10::ScalarType::Char, c10::ScalarType::Byte,
                               c10::ScalarType::Bool}) {
    if (name == scalarTypeName(type)) return type;
  }
  return std::nullopt;
}

int64_t ValueTable::find(const at::Tensor& t) const {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].impl != impl || entries_[i].overwritten) continue;
    // The weak reference keeps the TensorImpl's memory, so its address is not reused; a dead one is not `t`.
    if (entries_[i].weakImpl->expired()) continue;
    return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t ValueTable::add(const at::Tensor& t, bool produced) {
  Entry e;
  e.produced = produced;
  e.impl = t.unsafeGetTensorImpl();
  e.storage = t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
  e.offset = t.storage_offset();
  // Note [A pending chain holds no caller's TensorImpl]
  e.weakImpl.emplace(t.getIntrusivePtr());
  if (strong_) {
    e.taken = at::Tensor(t.unsafeGetTensorImpl()->shallow_copy_and_detach(
        t.unsafeGetTensorImpl()->version_counter(), /*allow_tensor_metadata_change=*/true));
  } else if (t.has_storage()) {
    e.weakStorage.emplace(t.storage().getWeakStorageImpl());
  }
  const int64_t id = static_cast<int64_t>(entries_.size());
  entries_.push_back(std::move(e));
  addMeta(id, t);
  return id;
}

void ValueTable::addMeta(int64_t id, const at::Tensor& t) {
  if (spareMetas_.empty()) {
    metas_.emplace(id, metaOf(t));
  } else {
    chain::TensorMetas::node_type node = std::move(spareMetas_.back());
    spareMetas_.pop_back();
    node.key() = id;
    fillMeta(t, node.mapped());
    metas_.insert(std::move(node));
  }
}

int64_t ValueTable::addInPlace(const at::Tensor& t, int64_t overwrites) {
  if (overwrites < 0 || static_cast<size_t>(overwrites) >= entries_.size()) return -1;
  Entry& old = entries_[static_cast<size_t>(overwrites)];
  if (!old.produced || old.overwritten || old.impl != t.unsafeGetTensorImpl() || !unchangedSinceAdded(overwrites, t)) {
    return -1;
  }
  Entry e;
  e.produced = true;
  e.overwrites = overwrites;
  e.impl = old.impl;
  e.storage = old.storage;
  e.offset = old.offset;
  e.weakImpl = old.weakImpl;
  e.weakStorage = old.weakStorage;
  e.taken = old.taken;  // the same TensorImpl as taken: the table holds the storage once (referencedElsewhere)
  const int64_t id = static_cast<int64_t>(entries_.size());
  entries_.push_back(std::move(e));
  entries_[static_cast<size_t>(overwrites)].overwritten = true;
  addMeta(id, t);
  return id;
}

const at::Tensor& ValueTable::taken(int64_t id) const {
  HOTKERNEL_INTERNAL_ASSERT(strong_ && id >= 0 && static_cast<size_t>(id) < entries_.size(), "no tensor ", id);
  return entries_[static_cast<size_t>(id)].taken;
}

bool ValueTable::unchangedSinceAdded(int64_t id, const at::Tensor& t) const {
  const Entry& e = entries_[static_cast<size_t>(id)];
  const chain::TensorMeta& m = metas_.at(id);
  const c10::StorageImpl* storage = t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
  return storage == e.storage && t.storage_offset() == e.offset && t.sizes().equals(m.sizes) &&
         t.strides().equals(m.strides);
}

bool ValueTable::referencedElsewhere(int64_t id) const {
  HOTKERNEL_INTERNAL_ASSERT(id >= 0 && static_cast<size_t>(id) < entries_.size(), "no value ", id);
  const Entry& e = entries_[static_cast<size_t>(id)];
  if (e.overwritten) return false;  // Note [In-place steps in the table]
  if (!e.weakImpl->expired()) return true;  // the caller's TensorImpl is alive: someone holds it
  if (strong_) return e.taken.storage().use_count() > 1;  // the storage: the table's own TensorImpl and a view's
  return e.weakStorage && !e.weakStorage->expired();
}

bool ValueTable::aliasesAValue(const at::Tensor& t, bool producedOnly) const {
  if (!t.has_storage()) return false;
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  for (const Entry& e : entries_) {
    if (producedOnly && !e.produced) continue;
    if (e.storage == storage && e.impl != impl) {
      if (!strong_ && e.weakStorage && e.weakStorage->expired()) continue;
      return true;
    }
  }
  return false;
}

void ValueTable::truncate(size_t size) {
  while (entries_.size() > size) {
    const int64_t overwrote = entries_.back().overwrites;
    if (overwrote >= 0 && static_cast<size_t>(overwrote) < size) entries_[static_cast<size_t>(overwrote)].overwritten = false;
    entries_.pop_back();
    recycle(metas_.extract(static_cast<int64_t>(entries_.size())));
  }
}

void ValueTable::clear() {
  entries_.clear();
  while (!metas_.empty()) recycle(metas_.extract(metas_.begin()));
}

void ValueTable::recycle(chain::TensorMetas::node_type node) noexcept {
  // Within the reserved capacity: no allocation, no throw. A node past it is freed here.
  if (node && spareMetas_.size() < kMaxSpareMetas) spareMetas_.push_back(std::move(node));
}

std::optional<c10::Device> callDevice(c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& v : args) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && !isWrappedNumber(t)) return t.device();
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        if (t.defined() && !isWrappedNumber(t)) return t.device();
      }
    }
  }
  return std::nullopt;
}

namespace {

// The id of tensor argument `t` in `values` (added when new), or why it cannot take part.
std::string tensorArgId(const at::Tensor& t, c10::Device device, ValueTable& values, int64_t& id) {
  std::string problem = tensorProblem(t, device);
  if (!problem.empty()) return problem;
  id = values.find(t);
  // Note [Values as a chain took them]: a value reshaped in place since is not the one the table knows.
  if (id >= 0 && !values.unchangedSinceAdded(id, t)) return "a value of the chain changed its metadata in place";
  if (id < 0) {
    // Note [Views of a chain's values]: a view of an input is an input; a view of a result is not.
    if (values.aliasesAValue(t, /*producedOnly=*/true)) return "a view of a value a call of the chain returned";
    id = values.add(t);
  }
  return "";
}

}  // namespace

std::string captureArgs(c10::ArrayRef<c10::IValue> args, c10::Device device, ValueTable& values,
                        chain::RecordedCall& call) {
  call.args.clear();
  call.args.reserve(args.size());
  for (const c10::IValue& v : args) {
    if (v.isNone()) {
      call.args.push_back(chain::RecordedArg::none());
    } else if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        call.args.push_back(chain::RecordedArg::none());
        continue;
      }
      if (isWrappedNumber(t)) {
        if (!c10::isFloatingType(t.scalar_type()) && !c10::isIntegralType(t.scalar_type(), /*includeBool=*/true)) {
          return "a wrapped number that is not real";
        }
        call.args.push_back(chain::RecordedArg::number(t.item().toDouble()));
        continue;
      }
      int64_t id = -1;
      std::string problem = tensorArgId(t, device, values, id);
      if (!problem.empty()) return problem;
      call.args.push_back(chain::RecordedArg::tensor(id));
    } else if (v.isTensorList()) {
      std::vector<int64_t> ids;
      for (const at::Tensor& t : v.toTensorVector()) {
        if (!t.defined()) return "an undefined tensor in a tensor list";
        if (isWrappedNumber(t)) return "a number in a tensor list";
        int64_t id = -1;
        std::string problem = tensorArgId(t, device, values, id);
        if (!problem.empty()) return problem;
        ids.push_back(id);
      }
      call.args.push_back(chain::RecordedArg::tensorList(std::move(ids)));
    } else if (v.isDouble()) {
      call.args.push_back(chain::RecordedArg::number(v.toDouble()));
    } else if (v.isBool()) {
      call.args.push_back(chain::RecordedArg::boolean(v.toBool()));
    } else if (v.isInt()) {
      call.args.push_back(chain::RecordedArg::number(static_cast<double>(v.toInt())));
    } else if (v.isIntList()) {
      call.args.push_back(chain::RecordedArg::intList(v.toIntVector()));
    } else if (v.isString()) {
      call.args.push_back(chain::RecordedArg::string(v.toStringRef()));
    } else if (v.isDevice()) {
      call.args.push_back(chain::RecordedArg::string(v.toDevice().str()));
    } else {
      return std::string("an argument of kind ") + v.tagKind();
    }
  }
  return "";
}

bool readsAValue(c10::ArrayRef<c10::IValue> args, const ValueTable& values) {
  auto reads = [&](const c10::IValue& v) {
    if (!v.isTensor()) return false;
    const at::Tensor& t = v.toTensor();
    return t.defined() && (values.find(t) >= 0 || values.aliasesAValue(t));
  };
  for (const c10::IValue& v : args) {
    if (reads(v)) return true;
    if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (reads(e)) return true;
      }
    }
  }
  return false;
}

}  // namespace hotkernel::fusion
