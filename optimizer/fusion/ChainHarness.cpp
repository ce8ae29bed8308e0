#include "hotkernel/optimizer/ChainHarness.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "hotkernel/optimizer/ChainLayoutValues.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"

namespace hotkernel {
namespace {

using chain::ChainArg;
using chain::ChainIR;
using chain::ChainPlan;
using chain::OpKind;
using chain::ShapeClass;

struct Interrupted {};

at::Tensor bitsOf(const at::Tensor& t) {
  return t.contiguous().view(t.scalar_type() == at::kFloat ? at::kInt : at::kShort);
}

bool bitwiseEqual(const at::Tensor& a, const at::Tensor& b) { return at::equal(bitsOf(a), bitsOf(b)); }

// `n` elements of `dtype` holding random bit patterns (NaNs and infinities among them).
at::Tensor randomBits(int64_t n, at::ScalarType dtype, at::Generator& gen, int device) {
  const auto opts = at::TensorOptions().device(at::kCUDA, device);
  if (dtype == at::kFloat) {
    return at::randint(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), {n}, gen,
                       opts.dtype(at::kInt))
        .view(dtype);
  }
  return at::randint(-32768, 32767, {n}, gen, opts.dtype(at::kShort)).view(dtype);
}

std::string describeElement(const at::Tensor& g, const at::Tensor& r, int64_t i) {
  std::ostringstream os;
  os << "element " << i << ": got " << g.view({-1})[i].item<float>() << ", ATen " << r.view({-1})[i].item<float>();
  return os.str();
}

enum class Prefill { Nan, RandomBits };

// One harness run of a plan (Note [Chain harness]).
struct Run {
  const ChainPlan& plan;
  const ChainIR& ir;
  const chain::ChainLayout& layout;  // Note [Chain values in a layout]
  int64_t rows, cols;
  int device;
  double watchdogSeconds;
  at::cuda::CUDAStream stream;
  at::Generator& gen;
  std::mt19937_64 rng;
  std::function<bool()> yieldPoint;
  double bound;
  HarnessReport& report;
  HarnessStage stage = HarnessStage::Smoke;

  // A yield point with none of the run's work in flight; throws Interrupted when it says stop.
  void pause() {
    if (!yieldPoint) return;
    stream.synchronize();
    if (!yieldPoint()) throw Interrupted{};
  }

  bool fail(const std::string& detail) {
    report.stages.push_back({stage, false, detail});
    return false;
  }

  // The candidate's outputs for `inputs` (memory in the variant's layout: Note [Chain values in a
  // layout]), each written through its view into a guarded, pre-filled buffer and returned as its
  // [rows, extent] value; empty with `why` set when the launch fails or breaks a rule (guards, elements
  // between strided rows, inputs, watchdog).
  std::vector<at::Tensor> launch(const std::vector<ChainReferenceInput>& inputs, Prefill prefill, std::string& why) {
    std::vector<at::Tensor> outs, buffers, views, snapshots;
    std::vector<std::pair<int64_t, int64_t>> spans;  // (guard before, elements) per output
    std::vector<void*> outPointers;
    size_t arg = chainFirstOutputArg(ir);
    for (int o : ir.outputs()) {
      const chain::Node& n = ir.node(o);
      const at::ScalarType dtype = chainScalarType(n.dtype);
      const int64_t span = chainArgumentElements(ir, layout, arg, rows, cols);
      // Guards of 64 to 256 elements keep the output aligned for any vec.
      const int64_t before = 64 * static_cast<int64_t>(1 + rng() % 4), after = 64 * static_cast<int64_t>(1 + rng() % 4);
      at::Tensor buffer = randomBits(before + span + after, dtype, gen, device);
      at::Tensor region = buffer.narrow(0, before, span);
      at::Tensor view = chainArgumentView(ir, layout, arg++, region, rows, cols);
      if (prefill == Prefill::Nan) {
        view.fill_(std::numeric_limits<float>::quiet_NaN());
      } else {
        view.copy_(randomBits(view.numel(), dtype, gen, device).view(view.sizes()));
      }
      snapshots.push_back(buffer.clone());
      spans.emplace_back(before, span);
      buffers.push_back(buffer);
      views.push_back(view);
      outPointers.push_back(region.mutable_data_ptr());
    }
    std::vector<at::Tensor> inputCopies;
    for (const ChainReferenceInput& in : inputs) inputCopies.push_back(in.tensor.defined() ? in.tensor.clone() : at::Tensor());
    const std::vector<chain::ChainInputValue> values = chainInputValues(inputs);
    pause();
    if (const std::string refusal = chain::chainLaunchRefusal(plan, values, outPointers); !refusal.empty()) {
      why = "the plan refused the harness's call: " + refusal;
      return {};
    }
    const KernelArgs args = chain::chainKernelArgs(ir, values, outPointers, rows, cols);
    if (const CUresult r = plan.launcher->launchStatus(args, stream.stream(), plan.launcher->geometry());
        r != CUDA_SUCCESS) {
      why = "launch failed: " + cudaErrorString(r);
      return {};
    }
    at::cuda::CUDAEvent done(cudaEventDefault);
    done.record(stream);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(watchdogSeconds);
    for (cudaError_t q = cudaEventQuery(done.event()); q != cudaSuccess; q = cudaEventQuery(done.event())) {
      if (q != cudaErrorNotReady) {
        why = std::string("CUDA error: ") + cudaGetErrorString(q);
        (void)cudaGetLastError();
        return {};
      }
      if (std::chrono::steady_clock::now() > deadline) {
        why = "watchdog: not finished after " + std::to_string(watchdogSeconds) + " s";
        return {};
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (size_t o = 0; o < buffers.size(); ++o) {
      // What the kernel may change: its view's elements. The rest of the buffer (guards, elements between
      // strided rows) keeps the bits it had.
      const auto [before, span] = spans[o];
      at::Tensor expected = snapshots[o];
      const size_t outArg = chainFirstOutputArg(ir) + o;
      chainArgumentView(ir, layout, outArg, expected.narrow(0, before, span), rows, cols).copy_(views[o]);
      if (!bitwiseEqual(buffers[o], expected)) {
        why = "wrote outside output " + std::to_string(o) + " (its guards or between its rows)";
        return {};
      }
      outs.push_back(chainValueOf(ir.node(ir.outputs()[o]), views[o], rows, cols));
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].tensor.defined() && !bitwiseEqual(inputs[k].tensor, inputCopies[k])) {
        why = "modified input " + std::to_string(k);
        return {};
      }
    }
    return outs;
  }

  // One check: the candidate against ATen on `inputs`; "" or why not.
  std::string check(const std::vector<ChainReferenceInput>& inputs, Prefill prefill, const std::string& label) {
    pause();
    const std::vector<at::Tensor> ref = chainAtenValues(ir, layout, inputs, rows, cols);
    std::string why;
    const std::vector<at::Tensor> got = launch(inputs, prefill, why);
    if (!why.empty()) return label + ": " + why;
    double worst = 0;
    why = compareChainOutputs(got, ref, bound, &worst);
    if (!why.empty()) return label + ": " + why;
    report.maxAbsError = std::max(report.maxAbsError, worst);
    return "";
  }

  std::vector<ChainReferenceInput> draw(ChainDraw d) { return drawChainMemory(ir, layout, rows, cols, d, gen); }
};

std::vector<ChainReferenceInput> mapTensors(const std::vector<ChainReferenceInput>& in,
                                            const std::function<at::Tensor(const at::Tensor&)>& f) {
  std::vector<ChainReferenceInput> out = in;
  for (ChainReferenceInput& r : out) {
    if (r.tensor.defined()) r.tensor = f(r.tensor).to(r.tensor.scalar_type()).contiguous();
  }
  return out;
}

// NaN, +inf and -inf at random elements of each tensor input's memory: about
// one in 24 rows at most for Full and Row inputs (reductions spread a NaN
// over its row; a broadcast element reaches every row that reads it), one
// element of a Column input.
// Note [Infinite broadcast inputs]
// A chain with reductions may multiply a broadcast input by a value a
// reduction centred (layer_norm's (sum - mean) * rstd * w): an infinite w
// then gives each row an infinity with the sign of that value. A fused
// kernel centres its intermediates as computed in float32 (it rounds outputs
// and casts, not what they feed: Note [Interpreter modes tolerance]), eager
// the 16-bit values it stored, and where the rounding moves a value across
// the row's mean the signs differ (or one side is exactly 0 and gives NaN):
// both within the chain's tolerance before the infinity, neither wrong
// (ChainTunerGpuTest's infinite-weights test shows it for every kind of
// point). So the broadcast (Column and Row) inputs of such a chain get NaNs
// only; their Full inputs, and every input of a chain without reductions, get
// all three.
std::vector<ChainReferenceInput> withSpecials(const ChainIR& ir, int64_t rows,
                                              const std::vector<ChainReferenceInput>& in, at::Generator& gen) {
  std::vector<ChainReferenceInput> out = in;
  const std::vector<int> nodes = ir.inputs();
  const bool reductions = ir.hasReductions();
  for (size_t k = 0; k < out.size(); ++k) {
    ChainReferenceInput& r = out[k];
    if (!r.tensor.defined()) continue;
    r.tensor = r.tensor.clone();
    const int64_t numel = r.tensor.numel();
    const ShapeClass shape = ir.node(nodes[k]).shape;
    const int64_t count = shape == ShapeClass::Column ? 1 : std::max<int64_t>(1, rows / 24);
    const bool nanOnly = reductions && shape != ShapeClass::Full;  // Note [Infinite broadcast inputs]
    at::Tensor flat = r.tensor.view({-1});
    for (double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
      if (nanOnly && !std::isnan(v)) continue;
      const at::Tensor idx = at::randint(0, numel, {count}, gen, r.tensor.options().dtype(at::kLong));
      flat.index_fill_(0, idx, v);
    }
  }
  return out;
}

bool runSmoke(Run& run) {
  run.stage = HarnessStage::Smoke;
  const std::string why = run.check(run.draw(ChainDraw::Uniform), Prefill::Nan, "uniform inputs");
  if (!why.empty()) return run.fail(why);
  run.report.stages.push_back({HarnessStage::Smoke, true, "every output written, guards and inputs untouched"});
  return true;
}

bool runSweep(Run& run) {
  run.stage = HarnessStage::Sweep;
  int k = 0;
  for (ChainDraw d : {ChainDraw::Uniform, ChainDraw::Normal, ChainDraw::Uniform}) {
    const std::string why = run.check(run.draw(d), k % 2 ? Prefill::Nan : Prefill::RandomBits,
                                      "draw " + std::to_string(++k));
    if (!why.empty()) return run.fail(why);
  }
  run.report.stages.push_back(
      {HarnessStage::Sweep, true, "3 more draws (the variant fixes rows and cols: no shape to sweep)"});
  return true;
}

bool runStability(Run& run) {
  run.stage = HarnessStage::Stability;
  const std::vector<ChainReferenceInput> base = run.draw(ChainDraw::Uniform);
  const std::vector<std::pair<std::string, std::vector<ChainReferenceInput>>> cases = {
      {"x3", mapTensors(base, [](const at::Tensor& t) { return t.to(at::kFloat).mul(3.0); })},
      {"x0.01", mapTensors(base, [](const at::Tensor& t) { return t.to(at::kFloat).mul(0.01); })},
      {"negated", mapTensors(base, [](const at::Tensor& t) { return t.neg(); })},
      {"zeros", mapTensors(base, [](const at::Tensor& t) { return at::zeros_like(t); })},
      {"NaN and infinities", withSpecials(run.ir, run.rows, base, run.gen)},
  };
  for (const auto& [label, inputs] : cases) {
    const std::string why = run.check(inputs, Prefill::Nan, label);
    if (!why.empty()) return run.fail(why);
  }
  run.report.stages.push_back({HarnessStage::Stability, true, "x3, x0.01, negated, zeros, NaN and infinities"});
  return true;
}

bool runDeterminism(Run& run) {
  run.stage = HarnessStage::Determinism;
  const std::vector<ChainReferenceInput> inputs = run.draw(ChainDraw::Uniform);
  std::vector<std::vector<at::Tensor>> results;
  for (Prefill p : {Prefill::Nan, Prefill::RandomBits, Prefill::RandomBits}) {
    std::string why;
    results.push_back(run.launch(inputs, p, why));
    if (!why.empty()) return run.fail(why);
  }
  for (size_t k = 1; k < results.size(); ++k) {
    for (size_t o = 0; o < results[0].size(); ++o) {
      if (!bitwiseEqual(results[0][o], results[k][o])) {
        return run.fail("output " + std::to_string(o) + " of run " + std::to_string(k + 1) +
                        " differs from run 1 (differently pre-filled)");
      }
    }
  }
  run.report.stages.push_back({HarnessStage::Determinism, true, "3 runs bitwise equal"});
  return true;
}

bool runEdgeCases(Run& run) {
  run.stage = HarnessStage::EdgeCases;
  const std::vector<ChainReferenceInput> inputs = run.draw(ChainDraw::Uniform);
  std::vector<chain::ChainInputValue> values = chainInputValues(inputs);
  std::vector<at::Tensor> outs;
  std::vector<void*> outPointers;
  size_t arg = chainFirstOutputArg(run.ir);
  for (int o : run.ir.outputs()) {
    const chain::Node& n = run.ir.node(o);
    outs.push_back(at::empty({chainArgumentElements(run.ir, run.layout, arg++, run.rows, run.cols)},
                             at::TensorOptions().dtype(chainScalarType(n.dtype)).device(at::kCUDA, run.device)));
    outPointers.push_back(outs.back().mutable_data_ptr());
  }
  if (const std::string r = chain::chainLaunchRefusal(run.plan, values, outPointers); !r.empty()) {
    return run.fail("the guard refused a fitting call: " + r);
  }
  size_t input = 0;
  const ChainArg* tensorInput = nullptr;
  const ChainArg* output = nullptr;
  for (const ChainArg& a : run.plan.layout) {
    if (a.kind == ChainArg::Kind::Input && !tensorInput) tensorInput = &a;
    if (a.kind == ChainArg::Kind::Output && !output) output = &a;
    if (!tensorInput && a.kind == ChainArg::Kind::ScalarInput) ++input;
  }
  const auto offBy = [](const ChainArg& a) {
    const size_t element = kernels::elementSize(a.dtype);
    return a.alignmentBytes > element ? element : size_t{1};
  };
  std::vector<std::pair<std::string, std::string>> refusals;
  if (tensorInput) {
    auto misaligned = values;
    misaligned[input].pointer = static_cast<const char*>(values[input].pointer) + offBy(*tensorInput);
    refusals.emplace_back("a misaligned input", chain::chainLaunchRefusal(run.plan, misaligned, outPointers));
    auto inPlace = outPointers;
    inPlace[0] = const_cast<void*>(values[input].pointer);
    refusals.emplace_back("an output over an input", chain::chainLaunchRefusal(run.plan, values, inPlace));
  }
  auto shifted = outPointers;
  shifted[0] = static_cast<char*>(outPointers[0]) + offBy(*output);
  refusals.emplace_back("a misaligned output", chain::chainLaunchRefusal(run.plan, values, shifted));
  if (!values.empty()) {
    auto fewer = values;
    fewer.pop_back();
    refusals.emplace_back("a missing input", chain::chainLaunchRefusal(run.plan, fewer, outPointers));
  }
  for (const auto& [what, refusal] : refusals) {
    if (refusal.empty()) return run.fail("the plan's guard accepted " + what);
  }
  run.report.stages.push_back({HarnessStage::EdgeCases, true, "misaligned, in-place and short calls refused"});
  return true;
}

}  // namespace

double chainTolerance(const ChainIR& ir) {
  bool normScale = false;  // an rsqrt of a value plus a constant: an eval batch norm's invstd
  for (const chain::Node& n : ir.nodes()) {
    if (n.dtype != chain::DType::Float32) return std::ldexp(1.0, -4);
    if (n.op == OpKind::Rsqrt) {
      const chain::Node& a = ir.node(n.operands.at(0));
      normScale = normScale || (a.op == OpKind::Add && std::any_of(a.operands.begin(), a.operands.end(), [&](int k) {
                                  return ir.node(k).op == OpKind::Constant;
                                }));
    }
  }
  if (ir.hasReductions()) return std::ldexp(1.0, -12);
  return normScale ? std::ldexp(1.0, -17) : std::ldexp(1.0, -20);
}

std::vector<ChainReferenceInput> drawChainMemory(const ChainIR& ir, const chain::ChainLayout& layout, int64_t rows,
                                                 int64_t cols, ChainDraw draw, at::Generator& gen) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  std::vector<ChainReferenceInput> inputs;
  size_t arg = 0;
  for (int i : ir.inputs()) {
    const chain::Node& n = ir.node(i);
    ChainReferenceInput r;
    if (n.shape == ShapeClass::Scalar) {
      const double u = at::rand({1}, gen, opts).item<double>();
      r.scalar = static_cast<double>(static_cast<float>(0.5 + 1.5 * u));
    } else {
      const int64_t elements = chainArgumentElements(ir, layout, arg++, rows, cols);
      const at::Tensor f = draw == ChainDraw::Uniform ? at::rand({elements}, gen, opts).mul_(4.0).sub_(2.0)
                                                      : at::randn({elements}, gen, opts).mul_(2.0).add_(0.5);
      r.tensor = f.to(chainScalarType(n.dtype)).contiguous();
    }
    inputs.push_back(std::move(r));
  }
  return inputs;
}

std::vector<ChainReferenceInput> drawChainInputs(const ChainIR& ir, int64_t rows, int64_t cols, ChainDraw draw,
                                                 at::Generator& gen) {
  return chainInputViews(ir, {}, drawChainMemory(ir, {}, rows, cols, draw, gen), rows, cols);
}

std::vector<chain::ChainInputValue> chainInputValues(const std::vector<ChainReferenceInput>& inputs) {
  std::vector<chain::ChainInputValue> values;
  for (const ChainReferenceInput& r : inputs) {
    chain::ChainInputValue v;
    v.pointer = r.tensor.defined() ? r.tensor.const_data_ptr() : nullptr;
    v.scalar = static_cast<float>(r.scalar);
    values.push_back(v);
  }
  return values;
}

std::string compareChainOutputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref, double bound,
                                double* maxAbsError) {
  if (got.size() != ref.size()) {
    return "got " + std::to_string(got.size()) + " outputs, ATen " + std::to_string(ref.size());
  }
  for (size_t o = 0; o < got.size(); ++o) {
    const std::string name = "output " + std::to_string(o) + " ";
    if (got[o].sizes() != ref[o].sizes()) return name + "has another shape than ATen's";
    const at::Tensor g = got[o].to(at::kFloat).contiguous(), r = ref[o].to(at::kFloat).contiguous();
    const at::Tensor gn = g.isnan(), rn = r.isnan();
    const at::Tensor nanDiff = gn.ne(rn).view({-1});
    if (nanDiff.any().item<bool>()) {
      const int64_t i = nanDiff.nonzero()[0][0].item<int64_t>();
      return name + "is NaN where ATen's is not, or not where it is: " +
             std::to_string(nanDiff.sum().item<int64_t>()) + " elements, first " + describeElement(g, r, i);
    }
    const at::Tensor infDiff = ((g.isinf() | r.isinf()) & g.ne(r) & gn.logical_not()).view({-1});
    if (infDiff.any().item<bool>()) {
      const int64_t i = infDiff.nonzero()[0][0].item<int64_t>();
      return name + "differs from ATen's infinities: " + describeElement(g, r, i);
    }
    const at::Tensor finite = g.isfinite() & r.isfinite();
    const at::Tensor err = (g - r).abs().masked_fill_(finite.logical_not(), 0.0);
    const at::Tensor excess = (err - r.abs().add(1.0).mul_(bound)).masked_fill_(finite.logical_not(), -1.0).view({-1});
    if (excess.numel() > 0 && excess.max().item<double>() > 0) {
      const int64_t i = excess.argmax().item<int64_t>();
      std::ostringstream os;
      os << name << "is off by more than " << bound << " (1 + |ATen|): " << describeElement(g, r, i);
      return os.str();
    }
    if (o == 0 && maxAbsError && err.numel() > 0) *maxAbsError = std::max(*maxAbsError, err.max().item<double>());
  }
  return "";
}

HarnessReport runChainHarness(const ChainPlan& plan, const HarnessOptions& options) {
  HOTKERNEL_CHECK(plan.launcher != nullptr, "the chain plan has no loaded kernel");
  HarnessReport report;
  report.seed = options.seed ? options.seed
                             : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  const int device = plan.variant.device;
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(false, device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device).clone();
  gen.set_current_seed(report.seed);
  Run run{plan,   plan.variant.ir, plan.variant.layout, plan.variant.rows, plan.variant.cols, device, options.watchdogSeconds, stream, gen,
          std::mt19937_64(report.seed ^ 0x9e3779b97f4a7c15ull), options.yieldPoint, chainTolerance(plan.variant.ir),
          report};
  try {
    if (!runSmoke(run) || !runSweep(run) || !runStability(run) || !runDeterminism(run) || !runEdgeCases(run)) {
      return report;
    }
  } catch (const Interrupted&) {
    run.fail("interrupted");  // abandoned at a yield point: no stage of this run counts
    return report;
  } catch (const std::exception& e) {
    run.fail(std::string("error: ") + e.what());  // a candidate that breaks a check is rejected, never thrown
    return report;
  }
  report.passed = true;
  return report;
}

}  // namespace hotkernel
