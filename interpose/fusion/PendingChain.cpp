#include "PendingChain.h"

#include <ATen/ops/empty_strided.h>
#include <ATen/record_function.h>
#include <c10/core/StreamGuard.h>

#include <algorithm>
#include <limits>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion {

void PendingChain::restart(std::shared_ptr<const ChainCatalog> catalog, c10::Device device, c10::Stream stream,
                           c10::DispatchKey backend, bool poison) {
  HOTKERNEL_INTERNAL_ASSERT(empty(), "restarting a chain that pends");
  reset();  // what a take that threw left (values it numbered before it threw)
  catalog_ = std::move(catalog);
  device_ = device;
  stream_ = stream;
  backend_ = backend;
  poison_ = poison;
  lastFusedKey_ = nullptr;
  lastUnfusedWhy_.clear();
  lastRefusedKey_.clear();
}

std::optional<std::vector<at::Tensor>> PendingChain::take(const ResolvedOp& op,
                                                          c10::ArrayRef<c10::IValue> args) {
  const size_t mark = values_.size();
  chain::RecordedCall call;
  call.op = op.qualified;
  if (!captureArgs(args, device_, values_, call).empty()) {
    values_.truncate(mark);
    return std::nullopt;
  }
  const size_t step = calls_.size();
  static const std::vector<size_t> kNone;
  const std::vector<size_t>* from = &candidates_;
  if (step == 0) {
    const std::vector<size_t>* starting = catalog_->startingWith(headDigest(call, values_.metas()));
    from = starting != nullptr ? starting : &kNone;
  }
  // The outputs' ids are the next ones (Note [Chain patterns]); their
  // metadata is the first candidate's whose step has this op and arguments
  // (the model's): the arguments' metadata is the table's, the outputs' the
  // model's.
  std::vector<size_t>& next = next_;
  next.clear();
  const chain::RecordedCall* model = nullptr;
  const chain::TensorMetas* modelMetas = nullptr;
  for (size_t index : *from) {
    const ReadyChain& c = catalog_->chains()[index];
    if (c.pattern.calls.size() <= step) continue;
    const chain::RecordedCall& want = c.pattern.calls[step];
    if (model == nullptr) {
      if (want.op != call.op || want.outputs.empty()) continue;
      call.outputs.clear();
      bool numbered = true;
      for (size_t k = 0; k < want.outputs.size(); ++k) {
        const int64_t id = static_cast<int64_t>(values_.size() + k);
        numbered = numbered && want.outputs[k] == id && c.pattern.metas.count(id) != 0;
        call.outputs.push_back(id);
      }
      if (!numbered) continue;
      if (!chain::sameStep(call, values_.metas(), c.pattern.metas, want, c.pattern.metas)) continue;
      model = &want;
      modelMetas = &c.pattern.metas;
    } else if (!chain::sameStep(call, values_.metas(), *modelMetas, want, c.pattern.metas)) {
      continue;
    }
    next.push_back(index);
  }
  if (next.empty()) {
    values_.truncate(mark);
    return std::nullopt;
  }
  std::vector<at::Tensor> outputs;
  for (int64_t id : call.outputs) {
    if (op.inPlace) {  // Note [In-place steps in the table]: the result is the caller's tensor, which it wrote
      const bool onTensor = !call.args.empty() && call.args[0].kind == chain::RecordedArg::Kind::Tensor;
      if (!onTensor || values_.addInPlace(args[0].toTensor(), call.args[0].value) != id) {
        values_.truncate(mark);
        return std::nullopt;
      }
      outputs.push_back(args[0].toTensor());
      continue;
    }
    const chain::TensorMeta& m = modelMetas->at(id);
    std::optional<c10::ScalarType> type = scalarTypeOf(m.scalarType);
    if (!type) {
      values_.truncate(mark);
      return std::nullopt;
    }
    at::Tensor out = at::empty_strided(m.sizes, m.strides, at::TensorOptions().dtype(*type).device(device_));
    if (poison_) out.fill_(std::numeric_limits<double>::quiet_NaN());
    const int64_t added = values_.add(out, /*produced=*/true);
    HOTKERNEL_INTERNAL_ASSERT(added == id, "output numbered ", added, " where the pattern has ", id);
    outputs.push_back(std::move(out));
  }
  Deferred d{&op, args.vec(), {}};
  for (size_t k = 0; k < call.args.size() && k < d.args.size(); ++k) {
    const chain::RecordedArg& a = call.args[k];
    if (a.kind == chain::RecordedArg::Kind::Tensor) {
      d.args[k] = values_.taken(a.value);
    } else if (a.kind == chain::RecordedArg::Kind::TensorList) {
      // A new list: the caller's may change, and its tensors are the caller's TensorImpls.
      std::vector<at::Tensor> list;
      for (int64_t id : a.ints) list.push_back(values_.taken(id));
      d.args[k] = c10::IValue(std::move(list));
    }
  }
  for (int64_t id : call.outputs) d.outputs.push_back(values_.taken(id));
  candidates_.swap(next);
  calls_.push_back(std::move(call));
  deferred_.push_back(std::move(d));
  return outputs;
}

const ReadyChain* PendingChain::fusedCandidate(std::string& why) const {
  // The chain's own references are to its values as taken, not the caller's TensorImpls.
  std::vector<int64_t> live;
  for (const chain::RecordedCall& c : calls_) {
    for (int64_t out : c.outputs) {
      if (values_.referencedElsewhere(out)) live.push_back(out);
    }
  }
  const ReadyChain* best = nullptr;
  // Why none fused, kept as the first failing candidate and worded only then (a flush is on the hot path).
  const ReadyChain* noKernel = nullptr;
  const ReadyChain* notWriting = nullptr;
  int64_t unwritten = -1;
  for (size_t index : candidates_) {
    const ReadyChain& c = catalog_->chains()[index];
    if (c.pattern.calls.size() != calls_.size()) continue;
    if (!c.kernel) {
      if (noKernel == nullptr) noKernel = &c;
      continue;
    }
    const std::vector<int64_t>& writes = c.build.outputValues;
    auto uncovered = std::find_if(live.begin(), live.end(), [&](int64_t v) {
      return std::find(writes.begin(), writes.end(), v) == writes.end();
    });
    if (uncovered != live.end()) {
      if (notWriting == nullptr) {
        notWriting = &c;
        unwritten = *uncovered;
      }
      continue;
    }
    if (best == nullptr || writes.size() < best->build.outputValues.size()) best = &c;
  }
  if (best != nullptr) {
    why.clear();
  } else if (notWriting != nullptr) {
    why = "value %" + std::to_string(unwritten) + " is still referenced elsewhere and chain " +
          notWriting->key.substr(0, 16) + "'s kernel does not write it";
  } else if (noKernel != nullptr) {
    why = "chain " + noKernel->key.substr(0, 16) + " has no kernel";
  } else {
    why = "no ready chain has exactly the " + std::to_string(calls_.size()) + " calls taken";
  }
  return best;
}

bool PendingChain::replay() noexcept {
  size_t i = 0;
  try {
    for (; i < deferred_.size(); ++i) {
      Deferred& d = deferred_[i];
      if (d.op->inPlace) {  // Note [Replaying a deferred call]: itself, on the value as taken
        torch::jit::Stack stack = d.args;
        d.op->op->redispatchBoxed(c10::DispatchKeySet(backend_), &stack);
      } else if (d.op->out) {
        torch::jit::Stack stack = d.args;
        for (const at::Tensor& out : d.outputs) stack.emplace_back(out);  // out= takes every result, in order
        d.op->out->redispatchBoxed(c10::DispatchKeySet(backend_), &stack);
      } else {
        d.outputs.at(0).copy_(d.args.at(0).toTensor());
      }
    }
    return true;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG(Error) << "fusion: replaying " << deferred_[i].op->qualified
                         << " of a deferred chain failed; its outputs and the later ones are not computed: "
                         << e.what();
  } catch (...) {
    HOTKERNEL_LOG(Error) << "fusion: replaying a deferred chain failed with an unknown error";
  }
  return false;
}

// Note [Flushes in the profiler]
// A chain is flushed inside whatever call triggers it (the next matmul, a
// copy to the host), so a profiler charges its kernels to that call. The
// launch runs in a user scope named hotkernel::fused_chain and a replay in
// hotkernel::unfused_chain, so that the triggering call keeps only its own
// kernels' time (torch.profiler's op table leaves the chain's kernels
// unattributed; its kernel view names them hk_chain). The recorder's
// sampled callback watches these scopes too (Note [Hotkernel's scopes in the
// profile]); a scope costs tens of nanoseconds, once a chain.
PendingChain::Flush PendingChain::flush() noexcept {
  lastUnfusedWhy_.clear();
  lastRefusedKey_.clear();
  if (calls_.empty()) return Flush::Unfused;
  Flush result = Flush::Unfused;
  try {
    c10::StreamGuard guard(stream_);
    const ReadyChain* fused = fusedCandidate(lastUnfusedWhy_);
    bool launched = false;
    if (fused != nullptr) {
      std::vector<at::Tensor> inputs;
      std::vector<at::Tensor> outputs;
      for (int64_t v : fused->build.inputValues) inputs.push_back(values_.taken(v));
      for (int64_t v : fused->build.outputValues) outputs.push_back(values_.taken(v));
      RECORD_USER_SCOPE("hotkernel::fused_chain");  // Note [Flushes in the profiler]
      launched = fused->kernel->launch(inputs, outputs, stream_);
      if (launched) {
        lastFusedKey_ = &fused->key;
      } else {
        lastUnfusedWhy_ = "the fused kernel " + fused->kernel->describe() + " did not launch";
        lastRefusedKey_ = fused->key;
      }
    }
    if (launched) {
      result = Flush::Fused;
    } else {
      RECORD_USER_SCOPE("hotkernel::unfused_chain");
      result = replay() ? Flush::Unfused : Flush::Failed;
    }
  } catch (const std::exception& e) {
    HOTKERNEL_LOG(Error) << "fusion: flushing a deferred chain failed: " << e.what();
    result = Flush::Failed;
  } catch (...) {
    result = Flush::Failed;
  }
  reset();
  return result;
}

void PendingChain::reset() {
  deferred_.clear();
  calls_.clear();
  candidates_.clear();
  values_.clear();
}

}  // namespace hotkernel::fusion
