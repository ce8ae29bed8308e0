// Chain fusion in a serving process (HOTKERNEL_FUSION=1, issue 20): the
// engine's side of the fusion engine (hotkernel/interpose/FusionEngine.h).
//
// Note [Fused chains in a serving process]
// startFusion installs the fusion engine's CUDA trampolines after the
// served ops' (so a served reduction stays served inside a chain that is
// not fused) and queues every chain the learner reports hot as an
// optimizer job (op "hotkernel::chain", the pattern's key). The job looks
// up the chain variant's entry (this process's cache, then the read-only
// tiers): a kernel entry becomes a plan at once (readChainEntry checks it
// against the chain: Note [Chain entry params, v2]); keep_aten leaves the
// chain unfused; with no entry the chain is tuned (tuneChain) and its
// decision stored. The variant carries the pattern's layout (strided and
// broadcast values: HF's rotary embedding, an attention mask shared by the
// heads), and so do its tuning (Note [Chain values in a layout]), entry,
// plan and launch guard; a kernel gets each input's
// own data pointer (a view's, not its storage's), and inputs may overlap
// (rotary's x and its halves). A plan is published to the fusion engine
// with the pattern just learned, so a later process fuses a chain after
// learning it again (hotCalls windows), without tuning. Patterns are not stored: the
// key of a chain entry is the chain and its extents, which several
// patterns (argument orders, live sets) may share.

#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAContext.h>

#include <memory>

#include "EngineFusion.h"
#include "EntryAdmission.h"
#include "StatusDocument.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/chain/ChainVariant.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/interpose/ChainCatalog.h"
#include "hotkernel/optimizer/ChainTuner.h"
#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/optimizer/TuneExperiments.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/ExitGate.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// A chain plan behind the fusion engine's launch interface.
class PlanKernel final : public fusion::FusedChainKernel {
 public:
  explicit PlanKernel(chain::ChainPlan plan) : plan_(std::move(plan)) {}

  bool launch(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
              c10::Stream stream) noexcept override {
    try {
      std::vector<chain::ChainInputValue> in;
      in.reserve(inputs.size());
      for (const at::Tensor& t : inputs) {
        chain::ChainInputValue v;
        v.pointer = t.const_data_ptr();
        in.push_back(v);
      }
      std::vector<void*> out;
      out.reserve(outputs.size());
      for (const at::Tensor& t : outputs) out.push_back(t.mutable_data_ptr());
      const cudaStream_t s = c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream).stream();
      std::string refusal;
      if (chain::launchChainPlan(plan_, in, out, s, &refusal)) return true;
      HOTKERNEL_LOG_ONCE(Warn, "chain-launch-refused:" + plan_.description)
          << "fusion: " << plan_.description << " refused a launch (" << refusal << "); the chain runs unfused";
    } catch (const std::exception& e) {
      HOTKERNEL_LOG_ONCE(Warn, "chain-launch-refused:" + plan_.description)
          << "fusion: " << plan_.description << " could not launch (" << e.what() << "); the chain runs unfused";
    } catch (...) {
    }
    return false;
  }
  std::string describe() const override { return plan_.description; }

 private:
  chain::ChainPlan plan_;
};

void publishPlan(const fusion::HotChain& hot, chain::ChainPlan plan) {
  fusion::FusionEngine* fusion = fusion::FusionEngine::process();
  if (fusion == nullptr) return;
  const std::string description = plan.description;
  fusion->publish(fusion::ReadyChain{hot.pattern, hot.build, engine::makePlanKernel(std::move(plan)), hot.key});
  HOTKERNEL_LOG(Info) << "fusion: chain of " << hot.pattern.calls.size() << " calls served by " << description;
}

}  // namespace

namespace engine {

chain::ChainVariant chainVariantOf(const fusion::HotChain& hot) {
  chain::ChainVariant v;
  v.ir = hot.build.chain;
  v.rows = hot.build.rows;
  v.cols = hot.build.cols;
  v.device = hot.device;
  v.layout = hot.build.layout;
  return v;
}

std::shared_ptr<fusion::FusedChainKernel> makePlanKernel(chain::ChainPlan plan) {
  return std::make_shared<PlanKernel>(std::move(plan));
}

bool cudaStreamIdle(const c10::Stream& stream) {
  // Note [Idle streams]: cudaStreamQuery, not a wait; any error counts as busy (the chain defers as before).
  try {
    return c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream).query();
  } catch (...) {
    return false;
  }
}

}  // namespace engine

void Engine::startFusion() {
  fusion::FusionOptions options{config().hotCalls, true};
  options.evalBatchNorm = config().fusionBatchNorm;
  options.inPlace = config().fusionInPlace;
  options.passConvolutions = config().fusionPassConvolutions;
  fusion::FusionEngine* fusion = fusion::FusionEngine::installWithShim(options);
  fusion->setHotCallback([this](const fusion::HotChain& hot) { onHotChain(hot); });
  if (config().fusionStartBusy) fusion->setStreamProbe(&engine::cudaStreamIdle);
  fusion->install(c10::DispatchKey::CUDA);
}

void Engine::onHotChain(const fusion::HotChain& hot) {
  // Under the fusion engine's lock: only queue (Note [The fusion engine's lock]).
  if (hot.device < 0) return;
  if (!config().optimize && !cache_ && readTiers_.empty()) return;
  if (!worker_ || forkedChild_.load() || ExitGate::process().exiting()) return;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (hotChains_.count(hot.key)) return;
    hotChains_[hot.key] = std::make_shared<const fusion::HotChain>(hot);
  }
  OptimizerJob job;
  job.op = chain::kChainOp;
  job.key.device = hot.device;
  job.chain = hot.key;
  if (worker_->enqueue(job)) {
    HOTKERNEL_LOG(Info) << "queued a chain of " << hot.pattern.calls.size() << " calls ("
                        << hot.build.rows << "x" << hot.build.cols << ") for fusion";
  }
}

void Engine::optimizeChain(const OptimizerJob& job) {
  std::shared_ptr<const fusion::HotChain> hot;
  {
    std::lock_guard<std::mutex> guard(mu_);
    auto it = hotChains_.find(job.chain);
    if (it == hotChains_.end()) return;
    hot = it->second;
  }
  ensureDevice(job.key.device);
  const chain::ChainVariant v = engine::chainVariantOf(*hot);
  const std::string variant = chain::chainVariantString(v);
  const std::optional<Fingerprint> fingerprint = fingerprints_.of(v.device);
  HOTKERNEL_CHECK(fingerprint.has_value(), "device ", v.device, " has no fingerprint (it could not be queried)");
  const std::string fingerprintKey = fingerprint->key();
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (decisions_.count(decisionKey(chain::kChainOp, variant))) return;  // another pattern of the same chain
  }
  // A decision cached by this or an earlier process.
  std::optional<cache::Entry> cached;
  if (!forkedChild_.load()) {
    if (cache_) cached = cache_->get(fingerprintKey, chain::kChainOp, variant);
    for (size_t i = 0; !cached && i < readTiers_.size(); ++i) {
      cached = readTiers_[i]->get(fingerprintKey, chain::kChainOp, variant);
    }
  }
  // A cached kernel that keeps float32 intermediates, in a process that asks for eager's rounding: tuned again
  // (Note [Eager rounding on request] in hotkernel/chain/ChainParameterSpace.h).
  std::optional<chain::ChainPlan> cachedPlan;
  if (cached && cached->decision == cache::kDecisionKernel && cached->family == chain::kChainFamily) {
    try {
      cachedPlan = chain::makeChainPlan(v, cached->params, cached->cubin);
    } catch (const std::exception& e) {
      HOTKERNEL_LOG_ONCE(Warn, "bad-chain-entry:" + variant)
          << "cached chain kernel " << variant << " refused (" << e.what() << "); the chain runs unfused";
    }
    if (cachedPlan && !chain::chainParamsRoundAsAsked(v.ir, cachedPlan->params, config().fusionEagerRounding)) {
      HOTKERNEL_LOG_ONCE(Info, "chain-entry-rounding:" + variant)
          << "cached chain kernel " << variant << " keeps float32 intermediates; HOTKERNEL_FUSION_ROUNDING=eager "
          << "tunes it again";
      cached.reset();
      cachedPlan.reset();
    }
  }
  if (cached) {
    {
      std::lock_guard<std::mutex> guard(mu_);
      addDecisionLocked(chain::kChainOp, variant);
    }
    if (cached->decision != cache::kDecisionKernel) return;
    if (cached->family != chain::kChainFamily) {
      HOTKERNEL_LOG_ONCE(Warn, "refused-chain-entry:" + variant)
          << "cached chain entry " << variant << " of family '" << cached->family << "' refused";
      return;
    }
    if (cachedPlan) publishPlan(*hot, std::move(*cachedPlan));
    return;
  }
  if (!config().optimize) return;
  TunerOptions options;
  options.yieldPoint = [this] { return yieldToServing(); };
  options.chainEagerRounding = config().fusionEagerRounding;
  options.memoryCapBytes = config().optimizerMemoryMb > 0
                               ? config().optimizerMemoryMb << 20
                               : static_cast<int64_t>(at::cuda::getDeviceProperties(v.device)->totalGlobalMem / 4);
  TuneOutcome out;
  try {
    out = tuneChain(v, options);
  } catch (const std::exception& e) {
    if (stopping_.load()) throw;
    // A chain the tuner cannot take (over the memory cap, no point serves it): unfused, and said once.
    HOTKERNEL_LOG(Info) << "fusion: chain " << variant << " not tuned: " << e.what();
    std::lock_guard<std::mutex> guard(mu_);
    addDecisionLocked(chain::kChainOp, variant);
    return;
  }
  const cache::Entry entry = chainResultEntry(fingerprints_, v, out);
  {
    ExperimentLog log(config().cacheDir);
    for (const Experiment& e : tuneExperiments(fingerprintKey, chain::kChainOp, variant, out)) log.append(e);
  }
  {
    std::lock_guard<std::mutex> guard(mu_);
    addDecisionLocked(chain::kChainOp, variant);
    tuneLog_.push_back({{"op", chain::kChainOp}, {"variant", variant}, {"decision", entry.decision},
                        {"metrics", out.metrics.toJson()}});
  }
  if (cache_ && !forkedChild_.load()) {
    try {
      cache_->put(entry);
    } catch (const std::exception& e) {
      HOTKERNEL_LOG(Warn) << "cannot store the chain result " << variant << " in the cache: " << e.what();
    }
  }
  if (!out.accepted) {
    HOTKERNEL_LOG(Info) << "fusion: chain " << variant << " stays unfused: no candidate was correct and faster";
    return;
  }
  publishPlan(*hot, chain::makeChainPlan(v, out.paramsJson.dump(), out.cubin));
}

nlohmann::json Engine::fusionStatus() {
  fusion::FusionEngine* fusion = fusion::FusionEngine::process();
  if (fusion == nullptr) return {{"on", false}};
  return engine::fusionStatusDocument(fusion->enabled(), fusion->stats(),
                                      nlohmann::json::parse(fusion->patternsJson()));
}

}  // namespace hotkernel
