#pragma once
// A dispatcher call as the recorder sees it, without torch: the op, its
// arguments (tensors by value id, numbers, lists, flags, strings) and the
// ids of the tensors it returns, plus each tensor's metadata.
//
// Note [Recorded calls]
// A value id names one tensor result for the length of a recording (the
// recorder numbers the TensorImpls it meets); a chain input is a value id
// that no earlier call of the sequence returned. Arguments are in schema
// order, keyword arguments included, trailing defaults optional. A Python
// number that ATen wraps into a 0-dim CPU tensor (`x * 0.5` reaches
// aten::mul.Tensor with a wrapped number) is recorded as a Scalar argument,
// like the Scalar of a `.Scalar` overload: both are wrapped numbers to
// ATen's type promotion (Note [Chain dtypes]). Sizes and strides are in
// elements; `scalarType` is torch's dtype name without "torch." (float32,
// float16, bfloat16, int64, bool, ...), so that a recording of any tensor
// can be described and refused by name. A Tensor[] argument (cat's) is a
// TensorList holding its tensors' value ids in order.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hotkernel::chain {

struct TensorMeta {
  std::string scalarType;  // "bfloat16"
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

struct RecordedArg {
  enum class Kind { Tensor, Scalar, IntList, Bool, String, None, TensorList };
  Kind kind = Kind::None;
  int64_t value = -1;         // Tensor: the value id
  double scalar = 0.0;        // Scalar
  std::vector<int64_t> ints;  // IntList (a dim list); TensorList: the value ids
  bool flag = false;          // Bool
  std::string text;           // String (gelu's approximate)

  static RecordedArg tensor(int64_t id);
  static RecordedArg number(double v);
  static RecordedArg intList(std::vector<int64_t> v);
  static RecordedArg boolean(bool v);
  static RecordedArg string(std::string v);
  static RecordedArg none();
  static RecordedArg tensorList(std::vector<int64_t> ids);

  // The value ids this argument names: one for a Tensor, the list's for a
  // TensorList, none otherwise. A view into this argument (no allocation: the
  // trampoline's take and sameStep walk it on every deferred call); valid
  // while the argument lives unchanged.
  struct IdRange {
    const int64_t* first = nullptr;
    const int64_t* last = nullptr;
    const int64_t* begin() const { return first; }
    const int64_t* end() const { return last; }
  };
  IdRange tensorIds() const {
    if (kind == Kind::Tensor) return {&value, &value + 1};
    if (kind == Kind::TensorList) return {ints.data(), ints.data() + ints.size()};
    return {};
  }
};

struct RecordedCall {
  std::string op;  // the schema name with its overload: "aten::mul.Tensor", "aten::rsqrt"
  std::vector<RecordedArg> args;
  std::vector<int64_t> outputs;  // value ids of the returned tensors
};

// The metadata of every tensor value the calls read or return, by value id.
using TensorMetas = std::map<int64_t, TensorMeta>;

// "aten::add.Tensor(%3, %4, alpha=1)"-like text of a call, for messages.
std::string describeCall(const RecordedCall& call);

}  // namespace hotkernel::chain
