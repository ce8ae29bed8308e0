#include "hotkernel/optimizer/ProfileDocument.h"

#include <limits>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel {
namespace {

namespace jf = jsonfield;

// Note [A profile is any file]
// `hotkernel warmup --profile` and `hotkernel profile` read whatever file they
// are given. Every field is checked for its type before it is read
// (nlohmann's value() and get() throw their own exception types on a
// mistyped field), and every count for being an integer in range before it is
// converted: converting a JSON float out of the range of an integer type is
// undefined behaviour. A malformed document is an Error, whatever its shape
// (parseRecordedProfile, ProfileDocument.cpp).

constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();

// The keys whose spelling changed in version 3 (Note [Profile versions] in Recorder.h): versions 1 and 2
// spell them in camelCase, version 3 in snake_case. Every other key is the same in all three.
struct ProfileKeys {
  const char* samplingProb;
  const char* sampledCalls;
  const char* estimatedCalls;
  const char* gpuNs;
  const char* gpuSampledCalls;
  const char* estimatedGpuNs;
  const char* gpuTime;
  const char* kernelNs;
  const char* attributedNs;
  const char* droppedRecords;
  const char* takenOver;
  const char* estimatedDeferredCalls;  // version 3 only (nullptr before): Note [Deferred calls in the recorder]
};

constexpr ProfileKeys kCamelCaseKeys = {"samplingProb", "sampledCalls", "estimatedCalls", "gpuNs",
                                        "gpuSampledCalls", "estimatedGpuNs", "gpuTime", "kernelNs",
                                        "attributedNs", "droppedRecords", "takenOver", nullptr};
constexpr ProfileKeys kSnakeCaseKeys = {"sampling_prob", "sampled_calls", "estimated_calls", "gpu_ns",
                                        "gpu_sampled_calls", "estimated_gpu_ns", "gpu_time", "kernel_ns",
                                        "attributed_ns", "dropped_records", "taken_over", "estimated_deferred_calls"};

const ProfileKeys& keysOf(int version) { return version >= 3 ? kSnakeCaseKeys : kCamelCaseKeys; }

// What a nested error says, without the " (File.cpp:42)" its throw appended: the
// message that wraps it names the entry and gets a location of its own.
std::string reasonOf(const std::exception& e) {
  const std::string text = e.what();
  const size_t open = text.rfind(" (");
  if (open == std::string::npos || text.back() != ')') return text;
  const std::string inside = text.substr(open + 2, text.size() - open - 3);
  const size_t colon = inside.rfind(':');
  const bool location = colon != std::string::npos && colon + 1 < inside.size() &&
                        inside.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                        inside.find_first_of(" ()") == std::string::npos && inside.find('.') < colon;
  return location ? text.substr(0, open) : text;
}

// `key` of `j` holds exactly the string `expected`.
bool holdsString(const nlohmann::json& j, const char* key, const char* expected) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() && it->get_ref<const std::string&>() == expected;
}

// The entry's GPU time when the profile carries it (Note [GPU time in the profile]).
std::optional<RecordedGpuTime> gpuOf(const nlohmann::json& entry, bool withGpu, const ProfileKeys& k,
                                     const std::string& where) {
  if (!withGpu) return std::nullopt;
  RecordedGpuTime g;
  g.ns = jf::integer(entry, k.gpuNs, where, 0, kMaxCount);
  g.sampledCalls = jf::integer(entry, k.gpuSampledCalls, where, 0, kMaxCount);
  g.estimatedNs = jf::number(entry, k.estimatedGpuNs, where);
  return g;
}

RecordedGpuSummary gpuSummaryOf(const nlohmann::json& j, const ProfileKeys& k) {
  const std::string where = k.gpuTime;
  jf::object(j, where);
  RecordedGpuSummary s;
  s.source = jf::string(j, "source", where);
  s.state = jf::string(j, "state", where);
  s.detail = jf::optionalString(j, "detail", where).value_or("");
  if (s.state == "started") {
    s.kernelNs = jf::integer(j, k.kernelNs, where, 0, kMaxCount);
    s.kernels = jf::integer(j, "kernels", where, 0, kMaxCount);
    s.attributedNs = jf::integer(j, k.attributedNs, where, 0, kMaxCount);
    s.droppedRecords = jf::optionalInteger(j, k.droppedRecords, where, 0, kMaxCount).value_or(0);
    s.evicted = jf::optionalInteger(j, "evicted", where, 0, kMaxCount).value_or(0);
    s.takenOver = jf::optionalString(j, k.takenOver, where).value_or("");
  }
  return s;
}


// "estimated_deferred_calls" (added within version 3: Note [Deferred calls in the recorder]): absent is 0; a
// count, never more than the entry's estimated calls.
double deferredOf(const nlohmann::json& entry, double estimatedCalls, const ProfileKeys& k, const std::string& where) {
  if (k.estimatedDeferredCalls == nullptr) return 0.0;
  const double deferred = jf::optionalNumber(entry, k.estimatedDeferredCalls, where).value_or(0.0);
  HOTKERNEL_CHECK(deferred >= 0 && deferred <= estimatedCalls, where, ".", k.estimatedDeferredCalls, ": ", deferred,
                  " is not a count within its ", k.estimatedCalls, " (", estimatedCalls, ")");
  return deferred;
}

RecordedVariant variantOf(const nlohmann::json& v, int device, bool withGpu, const ProfileKeys& k) {
  const std::string where = "variant";
  jf::object(v, where);
  RecordedVariant r;
  r.op = jf::string(v, "op", where);
  r.key.dtype = static_cast<int32_t>(kernels::parseDType(jf::string(v, "dtype", where)));
  r.key.device = device;
  r.key.rows = jf::integer(v, "rows", where);
  r.key.cols = jf::integer(v, "cols", where);
  // Middle-dim reductions' third extent (absent = none; Note [Profile format] in Recorder.h).
  if (std::optional<int64_t> inner = jf::optionalInteger(v, "inner", where)) r.key.inner = *inner;
  // Norm variants' options (absent = false; Note [Profile format]).
  if (jf::optionalBoolean(v, "weight", where).value_or(false)) r.key.options |= kernels::variant_options::kWeight;
  if (jf::optionalBoolean(v, "bias", where).value_or(false)) r.key.options |= kernels::variant_options::kBias;
  // cross_entropy_loss variants' reduction (an unknown one leaves none: no family serves the key).
  if (v.contains("reduction") && v["reduction"].is_string()) {
    const std::string reduction = v["reduction"].get<std::string>();
    for (int32_t i = 0; i < 3; ++i) {
      if (reduction == kernels::reductionName(static_cast<kernels::CrossEntropyReduction>(i))) {
        r.key.options |= kernels::reductionOptions(i);
      }
    }
  }
  // The whole key when the recorder wrote it (Note [Profile format]): it must agree with the fields.
  if (std::optional<std::string> text = jf::optionalString(v, "variant", where)) {
    const std::optional<VariantKey> whole = kernels::parseVariantString(*text, device);
    HOTKERNEL_CHECK(whole && whole->dtype == r.key.dtype && whole->rows == r.key.rows && whole->cols == r.key.cols &&
                        whole->inner == r.key.inner,
                    "variant: '", *text, "' is not the variant its dtype, rows, cols and inner name");
    r.key = *whole;
  }
  r.sampledCalls = jf::optionalNumber(v, k.sampledCalls, where).value_or(0.0);
  r.estimatedCalls = jf::optionalNumber(v, k.estimatedCalls, where).value_or(0.0);
  r.estimatedDeferredCalls = deferredOf(v, r.estimatedCalls, k, where);
  r.gpu = gpuOf(v, withGpu, k, where);
  return r;
}

RecordedOp opOf(const nlohmann::json& o, bool withGpu, const ProfileKeys& k) {
  const std::string where = "op";
  jf::object(o, where);
  RecordedOp r;
  r.op = jf::string(o, "op", where);
  r.sampledCalls = jf::optionalNumber(o, k.sampledCalls, where).value_or(0.0);
  r.estimatedCalls = jf::optionalNumber(o, k.estimatedCalls, where).value_or(0.0);
  r.estimatedDeferredCalls = deferredOf(o, r.estimatedCalls, k, where);
  r.gpu = gpuOf(o, withGpu, k, where);
  return r;
}

}  // namespace

RecordedProfile parseRecordedProfile(const nlohmann::json& profile, int device) {
  auto version = profile.is_object() ? profile.find("version") : profile.end();
  if (!profile.is_object() || !holdsString(profile, "format", kProfileFormat) || version == profile.end() ||
      !version->is_number_integer() || *version < kProfileOldestVersion || *version > kProfileNewestVersion ||
      !profile.contains("variants") || !profile["variants"].is_array()) {
    HOTKERNEL_THROW("is not a hotkernel profile (format hotkernel-profile, version 1 to 3)");
  }
  RecordedProfile out;
  out.version = version->get<int>();
  const ProfileKeys& k = keysOf(out.version);
  try {
    out.samplingProb = jf::optionalNumber(profile, k.samplingProb, "profile").value_or(0.0);
    if (out.version >= 2 && jf::present(profile, k.gpuTime)) out.gpuTime = gpuSummaryOf(profile[k.gpuTime], k);
  } catch (const std::exception& e) {
    HOTKERNEL_THROW("malformed profile header (", reasonOf(e), ")");
  }
  const bool withGpu = out.hasGpuTime();
  for (const nlohmann::json& v : profile["variants"]) {
    try {
      out.variants.push_back(variantOf(v, device, withGpu, k));
    } catch (const std::exception& e) {
      HOTKERNEL_THROW("malformed variant in the profile: ", v.dump(), " (", reasonOf(e), ")");
    }
  }
  if (jf::present(profile, "ops")) {
    if (!profile["ops"].is_array()) HOTKERNEL_THROW("malformed profile: \"ops\" is not an array");
    for (const nlohmann::json& o : profile["ops"]) {
      try {
        out.ops.push_back(opOf(o, withGpu, k));
      } catch (const std::exception& e) {
        HOTKERNEL_THROW("malformed op in the profile: ", o.dump(), " (", reasonOf(e), ")");
      }
    }
  }
  return out;
}

}  // namespace hotkernel
