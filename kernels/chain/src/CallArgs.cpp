// A recorded call's arguments as the chain builder's forms read them (CallArgs.h).

#include "CallArgs.h"

#include <algorithm>
#include <cmath>

#include "TensorPlacement.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {

const TensorMeta& metaOf(const TensorMetas& metas, int64_t id) {
  auto it = metas.find(id);
  HOTKERNEL_REQUIRE(it != metas.end(), "value %", id, " has no tensor metadata");
  return it->second;
}

DType dtypeOf(const TensorMeta& m, int64_t id) {
  for (DType d : kernels::kAllDTypes) {
    if (m.scalarType == dtypeName(d)) return d;
  }
  HOTKERNEL_THROW("value %", id, " is ", m.scalarType, ": a chain holds float32, float16 and bfloat16 tensors");
}

void unitStrideDimLast(ChainLayout& layout) {
  for (size_t d = layout.rowDims.size(); d-- > 0;) {
    if (layout.rowDims[d] == 1 || layout.strides[0][d] != 1) continue;
    auto moveLast = [d](auto& v) {
      std::rotate(v.begin() + static_cast<std::ptrdiff_t>(d), v.begin() + static_cast<std::ptrdiff_t>(d) + 1, v.end());
    };
    moveLast(layout.rowDims);
    for (std::vector<int64_t>& st : layout.strides) moveLast(st);
    return;
  }
}

const RecordedArg* argAt(const RecordedCall& call, size_t i) { return i < call.args.size() ? &call.args[i] : nullptr; }

double scalarArg(const RecordedCall& call, size_t i, double fallback, const char* what) {
  const RecordedArg* a = argAt(call, i);
  if (a == nullptr || a->kind == RecordedArg::Kind::None) return fallback;
  HOTKERNEL_REQUIRE(a->kind == RecordedArg::Kind::Scalar, what, " must be a number");
  return a->scalar;
}

void argCount(const RecordedCall& call, size_t most) {
  HOTKERNEL_REQUIRE(call.args.size() >= 1 && call.args.size() <= most, "takes 1 to ", most, " arguments, got ",
                    call.args.size());
}

bool reduceKeepdim(const RecordedCall& call, const TensorMetas& metas) {
  argCount(call, 4);
  const size_t nd = metaOf(metas, call.args[0].value).sizes.size();
  const RecordedArg* dims = argAt(call, 1);
  HOTKERNEL_REQUIRE(dims != nullptr && dims->kind == RecordedArg::Kind::IntList && dims->ints.size() == 1, "reduces ",
                    dims != nullptr ? join(dims->ints) : "every dim", ": a chain reduces the last dim alone");
  const int64_t d = dims->ints[0];
  HOTKERNEL_REQUIRE(d == -1 || d == static_cast<int64_t>(nd) - 1, "reduces dim ", d, " of a ", nd,
                    "-d tensor: a chain reduces the last dim alone");
  const RecordedArg* keep = argAt(call, 2);
  HOTKERNEL_REQUIRE(keep == nullptr || keep->kind == RecordedArg::Kind::Bool, "keepdim must be a bool");
  return keep != nullptr && keep->flag;
}

void unaryArgs(const RecordedCall& call) {
  if (call.op != "aten::softplus") return argCount(call, 1);
  argCount(call, 3);
  const double beta = scalarArg(call, 1, 1.0, "beta"), threshold = scalarArg(call, 2, 20.0, "threshold");
  HOTKERNEL_REQUIRE(beta == 1.0 && threshold == 20.0, "softplus with beta ", beta, " and threshold ", threshold,
                    ": a chain takes ATen's defaults (1, 20) only");
}

ClampBounds clampBounds(const RecordedCall& call, bool lowerFirst) {
  const bool both = call.op == "aten::clamp" || call.op == "aten::hardtanh";
  argCount(call, both ? 3 : 2);
  const RecordedArg* lower = lowerFirst ? argAt(call, 1) : nullptr;
  const RecordedArg* upper = both ? argAt(call, 2) : !lowerFirst ? argAt(call, 1) : nullptr;
  auto given = [](const RecordedArg* a) { return a != nullptr && a->kind != RecordedArg::Kind::None; };
  HOTKERNEL_REQUIRE(given(lower) || given(upper), "clamp without a bound");
  ClampBounds b;
  for (const RecordedArg* bound : {lower, upper}) {
    if (!given(bound)) continue;
    HOTKERNEL_REQUIRE(bound->kind == RecordedArg::Kind::Scalar, "clamp's bounds must be numbers");
    HOTKERNEL_REQUIRE(std::isfinite(bound->scalar), "clamp to the bound ", bound->scalar, ": a chain's constants are finite");
    (bound == lower ? b.lower : b.upper) = bound->scalar;
  }
  return b;
}

std::vector<int64_t> catParts(const RecordedCall& call, const TensorMetas& metas) {
  argCount(call, 2);
  const RecordedArg& list = call.args[0];
  HOTKERNEL_REQUIRE(list.kind == RecordedArg::Kind::TensorList && !list.ints.empty(),
                    "cat takes a list of one or more tensors");
  const std::vector<int64_t>& first = metaOf(metas, list.ints[0]).sizes;
  const size_t nd = first.size();
  const RecordedArg* dim = argAt(call, 1);
  const bool given = dim != nullptr && dim->kind != RecordedArg::Kind::None;
  HOTKERNEL_REQUIRE(!given || dim->kind == RecordedArg::Kind::Scalar, "cat's dim must be a number");
  const int64_t d = given ? static_cast<int64_t>(dim->scalar) : 0;
  HOTKERNEL_REQUIRE(nd >= 1 && (d == -1 || d == static_cast<int64_t>(nd) - 1), "cat along dim ", d, " of ", nd,
                    "-d tensors: a chain joins along the last dim only");
  for (int64_t id : list.ints) {
    const std::vector<int64_t>& s = metaOf(metas, id).sizes;
    HOTKERNEL_REQUIRE(s.size() == nd && std::equal(s.begin(), s.end() - 1, first.begin()), "cat's part %", id,
                      " has sizes ", join(s), ": the parts differ in a leading dim");
  }
  return list.ints;
}

}  // namespace hotkernel::chain::detail
