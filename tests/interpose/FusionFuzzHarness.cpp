#include "FusionFuzzHarness.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "../ChainLaidOutRows.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/interpose/FusionBypass.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion::fuzz {
namespace {

thread_local int tOwnDepth = 0;
thread_local int tStream = 0;
std::atomic<c10::DeviceType> gDevice{c10::DeviceType::CPU};

const c10::impl::DeviceGuardImplInterface* cudaGuard() { return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA); }

// Device 0's default stream and two of its pool (Note [The fuzz suite on a GPU]).
const std::vector<c10::Stream>& cudaStreams() {
  static const std::vector<c10::Stream> streams = [] {
    const c10::Device d(c10::DeviceType::CUDA, 0);
    std::vector<c10::Stream> out{cudaGuard()->getDefaultStream(d)};
    while (static_cast<int>(out.size()) < kFuzzStreams) {
      const c10::Stream s = cudaGuard()->getStreamFromGlobalPool(d);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
  }();
  return streams;
}

class CpuStreamGuard final : public c10::impl::NoOpDeviceGuardImpl<c10::DeviceType::CPU> {
 public:
  c10::Stream getStream(c10::Device) const noexcept override { return streamOf(tStream); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    const c10::Stream previous = streamOf(tStream);
    tStream = static_cast<int>(s.id());
    return previous;
  }

 private:
  static c10::Stream streamOf(int id) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CPU, -1), static_cast<c10::StreamId>(id));
  }
};

c10::ScalarType scalarTypeNamed(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "float16") return at::kHalf;
  if (name == "bfloat16") return at::kBFloat16;
  throw std::runtime_error("fuzz kernel: no dtype " + name);
}

// `t`'s memory read as the pattern's value `meta` (what a kernel given its pointer sees).
at::Tensor asPattern(const at::Tensor& t, const chain::TensorMeta& meta) {
  return at::from_blob(t.data_ptr(), meta.sizes, meta.strides, at::TensorOptions().dtype(scalarTypeNamed(meta.scalarType)));
}


class KernelBase : public FusedChainKernel {
 public:
  KernelBase(const HotChain& chain, LaunchLog& log, bool skipLast)
      : pattern_(chain.pattern), build_(chain.build), log_(log), skipLast_(skipLast) {}

  bool launch(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
              c10::Stream stream) noexcept override {
    try {
      if (inputs.size() != build_.inputValues.size() || outputs.size() != build_.outputValues.size()) return false;
      std::vector<double> gaps(outputs.size(), 0.0);
      std::vector<at::Tensor> results = compute(inputs, gaps);
      log_.launched(fusedArithmetic());
      const size_t written = skipLast_ && !outputs.empty() ? outputs.size() - 1 : outputs.size();
      for (size_t k = 0; k < written; ++k) {
        asPattern(outputs[k], pattern_.metas.at(build_.outputValues[k])).copy_(results[k]);
        log_.wrote(outputs[k], fuzzStreamId(stream), std::max(tolerance(), gaps[k] > 0 ? 1.25 * gaps[k] + 1.0 / 256 : 0.0));
      }
      return true;
    } catch (...) {
      return false;
    }
  }

 protected:
  // The outputs; `gaps[k]` (zeros on entry) may say how far the chain's own arithmetic moves output k
  // from eager's on these inputs (Note [A launch's own tolerance]).
  virtual std::vector<at::Tensor> compute(const std::vector<at::Tensor>& inputs, std::vector<double>& gaps) = 0;
  virtual bool fusedArithmetic() const = 0;
  // Note [Interpreter modes tolerance]: 2^-4 relative with a 16-bit value in the chain; float32
  // chains differ from the CPU's ATen only by its transcendental functions and summation order.
  //
  // Note [A launch's own tolerance]
  // The chain's bound is relative to the result, which a sum of signed
  // terms can make small while eager's roundings of the terms (each within
  // 2^-9 of a bf16 term, never made by the fused kernel) add up: a row sum
  // of 64 products of values up to 4 moves by ~0.07 where the sum itself is
  // near 0, beyond 2^-4 (1 + |sum|). The interpreter kernel therefore also
  // runs the launch's inputs in AtenOrder mode and takes as the launch's
  // tolerance the larger of the chain's bound and the two modes' largest
  // gap on each output (with a margin for the CPU's own transcendental
  // functions and sum order against the interpreter's). A wrong dataflow
  // (an input read unwritten, a wrong value read) is still caught: the
  // fused value then differs from eager's by what the wrong input makes,
  // while the two modes of the same wrong input stay close.
  double tolerance() const {
    if (!fusedArithmetic()) return 0;
    for (const auto& [id, meta] : pattern_.metas) {
      if (meta.scalarType != "float32") return 1.0 / 16;
    }
    return 1e-4;
  }

  chain::ChainPattern pattern_;
  chain::ChainBuild build_;
  LaunchLog& log_;
  bool skipLast_;
};

class InterpreterKernel final : public KernelBase {
 public:
  using KernelBase::KernelBase;
  std::string describe() const override { return "interpreter"; }

 protected:
  bool fusedArithmetic() const override { return true; }
  std::vector<at::Tensor> compute(const std::vector<at::Tensor>& inputs, std::vector<double>& gaps) override {
    // A full input is its memory from its pointer over the span its layout reaches (Note [Chain layouts]),
    // as the generated kernel reads it; the other classes are their values.
    std::vector<std::vector<float>> in;
    const std::vector<int> nodes = build_.chain.inputs();
    size_t tensorArg = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const chain::TensorMeta& meta = pattern_.metas.at(build_.inputValues[k]);
      const chain::ShapeClass shape = build_.chain.node(nodes[k]).shape;
      at::Tensor f;
      if (shape == chain::ShapeClass::Full) {
        const int64_t span = chain::layoutSpan(build_.chain, build_.layout, tensorArg, build_.rows, build_.cols);
        f = at::from_blob(inputs[k].data_ptr(), {span}, at::TensorOptions().dtype(scalarTypeNamed(meta.scalarType)))
                .to(at::kFloat);
      } else {
        f = asPattern(inputs[k], meta).to(at::kFloat).contiguous();
      }
      if (shape != chain::ShapeClass::Scalar) ++tensorArg;
      in.emplace_back(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
    }
    auto out = chain::interpretChain(build_.chain, build_.rows, build_.cols, build_.layout, in,
                                     chain::EvalMode::Fused);
    // Note [A launch's own tolerance]
    const auto eagerOrder = chain::interpretChain(build_.chain, build_.rows, build_.cols, build_.layout, in,
                                                  chain::EvalMode::AtenOrder);
    for (size_t k = 0; k < out.size() && k < gaps.size(); ++k) {
      for (size_t i = 0; i < out[k].size(); ++i) {
        const double f = out[k][i], a = eagerOrder[k][i];
        if (std::isfinite(f) && std::isfinite(a)) gaps[k] = std::max(gaps[k], std::abs(f - a) / (std::abs(a) + 1));
      }
    }
    std::vector<at::Tensor> results;
    const std::vector<int> outNodes = build_.chain.outputs();
    for (size_t k = 0; k < out.size(); ++k) {
      const chain::TensorMeta& m = pattern_.metas.at(build_.outputValues[k]);
      const chain::Node& n = build_.chain.node(outNodes[k]);
      at::Tensor f;
      if (n.shape == chain::ShapeClass::Full && !build_.layout.contiguous()) {
        // As a kernel writes it: the interpreter's rows are in the layout's row order, which need not be the
        // value's (a permuted input's transposed copy: Note [Transposed layouts]).
        f = chain::testutil::laidOutValue(build_.chain, build_.layout, tensorArg + k, build_.rows, build_.cols,
                                          chain::extentOf(n, build_.cols), out[k], m.sizes, m.strides);
      } else {
        f = at::from_blob(out[k].data(), {static_cast<int64_t>(out[k].size())}, at::kFloat).view(m.sizes);
      }
      results.push_back(f.to(scalarTypeNamed(m.scalarType), false, /*copy=*/true));  // out[k] dies here
    }
    return results;
  }
};

// A recorded argument as the schema's type wants it.
c10::IValue argumentValue(const chain::RecordedArg& a, const c10::TypePtr& declared,
                          const std::map<int64_t, at::Tensor>& values) {
  c10::TypePtr type = declared;
  if (auto opt = type->cast<c10::OptionalType>()) {
    if (a.kind == chain::RecordedArg::Kind::None) return c10::IValue();
    type = opt->getElementType();
  }
  using Kind = chain::RecordedArg::Kind;
  switch (a.kind) {
    case Kind::None: return c10::IValue();
    case Kind::Tensor: return values.at(a.value);
    case Kind::Bool: return c10::IValue(a.flag);
    case Kind::IntList: return c10::IValue(a.ints);
    case Kind::TensorList: {
      std::vector<at::Tensor> list;
      for (int64_t id : a.ints) list.push_back(values.at(id));
      return c10::IValue(list);
    }
    case Kind::String:
      if (type->kind() == c10::TypeKind::DeviceObjType) return c10::IValue(c10::Device(a.text));
      return c10::IValue(a.text);
    case Kind::Scalar:
      if (type->kind() == c10::TypeKind::TensorType) {
        at::Tensor wrapped = at::scalar_tensor(a.scalar, at::kDouble);
        wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
        return wrapped;
      }
      if (type->kind() == c10::TypeKind::FloatType || type->kind() == c10::TypeKind::NumberType) {
        return c10::IValue(a.scalar);
      }
      return c10::IValue(static_cast<int64_t>(a.scalar));
  }
  return c10::IValue();
}

class ExactKernel final : public KernelBase {
 public:
  using KernelBase::KernelBase;
  std::string describe() const override { return "exact"; }

 protected:
  bool fusedArithmetic() const override { return false; }
  std::vector<at::Tensor> compute(const std::vector<at::Tensor>& inputs, std::vector<double>&) override {
    std::map<int64_t, at::Tensor> values;
    for (size_t k = 0; k < inputs.size(); ++k) {
      values[build_.inputValues[k]] = asPattern(inputs[k], pattern_.metas.at(build_.inputValues[k]));
    }
    // The calls the outputs need, walking back from them.
    std::set<int64_t> needed(build_.outputValues.begin(), build_.outputValues.end());
    std::vector<bool> run(pattern_.calls.size(), false);
    for (size_t i = pattern_.calls.size(); i-- > 0;) {
      const chain::RecordedCall& c = pattern_.calls[i];
      for (int64_t o : c.outputs) run[i] = run[i] || needed.count(o) != 0;
      if (!run[i]) continue;
      for (const chain::RecordedArg& a : c.args) {
        if (a.kind == chain::RecordedArg::Kind::Tensor) needed.insert(a.value);
      }
    }
    auto& dispatcher = c10::Dispatcher::singleton();
    for (size_t i = 0; i < pattern_.calls.size(); ++i) {
      if (!run[i]) continue;
      const chain::RecordedCall& c = pattern_.calls[i];
      const size_t dot = c.op.find('.');
      const std::string name = c.op.substr(0, dot);
      const std::string overload = dot == std::string::npos ? "" : c.op.substr(dot + 1);
      auto op = dispatcher.findSchema({name, overload});
      if (!op) throw std::runtime_error("fuzz kernel: no op " + c.op);
      const auto& schema = op->schema().arguments();
      torch::jit::Stack stack;
      for (size_t k = 0; k < schema.size(); ++k) {
        if (k < c.args.size()) {
          stack.push_back(argumentValue(c.args[k], schema[k].type(), values));
        } else {
          stack.push_back(*schema[k].default_value());
        }
      }
      op->callBoxed(&stack);
      for (size_t k = 0; k < c.outputs.size(); ++k) values[c.outputs[k]] = stack.at(k).toTensor();
    }
    std::vector<at::Tensor> results;
    for (int64_t v : build_.outputValues) results.push_back(values.at(v));
    return results;
  }
};

class LoggedKernel final : public FusedChainKernel {
 public:
  LoggedKernel(std::shared_ptr<FusedChainKernel> inner, LaunchLog& log, double tolerance)
      : inner_(std::move(inner)), log_(log), tolerance_(tolerance) {}
  bool launch(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
              c10::Stream stream) noexcept override {
    if (!inner_->launch(inputs, outputs, stream)) {
      HOTKERNEL_LOG(Debug) << "fuzz: " << inner_->describe() << " refused a launch";
      return false;
    }
    try {
      if (logLevel() >= LogLevel::Debug) {
        std::ostringstream s;
        for (const at::Tensor& o : outputs) s << " " << o.storage().unsafeGetStorageImpl() << "@" << o.data_ptr();
        HOTKERNEL_LOG(Debug) << "fuzz: " << inner_->describe() << " launched, writing" << s.str();
      }
      log_.launchedOnDevice();
      for (const at::Tensor& o : outputs) log_.wrote(o, fuzzStreamId(stream), tolerance_);
    } catch (...) {
    }
    return true;
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::shared_ptr<FusedChainKernel> inner_;
  LaunchLog& log_;
  double tolerance_;
};

}  // namespace

namespace {
FuzzGate* gFuzzGate = nullptr;
std::atomic<bool> gUnderShim{false};  // Note [The fuzz suite under the shim]

// A real CUDA command of `kind` on this thread's current stream (Note [The fuzz suite under the shim]).
void realCommand(CommandKind kind) {
  const c10::Device d(fuzzDevice(), 0);
  // This thread's scratch values, leaked: threads may outlive the CUDA context at exit.
  thread_local at::Tensor* a = new at::Tensor(at::zeros({64}, at::TensorOptions().device(d).dtype(at::kFloat)));
  thread_local at::Tensor* b = new at::Tensor(at::zeros({64}, at::TensorOptions().device(d).dtype(at::kFloat)));
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(d.type())->getStream(d);
  switch (kind) {
    case CommandKind::Launch: a->fill_(1.0); break;
    case CommandKind::Copy: b->copy_(*a); break;
    case CommandKind::EventRecord: {
      c10::Event e(d.type());
      e.record(stream);
      break;
    }
    case CommandKind::StreamWait: {
      c10::Event e(d.type());
      e.record(stream);
      e.block(stream);
      break;
    }
    case CommandKind::Synchronize: {
      c10::Event e(d.type());
      e.record(stream);
      e.synchronize();
      break;
    }
  }
}
}  // namespace

bool FuzzGate::covers() { return shim_ ? shim_->covers() : true; }

void FuzzGate::setFlushHook(FlushHook h) {
  hook_.store(h);
  if (shim_) shim_->setFlushHook(h ? &FuzzGate::countingHook : nullptr);
}

void FuzzGate::countingHook(int kind) {
  FuzzGate* g = gFuzzGate;
  if (g == nullptr) return;
  g->hooksFired_.fetch_add(1);
  if (FlushHook h = g->hook_.load()) h(kind);
}

void FuzzGate::setPending(int count) {
  pending_.store(count);
  if (shim_) shim_->setPending(count);
}

void FuzzGate::enterOwn() {
  ++tOwnDepth;
  if (shim_) shim_->enterOwn();
}

void FuzzGate::leaveOwn() {
  --tOwnDepth;
  if (shim_) shim_->leaveOwn();
}

bool setFuzzShim() {
  if (fuzzDevice() == c10::DeviceType::CPU || !shimCommandGate()->covers()) return false;
  gUnderShim.store(true);
  return true;
}

bool fuzzUnderShim() { return gUnderShim.load(); }

void FuzzGate::command(CommandKind kind) {
  if (shim_) {
    realCommand(kind);
    return;
  }
  if (pending_.load() == 0 || tOwnDepth > 0) return;
  FlushHook h = hook_.load();
  if (h == nullptr) return;
  hooksFired_.fetch_add(1);
  h(static_cast<int>(kind));
}

void installCpuStreams() {
  static const bool installed = [] {
    static CpuStreamGuard guard;  // the registry holds it for the process
    c10::impl::DeviceGuardImplRegistrar registrar(c10::DeviceType::CPU, &guard);
    return true;
  }();
  (void)installed;
}

void setFuzzDevice(c10::DeviceType type) { gDevice.store(type); }
c10::DeviceType fuzzDevice() { return gDevice.load(); }

int currentFuzzStream() {
  if (fuzzDevice() == c10::DeviceType::CPU) return tStream;
  return fuzzStreamId(cudaGuard()->getStream(c10::Device(c10::DeviceType::CUDA, 0)));
}

void setCurrentFuzzStream(int id) {
  if (fuzzDevice() == c10::DeviceType::CPU) {
    tStream = id;
    return;
  }
  cudaGuard()->exchangeStream(cudaStreams().at(static_cast<size_t>(id)));
}

int fuzzStreamId(const c10::Stream& s) {
  if (s.device_type() == c10::DeviceType::CPU) return static_cast<int>(s.id());
  const std::vector<c10::Stream>& all = cudaStreams();
  const auto it = std::find(all.begin(), all.end(), s);
  return it == all.end() ? -1 : static_cast<int>(it - all.begin());
}

void synchronizeFuzzStreams() {
  if (fuzzDevice() == c10::DeviceType::CPU) return;
  for (const c10::Stream& s : cudaStreams()) {
    c10::Event done(c10::DeviceType::CUDA);
    done.record(s);
    done.synchronize();
  }
}

void orderedSwitch(int id) {
  if (fuzzDevice() == c10::DeviceType::CPU) {
    tStream = id;
    return;
  }
  const c10::Stream from = cudaGuard()->getStream(c10::Device(c10::DeviceType::CUDA, 0));
  const c10::Stream to = cudaStreams().at(static_cast<size_t>(id));
  if (from == to) return;
  c10::Event done(c10::DeviceType::CUDA);
  done.record(from);
  cudaGuard()->exchangeStream(to);
  done.block(to);
}

void LaunchLog::wrote(const at::Tensor& t, int stream, double tolerance) {
  std::lock_guard<std::mutex> guard(mu_);
  std::vector<Write>& writes = writes_[t.storage().unsafeGetStorageImpl()];
  if (writes.empty()) pins_.push_back(t.storage().getWeakStorageImpl());
  writes.push_back(Write{stream, tolerance});
}

void LaunchLog::launched(bool fusedArithmetic) {
  (fusedArithmetic ? interpreterLaunches_ : exactLaunches_).fetch_add(1);
}

std::vector<LaunchLog::Write> LaunchLog::written(const c10::StorageImpl* storage) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = writes_.find(storage);
  return it == writes_.end() ? std::vector<Write>{} : it->second;
}

void LaunchLog::clear() {
  std::lock_guard<std::mutex> guard(mu_);
  writes_.clear();
  pins_.clear();
}

std::shared_ptr<FusedChainKernel> makeInterpreterKernel(const HotChain& chain, LaunchLog& log, bool skipLastOutput) {
  return std::make_shared<InterpreterKernel>(chain, log, skipLastOutput);
}

std::shared_ptr<FusedChainKernel> makeExactKernel(const HotChain& chain, LaunchLog& log, bool skipLastOutput) {
  return std::make_shared<ExactKernel>(chain, log, skipLastOutput);
}

std::vector<chain::ChainKernelParams> fuzzKernelPoints(const HotChain& hot, const chain::ChainVariant& v) {
  std::vector<chain::ChainKernelParams> space = chain::chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
  bool sixteenBit = false;
  for (const auto& [id, meta] : hot.pattern.metas) sixteenBit = sixteenBit || meta.scalarType != "float32";
  if (!v.layout.contiguous() && sixteenBit) {
    for (chain::ChainKernelParams& p : space) p.atenRounding = true;
  }
  std::mt19937_64 rng(std::hash<std::string>()(hot.key));
  std::shuffle(space.begin(), space.end(), rng);
  return space;
}

std::shared_ptr<FusedChainKernel> loggedKernel(std::shared_ptr<FusedChainKernel> inner, LaunchLog& log,
                                               double tolerance) {
  return std::make_shared<LoggedKernel>(std::move(inner), log, tolerance);
}

FusionEngine& fuzzEngine() {
  static FusionEngine* e = [] {
    const bool cpu = fuzzDevice() == c10::DeviceType::CPU;
    if (cpu) installCpuStreams();
    auto gate = std::make_unique<FuzzGate>();
    if (gUnderShim.load()) gate->shim_ = shimCommandGate();
    gFuzzGate = gate.get();
    FusionOptions options;
    options.hotCalls = 3;
    options.defer = true;
    options.poisonDeferredOutputs = true;
    options.evalBatchNorm = true;  // Note [Eval BatchNorm in a chain]: the suite checks it before it is on by default
    options.inPlace = true;        // Note [In-place steps]: likewise
    options.passConvolutions = true;  // Note [Ops a chain lets pass]: its convolutions
    FusionEngine* made = FusionEngine::installProcessEngine(std::move(gate), options);
    made->install(cpu ? c10::DispatchKey::CPU : c10::DispatchKey::CUDA);
    return made;
  }();
  return *e;
}

FuzzGate& fuzzGate() {
  fuzzEngine();
  return *gFuzzGate;
}

}  // namespace hotkernel::fusion::fuzz
