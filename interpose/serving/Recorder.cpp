#include "hotkernel/interpose/Recorder.h"

#include <ATen/record_function.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/CuptiActivitySource.h"
#include "hotkernel/runtime/DeferredCalls.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// The external id of a sampled call (Note [GPU time in the profile]): its op's slot + 1 in the low half, its
// variant's slot + 1 (0: none) in the high half; never 0.
constexpr uint64_t kNoVariant = 0;
uint64_t externalIdOf(uint32_t opSlot, uint64_t variantSlotPlusOne) {
  return (variantSlotPlusOne << 32) | (static_cast<uint64_t>(opSlot) + 1);
}

// What a sampled call hands its end callback: whether it pushed an external id, its slots, and the thread's
// deferred-call count before it (Note [Deferred calls in the recorder] in runtime/DeferredCalls.h).
struct SampledCall final : at::ObserverContext {
  bool pushed = false;
  uint32_t opSlot = 0;
  uint64_t variantSlotPlusOne = kNoVariant;
  uint64_t deferredBefore = 0;
};

void childAfterFork() { Recorder::instance().stopGpuTimeInChild(); }

}  // namespace

// Note [The optimizer's own ops]
// The optimizer thread (IdleGate::ScopedOptimizerThread) runs ATen ops of its
// own: the harness's references and bounds (a norm's per-row amax of |x|, the
// errors' max), the ranker's measurements, the cached-kernel checks. They are
// not the process's workload: recorded, they would become hot variants of
// their own (float32 amax over the harness's row subsets), be tuned on idle
// time meant for the host's ops, stored in the cache and written to the
// profile that `hotkernel warmup` tunes elsewhere. The callback returns at
// once on that thread: no op, no variant, no external id.
//
// Note [Hotkernel's scopes in the profile]
// The recorder watches ops (FUNCTION scopes) and, of the user scopes, only
// hotkernel's own (names starting "hotkernel::": a fused chain's flush,
// Note [Flushes in the profiler]). Such a scope is an op of the profile: its
// calls are counted and, with GPU time attributed, it pushes its own external
// id, so the fused kernel launched inside another op's call (the one that
// triggered the flush) is charged to the chain, not to that op. Other user
// scopes (the program's record_function regions) are not recorded.
std::unique_ptr<at::ObserverContext> recorderOnOpStart(const at::RecordFunction& fn) {
  try {
    if (IdleGate::onOptimizerThread()) return nullptr;  // Note [The optimizer's own ops]
    Recorder& r = Recorder::instance();
    const char* name = fn.name();
    if (fn.scope() == at::RecordScope::USER_SCOPE && std::strncmp(name, "hotkernel::", 11) != 0) return nullptr;
    bool cudaInput = false;
    if (fn.num_inputs() > 0) {
      const c10::IValue& first = fn.inputs()[0];
      cudaInput = first.isTensor() && first.toTensor().is_cuda();
    }
    // Serving GPU work: the background optimizer waits for it to pause.
    if (cudaInput) IdleGate::instance().noteActivity();
    int gpu = r.gpuState_.load(std::memory_order_acquire);
    if (gpu == Recorder::kGpuPending && cudaInput) gpu = r.startGpuTimeIfPending();
    if (gpu == Recorder::kGpuActive) {
      if (torch::profiler::impl::profilerEnabled()) {
        if (!r.profilerChecked_.exchange(true, std::memory_order_acq_rel)) {
          r.yieldGpuTimeToProfiler();
          gpu = r.gpuState_.load(std::memory_order_acquire);
        }
      } else if (r.profilerChecked_.load(std::memory_order_relaxed)) {
        r.profilerChecked_.store(false, std::memory_order_relaxed);
      }
    }
    const bool attributing = gpu == Recorder::kGpuActive;
    const uint32_t opSlot = r.noteOp(name, attributing);
    uint64_t variant = kNoVariant;
    // The served op RecordFunction names so (every overload of "aten::sum"
    // comes here: its row's recordedKey takes only the one it serves).
    for (const ServedOp& op : servedOps()) {
      if (op.recordName != name) continue;
      if (std::optional<VariantKey> key = op.recordedKey(fn)) {
        const uint32_t slot = r.noteVariant(op.name, *key, attributing);
        if (variant == kNoVariant) variant = static_cast<uint64_t>(slot) + 1;
      }
    }
    auto call = std::make_unique<SampledCall>();
    call->opSlot = opSlot;
    call->variantSlotPlusOne = variant;
    call->deferredBefore = deferredCallsOnThisThread();
    if (attributing) {
      r.gpuSource_->pushExternalId(externalIdOf(opSlot, variant));
      call->pushed = true;
    }
    return call;
  } catch (...) {
    // Recording is best effort; it must never disturb the op.
  }
  return nullptr;
}

void recorderOnOpEnd(const at::RecordFunction& /*fn*/, at::ObserverContext* ctx) {
  // Only a sampled call has a context; a forked child pushes nothing and pops nothing.
  if (ctx == nullptr) return;
  Recorder& r = Recorder::instance();
  const auto* call = static_cast<const SampledCall*>(ctx);
  const int gpu = r.gpuState_.load(std::memory_order_acquire);
  if (call->pushed && (gpu == Recorder::kGpuActive || gpu == Recorder::kGpuHandedOver)) {
    r.gpuSource_->popExternalId();
  }
  // Note [Deferred calls in the recorder]: the fusion engine took this call (or one nested in it).
  if (deferredCallsOnThisThread() != call->deferredBefore) {
    try {
      r.noteDeferred(call->opSlot, call->variantSlotPlusOne);
    } catch (...) {
      // Recording is best effort; it must never disturb the op.
    }
  }
}

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
  // Note [GPU time from CUPTI]: opt-in; started at the first sampled CUDA op.
  if (config().cupti) attributeGpuTime(makeCuptiActivitySource(), GpuTimeStart::AtFirstCudaOp);
  at::addGlobalCallback(at::RecordFunctionCallback(&recorderOnOpStart, &recorderOnOpEnd)
                            .needsInputs(true)
                            .samplingProb(samplingProb)
                            .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
}

bool Recorder::started() const {
  std::lock_guard<std::mutex> guard(mu_);
  return started_;
}

double Recorder::samplingProb() const {
  std::lock_guard<std::mutex> guard(mu_);
  return samplingProb_;
}

uint32_t Recorder::noteOp(const char* name, bool attributed) {
  std::lock_guard<std::mutex> guard(mu_);
  auto [it, added] = opSlots_.try_emplace(name, static_cast<uint32_t>(ops_.size()));
  if (added) ops_.push_back(OpCount{name, 0, 0});
  OpCount& op = ops_[it->second];
  ++op.sampled;
  op.attributed += attributed ? 1 : 0;
  return it->second;
}

void Recorder::noteDeferred(uint32_t opSlot, uint64_t variantSlotPlusOne) {
  std::lock_guard<std::mutex> guard(mu_);
  if (opSlot < ops_.size()) ++ops_[opSlot].deferred;
  if (variantSlotPlusOne != kNoVariant && variantSlotPlusOne - 1 < variants_.size()) {
    ++variants_[variantSlotPlusOne - 1].deferred;
  }
}

Recorder::CallsSinceHot Recorder::callsSinceHot(const std::string& op, const VariantKey& key) const {
  std::lock_guard<std::mutex> guard(mu_);
  for (const VariantCount& v : variants_) {
    if (v.key == key && v.op == op && v.hot) return {v.sampled - v.sampledAtHot, v.deferred - v.deferredAtHot};
  }
  return {};
}

std::optional<Recorder::CallsSinceHot> Recorder::rearm(const std::string& op, const VariantKey& key) {
  std::lock_guard<std::mutex> guard(mu_);
  for (VariantCount& v : variants_) {
    if (v.key == key && v.op == op && v.hot) {
      v.hot = false;
      v.ranBase = v.sampled - v.deferred;
      return CallsSinceHot{v.sampled - v.sampledAtHot, v.deferred - v.deferredAtHot};
    }
  }
  return std::nullopt;
}

uint32_t Recorder::noteVariant(const std::string& op, const VariantKey& key, bool attributed) {
  HotFn fire;
  uint32_t slot = 0;
  {
    std::lock_guard<std::mutex> guard(mu_);
    VariantCount* found = nullptr;
    for (size_t i = 0; i < variants_.size(); ++i) {
      if (variants_[i].key == key && variants_[i].op == op) {
        found = &variants_[i];
        slot = static_cast<uint32_t>(i);
        break;
      }
    }
    if (!found) {
      slot = static_cast<uint32_t>(variants_.size());
      variants_.push_back(VariantCount{op, key, 0, false, 0});
      found = &variants_.back();
    }
    ++found->sampled;
    found->attributed += attributed ? 1 : 0;
    // Hot on the calls that ran (Note [Deferred calls in the recorder]); after rearm(), on those since.
    // A call deferred after rearm() that started before it can take the count below ranBase.
    const uint64_t run = found->sampled - found->deferred;
    const uint64_t ran = run > found->ranBase ? run - found->ranBase : 0;
    if (!found->hot && static_cast<double>(ran) / samplingProb_ >= static_cast<double>(hotCalls_)) {
      found->hot = true;
      found->sampledAtHot = found->sampled;
      found->deferredAtHot = found->deferred;
      fire = onHot_;
    }
  }
  if (fire) fire(op, key);
  return slot;
}

bool Recorder::attributeGpuTime(std::unique_ptr<ActivitySource> source, GpuTimeStart when) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (gpuSource_ != nullptr || source == nullptr) return false;
    gpuSource_ = source.release();       // leaked: callbacks may run during exit
    gpuLedger_ = new GpuTimeLedger();    // leaked: the source delivers into it until the process ends
    gpuStart_ = ActivityStart{ActivityStartState::Failed, "not started: no sampled op had a CUDA input"};
  }
  // A forked child has no CUPTI threads: it pushes nothing (Note [Fork]).
  ::pthread_atfork(nullptr, nullptr, &childAfterFork);
  gpuState_.store(kGpuPending, std::memory_order_release);
  if (when == GpuTimeStart::Now) startGpuTimeIfPending();
  return true;
}

bool Recorder::gpuAttributing() const { return gpuState_.load(std::memory_order_acquire) == kGpuActive; }

void Recorder::stopGpuTimeInChild() {
  if (gpuState_.load(std::memory_order_relaxed) != kGpuOff) gpuState_.store(kGpuBackedOff, std::memory_order_relaxed);
}

int Recorder::startGpuTimeIfPending() {
  int expected = kGpuPending;
  if (!gpuState_.compare_exchange_strong(expected, kGpuStarting, std::memory_order_acq_rel)) return expected;
  const ActivityStart started = gpuSource_->start(gpuLedger_);
  if (started.state == ActivityStartState::Started) {
    HOTKERNEL_LOG(Info) << "HOTKERNEL_CUPTI=1: GPU time is attributed to the sampled ops (CUPTI activity records)";
  } else {
    HOTKERNEL_LOG_ONCE(Warn, "cupti-backed-off") << "HOTKERNEL_CUPTI=1: " << started.detail
                                                 << "; the profile ranks ops by calls";
  }
  {
    std::lock_guard<std::mutex> guard(mu_);
    gpuStart_ = started;
  }
  const int state = started.state == ActivityStartState::Started ? kGpuActive : kGpuBackedOff;
  gpuState_.store(state, std::memory_order_release);
  return state;
}

void Recorder::flushGpuTime() const {
  if (gpuState_.load(std::memory_order_acquire) != kGpuActive) return;
  gpuSource_->flush();
  std::string takenOver = gpuSource_->takenOver();
  if (!takenOver.empty()) HOTKERNEL_LOG_ONCE(Warn, "cupti-taken-over") << "HOTKERNEL_CUPTI=1: " << takenOver;
  std::lock_guard<std::mutex> guard(mu_);
  gpuTakenOver_ = std::move(takenOver);
}

// Note [Handing CUPTI to the PyTorch profiler]
// torch.profiler started after this source registers its own CUPTI buffer
// callbacks, but CUPTI keeps filling the buffer it has from this source, and
// kineto drops a buffer it did not hand out: its trace would show no kernels
// (Note [A later CUPTI client]). The first sampled op that sees the profiler
// on its thread probes whether the profiler took CUPTI (a CPU-only session
// does not) and, if so, hands the source over: CUPTI completes this source's
// buffer and asks the profiler's callbacks for the next, and attribution
// stops for the rest of the process, the profile saying so ("taken_over").
// The buffer goes to the profiler's callbacks (CUPTI calls whichever are
// registered), so the records it held since the source's last flush are
// lost to both: the profile keeps what was delivered before, and the
// profiler misses its first moments before that op (about 1/p ops with
// sampling probability p).
void Recorder::yieldGpuTimeToProfiler() {
  const std::string takenOver = gpuSource_->takenOver();
  if (takenOver.empty()) return;  // a profiler session without CUDA activity: attribution goes on
  int expected = kGpuActive;
  if (!gpuState_.compare_exchange_strong(expected, kGpuHandedOver, std::memory_order_acq_rel)) return;
  gpuSource_->handOver();
  std::string why = gpuSource_->takenOver();
  HOTKERNEL_LOG_ONCE(Warn, "cupti-handed-over") << "HOTKERNEL_CUPTI=1: " << why;
  std::lock_guard<std::mutex> guard(mu_);
  gpuTakenOver_ = std::move(why);
}

nlohmann::json Recorder::gpuTimeJsonLocked() const {
  const int state = gpuState_.load(std::memory_order_acquire);
  nlohmann::json j = {{"source", "cupti"}};
  if (state == kGpuPending || state == kGpuStarting) {
    j["state"] = "pending";
    j["detail"] = gpuStart_.detail;
    return j;
  }
  j["state"] = activityStartStateName(gpuStart_.state);
  if (!gpuStart_.detail.empty()) j["detail"] = gpuStart_.detail;
  if (gpuStart_.state != ActivityStartState::Started) return j;
  const GpuTimeLedger::Totals t = gpuLedger_->totals();
  j["kernel_ns"] = t.kernelNs;
  j["kernels"] = t.kernels;
  j["attributed_ns"] = t.attributedNs;
  j["dropped_records"] = t.droppedRecords;
  j["evicted"] = t.evicted;
  // Note [Launch API records only] (CuptiActivitySource.h): whether correlations come at all. Added keys
  // within version 3: every reader takes its keys by name and ignores others.
  j["api_records"] = t.apiRecords;
  j["correlations"] = t.correlations;
  if (!gpuTakenOver_.empty()) j["taken_over"] = gpuTakenOver_;
  return j;
}

nlohmann::json Recorder::profile() const {
  std::lock_guard<std::mutex> guard(mu_);
  // Note [GPU time in the profile]: the ledger's time per external id, summed per op and per variant.
  const bool withGpu = gpuSource_ != nullptr && gpuState_.load(std::memory_order_acquire) != kGpuPending &&
                       gpuStart_.state == ActivityStartState::Started;
  std::vector<uint64_t> opNs(withGpu ? ops_.size() : 0, 0);
  std::vector<uint64_t> variantNs(withGpu ? variants_.size() : 0, 0);
  if (withGpu) {
    for (const auto& [id, attributed] : gpuLedger_->byExternalId()) {
      const uint64_t op = (id & 0xffffffffu) - 1;
      const uint64_t variant = id >> 32;
      if (op < opNs.size()) opNs[op] += attributed.ns;
      if (variant != kNoVariant && variant - 1 < variantNs.size()) variantNs[variant - 1] += attributed.ns;
    }
  }
  auto addGpu = [this, withGpu](nlohmann::json& entry, uint64_t ns, uint64_t attributedCalls) {
    if (!withGpu) return;
    entry["gpu_ns"] = ns;
    entry["gpu_sampled_calls"] = attributedCalls;
    entry["estimated_gpu_ns"] = static_cast<double>(ns) / samplingProb_;
  };
  // Note [Deferred calls in the recorder]; keys added within version 3, present only when calls were deferred.
  auto addDeferred = [this](nlohmann::json& entry, uint64_t deferred) {
    if (deferred == 0) return;
    entry["deferred_calls"] = deferred;
    entry["estimated_deferred_calls"] = static_cast<double>(deferred) / samplingProb_;
  };
  std::vector<size_t> order(ops_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) {
    return ops_[a].sampled != ops_[b].sampled ? ops_[a].sampled > ops_[b].sampled : ops_[a].name < ops_[b].name;
  });
  nlohmann::json ops = nlohmann::json::array();
  for (size_t i : order) {
    const OpCount& op = ops_[i];
    nlohmann::json entry = {{"op", op.name},
                            {"sampled_calls", op.sampled},
                            {"estimated_calls", static_cast<double>(op.sampled) / samplingProb_}};
    addDeferred(entry, op.deferred);
    addGpu(entry, withGpu ? opNs[i] : 0, op.attributed);
    ops.push_back(std::move(entry));
  }
  nlohmann::json variants = nlohmann::json::array();
  for (size_t i = 0; i < variants_.size(); ++i) {
    const VariantCount& v = variants_[i];
    nlohmann::json entry = {{"op", v.op},
                            {"dtype", kernels::dtypeName(static_cast<kernels::DType>(v.key.dtype))},
                            {"device", v.key.device},
                            {"rows", v.key.rows},
                            {"cols", v.key.cols},
                            {"sampled_calls", v.sampled},
                            {"estimated_calls", static_cast<double>(v.sampled) / samplingProb_}};
    // Middle-dim reductions only (Note [Profile format] in Recorder.h).
    if (v.key.inner != 0) entry["inner"] = v.key.inner;
    // The whole key (Note [Profile format]): what the fields above cannot spell (group_norm's groups and HxW,
    // attention's extents and layouts) survives the file.
    entry["variant"] = kernels::variantString(v.key);
    // Norm variants only, and only when set (Note [Profile format] in Recorder.h).
    if (kernels::hasWeight(v.key)) entry["weight"] = true;
    if (kernels::hasBias(v.key)) entry["bias"] = true;
    if (kernels::reductionOf(v.key) >= 0) {
      entry["reduction"] = kernels::reductionName(static_cast<kernels::CrossEntropyReduction>(kernels::reductionOf(v.key)));
    }
    addDeferred(entry, v.deferred);
    addGpu(entry, withGpu ? variantNs[i] : 0, v.attributed);
    variants.push_back(std::move(entry));
  }
  nlohmann::json doc = {{"format", "hotkernel-profile"}, {"version", 3}, {"sampling_prob", samplingProb_},
                        {"ops", ops}, {"variants", variants}};
  if (gpuSource_ != nullptr) doc["gpu_time"] = gpuTimeJsonLocked();
  return doc;
}

double Recorder::estimatedCalls(const std::string& op, const VariantKey& key) const {
  std::lock_guard<std::mutex> guard(mu_);
  for (const VariantCount& v : variants_) {
    if (v.key == key && v.op == op) return static_cast<double>(v.sampled - v.deferred) / samplingProb_;
  }
  return 0.0;
}

bool Recorder::writeProfile(const std::string& path) const {
  try {
    flushGpuTime();
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
