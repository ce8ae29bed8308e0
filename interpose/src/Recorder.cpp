#include "Recorder.h"

#include <ATen/record_function.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "CrossEntropyOverride.h"
#include "LayerNormOverride.h"
#include "NormOverrideCommon.h"
#include "ReduceOverride.h"
#include "RmsNormOverride.h"
#include "SoftmaxOverride.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// An int[] / SymInt[] argument as concrete sizes; nullopt for anything else
// (a symbolic size: no variant to record).
std::optional<std::vector<int64_t>> sizesOf(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  if (!v.isList()) return std::nullopt;
  std::vector<int64_t> out;
  for (const c10::IValue& e : v.toListRef()) {
    if (e.isInt()) {
      out.push_back(e.toInt());
    } else if (e.isSymInt()) {
      const std::optional<int64_t> i = e.toSymInt().maybe_as_int();
      if (!i) return std::nullopt;
      out.push_back(*i);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// An optional Tensor argument: nullopt for None; false when it is neither.
bool optionalTensorOf(const c10::IValue& v, std::optional<at::Tensor>& out) {
  if (v.isNone()) {
    out = std::nullopt;
    return true;
  }
  if (!v.isTensor()) return false;
  out = v.toTensor();
  return true;
}

// aten::_fused_rms_norm(input, normalized_shape, weight?, eps?) and
// aten::native_layer_norm(input, normalized_shape, weight?, bias?, eps): the
// variant key the trampoline would look up (normCallOf: weight / bias flags).
void noteNormVariant(Recorder& r, const at::RecordFunction& fn, bool layerNorm) {
  const size_t need = layerNorm ? 5 : 4;
  if (fn.num_inputs() < need) return;
  auto inputs = fn.inputs();
  if (!inputs[0].isTensor()) return;
  const std::optional<std::vector<int64_t>> shape = sizesOf(inputs[1]);
  if (!shape) return;
  std::optional<at::Tensor> weight, bias;
  if (!optionalTensorOf(inputs[2], weight)) return;
  if (layerNorm && !optionalTensorOf(inputs[3], bias)) return;
  if (auto call = normCallOf(inputs[0].toTensor(), *shape, weight, bias)) {
    r.noteVariant(layerNorm ? LayerNormOverride::kOpName : RmsNormOverride::kOpName, call->key);
  }
}

// aten::cross_entropy_loss(self, target, weight?, reduction, ignore_index,
// label_smoothing): the key crossEntropyKeyOf gives (the reduction in its flags).
void noteCrossEntropyVariant(Recorder& r, const at::RecordFunction& fn) {
  if (fn.num_inputs() < 6) return;
  auto inputs = fn.inputs();
  if (!inputs[0].isTensor() || !inputs[1].isTensor() || !inputs[3].isInt() || !inputs[5].isDouble()) return;
  std::optional<at::Tensor> weight;
  if (!optionalTensorOf(inputs[2], weight)) return;
  if (auto key = crossEntropyKeyOf(inputs[0].toTensor(), inputs[1].toTensor(), weight, inputs[3].toInt(),
                                   inputs[5].toDouble())) {
    r.noteVariant(CrossEntropyOverride::kOpName, *key);
  }
}

// Note [Recording reductions]
// RecordFunction names an op without its overload ("aten::sum" for every sum);
// the overload comes from operator_name(). aten::sum.dim_IntList and
// aten::mean.dim (self, dim?, keepdim, dtype?), aten::amax (self, dim[],
// keepdim) and aten::argmax (self, dim?, keepdim): the key reduceKeyOf gives,
// under the overload-qualified name the runtime and the cache use. Other
// overloads (a full sum, named dims) are not served and not recorded.
void noteReduceVariant(Recorder& r, const at::RecordFunction& fn, kernels::ReduceOp op) {
  const size_t need = op == kernels::ReduceOp::Sum || op == kernels::ReduceOp::Mean ? 4 : 3;
  if (fn.num_inputs() < need) return;
  const std::optional<c10::OperatorName> name = fn.operator_name();
  const char* overload = op == kernels::ReduceOp::Sum ? "dim_IntList" : op == kernels::ReduceOp::Mean ? "dim" : "";
  if (!name || name->overload_name != overload) return;
  auto inputs = fn.inputs();
  if (!inputs[0].isTensor() || !inputs[2].isBool()) return;
  std::optional<std::vector<int64_t>> dims;
  if (op == kernels::ReduceOp::Argmax) {
    if (inputs[1].isInt()) {
      dims = std::vector<int64_t>{inputs[1].toInt()};
    } else if (!inputs[1].isNone()) {
      return;
    }
  } else if (!inputs[1].isNone()) {
    dims = sizesOf(inputs[1]);
    if (!dims) return;
  }
  const bool dtypeGiven = need == 4 && !inputs[3].isNone();
  if (auto call = reduceKeyOf(op, inputs[0].toTensor(), dims, inputs[2].toBool(), dtypeGiven)) {
    r.noteVariant(ReduceOverride::opName(op), call->key);
  }
}

// The reduction a RecordFunction name may be ("aten::sum", "aten::mean", "aten::amax", "aten::argmax").
std::optional<kernels::ReduceOp> reduceOpNamed(const char* name) {
  if (std::strcmp(name, "aten::sum") == 0) return kernels::ReduceOp::Sum;
  if (std::strcmp(name, "aten::mean") == 0) return kernels::ReduceOp::Mean;
  if (std::strcmp(name, "aten::amax") == 0) return kernels::ReduceOp::Amax;
  if (std::strcmp(name, "aten::argmax") == 0) return kernels::ReduceOp::Argmax;
  return std::nullopt;
}

std::unique_ptr<at::ObserverContext> onOpStart(const at::RecordFunction& fn) {
  try {
    Recorder& r = Recorder::instance();
    const char* name = fn.name();
    r.noteOp(name);
    // Serving GPU work: the background optimizer waits for it to pause.
    if (fn.num_inputs() > 0) {
      const c10::IValue& first = fn.inputs()[0];
      if (first.isTensor() && first.toTensor().is_cuda()) IdleGate::instance().noteActivity();
    }
    const bool softmax = std::strcmp(name, SoftmaxOverride::kOpName) == 0;
    if ((softmax || std::strcmp(name, SoftmaxOverride::kLogOpName) == 0) && fn.num_inputs() >= 3) {
      auto inputs = fn.inputs();
      if (inputs[0].isTensor() && inputs[1].isInt() && inputs[2].isBool()) {
        if (auto key = softmaxVariantOf(inputs[0].toTensor(), inputs[1].toInt(), inputs[2].toBool())) {
          r.noteVariant(softmax ? SoftmaxOverride::kOpName : SoftmaxOverride::kLogOpName, *key);
        }
      }
    } else if (std::strcmp(name, RmsNormOverride::kOpName) == 0) {
      noteNormVariant(r, fn, /*layerNorm=*/false);
    } else if (std::strcmp(name, LayerNormOverride::kOpName) == 0) {
      noteNormVariant(r, fn, /*layerNorm=*/true);
    } else if (std::strcmp(name, CrossEntropyOverride::kOpName) == 0) {
      noteCrossEntropyVariant(r, fn);
    } else if (const std::optional<kernels::ReduceOp> reduce = reduceOpNamed(name)) {
      noteReduceVariant(r, fn, *reduce);
    }
  } catch (...) {
    // Recording is best effort; it must never disturb the op.
  }
  return nullptr;
}

}  // namespace

Recorder& Recorder::instance() {
  static Recorder* r = new Recorder();  // leaked: callbacks may run during exit
  return *r;
}

void Recorder::start(double samplingProb, int64_t hotCalls, HotFn onHot) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (started_) return;
    started_ = true;
    samplingProb_ = samplingProb;
    hotCalls_ = hotCalls;
    onHot_ = std::move(onHot);
  }
  at::addGlobalCallback(at::RecordFunctionCallback(&onOpStart)
                            .needsInputs(true)
                            .samplingProb(samplingProb)
                            .scopes({at::RecordScope::FUNCTION}));
}

bool Recorder::started() const {
  std::lock_guard<std::mutex> guard(mu_);
  return started_;
}

double Recorder::samplingProb() const {
  std::lock_guard<std::mutex> guard(mu_);
  return samplingProb_;
}

void Recorder::noteOp(const char* name) {
  std::lock_guard<std::mutex> guard(mu_);
  ++opCounts_[name];
}

void Recorder::noteVariant(const std::string& op, const VariantKey& key) {
  HotFn fire;
  {
    std::lock_guard<std::mutex> guard(mu_);
    VariantCount* found = nullptr;
    for (VariantCount& v : variants_) {
      if (v.key == key && v.op == op) {
        found = &v;
        break;
      }
    }
    if (!found) {
      variants_.push_back(VariantCount{op, key, 0, false});
      found = &variants_.back();
    }
    ++found->sampled;
    if (!found->hot && static_cast<double>(found->sampled) / samplingProb_ >= static_cast<double>(hotCalls_)) {
      found->hot = true;
      fire = onHot_;
    }
  }
  if (fire) fire(op, key);
}

nlohmann::json Recorder::profile() const {
  std::lock_guard<std::mutex> guard(mu_);
  nlohmann::json ops = nlohmann::json::array();
  std::vector<std::pair<std::string, uint64_t>> sorted(opCounts_.begin(), opCounts_.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [name, n] : sorted) {
    ops.push_back({{"op", name}, {"sampledCalls", n}, {"estimatedCalls", static_cast<double>(n) / samplingProb_}});
  }
  nlohmann::json variants = nlohmann::json::array();
  for (const VariantCount& v : variants_) {
    nlohmann::json entry = {{"op", v.op},
                            {"dtype", kernels::dtypeName(static_cast<kernels::DType>(v.key.dtype))},
                            {"device", v.key.device},
                            {"rows", v.key.rows},
                            {"cols", v.key.cols},
                            {"sampledCalls", v.sampled},
                            {"estimatedCalls", static_cast<double>(v.sampled) / samplingProb_}};
    // Norm variants only, and only when set (Note [Profile format] in Recorder.h).
    if (v.key.hasWeight()) entry["weight"] = true;
    if (v.key.hasBias()) entry["bias"] = true;
    if (v.key.reduction() >= 0) {
      entry["reduction"] = kernels::reductionName(static_cast<kernels::CrossEntropyReduction>(v.key.reduction()));
    }
    variants.push_back(std::move(entry));
  }
  return {{"format", "hotkernel-profile"}, {"version", 1}, {"samplingProb", samplingProb_},
          {"ops", ops}, {"variants", variants}};
}

double Recorder::estimatedCalls(const std::string& op, const VariantKey& key) const {
  std::lock_guard<std::mutex> guard(mu_);
  for (const VariantCount& v : variants_) {
    if (v.key == key && v.op == op) return static_cast<double>(v.sampled) / samplingProb_;
  }
  return 0.0;
}

bool Recorder::writeProfile(const std::string& path) const {
  try {
    const std::string text = profile().dump(2) + "\n";
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream f(tmp, std::ios::trunc);
      f << text;
      f.flush();
      if (!f) {
        HOTKERNEL_LOG(Warn) << "cannot write the profile to " << tmp;
        std::remove(tmp.c_str());
        return false;
      }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      HOTKERNEL_LOG(Warn) << "cannot rename the profile to " << path;
      std::remove(tmp.c_str());
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG(Warn) << "cannot write the profile: " << e.what();
    return false;
  }
}

}  // namespace hotkernel
