// The attention family (sdpa_backend): guards, keys, params and the descriptor.
//
// Note [Choosing an attention backend]
// aten::scaled_dot_product_attention picks one of ATen's backends with a
// heuristic (its `_fused_sdp_choice` stub: the first backend of a fixed
// priority order whose constraints the call meets), not by speed. The family
// serves a variant with the backend measured fastest for it, among the
// backends that take it and give the reference's values: a choice among
// ATen's own implementations, so a cached decision names a backend (a
// whitelisted name, SdpaParams) and never carries code. The tuner
// (optimizer/search/SdpaTuner.cpp) checks each backend against the math
// backend run in float64 and times it against the op as PyTorch runs it
// (its own choice); a backend is chosen when its speed-up's confidence
// interval clears the family search's threshold, so the choice is never
// slower than PyTorch's within the measurement. Only calls without a mask
// or dropout are served (the composite converts masks per backend: those
// calls keep PyTorch's choice), and only in inference (a call that needs a
// gradient runs the composite, whose backends record autograd).

#include "hotkernel/kernels/SdpaFamily.h"

#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

constexpr const char* kParamsFormat = "hotkernel-attention-choice";
constexpr int kParamsVersion = 1;
constexpr int32_t kFields = variant_options::kLayoutMask | variant_options::kCausal | variant_options::kGqa;

bool inRange(int64_t n, int64_t low, int64_t high) { return n >= low && n <= high; }

// Elements of a [b, h, n, d] tensor, or -1 past kMaxElements.
int64_t elements(int64_t b, int64_t h, int64_t n, int64_t d) {
  if (b > SdpaFamily::kMaxElements / h) return -1;
  int64_t e = b * h;
  if (e > SdpaFamily::kMaxElements / n) return -1;
  e *= n;
  if (e > SdpaFamily::kMaxElements / d) return -1;
  return e * d;
}

bool servesKey(const VariantKey& key) {
  if (!detail::optionsWithin(key, kFields)) return false;
  const SdpaVariant v = sdpaVariantOf(key);
  // The gqa bit is what the extents say: one key per variant.
  return SdpaFamily::guardVariant(v) && ((key.options & variant_options::kGqa) != 0) == v.gqa();
}

double bytesMoved(const VariantKey& key) { return SdpaFamily::bytesMoved(sdpaVariantOf(key)); }

Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int /*device*/) {
  HOTKERNEL_CHECK(servesKey(key), SdpaFamily::kName, " does not take the variant ", variantString(key));
  HOTKERNEL_CHECK(cubin.empty(), SdpaFamily::kName, " has no kernel of its own: a choice carries no cubin");
  const SdpaParams p = SdpaParams::fromJson(params);
  HOTKERNEL_CHECK(attentionBackendRunsOn(p.backend, key.device >= 0), "backend ",
                  attentionBackendName(p.backend), " does not run on ", key.device >= 0 ? "CUDA" : "the CPU");
  Plan plan;
  plan.key = key;
  plan.launcher = std::make_shared<SdpaChoice>(p.backend);
  plan.description = std::string(SdpaFamily::kName) + "[" + attentionBackendName(p.backend) + "] for " +
                     variantString(key);
  return plan;
}

const FamilyDescriptor kSdpa{SdpaFamily::kName, SdpaFamily::kOp, "", kFields, &servesKey, &bytesMoved, &makePlan};

}  // namespace

bool SdpaVariant::operator==(const SdpaVariant& o) const {
  return dtype == o.dtype && batch == o.batch && heads == o.heads && kvHeads == o.kvHeads &&
         queries == o.queries && keys == o.keys && headDim == o.headDim && valueDim == o.valueDim &&
         layouts[0] == o.layouts[0] && layouts[1] == o.layouts[1] && layouts[2] == o.layouts[2] &&
         causal == o.causal;
}

std::vector<int64_t> sdpaLayoutStrides(int32_t layout, int64_t b, int64_t h, int64_t n, int64_t d) {
  (void)b;
  switch (layout) {
    case 0:
      return {h * n * d, n * d, d, 1};
    case 1:
      return {n * h * d, d, h * d, 1};
    case 2:
      return {3 * n * h * d, d, 3 * h * d, 1};
    default:
      HOTKERNEL_THROW("no attention layout class ", layout);
  }
}

int32_t sdpaLayoutOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (sizes.size() != 4 || strides.size() != 4) return -1;
  for (int64_t s : sizes) {
    if (s < 1) return -1;
  }
  for (int32_t layout = 0; layout < 3; ++layout) {
    const std::vector<int64_t> want = sdpaLayoutStrides(layout, sizes[0], sizes[1], sizes[2], sizes[3]);
    bool match = true;
    for (int i = 0; i < 4 && match; ++i) match = sizes[i] == 1 || strides[i] == want[i];
    if (match) return layout;
  }
  return -1;
}

SdpaVariant sdpaVariantOf(const VariantKey& key) {
  SdpaVariant v;
  v.dtype = static_cast<DType>(key.dtype);
  v.batch = key.rows;
  v.queries = key.cols;
  v.keys = key.inner;
  v.heads = key.more[0];
  v.kvHeads = key.more[1];
  v.headDim = key.more[2];
  v.valueDim = key.more[3];
  for (int i = 0; i < 3; ++i) v.layouts[i] = layoutOf(key, i);
  v.causal = (key.options & variant_options::kCausal) != 0;
  return v;
}

VariantKey sdpaKeyOf(const SdpaVariant& v, int device) {
  VariantKey key{static_cast<int32_t>(v.dtype), device, v.batch, v.queries};
  key.inner = v.keys;
  key.more[0] = v.heads;
  key.more[1] = v.kvHeads;
  key.more[2] = v.headDim;
  key.more[3] = v.valueDim;
  key.options = layoutOptions(v.layouts[0], v.layouts[1], v.layouts[2]) |
                (v.causal ? variant_options::kCausal : 0) | (v.gqa() ? variant_options::kGqa : 0);
  return key;
}

const FamilyDescriptor& sdpaDescriptor() { return kSdpa; }

nlohmann::json SdpaParams::toJson() const {
  return {{"format", kParamsFormat}, {"version", kParamsVersion}, {"backend", attentionBackendName(backend)}};
}

SdpaParams SdpaParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "an attention choice is a JSON object");
  HOTKERNEL_CHECK(j.contains("format") && j["format"].is_string() && j["format"] == kParamsFormat,
                  "an attention choice has format \"", kParamsFormat, "\"");
  HOTKERNEL_CHECK(j.contains("version") && j["version"].is_number_integer() && j["version"] == kParamsVersion,
                  "an attention choice of version ", kParamsVersion, " is expected");
  HOTKERNEL_CHECK(j.contains("backend") && j["backend"].is_string(), "an attention choice names its backend");
  const std::optional<AttentionBackend> b = parseAttentionBackend(j["backend"].get<std::string>());
  HOTKERNEL_CHECK(b.has_value(), "unknown attention backend '", j["backend"].get<std::string>(), "'");
  return SdpaParams{*b};
}

std::string SdpaChoice::describe() const {
  return std::string("aten attention backend ") + attentionBackendName(backend_);
}

bool SdpaFamily::guardVariant(const SdpaVariant& v) {
  if (v.dtype != DType::Float32 && v.dtype != DType::Float16 && v.dtype != DType::BFloat16) return false;
  if (!inRange(v.batch, 1, kMaxExtent) || !inRange(v.heads, 1, kMaxExtent) || !inRange(v.kvHeads, 1, kMaxExtent) ||
      !inRange(v.queries, 1, kMaxExtent) || !inRange(v.keys, 2, kMaxExtent) || !inRange(v.headDim, 1, kMaxHeadDim) ||
      !inRange(v.valueDim, 1, kMaxHeadDim)) {
    return false;
  }
  if (v.heads % v.kvHeads != 0) return false;
  for (int32_t layout : v.layouts) {
    if (layout < 0 || layout > 2) return false;
  }
  // Layout 2's storage spans three times the tensor's elements: the bound holds for that storage.
  return elements(3 * v.batch, v.heads, v.queries, std::max(v.headDim, v.valueDim)) > 0 &&
         elements(3 * v.batch, v.kvHeads, v.keys, std::max(v.headDim, v.valueDim)) > 0;
}

bool SdpaFamily::guardCall(const SdpaCall& call, SdpaVariant* out) {
  if (!call.dtypeServed || !call.sameDtypes || !call.sameDevice || !call.dense) return false;
  if (call.hasMask || call.dropoutP != 0.0) return false;
  const std::vector<int64_t>& q = call.querySizes;
  const std::vector<int64_t>& k = call.keySizes;
  const std::vector<int64_t>& val = call.valueSizes;
  if (q.size() != 4 || k.size() != 4 || val.size() != 4) return false;
  if (k[0] != q[0] || val[0] != q[0] || val[1] != k[1] || val[2] != k[2] || k[3] != q[3]) return false;
  SdpaVariant v;
  v.dtype = call.dtype;
  v.batch = q[0];
  v.heads = q[1];
  v.queries = q[2];
  v.headDim = q[3];
  v.kvHeads = k[1];
  v.keys = k[2];
  v.valueDim = val[3];
  v.causal = call.isCausal;
  if (v.kvHeads < 1 || v.heads % v.kvHeads != 0 || (v.gqa() && !call.enableGqa)) return false;
  v.layouts[0] = sdpaLayoutOf(q, call.queryStrides);
  v.layouts[1] = sdpaLayoutOf(k, call.keyStrides);
  v.layouts[2] = sdpaLayoutOf(val, call.valueStrides);
  if (!guardVariant(v)) return false;
  if (out) *out = v;
  return true;
}

std::vector<AttentionBackend> SdpaFamily::candidates(bool cuda) {
  std::vector<AttentionBackend> out;
  for (AttentionBackend b : kAllAttentionBackends) {
    if (attentionBackendRunsOn(b, cuda)) out.push_back(b);
  }
  return out;
}

double SdpaFamily::bytesMoved(const SdpaVariant& v) {
  const double q = static_cast<double>(v.batch) * v.heads * v.queries;
  const double kv = static_cast<double>(v.batch) * v.kvHeads * v.keys;
  return (q * v.headDim + kv * v.headDim + kv * v.valueDim + q * v.valueDim) * elementSize(v.dtype);
}

}  // namespace hotkernel::kernels
