#include "ResultLayout.h"

#include <optional>
#include <utility>
#include <vector>

#include "CallArgs.h"
#include "TensorIteratorLayout.h"
#include "TensorPlacement.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {
namespace {

using rules::Form;

// c10::MemoryFormat's values as the recorder sees them (an int).
constexpr int64_t kContiguousFormat = 0;
constexpr int64_t kPreserveFormat = 1;

}  // namespace

bool cloneContiguous(const RecordedCall& call) {
  const RecordedArg* format = call.args.size() > 1 ? &call.args[1] : nullptr;
  if (format == nullptr || format->kind == RecordedArg::Kind::None) return false;
  HOTKERNEL_REQUIRE(format->kind == RecordedArg::Kind::Scalar, "clone's memory_format must be a memory format");
  const auto f = static_cast<int64_t>(format->scalar);
  HOTKERNEL_REQUIRE(f == kContiguousFormat || f == kPreserveFormat, "clone to memory format ", f,
                    ": a chain writes contiguous or preserved strides");
  return f == kContiguousFormat;
}

void checkResultLayout(const rules::OpRule& rule, const RecordedCall& call, const TensorMetas& metas, int64_t out,
                       size_t result) {
  auto meta = [&metas](int64_t id) -> const TensorMeta& { return metaOf(metas, id); };
  const TensorMeta& got = meta(out);
  std::optional<TensorMeta> want;
  switch (rule.form) {
    case Form::Reduce:
      return;  // Row and RowFlat values are contiguous (placement)
    case Form::LayerNorm:
    case Form::GroupNorm:
    case Form::BatchNorm: {
      if (result != 0) return;  // the mean and rstd: Row values, contiguous (placement)
      const std::vector<int64_t>& sizes = meta(call.args.at(0).value).sizes;
      want = TensorMeta{got.scalarType, sizes, contiguousStrides(sizes)};  // a contiguous input (the guard)
      break;
    }
    case Form::Cast:
      want = TensorMeta{got.scalarType, meta(call.args.at(0).value).sizes, emptyLikeStrides(meta(call.args.at(0).value))};
      break;
    case Form::Clone: {
      const TensorMeta& self = meta(call.args.at(0).value);
      want = TensorMeta{got.scalarType, self.sizes,
                        cloneContiguous(call) ? contiguousStrides(self.sizes) : emptyLikeStrides(self)};
      break;
    }
    case Form::Softmax: {  // contiguous whatever the input's strides (the structured kernel's meta)
      const std::vector<int64_t>& sizes = meta(call.args.at(0).value).sizes;
      want = TensorMeta{got.scalarType, sizes, contiguousStrides(sizes)};
      break;
    }
    case Form::Cat: {
      std::vector<int64_t> sizes = meta(call.args.at(0).ints.at(0)).sizes;
      sizes.back() = 0;
      for (int64_t id : call.args[0].ints) sizes.back() += meta(id).sizes.back();
      want = TensorMeta{got.scalarType, sizes, contiguousStrides(sizes)};
      break;
    }
    default: {
      std::vector<const TensorMeta*> operands;
      for (const RecordedArg& a : call.args) {
        if (a.kind == RecordedArg::Kind::Tensor) operands.push_back(&meta(a.value));
        if (a.kind == RecordedArg::Kind::Scalar && operands.size() < 2) operands.push_back(nullptr);
      }
      if (rule.form == Form::Rsub && operands.size() == 2) std::swap(operands[0], operands[1]);
      if (rule.form != Form::BinaryTensor && rule.form != Form::BinaryScalar && rule.form != Form::Rsub) {
        operands.resize(1);
      }
      want = tensorIteratorResult(operands);
      break;
    }
  }
  HOTKERNEL_REQUIRE(want.has_value() && want->sizes == got.sizes, "the result %", out, " has sizes ", join(got.sizes),
                    " where ATen's broadcast gives ", want ? join(want->sizes) : "none");
  bool same = true;  // a dim of size 1 has any stride
  for (size_t d = 0; d < got.sizes.size(); ++d) same = same && (got.sizes[d] == 1 || got.strides[d] == want->strides[d]);
  HOTKERNEL_REQUIRE(same, "the result %", out, " has strides ", join(got.strides), " where ATen allocates ",
                    join(want->strides), " (Note [Result layouts as ATen allocates them])");
}

}  // namespace hotkernel::chain::detail
