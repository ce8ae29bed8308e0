#include "hotkernel/optimizer/MmPadTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/addmm_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/ListedTuning.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"
#include "hotkernel/runtime/PaddedGemm.h"

// Note [Padded GEMM checks]
// The plan's arithmetic is cuBLAS's, on the same inputs but another output
// width, so another kernel: each element is a float32-accumulated dot product
// of K terms in another order, rounded once to the 16-bit dtype. Summing in
// another order moves a float32 sum by up to about K * 2^-24 times the sum of
// the terms' magnitudes, which near a cancellation (an output near 0) is many
// units of the output's own spacing. So the check holds each element to
// eager's own distance from a float64 GEMM, plus two units of the dtype's
// relative spacing (2^-10 float16, 2^-7 bfloat16) of the float64 value, plus
// 2 * K * 2^-24 * (|self| |weight|^T) at that element (the float32 summation
// bound, twice for the two orders), plus the dtype's smallest subnormal. A
// wrong element (another row or column, a value never written) is off by
// about the output's own magnitude, far outside.
// What the copies could get wrong is checked apart from the values: buffers
// filled with NaN before the plan writes them (an element left unwritten
// stays NaN where the reference is finite), eager's sizes and strides, the
// same bits from a second run (a race in the copy would show), and NaN and
// infinities where eager has them with a NaN in self and an infinity in the
// weight (the zero rows of the padded weight must not leak into the first N
// columns). The float64 GEMM runs by row blocks of at most kCheckBlockBytes.

namespace hotkernel {
namespace {

using kernels::MmPadFamily;
using kernels::MmPadParams;
using kernels::MmPadVariant;

constexpr int64_t kCheckBlockBytes = int64_t{256} << 20;
constexpr const char* kInterrupted = "tuning interrupted";

struct MmInput {
  at::Tensor self;    // [m, k]
  at::Tensor weight;  // [n, k]; the op's mat2 is weight.t()
  at::Tensor bias;    // [n] for addmm, else undefined
};

MmInput drawInput(const MmPadVariant& v, int device, at::Generator& gen) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  const at::ScalarType dt = scalarTypeOf(v.dtype);
  MmInput in;
  in.self = at::randn({v.m, v.k}, gen, opts).to(dt);
  in.weight = at::randn({v.n, v.k}, gen, opts).mul_(1.0 / std::sqrt(static_cast<double>(v.k))).to(dt);
  if (v.bias) in.bias = at::randn({v.n}, gen, opts).to(dt);
  return in;
}

// ATen's op below the dispatcher: mm, or addmm with beta = alpha = 1 when a bias is given.
at::Tensor atenMm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  return bias.defined() ? at::cuda::addmm(bias, a, b) : at::cuda::mm(a, b);
}
at::Tensor eagerOf(const MmInput& in) { return atenMm(in.self, in.weight.t(), in.bias); }

at::Tensor runPlan(const Plan& plan, const MmInput& in, const MmPadVariant& v, at::Tensor w8 = {},
                   at::Tensor out = {}) {
  return runPaddedMm(*plan.launcher, in.self, in.weight.t(), in.bias, v.paddedN(), &atenMm,
                     at::cuda::getCurrentCUDAStream().stream(), std::move(w8), std::move(out));
}

double relativeSpacing(kernels::DType dtype) { return dtype == kernels::DType::BFloat16 ? 0x1p-7 : 0x1p-10; }
double smallestSubnormal(kernels::DType dtype) { return dtype == kernels::DType::BFloat16 ? 0x1p-133 : 0x1p-24; }

}  // namespace

std::string mmValuesWithinBound(const at::Tensor& self, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& got, const at::Tensor& eager, kernels::DType dtype,
                                const std::function<bool()>& yieldPoint) {
  const MmPadVariant v{dtype, self.size(0), weight.size(0), self.size(1), bias.defined()};
  const at::Tensor b64 = v.bias ? bias.to(at::kDouble) : at::Tensor();
  const int64_t blockRows = std::max<int64_t>(1, kCheckBlockBytes / (8 * v.n));
  const at::Tensor w64 = weight.to(at::kDouble);
  const at::Tensor w64Abs = w64.abs();
  const double summation = 2.0 * static_cast<double>(v.k) * 0x1p-24;
  for (int64_t r0 = 0; r0 < v.m; r0 += blockRows) {
    if (yieldPoint && !yieldPoint()) return "interrupted";
    const int64_t rows = std::min(blockRows, v.m - r0);
    const at::Tensor a64 = self.narrow(0, r0, rows).to(at::kDouble);
    at::Tensor ref = at::mm(a64, w64.t());
    at::Tensor magnitude = at::mm(a64.abs(), w64Abs.t());
    if (v.bias) {
      ref.add_(b64);
      magnitude.add_(b64.abs());
    }
    const at::Tensor g = got.narrow(0, r0, rows).to(at::kDouble);
    const at::Tensor e = eager.narrow(0, r0, rows).to(at::kDouble);
    const at::Tensor bound = (e - ref)
                                 .abs_()
                                 .add_(ref.abs().mul_(2 * relativeSpacing(v.dtype)))
                                 .add_(magnitude.mul_(summation))
                                 .add_(smallestSubnormal(v.dtype));
    const at::Tensor bad = (g - ref).abs_().gt(bound).logical_or_(g.isnan());
    const int64_t count = bad.sum().item<int64_t>();
    if (count > 0) {
      const int64_t flat = bad.flatten().nonzero().index({0}).item<int64_t>();
      const int64_t r = flat / v.n, c = flat % v.n;
      std::ostringstream why;
      why.precision(9);
      why << count << " element(s) outside the bound; first at [" << r0 + r << ", " << c << "]: got "
          << g.index({r, c}).item<double>() << ", eager " << e.index({r, c}).item<double>() << ", float64 "
          << ref.index({r, c}).item<double>() << ", bound " << bound.index({r, c}).item<double>();
      return why.str();
    }
  }
  return "";
}

namespace {

std::string checkWith(const Plan& plan, const MmPadVariant& v, int device, const std::function<bool()>& yieldPoint,
                      at::Generator& gen) {
  if (yieldPoint && !yieldPoint()) return "interrupted";
  MmInput in = drawInput(v, device, gen);
  const at::Tensor eager = eagerOf(in);
  at::Tensor w8 = at::full({v.paddedN(), v.k}, NAN, in.self.options());
  at::Tensor out = at::full({v.m, v.n}, NAN, in.self.options());
  const at::Tensor got = runPlan(plan, in, v, w8, out);
  if (!got.defined()) return "the plan did not run";
  if (got.sizes() != eager.sizes() || got.strides() != eager.strides() || got.dtype() != eager.dtype()) {
    return "its result is not shaped like eager's";
  }
  std::string why = mmValuesWithinBound(in.self, in.weight, in.bias, got, eager, v.dtype, yieldPoint);
  if (!why.empty()) return why == "interrupted" ? why : "values: " + why;
  if (yieldPoint && !yieldPoint()) return "interrupted";
  const at::Tensor again = runPlan(plan, in, v);
  if (!again.defined() || !at::equal(again.view(at::kShort), got.view(at::kShort))) {
    return "a second run gave other bits";
  }
  // Special values: a NaN in self's row 0, an infinity in the weight's last row.
  in.self.index_put_({0, 0}, NAN);
  in.weight.index_put_({v.n - 1, v.k - 1}, INFINITY);
  const at::Tensor eagerSpecial = eagerOf(in);
  const at::Tensor gotSpecial = runPlan(plan, in, v);
  if (!gotSpecial.defined()) return "the plan did not run on special values";
  if (!at::equal(gotSpecial.isnan(), eagerSpecial.isnan()) ||
      !at::equal(gotSpecial.isposinf(), eagerSpecial.isposinf()) ||
      !at::equal(gotSpecial.isneginf(), eagerSpecial.isneginf())) {
    return "special values: NaN or infinities where eager has none, or the other way round";
  }
  return "";
}

int64_t bytesNeeded(const MmPadVariant& v, int device) {
  const int64_t e = 2;
  const int64_t l2 = at::cuda::getDeviceProperties(device)->l2CacheSize;
  // self and weight twice (two draws), the padded weight, the wide result, eager's, the plan's and the check's
  // results, the float64 blocks (reference, |self| |weight|^T, got, eager, bound), the flush buffer.
  return e * (2 * (v.m * v.k + v.n * v.k) + v.paddedN() * v.k + v.m * v.paddedN() + 4 * v.m * v.n) +
         6 * kCheckBlockBytes + 2 * l2;
}

Plan planOf(const MmPadVariant& v, const MmPadParams& p, const std::string& cubin, int device) {
  return kernels::mmPadDescriptorOf(v).makePlan(kernels::mmPadKeyOf(v, device), p.toJson(), cubin, device);
}

}  // namespace

AtenReference mmPadAtenReference(const MmPadVariant& v) {
  AtenReference r;
  r.timedArgs = [](const at::Tensor&, at::Generator&) { return RowOpArgs{}; };
  r.input = [v](int device, at::Generator& gen) {
    MmInput in = drawInput(v, device, gen);
    TimedInput t;
    t.in = in.self;
    t.args.columns = {in.weight, in.bias};
    return t;
  };
  r.call = [](const TimedInput& t) { atenMm(t.in, t.args.columns.at(0).t(), t.args.columns.at(1)); };
  return r;
}

std::string checkMmPadPlan(const Plan& plan, const MmPadVariant& v, int device,
                           const std::function<bool()>& yieldPoint) {
  at::Generator gen = timingGenerator(device);
  return checkWith(plan, v, device, yieldPoint, gen);
}

TuneOutcome tuneMmPad(const MmPadVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(MmPadFamily::guardVariant(v), kernels::mmPadDescriptorOf(v).name, " cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);  // Note [A tuner's scope]
  const int64_t need = bytesNeeded(v, device);
  HOTKERNEL_CHECK(options.memoryCapBytes <= 0 || need <= options.memoryCapBytes, "tuning ",
                  kernels::mmPadDescriptorOf(v).name, " ", kernels::variantString(kernels::mmPadKeyOf(v, device)),
                  " needs ~", need >> 20,
                  " MiB of GPU memory, over the optimizer's cap of ", options.memoryCapBytes >> 20, " MiB");
  const std::string arch = queryDevice(device).nvrtcArch();
  const std::vector<MmPadParams> points = MmPadFamily::parameterSpace(v);

  TuneOutcome outcome;
  outcome.family = kernels::mmPadDescriptorOf(v).name;
  outcome.metrics.arch = arch;
  at::Generator gen = timingGenerator(device);
  HOTKERNEL_CHECK(!options.yieldPoint || options.yieldPoint(), kInterrupted);
  const MmInput timed = drawInput(v, device, gen);
  std::vector<std::string> cubins(points.size());
  std::vector<Plan> plans(points.size());
  std::vector<ListedCandidate> candidates;
  for (size_t i = 0; i < points.size(); ++i) {
    ListedCandidate c;
    c.params = points[i].toJson();
    c.prepare = [&, i](CandidateRecord& rec) {
      const NvrtcOutput compiled =
          compileToCubin(MmPadFamily::source(), "pad_rows.cu", arch, MmPadFamily::compileOptions(points[i]));
      rec.compileSeconds = compiled.compileSeconds;
      cubins[i] = compiled.cubin;
      plans[i] = planOf(v, points[i], cubins[i], device);
      return std::string();
    };
    c.check = [&, i] { return checkWith(plans[i], v, device, options.yieldPoint, gen); };
    c.run = [&, i] { return runPlan(plans[i], timed, v); };
    candidates.push_back(std::move(c));
  }
  const std::optional<size_t> best = tuneListed(candidates, [&] { eagerOf(timed); }, device, options, outcome.metrics);
  if (best) {
    outcome.accepted = true;
    outcome.paramsJson = points[*best].toJson();
    outcome.kernelName = MmPadFamily::kKernelName;
    outcome.cubin = cubins[*best];
  }
  return outcome;
}

std::string checkCachedMmPad(const VariantKey& key, const std::string& paramsJson, const std::string& cubin,
                             const TunerOptions& options) {
  const MmPadVariant v = kernels::mmPadVariantOf(key);
  MmPadParams p;
  try {
    p = MmPadParams::fromJson(nlohmann::json::parse(paramsJson));
  } catch (const std::exception& e) {
    return std::string("unreadable parameters: ") + e.what();
  }
  const std::vector<MmPadParams> all = MmPadFamily::allParameterPoints();
  if (std::find(all.begin(), all.end(), p) == all.end()) {
    return "its parameters " + paramsJson + " are not a point of " + kernels::mmPadDescriptorOf(v).name + "'s space";
  }
  TunerScope scope(key.device);  // Note [A tuner's scope]
  const int64_t need = bytesNeeded(v, key.device);
  if (options.memoryCapBytes > 0 && need > options.memoryCapBytes) {
    return "its check needs ~" + std::to_string(need >> 20) + " MiB, over the optimizer's cap";
  }
  const std::string why = checkMmPadPlan(planOf(v, p, cubin, key.device), v, key.device, options.yieldPoint);
  HOTKERNEL_CHECK(why != "interrupted", kInterrupted);
  return why.empty() ? "" : "checks: " + why;
}

}  // namespace hotkernel
