#include "hotkernel/optimizer/SdpaTuner.h"

#include <ATen/ATen.h>
#include <ATen/ops/scaled_dot_product_attention_compositeimplicitautograd_dispatch.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/ListedTuning.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/AttentionBackendCall.h"
#include "hotkernel/runtime/AttentionDefaults.h"
#include "hotkernel/runtime/Check.h"

// Note [Attention checks]
// A backend is ATen's own code, so what the checks guard against is a backend
// that does not compute this call's attention: one that reads a layout, a
// causal mask or grouped heads otherwise than the op means (the causal mask
// is top-left: query i sees keys j <= i), or leaves elements unwritten. Each
// element of its output is held to eager's own distance from a float64
// attention (the op as PyTorch runs it: its own choice), plus four units of
// the dtype's relative spacing (2^-10 float16 and float32, since a float32
// backend may use TF32; 2^-7 bfloat16) times max |value| (an output is a
// convex combination of value rows, each rounded at most that much), plus the
// smallest normal number. A wrong mask, layout or head is off by about the
// values' own size. The checks, as the harness's stages apply to a choice of
// ATen's: smoke (it runs and has eager's sizes, finite where the reference
// is), three random draws, stability (queries scaled by 8: peaked softmax
// rows; zero queries: uniform rows), and determinism (the same bits twice).
// The float64 attention runs by blocks of at most kReferenceBlockBytes of
// scores.

namespace hotkernel {
namespace {

using kernels::SdpaFamily;
using kernels::SdpaParams;
using kernels::SdpaVariant;

constexpr int64_t kReferenceBlockBytes = int64_t{256} << 20;
constexpr const char* kInterrupted = "tuning interrupted";

double relativeSpacing(kernels::DType d) { return d == kernels::DType::BFloat16 ? 0x1p-7 : 0x1p-10; }

// A [b, h, n, d] tensor in layout class `layout` (Note [Attention layouts]).
at::Tensor drawInLayout(int32_t layout, int64_t b, int64_t h, int64_t n, int64_t d, const at::TensorOptions& opts,
                        at::Generator& gen) {
  switch (layout) {
    case 0:
      return at::randn({b, h, n, d}, gen, opts);
    case 1:
      return at::randn({b, n, h, d}, gen, opts).transpose(1, 2);
    default:
      return at::randn({b, n, 3, h, d}, gen, opts).select(2, 1).transpose(1, 2);
  }
}

at::Tensor eagerOf(const SdpaVariant& v, const SdpaInput& in) {
  // Note [PyTorch's settled priority order]: this may be the process's first selection (a tuner before any call).
  AttentionDefaults::process().settleOn(in.query, in.key, in.value, std::nullopt, 0.0, v.causal, std::nullopt, v.gqa());
  return at::compositeimplicitautograd::scaled_dot_product_attention(in.query, in.key, in.value, std::nullopt, 0.0,
                                                                     v.causal, std::nullopt, v.gqa());
}

at::Tensor backendOf(AttentionBackend backend, const SdpaVariant& v, const SdpaInput& in) {
  return runAttentionBackend(backend, in.query, in.key, in.value, v.causal, std::nullopt, v.gqa());
}

int64_t bytesNeeded(const SdpaVariant& v, int device) {
  const int64_t e = static_cast<int64_t>(kernels::elementSize(v.dtype));
  const int64_t dim = std::max(v.headDim, v.valueDim);
  const int64_t q = v.batch * v.heads * v.queries * dim, kv = v.batch * v.kvHeads * v.keys * dim;
  const int64_t l2 = device >= 0 ? at::cuda::getDeviceProperties(device)->l2CacheSize : 0;
  // Two draws of q, k, v (layout 2: three times the elements), outputs (eager's, the backend's, twice), their
  // float64 copies and the reference (q-sized, 4 of them), the reference's blocks (scores, probabilities),
  // the flush buffer.
  return 2 * 3 * e * (q + 2 * kv) + 4 * e * q + 4 * 8 * q + 8 * (q + kv) + 3 * kReferenceBlockBytes + 2 * l2;
}

std::optional<SdpaParams> paramsOf(const std::string& paramsJson, std::string* why) {
  try {
    return SdpaParams::fromJson(nlohmann::json::parse(paramsJson));
  } catch (const std::exception& e) {
    *why = std::string("unreadable choice: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace

SdpaInput drawSdpaInput(const SdpaVariant& v, int device, at::Generator& gen) {
  const auto opts = at::TensorOptions()
                        .dtype(scalarTypeOf(v.dtype))
                        .device(device >= 0 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device))
                                            : at::Device(at::kCPU));
  SdpaInput in;
  in.query = drawInLayout(v.layouts[0], v.batch, v.heads, v.queries, v.headDim, opts, gen);
  in.key = drawInLayout(v.layouts[1], v.batch, v.kvHeads, v.keys, v.headDim, opts, gen);
  in.value = drawInLayout(v.layouts[2], v.batch, v.kvHeads, v.keys, v.valueDim, opts, gen);
  return in;
}

at::Tensor sdpaReference(const SdpaVariant& v, const SdpaInput& in, const std::function<bool()>& yieldPoint) {
  const int64_t group = v.heads / v.kvHeads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(v.headDim));
  at::Tensor out = at::empty({v.batch, v.heads, v.queries, v.valueDim}, in.query.options().dtype(at::kDouble));
  // Rows of queries per block: the scores of one block are rows x keys doubles.
  const int64_t rowsPerBlock = std::max<int64_t>(1, kReferenceBlockBytes / (8 * v.keys));
  for (int64_t b = 0; b < v.batch; ++b) {
    for (int64_t h = 0; h < v.heads; ++h) {
      const at::Tensor k = in.key.select(0, b).select(0, h / group).to(at::kDouble);    // [S, E]
      const at::Tensor val = in.value.select(0, b).select(0, h / group).to(at::kDouble);  // [S, Ev]
      for (int64_t r0 = 0; r0 < v.queries; r0 += rowsPerBlock) {
        if (yieldPoint && !yieldPoint()) return at::Tensor();
        const int64_t rows = std::min(rowsPerBlock, v.queries - r0);
        const at::Tensor q = in.query.select(0, b).select(0, h).narrow(0, r0, rows).to(at::kDouble);  // [rows, E]
        at::Tensor scores = at::mm(q, k.t()).mul_(scale);
        if (v.causal) {
          // Top-left: query r0 + i sees keys j <= r0 + i.
          const at::Tensor i = at::arange(r0, r0 + rows, scores.options().dtype(at::kLong)).unsqueeze(1);
          const at::Tensor j = at::arange(v.keys, scores.options().dtype(at::kLong)).unsqueeze(0);
          scores.masked_fill_(j.gt(i), -std::numeric_limits<double>::infinity());
        }
        out.select(0, b).select(0, h).narrow(0, r0, rows).copy_(at::mm(at::softmax(scores, -1), val));
      }
    }
  }
  return out;
}

std::string sdpaValuesWithinBound(const SdpaVariant& v, const SdpaInput& in, const at::Tensor& got,
                              const at::Tensor& eager, const std::function<bool()>& yieldPoint) {
  if (got.sizes() != eager.sizes()) return "its result is not sized like eager's";
  const at::Tensor ref = sdpaReference(v, in, yieldPoint);
  if (!ref.defined()) return "interrupted";
  const double maxValue = in.value.abs().max().item<double>();
  const at::Tensor g = got.to(at::kDouble);
  const at::Tensor bound = (eager.to(at::kDouble) - ref)
                               .abs_()
                               .add_(4.0 * relativeSpacing(v.dtype) * maxValue +
                                     std::numeric_limits<float>::min());
  const at::Tensor bad = (g - ref).abs_().gt(bound).logical_or_(g.isnan().logical_and_(ref.isnan().logical_not()));
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return "";
  const at::Tensor first = bad.flatten().nonzero().index({0});
  const int64_t i = first.item<int64_t>();
  std::ostringstream why;
  why.precision(9);
  why << count << " element(s) outside the bound; first at flat index " << i << ": got "
      << g.flatten().index({i}).item<double>() << ", float64 " << ref.flatten().index({i}).item<double>()
      << ", bound " << bound.flatten().index({i}).item<double>();
  return why.str();
}

std::string checkSdpaBackend(AttentionBackend backend, const SdpaVariant& v, int device,
                             const std::function<bool()>& yieldPoint) {
  if (!SdpaFamily::guardVariant(v)) return "the family does not serve the variant";
  if (!attentionBackendRunsOn(backend, device >= 0)) return "the backend does not run on this device";
  at::Generator gen = device >= 0 ? timingGenerator(device) : at::detail::getDefaultCPUGenerator().clone();
  try {
    for (int draw = 0; draw < 3; ++draw) {
      if (yieldPoint && !yieldPoint()) return "interrupted";
      const SdpaInput in = drawSdpaInput(v, device, gen);
      const at::Tensor eager = eagerOf(v, in);
      const at::Tensor got = backendOf(backend, v, in);
      if (draw == 0) {
        // Smoke: eager's sizes and dtype, then the same bits twice (determinism).
        if (got.sizes() != eager.sizes() || got.scalar_type() != eager.scalar_type()) {
          return "smoke: its result is not shaped like eager's";
        }
        const at::Tensor again = backendOf(backend, v, in);
        if (!at::equal(again.contiguous().view(at::kByte), got.contiguous().view(at::kByte))) {
          return "determinism: a second run gave other bits";
        }
      }
      const std::string why = sdpaValuesWithinBound(v, in, got, eager, yieldPoint);
      if (!why.empty()) return why == "interrupted" ? why : "draw " + std::to_string(draw) + ": " + why;
    }
    // Stability: peaked rows (queries x 8) and uniform rows (zero queries).
    for (const double factor : {8.0, 0.0}) {
      if (yieldPoint && !yieldPoint()) return "interrupted";
      SdpaInput in = drawSdpaInput(v, device, gen);
      in.query.mul_(factor);  // in place: the query keeps its layout
      const std::string why = sdpaValuesWithinBound(v, in, backendOf(backend, v, in), eagerOf(v, in), yieldPoint);
      if (!why.empty()) {
        return why == "interrupted" ? why : "stability (queries x " + std::to_string(factor) + "): " + why;
      }
    }
  } catch (const std::exception& e) {
    return std::string("the backend refused the call: ") + std::string(e.what()).substr(0, 300);
  }
  return "";
}

AtenReference sdpaAtenReference(const SdpaVariant& v) {
  AtenReference r;
  r.timedArgs = [](const at::Tensor&, at::Generator&) { return RowOpArgs{}; };
  r.input = [v](int device, at::Generator& gen) {
    SdpaInput in = drawSdpaInput(v, device, gen);
    TimedInput t;
    t.in = in.query;
    t.args.columns = {in.key, in.value};
    return t;
  };
  r.call = [v](const TimedInput& t) { eagerOf(v, SdpaInput{t.in, t.args.columns.at(0), t.args.columns.at(1)}); };
  return r;
}

TuneOutcome tuneSdpa(const SdpaVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(SdpaFamily::guardVariant(v), SdpaFamily::kName, " cannot serve this variant");
  TunerScope scope(device);  // Note [A tuner's scope]
  const int64_t need = bytesNeeded(v, device);
  HOTKERNEL_CHECK(options.memoryCapBytes <= 0 || need <= options.memoryCapBytes, "tuning ", SdpaFamily::kName,
                  " ", kernels::variantString(kernels::sdpaKeyOf(v, device)), " needs ~", need >> 20,
                  " MiB of GPU memory, over the optimizer's cap of ", options.memoryCapBytes >> 20, " MiB");
  const std::vector<AttentionBackend> backends = SdpaFamily::candidates(true);

  TuneOutcome outcome;
  outcome.family = SdpaFamily::kName;
  at::Generator gen = timingGenerator(device);
  HOTKERNEL_CHECK(!options.yieldPoint || options.yieldPoint(), kInterrupted);
  const SdpaInput timed = drawSdpaInput(v, device, gen);
  std::vector<ListedCandidate> candidates;
  for (AttentionBackend backend : backends) {
    ListedCandidate c;
    c.params = SdpaParams{backend}.toJson();
    c.check = [&, backend] { return checkSdpaBackend(backend, v, device, options.yieldPoint); };
    c.run = [&, backend] { return backendOf(backend, v, timed); };
    candidates.push_back(std::move(c));
  }
  const std::optional<size_t> best =
      tuneListed(candidates, [&] { eagerOf(v, timed); }, device, options, outcome.metrics);
  if (best) {
    outcome.accepted = true;
    outcome.paramsJson = SdpaParams{backends[*best]}.toJson();
  }
  return outcome;
}

std::string checkCachedSdpa(const VariantKey& key, const std::string& paramsJson, const std::string& cubin,
                            const TunerOptions& options) {
  if (!cubin.empty()) return std::string(SdpaFamily::kName) + " holds no kernels: a cubin is refused";
  std::string why;
  const std::optional<SdpaParams> p = paramsOf(paramsJson, &why);
  if (!p) return why;
  const SdpaVariant v = kernels::sdpaVariantOf(key);
  if (key.device >= 0) {
    TunerScope scope(key.device);  // Note [A tuner's scope]
    const int64_t need = bytesNeeded(v, key.device);
    if (options.memoryCapBytes > 0 && need > options.memoryCapBytes) {
      return "its check needs ~" + std::to_string(need >> 20) + " MiB, over the optimizer's cap";
    }
    why = checkSdpaBackend(p->backend, v, key.device, options.yieldPoint);
  } else {
    why = checkSdpaBackend(p->backend, v, key.device, options.yieldPoint);
  }
  HOTKERNEL_CHECK(why != "interrupted", kInterrupted);
  return why.empty() ? "" : "checks: " + why;
}

}  // namespace hotkernel
