#include "HarnessCompare.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "HarnessBuffers.h"
#include "hotkernel/optimizer/WorkSlices.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {

using kernels::DType;

std::string exactOutputMismatch(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kLong);
  if (at::equal(out, r)) return {};
  const at::Tensor differs = (out != r).reshape({-1});
  const int64_t bad = differs.sum().item<int64_t>();
  const int64_t i = differs.to(at::kInt).argmax().item<int64_t>();
  std::ostringstream os;
  os << bad << " element(s) differ; first at flat index " << i << ": got " << out.reshape({-1})[i].item<int64_t>()
     << ", reference " << r.reshape({-1})[i].item<int64_t>();
  return os.str();
}

namespace harness {
namespace {

// Max |out - ref|; +inf when NaN positions differ. Compared in float32 (exact
// for 16-bit values; for float32 the difference is rounded once, far below any
// tolerance) to keep the comparison cheap; the check calls it on row slices
// (Note [Bounded units of background GPU work]), so that the background
// optimizer yields quickly (Note [Optimize only on idle GPU time]).
double maxAbsError(const at::Tensor& out, const at::Tensor& ref) {
  const at::ScalarType t = out.scalar_type() == at::kDouble || ref.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor o = out.to(t), r = ref.to(t);
  if (!at::equal(o.isnan(), r.isnan())) return std::numeric_limits<double>::infinity();
  at::Tensor diff = (at::nan_to_num(o, 0.0, 0.0, 0.0) - at::nan_to_num(r, 0.0, 0.0, 0.0)).abs();
  // Infinite values must match exactly.
  if (!at::equal(o.isinf(), r.isinf())) return std::numeric_limits<double>::infinity();
  return diff.numel() ? diff.max().item<double>() : 0.0;
}

// Elements of a slice of `out` farther from `ref` than the elementwise
// `bound` (finite positions; NaN and infinity positions are maxAbsError's
// business), compared in float32 like maxAbsError; the worst one by its flat
// index in the whole output (`flatOffset`: the slice's first element there).
struct OutsideBound {
  int64_t bad = 0;
  double worstExcess = 0;
  int64_t worstIndex = 0;
  double got = 0, reference = 0, bound = 0;

  // Merges a later slice: counts add up; the worst is the first largest
  // excess in flat order (as argmax over the whole output picks it).
  void merge(const OutsideBound& later) {
    if (later.bad == 0) return;
    if (bad == 0 || later.worstExcess > worstExcess) {
      const int64_t total = bad + later.bad;
      *this = later;
      bad = total;
    } else {
      bad += later.bad;
    }
  }
  std::string describe() const {
    std::ostringstream os;
    os << bad << " element(s) outside the bound; worst at flat index " << worstIndex << ": got " << got
       << ", reference " << reference << ", bound " << bound;
    return os.str();
  }
};

OutsideBound outsideBound(const at::Tensor& out, const at::Tensor& ref, const at::Tensor& bound, int64_t flatOffset) {
  OutsideBound r;
  at::Tensor o = out.to(at::kFloat), rf = ref.to(at::kFloat);
  at::Tensor excess = ((o - rf).abs() - bound.to(o.device()).to(at::kFloat)).masked_fill_(~(o.isfinite() & rf.isfinite()), 0.0);
  r.bad = (excess > 0).sum().item<int64_t>();
  if (r.bad == 0) return r;
  at::Tensor flatExcess = excess.reshape({-1});
  const int64_t i = flatExcess.argmax().item<int64_t>();
  at::Tensor b = bound.to(o.device()).to(at::kFloat).expand_as(o).reshape({-1});
  r.worstExcess = flatExcess[i].item<double>();
  r.worstIndex = flatOffset + i;
  r.got = o.reshape({-1})[i].item<double>();
  r.reference = rf.reshape({-1})[i].item<double>();
  r.bound = b[i].item<double>();
  return r;
}

// Rows [b, b + n) of what a check of `rows` rows holds per row: a reference
// ([rows, cols] or [rows]) or a per-row input; anything else (0-dim) whole.
at::Tensor rowsOf(const at::Tensor& t, int64_t rows, int64_t b, int64_t n) {
  return t.defined() && t.dim() >= 1 && t.size(0) == rows ? t.narrow(0, b, n) : t;
}

// Rows [b, b + n) of a bound of a [rows, cols] output: a [rows, cols] or
// [rows, 1] bound is narrowed; a scalar, [cols] or [1, cols] one broadcasts.
at::Tensor boundRowsOf(const at::Tensor& bound, int64_t rows, int64_t b, int64_t n) {
  return bound.dim() == 2 && bound.size(0) == rows ? bound.narrow(0, b, n) : bound;
}

// A check's extra arguments for rows [b, b + n): per-row inputs narrowed.
RowOpArgs argsRowsOf(const RowOpArgs& a, int64_t rows, int64_t b, int64_t n) {
  RowOpArgs s = a;
  for (at::Tensor& t : s.rowInputs) t = rowsOf(t, rows, b, n);
  return s;
}

}  // namespace

bool Comparer::compareOutput(size_t i, const at::Tensor& in, const RowOpArgs& args, const at::Tensor& out,
                             const std::vector<at::Tensor>& refs, double& err, double& boundMax,
                             std::string& why) const {
  const RowOpOutput& output = spec.outputs[i];
  const std::string name = spec.outputs.size() > 1 ? output.name + ": " : "";
  const int64_t r = in.size(0), n = in.size(1);
  const at::Tensor ref = refs[i].reshape(out.sizes());
  if (output.exactBits) {  // Note [Bit-exact outputs]: the element's bits as integers, no bound
    pause();
    err = 0;
    boundMax = 0;
    const at::ScalarType bits = out.element_size() == 4 ? at::kInt : at::kShort;
    HOTKERNEL_CHECK(out.element_size() == ref.element_size() && (out.element_size() == 4 || out.element_size() == 2),
                    name, "a bit-exact output needs 2- or 4-byte elements like its reference's");
    at::Tensor outBits = out.contiguous().view(bits).to(at::kLong), refBits = ref.contiguous().view(bits).to(at::kLong);
    if (out.scalar_type() == at::kBFloat16 && ref.scalar_type() == at::kBFloat16) {
      const at::Tensor bothNan = out.isnan() & ref.isnan();  // any payload (Note [Bit-exact outputs])
      outBits.masked_fill_(bothNan.reshape(outBits.sizes()), 0);
      refBits.masked_fill_(bothNan.reshape(refBits.sizes()), 0);
    }
    const std::string mismatch = exactOutputMismatch(outBits, refBits);
    if (!mismatch.empty()) {
      std::ostringstream os;
      os << name << "bits: " << mismatch << " at [" << r << ", " << n << "]";
      why = os.str();
      return false;
    }
    return true;
  }
  if (isExactInt64(output)) {  // [rows] int64 (argmax's indices): one comparison, no bound
    pause();
    err = 0;
    boundMax = 0;
    if (const std::string mismatch = exactOutputMismatch(out, ref); !mismatch.empty()) {
      std::ostringstream os;
      os << name << mismatch << " at [" << r << ", " << n << "]";
      why = os.str();
      return false;
    }
    return true;
  }
  auto boundOf = [&](const at::Tensor& inRows, const RowOpArgs& argsRows, const std::vector<at::Tensor>& refsRows) {
    return output.boundWithArgs ? output.boundWithArgs(inRows, argsRows, refsRows, dtype)
                                : output.bound(inRows, refsRows, dtype);
  };
  // [rows, cols] outputs in row slices; a per-row output too when its bound
  // is row-local (the bound, not the comparison, is what costs: layer_norm's
  // rstd takes a float64 variance of the whole input); scalar outputs whole.
  const bool sliced = (out.dim() == 2 && out.size(0) == r) ||
                      (output.rowLocalBound && out.dim() == 1 && out.size(0) == r);
  at::Tensor wholeBound;
  if (!sliced || !output.rowLocalBound) {
    pause();
    wholeBound = boundOf(in, args, refs);
  }
  const std::vector<RowSlice> slices =
      sliced ? rowSlices(r, n, kCompareTrafficPerElement) : std::vector<RowSlice>{RowSlice{0, r}};
  err = 0;
  boundMax = 0;
  bool finite = true;
  std::optional<double> failedTolerance;  // a scalar bound some slice exceeded
  OutsideBound outside;
  for (const RowSlice& s : slices) {
    pause();
    const at::Tensor o = sliced ? out.narrow(0, s.begin, s.rows) : out;
    const at::Tensor rf = sliced ? ref.narrow(0, s.begin, s.rows) : ref;
    const double e = maxAbsError(o, rf);
    if (!std::isfinite(e)) {
      finite = false;
      break;
    }
    err = std::max(err, e);
    at::Tensor bound;
    if (wholeBound.defined()) {
      bound = sliced ? boundRowsOf(wholeBound, r, s.begin, s.rows) : wholeBound;
    } else {
      std::vector<at::Tensor> refRows;
      for (const at::Tensor& t : refs) refRows.push_back(rowsOf(t, r, s.begin, s.rows));
      bound = boundOf(in.narrow(0, s.begin, s.rows), argsRowsOf(args, r, s.begin, s.rows), refRows);
    }
    // The largest finite bound: rows the reference makes NaN or infinite
    // (the -inf / NaN stress set) have no finite bound.
    if (i == 0 && spec.references64) {
      boundMax = std::max(boundMax, bound.to(at::kDouble).nan_to_num(0.0, 0.0, 0.0).max().item<double>());
    }
    if (bound.numel() == 1) {
      // Note [A NaN scalar bound]
      // A one-element bound (a scalar, or a per-row bound of one row) is NaN
      // when the reference is not finite (a sum over an inf: inf - inf in the
      // bound's arithmetic). Such a reference must be met exactly, which
      // maxAbsError has already checked (e is 0 here), so it counts as 0, as
      // the elementwise path does by skipping non-finite positions. Without
      // this, every correct sum / mean candidate fails at [1, cols] on a row
      // holding an -inf.
      double tol = bound.item<double>();
      if (std::isnan(tol)) tol = 0.0;
      if (!(e <= tol) && !failedTolerance) failedTolerance = tol;
    } else {
      outside.merge(outsideBound(o, rf, bound, sliced ? s.begin * (out.dim() == 2 ? out.size(1) : 1) : 0));
    }
  }
  if (!finite) {
    std::ostringstream os;
    os << name << "NaN or infinity where the reference has none (or the reverse) at [" << r << ", " << n << "]";
    why = os.str();
    return false;
  }
  if (failedTolerance) {
    std::ostringstream os;
    os << name << "max abs error " << err << " > tolerance " << *failedTolerance << " at [" << r << ", " << n
       << "]";
    why = os.str();
    return false;
  }
  if (outside.bad > 0) {
    std::ostringstream os;
    os << name << "max abs error " << err << ": " << outside.describe() << " at [" << r << ", " << n << "]";
    why = os.str();
    return false;
  }
  return true;
}

bool Comparer::compareAll(const at::Tensor& in, const RowOpArgs& args, const std::vector<at::Tensor>& outs,
                          std::string& why, double& maxAbsError0) const {
  pause();
  std::vector<at::Tensor> refs = spec.references(in, args);
  HOTKERNEL_CHECK(refs.size() == outs.size(), "the reference of ", spec.op, " gave ", refs.size(),
                  " outputs, the spec names ", outs.size());
  double bound0Max = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    double err = 0, boundMax = 0;
    if (!compareOutput(i, in, args, outs[i], refs, err, boundMax, why)) return false;
    if (i == 0) {
      maxAbsError0 = std::max(maxAbsError0, err);
      bound0Max = boundMax;
    }
  }
  if (spec.references64 && !isExactInt64(spec.outputs[0])) {
    // Against float64 (on up to 256 rows: "where cheap"), the candidate's
    // output 0 may not be worse than ATen's by more than its bound (the
    // largest finite one, so that rows the reference makes NaN or infinite
    // do not turn the tolerance into NaN, which would fail every candidate).
    pause();
    const int64_t n = std::min<int64_t>(in.size(0), 256);
    const at::Tensor in64 = in.narrow(0, 0, n).to(at::kDouble);
    at::Tensor ref64 = spec.references64(in64, argsRowsOf(args, in.size(0), 0, n));
    at::Tensor ref0 = refs[0].reshape(outs[0].sizes()).narrow(0, 0, n);
    const at::Tensor out0 = outs[0].narrow(0, 0, n);
    const double mine = maxAbsError(out0, ref64), aten = maxAbsError(ref0, ref64);
    const double tol = bound0Max;
    if (std::isfinite(aten) && !(mine <= aten + tol)) {
      std::ostringstream os;
      os << "float64 error " << mine << " exceeds ATen's " << aten << " + tolerance " << tol;
      why = os.str();
      return false;
    }
    // Note [Family invariants]
    if (spec.invariant) {
      const std::string broken = spec.invariant(in64, out0.to(at::kDouble), ref64, dtype);
      if (!broken.empty()) {
        std::ostringstream os;
        os << "invariant: " << broken << " at [" << in.size(0) << ", " << in.size(1) << "]";
        why = os.str();
        return false;
      }
    }
  }
  return true;
}

}  // namespace harness

std::string checkOutputs(const RowOpSpec& opSpec, DType dtype, const at::Tensor& in, const RowOpArgs& args,
                         const std::vector<at::Tensor>& outs, const std::function<bool()>& yieldPoint) {
  const RowOpSpec spec = generalForm(opSpec);
  HOTKERNEL_CHECK(outs.size() == spec.outputs.size(), "checkOutputs: ", outs.size(), " outputs, the spec of ",
                  spec.op, " names ", spec.outputs.size());
  const int device = in.device().index();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  const at::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  auto pause = [&] {
    if (!yieldPoint) return;
    stream.synchronize();
    if (!yieldPoint()) throw harness::Interrupted{};
  };
  const harness::Comparer comparer{spec, dtype, pause};
  std::string why;
  double maxError = 0;
  try {
    std::vector<at::Tensor> shaped;
    for (size_t i = 0; i < outs.size(); ++i) {
      shaped.push_back(outs[i].reshape(outputView(outs[i].reshape({-1}), spec.outputs[i], in.size(0), in.size(1)).sizes()));
    }
    if (!comparer.compareAll(in, args, shaped, why, maxError)) return why;
  } catch (const harness::Interrupted&) {
    return "interrupted";
  }
  return {};
}

}  // namespace hotkernel
