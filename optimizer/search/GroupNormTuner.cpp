#include "hotkernel/optimizer/GroupNormTuner.h"

#include <ATen/ATen.h>
#include <ATen/ops/native_group_norm_cuda_dispatch.h>

#include "FamilyCandidate.h"
#include "NormTuning.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::GroupNormFamily;
using kernels::NormParams;
using kernels::NormTolerance;
using namespace norm_tuning;

// The family's dtype of a harness input (float32, float16 or bfloat16).
DType dtypeOfInput(const at::Tensor& in) {
  if (in.scalar_type() == at::kHalf) return DType::Float16;
  if (in.scalar_type() == at::kBFloat16) return DType::BFloat16;
  return DType::Float32;
}

// ATen's native_group_norm of the [rows, cols] view: rows that are not a
// multiple of the groups (the harness's neighbour shapes, the kernel's row r
// being group r % G) are padded with zero rows and the padding dropped from
// the results.
std::vector<at::Tensor> groupNormRows(const at::Tensor& in, const at::Tensor& w, const at::Tensor& b, int64_t groups,
                                      int64_t hw, double eps) {
  const int64_t rows = in.size(0), cols = in.size(1);
  const int64_t n = (rows + groups - 1) / groups;
  at::Tensor x = in;
  if (n * groups != rows) x = at::cat({in, at::zeros({n * groups - rows, cols}, in.options())});
  const int64_t channels = groups * (cols / hw);
  auto [out, mean, rstd] = at::cuda::native_group_norm(x.view({n, channels, hw}), optionalOf(w), optionalOf(b), n,
                                                       channels, hw, groups, eps);
  return {out.view({n * groups, cols}).narrow(0, 0, rows), mean.view({n * groups}).narrow(0, 0, rows),
          rstd.view({n * groups}).narrow(0, 0, rows)};
}

}  // namespace

// Note [Group norm harness bounds]
// As Note [Norm harness bounds] for layer_norm, with the family's statRel
// (one unit in the dtype's last place more: Note [Group norm tolerance]). The
// output is computed from the rounded statistics on both sides, so a
// statistic one unit apart moves it: rstd by statRel of |out - bias| <=
// |out| + 0.5, the mean by statRel * (|mean| + 1 / rstd) * rstd * |w| with
// |w| <= 1 (Note [Norm harness arguments]'s draws); out's bound adds both.
RowOpSpec groupNormSpec(int64_t groups, int64_t hw, bool hasWeight, bool hasBias) {
  HOTKERNEL_CHECK(groups >= 1 && hw >= 2, "group_norm needs groups >= 1 and HxW >= 2, got ", groups, " and ", hw);
  RowOpSpec spec;
  spec.op = "aten::native_group_norm";
  spec.infinitiesDefined = false;
  spec.outputs = {
      RowOpOutput{"out", false,
                  [](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
                    const NormTolerance t = GroupNormFamily::tolerance(d, in.size(1));
                    const at::Tensor rstd = refs[2].to(at::kFloat);
                    const at::Tensor carried = (refs[1].to(at::kFloat).abs() * rstd)
                                                   .add_(1.5)
                                                   .nan_to_num_(0.0, 0.0, 0.0)
                                                   .mul_(t.statRel)
                                                   .unsqueeze(1);
                    const at::Tensor ref = refs[0].to(at::kFloat).abs();
                    return ref.mul(t.outRel + t.statRel).add_(t.outAbs).add_(carried);
                  }},
      normMeanOutput(&GroupNormFamily::tolerance),
      normRstdOutput(&GroupNormFamily::tolerance),
  };
  for (RowOpOutput& o : spec.outputs) o.rowLocalBound = true;
  // mean and rstd are the input's dtype (Note [What ATen's native_group_norm returns]).
  spec.outputs[1].perRowInInputDtype = true;
  spec.outputs[2].perRowInInputDtype = true;
  spec.makeArgs = [groups, hw, hasWeight, hasBias](int64_t, int64_t cols, DType d, at::Generator& gen) {
    const int64_t channels = groups * (cols / hw);
    RowOpArgs a;
    a.columns = {hasWeight ? drawColumn(channels, d, 1.0, gen) : at::Tensor(),
                 hasBias ? drawColumn(channels, d, 0.5, gen) : at::Tensor()};
    a.scalars = {drawEps(gen, /*allowNone=*/false)};
    return a;
  };
  spec.references = [groups, hw](const at::Tensor& in, const RowOpArgs& a) {
    return groupNormRows(in, a.columns[0], a.columns[1], groups, hw, *a.scalars[0]);
  };
  spec.references64 = [groups, hw](const at::Tensor& in64, const RowOpArgs& a) {
    const at::Tensor w = a.columns[0].defined() ? a.columns[0].to(at::kDouble) : at::Tensor();
    const at::Tensor b = a.columns[1].defined() ? a.columns[1].to(at::kDouble) : at::Tensor();
    return groupNormRows(in64, w, b, groups, hw, *a.scalars[0])[0];
  };
  spec.kernelArgs = [](const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& outs) {
    return layerNormKernelArgs(in, a, outs, GroupNormFamily::kernelEps(dtypeOfInput(in), *a.scalars[0]));
  };
  spec.workspaceFloats = [](int64_t rows, int64_t) { return GroupNormFamily::maxWorkspaceFloats(rows); };
  spec.workspaceZeroTail = 1;
  return spec;
}

HarnessCandidate groupNormCandidate(const kernels::GroupNormVariant& v, const NormParams& p, const std::string& cubin,
                                    bool colsSpecialized) {
  HarnessCandidate c = detail::familyCandidate<GroupNormFamily>(v, p, cubin, GroupNormFamily::kName);
  finishNormCandidate(c, v.rows, v.cols, p, colsSpecialized);
  return c;
}

FamilyTuneSpec groupNormTuneSpec(const kernels::GroupNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(GroupNormFamily::guardVariant(v), "group_norm family cannot serve this variant");
  FamilyTuneSpec spec = normTuneSpecOf<GroupNormFamily>(v, device, "layer_norm.cu");
  spec.compileOptions = [v](const FamilyPoint& p) { return GroupNormFamily::compileOptions(v, toParams(p)); };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    return groupNormCandidate(v, toParams(p), cubin, /*colsSpecialized=*/true);  // compileOptions above
  };
  spec.harnessSpec = groupNormSpec(v.groups, v.hw, v.hasWeight, v.hasBias);
  // The tuned rows may be any count (row r is group r % G).
  finishNormTuneSpec(
      spec, kernels::groupNormDescriptor(),
      [v, device](int64_t rows) {
        kernels::GroupNormVariant tuned = v;
        tuned.rows = rows;
        return kernels::groupNormKeyOf(tuned, device);
      },
      device, options);
  return spec;
}

TuneOutcome tuneGroupNorm(const kernels::GroupNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(GroupNormFamily::guardVariant(v), "group_norm family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);
  return runNormSearch(groupNormTuneSpec(v, device, options), device, options);
}

}  // namespace hotkernel
