// A chain variant tuned end to end (Note [Chain tuning]): each named HF chain
// in bfloat16 and float32 tuned against the chain run by CUDA ATen, its
// kernel entry written to a temporary cache, read back and made into a
// ChainPlan from scratch (a fresh variant object, the entry's params and
// cubin only), launched through the plan's guard, and compared with the
// interpreter's Fused mode (the kernel's arithmetic) and with CUDA ATen; a
// tampered entry (another chain's JSON under the variant's key) makes no
// plan. The harness's stages on a kernel that is wrong on purpose.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/chain/ChainEntry.h"
#include "../ChainDifference.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/ChainJson.h"
#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/optimizer/ChainHarness.h"
#include "hotkernel/optimizer/ChainReference.h"
#include "hotkernel/optimizer/ChainTuner.h"
#include "hotkernel/optimizer/TuneExperiments.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using chain::ChainIR;
using chain::ChainVariant;
using chain::DType;

#define REQUIRE_CUDA_AND_NVRTC()                                    \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }                                                                 \
  if (!nvrtcAvailable()) GTEST_SKIP() << "no NVRTC"

constexpr int64_t kRows = 2048, kCols = 4096;

// The named chains as one test case each; `make` builds the chain anew (a fresh object every call).
struct Named {
  std::string name;
  ChainIR (*make)();
  // Whether no Fused point passes the harness, so the tuner's second pass (kernels that round as ATen does,
  // Note [ATen rounding in a fused kernel]) is what serves it.
  bool servedAtenRounded = false;
  float unitsFloor = 0;  // Note [Units of a cancelling output] (tests/ChainDifference.h)
};

std::vector<Named> namedChains() {
  return {{"rms_norm bf16", [] { return chain::rmsNormChain(DType::BFloat16, 1e-6); }},
          {"rms_norm fp32", [] { return chain::rmsNormChain(DType::Float32, 1e-6); }},
          {"swiglu bf16", [] { return chain::swigluChain(DType::BFloat16); }},
          {"swiglu fp32", [] { return chain::swigluChain(DType::Float32); }},
          {"new_gelu bf16", [] { return chain::newGeluChain(DType::BFloat16); }},
          {"new_gelu fp32", [] { return chain::newGeluChain(DType::Float32); }},
          {"residual add + cast bf16", [] { return chain::residualAddCastChain(DType::BFloat16, DType::Float32); }},
          {"residual add + cast fp32", [] { return chain::residualAddCastChain(DType::Float32, DType::BFloat16); }},
          // HF's rotary on a contiguous x of width kCols (a variant with a layout is not tuned: Note [Chain tuning]).
          // bf16 rotary: ATen rounds each product before their difference; on the Normal draw a fused
          // difference lands more than the bound away where the products cancel.
          {"rotary bf16 contiguous", [] { return chain::rotaryChain(DType::BFloat16, kCols); }, true},
          {"rotary fp16 contiguous", [] { return chain::rotaryChain(DType::Float16, kCols); }},
          // GPT-2's eager attention scores against mul, add and the one aten::_softmax eager runs.
          {"attention scores fp16", [] { return chain::attentionSoftmaxChain(DType::Float16, 0.125); }},
          // BERT's and GPT-2's residual add + nn.LayerNorm (Note [LayerNorm in a chain]).
          // The bias cancels y * w in places: units at the terms' magnitude (inputs in [-2, 2]).
          {"residual layer_norm bf16", [] { return chain::residualLayerNormChain(DType::BFloat16, 1e-12); }, false, 2.0f},
          {"residual layer_norm fp32", [] { return chain::residualLayerNormChain(DType::Float32, 1e-5); }, false, 2.0f}};
}


Fingerprint testFingerprint() {
  const DeviceInfo d = queryDevice(0);
  Fingerprint f;
  f.gpuName = d.name;
  f.computeCapability = std::to_string(d.ccMajor) + "." + std::to_string(d.ccMinor);
  f.driverVersion = d.driverVersion;
  f.nvrtcVersion = nvrtcVersion();
  f.torchVersion = "test";
  f.hotkernelVersion = "test";
  f.kernelSources = "chain-tuner-gpu-test";
  return f;
}

std::string tempCacheDir() {
  std::string tmpl = ::testing::TempDir() + "/chain-tuner-XXXXXX";
  const char* made = ::mkdtemp(tmpl.data());
  return made ? std::string(made) : tmpl;
}

// The chain's inputs at [kRows, kCols] on the GPU, uniform in [-2, 2), in its dtypes.
std::vector<ChainReferenceInput> uniformInputs(const ChainIR& ir) {
  std::vector<ChainReferenceInput> inputs;
  for (int node : ir.inputs()) {
    const chain::Node& n = ir.node(node);
    ChainReferenceInput r;
    r.tensor = (at::rand(chainValueSizes(n.shape, kRows, chain::extentOf(n, kCols)),
                         at::TensorOptions().device(at::kCUDA)) * 4 - 2)
                   .to(chainScalarType(n.dtype));
    inputs.push_back(r);
  }
  return inputs;
}

// Outputs shaped like `like`, NaN-filled so that an element a kernel leaves unwritten shows.
std::vector<at::Tensor> nanLike(const std::vector<at::Tensor>& like) {
  std::vector<at::Tensor> outs;
  for (const at::Tensor& a : like) outs.push_back(at::full_like(a, std::nan("")));
  return outs;
}

std::vector<void*> pointersOf(const std::vector<at::Tensor>& outs) {
  std::vector<void*> p;
  for (const at::Tensor& o : outs) p.push_back(o.data_ptr());
  return p;
}

// tuneChain with 21 interleaved pairs, each candidate's stage and speed-up printed (the run's log).
TuneOutcome tunePrinted(const ChainVariant& v, const std::string& label) {
  TunerOptions options;
  options.pairs = 21;
  const TuneOutcome outcome = tuneChain(v, options);
  for (const CandidateRecord& r : outcome.metrics.candidates) {
    std::printf("[chain tuner] %s %s: %s %s speedup %.2f (kernel %.1f us, ATen %.1f us)\n", label.c_str(),
                r.params->dump().c_str(), r.stage.c_str(), r.error.c_str(), r.speedup.value_or(0.0),
                r.kernelUs.value_or(0.0), r.atenUs.value_or(0.0));
  }
  return outcome;
}

TEST(ChainTunerGpuTest, GivenTheNamedChainsWhenTunedThenAKernelEntryIsCachedReloadedAsAPlanAndComputesTheChain) {
  REQUIRE_CUDA_AND_NVRTC();
  const Fingerprint fp = testFingerprint();
  DeviceFingerprints fingerprints;
  fingerprints.set(0, fp);
  const std::string dir = tempCacheDir();
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  for (const Named& c : namedChains()) {
    SCOPED_TRACE(c.name);
    const ChainVariant tuned{c.make(), kRows, kCols, 0};
    const TuneOutcome outcome = tunePrinted(tuned, c.name);
    ASSERT_TRUE(outcome.accepted) << "no candidate beat the unfused chain with a CI above 1.02";
    ASSERT_TRUE(outcome.metrics.kernel.has_value());
    EXPECT_GT(outcome.metrics.kernel->speedupCi.low, 1.02);
    const size_t spaceSize = chain::chainParameterSpace(tuned.ir, kRows, kCols).size();
    size_t fusedPoints = 0, atenRoundedPoints = 0;
    for (const CandidateRecord& r : outcome.metrics.candidates) {
      const bool atenRounded = r.params->value("rounding", "") == "aten";
      (atenRounded ? atenRoundedPoints : fusedPoints)++;
      if (atenRounded || !c.servedAtenRounded) {
        // Every candidate that serves a named chain compiles and passes the five stages.
        EXPECT_TRUE(r.stage == "benchmark") << r.params->dump() << ": " << r.stage << " " << r.error;
      } else {
        EXPECT_NE(r.stage, "benchmark") << r.params->dump() << ": a Fused point passed, the test's premise is stale";
      }
    }
    // The first pass tries the whole space; the second pass, the same space rounding as ATen, only when
    // no point of the first passed.
    EXPECT_EQ(fusedPoints, spaceSize);
    EXPECT_EQ(atenRoundedPoints, c.servedAtenRounded ? spaceSize : 0u);
    const std::string variant = chain::chainVariantString(tuned);
    EXPECT_EQ(tuneExperiments(fp.key(), chain::kChainOp, variant, outcome).size(),
              outcome.metrics.candidates.size());
    {
      auto store = cache::CacheStore::open(dir);
      store->put(chainResultEntry(fingerprints, tuned, outcome));
    }

    // A fresh process's view: the cache reopened, the variant rebuilt, the plan made from the entry alone.
    auto store = cache::CacheStore::open(dir);
    const std::optional<cache::Entry> entry = store->get(fp.key(), chain::kChainOp, variant);
    ASSERT_TRUE(entry.has_value());
    EXPECT_EQ(entry->decision, cache::kDecisionKernel);
    EXPECT_EQ(entry->family, chain::kChainFamily);
    EXPECT_EQ(chain::chainFromJson(nlohmann::json::parse(entry->params).at("chain")), tuned.ir);
    const ChainVariant fresh{c.make(), kRows, kCols, 0};
    const chain::ChainPlan plan = chain::makeChainPlan(fresh, entry->params, entry->cubin);

    at::manual_seed(11);
    const std::vector<ChainReferenceInput> inputs = uniformInputs(fresh.ir);
    std::vector<std::vector<float>> values;
    for (const ChainReferenceInput& r : inputs) {
      const at::Tensor f = r.tensor.to(at::kFloat).cpu().contiguous().reshape({-1});
      values.emplace_back(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
    }
    const std::vector<at::Tensor> aten = runChainWithAten(fresh.ir, inputs, kRows, kCols);
    std::vector<at::Tensor> outs = nanLike(aten);
    const std::vector<void*> outPointers = pointersOf(outs);
    ASSERT_TRUE(chain::launchChainPlan(plan, chainInputValues(inputs), outPointers, stream));
    // The interpreter's mode that the kernel's rounding follows: an ATen-rounded kernel stores every 16-bit
    // value as ATen's op by op run does.
    const bool atenRounded = nlohmann::json::parse(entry->params).at("kernel").value("rounding", "") == "aten";
    EXPECT_EQ(atenRounded, c.servedAtenRounded);
    const chain::EvalMode mode = atenRounded ? chain::EvalMode::AtenOrder : chain::EvalMode::Fused;
    const auto interpreted = chain::interpretChain(fresh.ir, kRows, kCols, values, mode);
    for (size_t o = 0; o < outs.size(); ++o) {
      const DType dtype = fresh.ir.node(fresh.ir.outputs()[o]).dtype;
      // 16-bit: two units; float32: the CPU's libm (expf, tanhf) against CUDA's and the row sums'
      // order differ by a few float32 units (ATen's bound, checked next, is the correctness one).
      EXPECT_LE(compareWithInterpreted(outs[o], interpreted[o], dtype, c.unitsFloor).worstUnits,
                dtype == DType::Float32 ? 64.0 : 2.0)
          << "output " << o << " vs the " << chain::evalModeName(mode) << " interpreter";
    }
    EXPECT_EQ(compareChainOutputs(outs, aten, chainTolerance(fresh.ir)), "");
    // The guard: an in-place call is refused and launches nothing.
    std::vector<void*> inPlace = outPointers;
    inPlace[0] = const_cast<void*>(inputs[0].tensor.const_data_ptr());
    EXPECT_FALSE(chain::launchChainPlan(plan, chainInputValues(inputs), inPlace, stream));
  }
}

// Note [Eager rounding on request]: tuned with chainEagerRounding, a 16-bit chain is tried only at points that
// round as ATen does, and its kernel's outputs differ from eager's op-by-op run in no more elements than the
// kernel at the same point without it (printed: how many of each, and the default tuning's).
TEST(ChainTunerGpuTest, GivenEagerRoundingWhenA16BitChainIsTunedThenOnlyAtenRoundedPointsAndNoFartherFromEager) {
  REQUIRE_CUDA_AND_NVRTC();
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  const std::string arch = queryDevice(0).nvrtcArch();
  for (const Named& c : namedChains()) {
    if (c.name != "swiglu bf16" && c.name != "rms_norm bf16" && c.name != "new_gelu bf16") continue;
    SCOPED_TRACE(c.name);
    const ChainVariant v{c.make(), kRows, kCols, 0};
    ASSERT_TRUE(chain::atenRoundingApplies(v.ir));
    at::manual_seed(17);
    const std::vector<ChainReferenceInput> inputs = uniformInputs(v.ir);
    const std::vector<at::Tensor> aten = runChainWithAten(v.ir, inputs, kRows, kCols);
    // The outputs of `plan` that differ from eager's; within the chain's tolerance everywhere.
    auto differing = [&](const chain::ChainPlan& plan) {
      const std::vector<at::Tensor> outs = nanLike(aten);
      EXPECT_TRUE(chain::launchChainPlan(plan, chainInputValues(inputs), pointersOf(outs), stream));
      EXPECT_EQ(compareChainOutputs(outs, aten, chainTolerance(v.ir)), "");
      int64_t n = 0;
      for (size_t o = 0; o < outs.size(); ++o) n += outs[o].ne(aten[o]).sum().item<int64_t>();
      return n;
    };
    chain::ChainKernelParams eagerPoint;
    int64_t eager = 0;
    for (const bool eagerRounding : {false, true}) {
      TunerOptions options;
      options.pairs = 9;
      options.chainEagerRounding = eagerRounding;
      const TuneOutcome outcome = tuneChain(v, options);
      ASSERT_TRUE(outcome.accepted) << (eagerRounding ? "eager" : "fused") << " rounding: nothing accepted";
      for (const CandidateRecord& r : outcome.metrics.candidates) {
        EXPECT_EQ(r.params->value("rounding", "") == "aten", eagerRounding) << r.params->dump();
      }
      EXPECT_EQ(outcome.metrics.candidates.size(), chain::chainParameterSpace(v.ir, kRows, kCols).size());
      const chain::ChainPlan plan = chain::makeChainPlan(v, outcome.paramsJson.dump(), outcome.cubin);
      EXPECT_EQ(plan.params.atenRounding, eagerRounding);
      const int64_t n = differing(plan);
      std::printf("[eager rounding] %s, %s rounding (%s): %lld of %lld outputs differ from eager's\n", c.name.c_str(),
                  eagerRounding ? "eager" : "fused", plan.params.describe().c_str(), static_cast<long long>(n),
                  static_cast<long long>(kRows * kCols));
      if (eagerRounding) {
        eagerPoint = plan.params;
        eager = n;
      }
    }
    // The two tunings may pick points that sum a row in different orders (rms_norm: v8 i2 against v4 i4), which
    // moves a few outputs by a unit either way; the rounding alone is compared at the eager-rounding point itself.
    chain::ChainKernelParams fusedTwin = eagerPoint;
    fusedTwin.atenRounding = false;
    const std::string cubin =
        compileToCubin(chain::generateChainSource(v.ir, fusedTwin), "hk_chain.cu", arch, chain::chainCompileOptions())
            .cubin;
    const int64_t fused = differing(chain::makeChainPlan(v, chain::chainEntryParams(v, fusedTwin).dump(), cubin));
    std::printf("[eager rounding] %s at %s: %lld outputs differ from eager's with eager rounding, %lld without\n",
                c.name.c_str(), fusedTwin.describe().c_str(), static_cast<long long>(eager),
                static_cast<long long>(fused));
    EXPECT_LE(eager, fused);
  }
}

TEST(ChainTunerGpuTest, GivenATamperedChainEntryWhenLoadedThenNoPlanIsMade) {
  REQUIRE_CUDA_AND_NVRTC();
  const Fingerprint fp = testFingerprint();
  DeviceFingerprints fingerprints;
  fingerprints.set(0, fp);
  const std::string dir = tempCacheDir();
  const ChainVariant v{chain::swigluChain(DType::BFloat16), 1024, 4096, 0};
  TunerOptions options;
  options.pairs = 15;
  options.minSpeedup = 1.0;
  const TuneOutcome outcome = tuneChain(v, options);
  ASSERT_TRUE(outcome.accepted);
  cache::Entry entry = chainResultEntry(fingerprints, v, outcome);
  auto store = cache::CacheStore::open(dir);
  store->put(entry);
  const std::string variant = chain::chainVariantString(v);
  ASSERT_NO_THROW(chain::makeChainPlan(v, store->get(fp.key(), chain::kChainOp, variant)->params, entry.cubin));

  // Another chain's JSON (new-GELU, one input) under the SwiGLU variant's key, its sha left or made consistent.
  const ChainIR other = chain::newGeluChain(DType::BFloat16);
  nlohmann::json params = nlohmann::json::parse(entry.params);
  params["chain"] = chain::chainToJson(other);
  for (bool consistentSha : {false, true}) {
    if (consistentSha) params["chainSha256"] = chain::chainKey(other).sha256;
    entry.params = params.dump();
    store->put(entry);  // the cache stores bytes; the loader judges them
    const std::optional<cache::Entry> got = store->get(fp.key(), chain::kChainOp, variant);
    ASSERT_TRUE(got.has_value());
    EXPECT_THROW(chain::makeChainPlan(v, got->params, got->cubin), Error) << params.dump();
  }
}

// Note [Infinite broadcast inputs] (optimizer/fusion/ChainHarness.cpp): the residual layer_norm chain with infinite
// weights in a quarter of the columns. out = (sum - mean) * rstd * w + b, so an infinite w[c] gives each row an
// infinity with the sign of its normalized value there. A fused kernel normalizes the residual sum as computed in
// float32 (it rounds outputs, not the intermediates they feed: Note [Interpreter modes tolerance]), eager the sum
// as stored in bf16; where rounding the sum moves it across the row's mean, the two signs differ (or one side is
// exactly 0 and gives NaN). Every infinity or NaN of the kernel's that is not ATen's is such an element, at every
// kind of point (streaming, registers); everywhere else they agree.
TEST(ChainTunerGpuTest, GivenInfiniteLayerNormWeightsWhenRunFusedThenInfinitiesDifferOnlyWhereRoundingTheSumFlipsTheNorm) {
  REQUIRE_CUDA_AND_NVRTC();
  const ChainVariant v{chain::residualLayerNormChain(DType::BFloat16, 1e-12), kRows, kCols, 0};
  const std::string arch = queryDevice(0).nvrtcArch();
  int64_t flips = 0, elements = 0;
  for (const chain::ChainKernelParams& p : {chain::ChainKernelParams{128, 4, 1, 0}, chain::ChainKernelParams{256, 8, 1, 2},
                                            chain::ChainKernelParams{512, 8, 1, 0}}) {
    SCOPED_TRACE(p.describe());
    const std::string cubin =
        compileToCubin(chain::generateChainSource(v.ir, p), "hk_chain.cu", arch, chain::chainCompileOptions()).cubin;
    const chain::ChainPlan plan = chain::makeChainPlan(v, chain::chainEntryParams(v, p).dump(), cubin);
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(0).clone();
      gen.set_current_seed(seed);
      std::vector<ChainReferenceInput> inputs = drawChainInputs(v.ir, kRows, kCols, ChainDraw::Normal, gen);
      // Inputs: x, residual, weight, bias. +inf in every 8th column of the weight, -inf 4 columns on.
      at::Tensor w = inputs[2].tensor.clone();
      w.slice(0, 0, kCols, 8).fill_(std::numeric_limits<float>::infinity());
      w.slice(0, 4, kCols, 8).fill_(-std::numeric_limits<float>::infinity());
      inputs[2].tensor = w;
      const std::vector<at::Tensor> ref = runChainWithAten(v.ir, inputs, kRows, kCols);
      std::vector<at::Tensor> got;
      std::vector<void*> outs;
      for (const at::Tensor& r : ref) {
        got.push_back(at::full_like(r, std::numeric_limits<float>::quiet_NaN()));
        outs.push_back(got.back().mutable_data_ptr());
      }
      std::string refusal;
      ASSERT_TRUE(chain::launchChainPlan(plan, chainInputValues(inputs), outs,
                                         c10::cuda::getCurrentCUDAStream(0).stream(), &refusal))
          << refusal;
      c10::cuda::getCurrentCUDAStream(0).synchronize();
      EXPECT_TRUE(at::equal(got[0], ref[0])) << "the residual sum";
      const at::Tensor g = got[1].to(at::kFloat), r = ref[1].to(at::kFloat);
      const at::Tensor differ =
          ((g.isinf() | r.isinf()) & g.ne(r) & g.isnan().logical_not()) | g.isnan().ne(r.isnan());
      // The normalized value's sign in float64: of the float32 sum (the kernel's) and of the stored bf16 sum
      // (eager's), each against its own row mean; "explained" where they differ or either is within 1e-6 of a
      // std of zero (the float32 means' own rounding).
      auto centred = [](const at::Tensor& t) {
        const at::Tensor d = t - t.mean(-1, true);
        return d / d.pow(2).mean(-1, true).sqrt();
      };
      const at::Tensor zFused = centred(inputs[0].tensor.to(at::kFloat).add(inputs[1].tensor.to(at::kFloat)).to(at::kDouble));
      const at::Tensor zEager = centred(ref[0].to(at::kDouble));
      const at::Tensor explained =
          zFused.sign().ne(zEager.sign()) | zFused.abs().lt(1e-6) | zEager.abs().lt(1e-6);
      const at::Tensor unexplained = differ & explained.logical_not();
      EXPECT_FALSE(unexplained.any().item<bool>())
          << "seed " << seed << ": " << unexplained.sum().item<int64_t>()
          << " infinities (or NaNs) not ATen's where rounding the sum keeps the norm's sign, largest |z| "
          << zEager.abs().masked_select(unexplained).max().item<double>();
      flips += differ.sum().item<int64_t>();
      elements += w.isinf().sum().item<int64_t>() * kRows;
    }
  }
  EXPECT_GT(flips, 0) << "no rounding flipped a norm's sign: the premise of Note [Infinite broadcast inputs] is stale";
  std::printf("[infinite weights] %lld of %lld infinite outputs not ATen's, each where rounding the sum flips the norm\n",
              static_cast<long long>(flips), static_cast<long long>(elements));
}

TEST(ChainTunerGpuTest, GivenAKernelOfAnotherChainWhenHarnessedThenItFailsTheSmokeStage) {
  REQUIRE_CUDA_AND_NVRTC();
  // A kernel of g * u loaded as SwiGLU's (silu(g) * u): the same arguments, another computation.
  const ChainVariant swiglu{chain::swigluChain(DType::BFloat16), 512, 4096, 0};
  ChainIR mulOnly;
  const int g = mulOnly.addInput(DType::BFloat16, chain::ShapeClass::Full);
  const int u = mulOnly.addInput(DType::BFloat16, chain::ShapeClass::Full);
  mulOnly.markOutput(mulOnly.addBinary(chain::OpKind::Mul, g, u));
  const chain::ChainKernelParams p{256, 8, 1, 0};
  const std::string arch = queryDevice(0).nvrtcArch();
  const std::string wrongCubin =
      compileToCubin(chain::generateChainSource(mulOnly, p), "hk_chain.cu", arch, chain::chainCompileOptions()).cubin;
  const chain::ChainPlan wrong =
      chain::makeChainPlan(swiglu, chain::chainEntryParams(swiglu, p).dump(), wrongCubin);
  const HarnessReport bad = runChainHarness(wrong);
  EXPECT_FALSE(bad.passed);
  ASSERT_NE(bad.failure(), nullptr);
  EXPECT_EQ(bad.failure()->stage, HarnessStage::Smoke) << bad.failure()->detail;
  // The right cubin passes all five stages.
  const std::string rightCubin =
      compileToCubin(chain::generateChainSource(swiglu.ir, p), "hk_chain.cu", arch, chain::chainCompileOptions()).cubin;
  const HarnessReport good =
      runChainHarness(chain::makeChainPlan(swiglu, chain::chainEntryParams(swiglu, p).dump(), rightCubin));
  EXPECT_TRUE(good.passed) << (good.failure() ? good.failure()->detail : "");
  EXPECT_EQ(good.stages.size(), 5u);
}

// Note [Chain values in a layout]: strided and broadcast variants (HF's rotary on q viewed from its
// projection, GPT-2's attention scores with the mask shared by the heads) harnessed and tuned on memory in
// their layout. A kernel compiled without the layout reads the wrong elements: the smoke stage fails it.
struct LaidOut {
  std::string name;
  ChainVariant variant;
};

std::vector<LaidOut> laidOutVariants() {
  const chain::RotaryShape rotary{2, 8, 256, 128};
  const chain::AttentionShape attention{8, 12, 512, 512};
  return {{"rotary fp16 strided", ChainVariant{chain::rotaryChain(DType::Float16, rotary.headDim), chain::rotaryRows(rotary),
                                               rotary.headDim, 0, chain::rotaryLayout(rotary)}},
          {"attention scores fp16, mask broadcast",
           ChainVariant{chain::attentionSoftmaxChain(DType::Float16, 0.125), chain::attentionRows(attention),
                        attention.keys, 0, chain::attentionSoftmaxLayout(attention)}},
          // Note [Relayout copies]: GPT-2's q copied out of its fused QKV projection, against eager's clone.
          {"relayout copy fp16, q of GPT-2's QKV",
           ChainVariant{chain::relayoutCopyChain(DType::Float16), 16 * 12 * 512, 64, 0,
                        chain::headViewCopyLayout(chain::RotaryShape{16, 12, 512, 64}, 3)}},
          // Note [Transposed copies]: GPT-2's k^T copied contiguous (matmul's reshape), against eager's clone.
          {"transposed copy fp16, k^T of GPT-2's QKV",
           ChainVariant{chain::relayoutCopyChain(DType::Float16), 16 * 12 * 64, 512, 0,
                        chain::headTransposeCopyLayout(chain::RotaryShape{16, 12, 512, 64}, 3)}}};
}

TEST(ChainTunerGpuTest, GivenStridedVariantsWhenHarnessedThenTheLayoutsKernelPassesAndAContiguousOneFails) {
  REQUIRE_CUDA_AND_NVRTC();
  const std::string arch = queryDevice(0).nvrtcArch();
  for (const LaidOut& c : laidOutVariants()) {
    SCOPED_TRACE(c.name);
    const ChainVariant& v = c.variant;
    ASSERT_FALSE(v.layout.contiguous());
    const std::vector<chain::ChainKernelParams> space = chain::chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
    ASSERT_FALSE(space.empty());
    const chain::ChainKernelParams p = space.front();
    const std::string params = chain::chainEntryParams(v, p).dump();
    const std::string right =
        compileToCubin(chain::generateChainSource(v.ir, p, v.layout), "hk_chain.cu", arch, chain::chainCompileOptions()).cubin;
    const HarnessReport good = runChainHarness(chain::makeChainPlan(v, params, right));
    EXPECT_TRUE(good.passed) << (good.failure() ? good.failure()->detail : "");
    EXPECT_EQ(good.stages.size(), 5u);
    const std::string contiguous =
        compileToCubin(chain::generateChainSource(v.ir, p), "hk_chain.cu", arch, chain::chainCompileOptions()).cubin;
    const HarnessReport bad = runChainHarness(chain::makeChainPlan(v, params, contiguous));
    EXPECT_FALSE(bad.passed);
    ASSERT_NE(bad.failure(), nullptr);
    EXPECT_EQ(bad.failure()->stage, HarnessStage::Smoke) << bad.failure()->detail;
  }
}

TEST(ChainTunerGpuTest, GivenStridedVariantsWhenTunedThenAKernelIsAcceptedAndItsPlanComputesEagerOnTheRealTensors) {
  REQUIRE_CUDA_AND_NVRTC();
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  for (const LaidOut& c : laidOutVariants()) {
    SCOPED_TRACE(c.name);
    const ChainVariant& v = c.variant;
    const TuneOutcome outcome = tunePrinted(v, c.name + " (layout)");
    ASSERT_TRUE(outcome.accepted) << "no candidate beat eager's calls on the same views with a CI above 1.02";
    const chain::ChainPlan plan = chain::makeChainPlan(v, outcome.paramsJson.dump(), outcome.cubin);
    at::manual_seed(13);
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
    std::vector<chain::ChainInputValue> values;
    at::Tensor eager, out;
    std::vector<at::Tensor> keep;
    if (c.name.rfind("rotary", 0) == 0) {
      const int64_t b = 2, h = 8, s = 256, d = 128;
      const at::Tensor projection = at::randn({b, s, h * d}, opts), cosT = at::randn({b, s, d}, opts),
                       sinT = at::randn({b, s, d}, opts);
      const at::Tensor x = projection.view({b, s, h, d}).transpose(1, 2), cos = cosT.unsqueeze(1), sin = sinT.unsqueeze(1);
      const at::Tensor x1 = x.slice(-1, 0, d / 2), x2 = x.slice(-1, d / 2);
      eager = x * cos + at::cat({-x2, x1}, -1) * sin;
      out = at::empty_strided(eager.sizes(), x.strides(), opts);  // the sum follows x (Note [Chain layouts])
      for (const at::Tensor& t : {x, cos, x2, x1, sin}) values.push_back({t.const_data_ptr(), 0.0f});
      keep = {projection, cosT, sinT};
    } else if (c.name.rfind("transposed", 0) == 0) {
      const at::Tensor qkv = at::randn({16, 512, 3 * 12 * 64}, opts);
      const at::Tensor kt = qkv.narrow(-1, 12 * 64, 12 * 64).view({16, 512, 12, 64}).transpose(1, 2).transpose(-1, -2);
      eager = kt.clone(at::MemoryFormat::Contiguous);
      out = at::empty_like(eager);
      values.push_back({kt.const_data_ptr(), 0.0f});
      keep = {qkv};
    } else if (c.name.rfind("relayout", 0) == 0) {
      const at::Tensor qkv = at::randn({16, 512, 3 * 12 * 64}, opts);
      const at::Tensor q = qkv.narrow(-1, 0, 12 * 64).view({16, 512, 12, 64}).transpose(1, 2);
      eager = q.clone(at::MemoryFormat::Contiguous);
      out = at::empty_like(eager);
      values.push_back({q.const_data_ptr(), 0.0f});
      keep = {qkv};
    } else {
      const at::Tensor scores = at::randn({8, 12, 512, 512}, opts), mask = at::randn({8, 1, 512, 512}, opts);
      eager = at::softmax(scores * 0.125 + mask, -1);
      out = at::empty_like(eager);
      for (const at::Tensor& t : {scores, mask}) values.push_back({t.const_data_ptr(), 0.0f});
      keep = {scores, mask};
    }
    out.fill_(std::nan(""));
    ASSERT_TRUE(chain::launchChainPlan(plan, values, {out.mutable_data_ptr()}, stream));
    EXPECT_EQ(compareChainOutputs({out.reshape({v.rows, v.cols})}, {eager.reshape({v.rows, v.cols})},
                                  chainTolerance(v.ir)),
              "");
  }
}

// Note [The group view]: diffusers' GroupNorm(32) + SiLU and BiT's GroupNorm(32) + ReLU over their group views
// (per-channel weight and bias repeated over HxW: Note [Repeated columns]). Every point of the space the tuner
// tries passes or fails the five stages on its own (the reference runs eager's one native_group_norm); the first
// point's plan computes eager's F.silu(F.group_norm(x)) on the real tensors; the tuner's outcome against eager is
// printed (the benchmark, not this test, says how fast).
TEST(ChainTunerGpuTest, GivenGroupNormActivationVariantsWhenHarnessedAndTunedThenThePlanComputesEagerOnRealTensors) {
  REQUIRE_CUDA_AND_NVRTC();
  const std::string arch = queryDevice(0).nvrtcArch();
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  struct Case {
    std::string name;
    DType dtype;
    chain::OpKind act;
    chain::GroupNormShape shape;
  };
  const std::vector<Case> cases = {
      {"SD UNet fp16 [2, 320, 64, 64] + silu", DType::Float16, chain::OpKind::Silu, {2, 320, 4096, 32}},
      {"BiT bf16 [32, 256, 56, 56] + relu", DType::BFloat16, chain::OpKind::Relu, {32, 256, 3136, 32}},
      {"BiT bf16 [32, 2048, 7, 7] + relu", DType::BFloat16, chain::OpKind::Relu, {32, 2048, 49, 32}},
      {"VAE fp32 [1, 128, 64, 64] + silu", DType::Float32, chain::OpKind::Silu, {1, 128, 4096, 32}},
      // Note [Rows split over a cluster]: few long groups, where the space offers clusters.
      {"VAE fp16 [1, 512, 128, 128] + silu", DType::Float16, chain::OpKind::Silu, {1, 512, 16384, 32}},
      {"UNet fp16 [2, 640, 64, 64] + silu", DType::Float16, chain::OpKind::Silu, {2, 640, 4096, 32}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ChainVariant v{chain::groupNormActChain(c.dtype, 1e-5, c.act), chain::groupNormRows(c.shape),
                         chain::groupNormCols(c.shape), 0, chain::groupNormActLayout(c.shape)};
    const std::vector<chain::ChainKernelParams> space = chain::chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
    ASSERT_FALSE(space.empty());
    const at::ScalarType type = chainScalarType(c.dtype);
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(type);
    at::manual_seed(17);
    const int64_t channels = c.shape.channels;
    const at::Tensor x = at::randn({c.shape.batch, channels, c.shape.hw}, opts) * 2 + 1;
    const at::Tensor w = at::rand({channels}, opts) * 2 - 0.5, b = at::randn({channels}, opts) * 0.1;
    const at::Tensor norm = at::group_norm(x, c.shape.groups, w, b, 1e-5);
    const at::Tensor eager = c.act == chain::OpKind::Silu ? at::silu(norm) : at::relu(norm);
    std::vector<chain::ChainInputValue> values;
    for (const at::Tensor& t : {x, w, b}) values.push_back({t.const_data_ptr(), 0.0f});
    // The space's first point, and its first cluster point where it has one (Note [Rows split over a cluster]).
    std::vector<chain::ChainKernelParams> checked = {space.front()};
    for (const chain::ChainKernelParams& p : space) {
      if (p.cluster > 1) {
        checked.push_back(p);
        break;
      }
    }
    for (const chain::ChainKernelParams& p : checked) {
      const std::string params = chain::chainEntryParams(v, p).dump();
      const std::string cubin = compileToCubin(chain::generateChainSource(v.ir, p, v.layout), "hk_chain.cu", arch,
                                               chain::chainCompileOptions()).cubin;
      const chain::ChainPlan plan = chain::makeChainPlan(v, params, cubin);
      const HarnessReport report = runChainHarness(plan);
      EXPECT_TRUE(report.passed) << p.describe() << ": " << (report.failure() ? report.failure()->detail : "");
      at::Tensor out = at::full_like(eager, std::nan(""));
      ASSERT_TRUE(chain::launchChainPlan(plan, values, {out.mutable_data_ptr()}, stream)) << p.describe();
      EXPECT_EQ(compareChainOutputs({out.reshape({v.rows, v.cols})}, {eager.reshape({v.rows, v.cols})},
                                    chainTolerance(v.ir)),
                "")
          << p.describe();
    }
    if (c.shape.batch * c.shape.groups < 264) EXPECT_EQ(checked.size(), 2u) << "few long rows take clusters";
    const TuneOutcome outcome = tunePrinted(v, c.name);
    std::printf("[group norm chain] %s: %s\n", c.name.c_str(), outcome.accepted ? "accepted" : "eager kept");
    for (const CandidateRecord& r : outcome.metrics.candidates) {  // slower than eager, or passing: never wrong
      EXPECT_TRUE(r.error.empty() || r.stage == "timed" || r.stage == "benchmark")
          << r.params->dump() << ": " << r.stage << " " << r.error;
    }
  }
}

// Note [Eval BatchNorm in a chain]: HF's ResNet's eval BatchNorm2d + ReLU over the view of one channel a row (no
// reduction: the row kernel for repeated columns). The space's first point passes the five stages against eager's
// one batch norm (Note [Eval BatchNorm groups]) and computes eager on the real tensors; the tuner's outcome printed.
TEST(ChainTunerGpuTest, GivenEvalBatchNormReluVariantsWhenHarnessedAndTunedThenThePlanComputesEagerOnRealTensors) {
  REQUIRE_CUDA_AND_NVRTC();
  const std::string arch = queryDevice(0).nvrtcArch();
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  for (const chain::GroupNormShape& shape : {chain::GroupNormShape{32, 256, 3136, 256}, chain::GroupNormShape{32, 2048, 49, 2048}}) {
    SCOPED_TRACE(std::to_string(shape.channels) + " channels of " + std::to_string(shape.hw));
    const ChainVariant v{chain::batchNormActChain(DType::BFloat16, 1e-5, chain::OpKind::Relu), shape.batch * shape.channels,
                         shape.hw, 0, chain::batchNormActLayout(shape)};
    const std::vector<chain::ChainKernelParams> space = chain::chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
    ASSERT_FALSE(space.empty());
    const chain::ChainKernelParams p = space.front();
    const std::string cubin = compileToCubin(chain::generateChainSource(v.ir, p, v.layout), "hk_chain.cu", arch,
                                             chain::chainCompileOptions()).cubin;
    const chain::ChainPlan plan = chain::makeChainPlan(v, chain::chainEntryParams(v, p).dump(), cubin);
    const HarnessReport report = runChainHarness(plan);
    EXPECT_TRUE(report.passed) << p.describe() << ": " << (report.failure() ? report.failure()->detail : "");
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    at::manual_seed(19);
    const at::Tensor x = at::randn({shape.batch, shape.channels, shape.hw}, opts) * 2;
    const at::Tensor w = at::randn({shape.channels}, opts), b = at::randn({shape.channels}, opts) * 0.1;
    const at::Tensor mean = at::randn({shape.channels}, opts) * 0.1, var = at::rand({shape.channels}, opts) + 0.5;
    const at::Tensor eager = at::relu(at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true));
    at::Tensor out = at::full_like(eager, std::nan(""));
    std::vector<chain::ChainInputValue> values;
    for (const at::Tensor& t : {x, w, b, mean, var}) values.push_back({t.const_data_ptr(), 0.0f});
    ASSERT_TRUE(chain::launchChainPlan(plan, values, {out.mutable_data_ptr()}, stream));
    EXPECT_EQ(compareChainOutputs({out.reshape({v.rows, v.cols})}, {eager.reshape({v.rows, v.cols})},
                                  chainTolerance(v.ir)),
              "");
    const TuneOutcome outcome = tunePrinted(v, "eval batch_norm + relu " + std::to_string(shape.hw));
    std::printf("[batch norm chain] %lld x %lld: %s\n", static_cast<long long>(v.rows), static_cast<long long>(v.cols),
                outcome.accepted ? "accepted" : "eager kept");
    for (const CandidateRecord& r : outcome.metrics.candidates) {
      EXPECT_TRUE(r.error.empty() || r.stage == "timed" || r.stage == "benchmark")
          << r.params->dump() << ": " << r.stage << " " << r.error;
    }
  }
}

}  // namespace
}  // namespace hotkernel
