#include "hotkernel/interpose/Recorder.h"

#include <ATen/record_function.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

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
    // The served op RecordFunction names so (every overload of "aten::sum"
    // comes here: its row's recordedKey takes only the one it serves).
    for (const ServedOp& op : servedOps()) {
      if (op.recordName != name) continue;
      if (std::optional<VariantKey> key = op.recordedKey(fn)) r.noteVariant(op.name, *key);
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
    // Middle-dim reductions only (Note [Profile format] in Recorder.h).
    if (v.key.inner != 0) entry["inner"] = v.key.inner;
    // Norm variants only, and only when set (Note [Profile format] in Recorder.h).
    if (kernels::hasWeight(v.key)) entry["weight"] = true;
    if (kernels::hasBias(v.key)) entry["bias"] = true;
    if (kernels::reductionOf(v.key) >= 0) {
      entry["reduction"] = kernels::reductionName(static_cast<kernels::CrossEntropyReduction>(kernels::reductionOf(v.key)));
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
