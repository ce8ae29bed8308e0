// The fused chain kernels (kernels/chain, Note [Chain kernels]) on the GPU, and
// the chain IR's rules against CUDA ATen (Note [The chain's ATen reference]):
// the HF chains run by CUDA ATen op by op against the interpreter's AtenOrder
// mode, and the generated kernels at several parameter points against the
// interpreter's Fused mode (the same arithmetic) and against CUDA ATen.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "../ChainDifference.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/chain/RandomChain.h"
#include "hotkernel/optimizer/ChainReference.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using chain::ChainIR;
using chain::DType;
using chain::ShapeClass;

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

struct Named {
  std::string name;
  ChainIR ir;
  float unitsFloor = 0;  // Note [Units of a cancelling output] (tests/ChainDifference.h)
};

std::vector<Named> namedChains() {
  return {{"rms_norm bf16", chain::rmsNormChain(DType::BFloat16, 1e-6)},
          {"rms_norm fp16", chain::rmsNormChain(DType::Float16, 1e-5)},
          {"swiglu bf16", chain::swigluChain(DType::BFloat16)},
          {"new_gelu bf16", chain::newGeluChain(DType::BFloat16)},
          {"new_gelu fp16", chain::newGeluChain(DType::Float16)},
          {"residual add + cast bf16", chain::residualAddCastChain(DType::BFloat16, DType::Float32)},
          // HF's rotary on a contiguous x (a width-fixed chain of width 4096, the tests' cols).
          {"rotary bf16 contiguous", chain::rotaryChain(DType::BFloat16, 4096)},
          {"rotary fp16 contiguous", chain::rotaryChain(DType::Float16, 4096)},
          // Note [Softmax in a chain]: the reference runs them as aten::_softmax / _log_softmax (Note [Softmax groups]).
          {"softmax bf16", chain::softmaxChain(DType::BFloat16)},
          {"log_softmax fp16", chain::softmaxChain(DType::Float16, true)},
          {"attention scores fp16", chain::attentionSoftmaxChain(DType::Float16, 0.125)},
          // Note [LayerNorm in a chain]: the reference runs the group as one aten::native_layer_norm.
          // The bias cancels y * w in places: units at the terms' magnitude (inputs in [-2, 2]).
          {"residual layer_norm bf16", chain::residualLayerNormChain(DType::BFloat16, 1e-5), 2.0f},
          {"residual layer_norm fp16 no affine", chain::residualLayerNormChain(DType::Float16, 1e-12, false, false)}};
}

// Random CUDA inputs in [-2, 2] of each input's dtype, and their values for the interpreter.
struct Inputs {
  std::vector<ChainReferenceInput> aten;
  std::vector<std::vector<float>> values;
};

Inputs drawInputs(const ChainIR& ir, int64_t rows, int64_t cols) {
  Inputs in;
  for (int node : ir.inputs()) {
    const chain::Node& n = ir.nodes()[static_cast<size_t>(node)];
    ChainReferenceInput r;
    if (n.shape == ShapeClass::Scalar) {
      r.scalar = 1.5;
      in.values.push_back({1.5f});
    } else {
      r.tensor = (at::rand(chainValueSizes(n.shape, rows, chain::extentOf(n, cols)), at::TensorOptions().device(at::kCUDA)) *
                      4 -
                  2)
                     .to(chainScalarType(n.dtype));
      const at::Tensor f = r.tensor.to(at::kFloat).cpu().contiguous().reshape({-1});
      in.values.emplace_back(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
    }
    in.aten.push_back(r);
  }
  return in;
}

TEST(ChainKernelGpuTest, GivenTheHfChainsWhenRunByCudaAtenThenTheInterpretersAtenOrderAgrees) {
  REQUIRE_CUDA();
  at::manual_seed(3);
  const int64_t rows = 256, cols = 4096;
  for (const Named& c : namedChains()) {
    const Inputs in = drawInputs(c.ir, rows, cols);
    const std::vector<at::Tensor> aten = runChainWithAten(c.ir, in.aten, rows, cols);
    const auto want = chain::interpretChain(c.ir, rows, cols, in.values, chain::EvalMode::AtenOrder);
    for (size_t o = 0; o < aten.size(); ++o) {
      const DType dtype = c.ir.nodes()[static_cast<size_t>(c.ir.outputs()[o])].dtype;
      const ChainDifference d = compareWithInterpreted(aten[o], want[o], dtype, c.unitsFloor);
      std::printf("[chain rules] %s output %zu: %lld of %lld differ, worst %.1f units\n", c.name.c_str(), o,
                  static_cast<long long>(d.differing), static_cast<long long>(d.total), d.worstUnits);
      // The row sums' order aside, the interpreter is CUDA ATen's chain: a last bit of the float32
      // mean can move a 16-bit rounding by one unit, which the weight's product can make two.
      EXPECT_LE(d.worstUnits, 2.0) << c.name << " output " << o;
      EXPECT_LE(d.differing * 100, d.total) << c.name << " output " << o;
    }
  }
}

TEST(ChainKernelGpuTest, GivenTheHfChainsWhenRunAsFusedKernelsThenTheyComputeTheInterpretersFusedModeAndStayNearAten) {
  REQUIRE_CUDA();
  at::manual_seed(5);
  const std::string arch = queryDevice(0).nvrtcArch();
  const std::vector<chain::ChainKernelParams> points = {
      {256, 8, 1, 0}, {512, 4, 1, 0}, {256, 8, 1, 2}, {32, 8, 4, 0}, {128, 2, 1, 0}};
  const int64_t rows = 256, cols = 4096;
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  for (const Named& c : namedChains()) {
    const Inputs in = drawInputs(c.ir, rows, cols);
    const std::vector<at::Tensor> aten = runChainWithAten(c.ir, in.aten, rows, cols);
    const auto fused = chain::interpretChain(c.ir, rows, cols, in.values, chain::EvalMode::Fused);
    int served = 0;
    for (const chain::ChainKernelParams& p : points) {
      try {
        chain::checkChainKernel(c.ir, p);
      } catch (const Error&) {
        continue;  // a point this chain kind does not take (rowsPerCta / items of a pointwise chain)
      }
      if (!chain::chainVariantProblem(c.ir, p, rows, cols).empty()) continue;
      SCOPED_TRACE(c.name + " at " + p.describe());
      const std::string cubin =
          compileToCubin(chain::generateChainSource(c.ir, p), "chain.cu", arch, chain::chainCompileOptions()).cubin;
      const chain::LaunchGeometry g = chain::chainLaunchGeometry(c.ir, p, rows, cols);
      auto launcher = CudaKernelLauncher::load(0, cubin, chain::kChainKernelName,
                                               LaunchGeometry{g.gridX, g.blockX, g.sharedBytes}, 16, c.name);
      std::vector<chain::ChainInputValue> args;
      for (const ChainReferenceInput& r : in.aten) {
        chain::ChainInputValue v;
        v.pointer = r.tensor.defined() ? r.tensor.const_data_ptr() : nullptr;
        v.scalar = static_cast<float>(r.scalar);
        args.push_back(v);
      }
      std::vector<at::Tensor> outs;
      std::vector<void*> outPointers;
      for (const at::Tensor& a : aten) {
        outs.push_back(at::full_like(a, std::nan("")));
        outPointers.push_back(outs.back().mutable_data_ptr());
      }
      ASSERT_TRUE(launcher->launchArgs(chain::chainKernelArgs(c.ir, args, outPointers, rows, cols), stream));
      for (size_t o = 0; o < outs.size(); ++o) {
        const DType dtype = c.ir.nodes()[static_cast<size_t>(c.ir.outputs()[o])].dtype;
        const ChainDifference vsFused = compareWithInterpreted(outs[o], fused[o], dtype, c.unitsFloor);
        // The same arithmetic as the interpreter's Fused mode: the device's exp / tanh and the row sum's
        // order move a result by at most a unit or two of its dtype.
        EXPECT_LE(vsFused.worstUnits, 2.0) << "output " << o;
        const at::Tensor ref = aten[o].to(at::kFloat), got = outs[o].to(at::kFloat);
        // Note [Interpreter modes tolerance]: eager rounds every intermediate, the kernel only its outputs.
        const double worst = (got - ref).abs().sub(ref.abs().add(1.0).mul(1.0 / 16)).max().item<double>();
        EXPECT_LE(worst, 0.0) << "output " << o << " strays from CUDA ATen";
        EXPECT_FALSE(got.isnan().any().item<bool>()) << "output " << o << " not written everywhere";
      }
      ++served;
    }
    EXPECT_GE(served, 2) << c.name << ": fewer than two parameter points serve [256, 4096]";
  }
}

// The values of a CUDA tensor's memory from its data pointer, `elements` long, as floats.
std::vector<float> memoryOf(const at::Tensor& base, int64_t offset, int64_t elements) {
  const at::Tensor f = base.reshape({-1}).narrow(0, offset, elements).to(at::kFloat).cpu().contiguous();
  return std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
}

// HF's apply_rotary_pos_emb as the dispatcher delivers it (chain::rotaryRecording): x viewed from the
// projection by transpose(1, 2), x1 and x2 as views of it, cos and sin unsqueezed over the heads;
// the fused kernel reads all of them in place through the variant's layout and writes an output with
// x's strides, as eager allocates it.
TEST(ChainKernelGpuTest, GivenHfRotaryInItsStridedLayoutWhenRunAsAFusedKernelThenItComputesTheFusedModeAndStaysNearEager) {
  REQUIRE_CUDA();
  at::manual_seed(11);
  const std::string arch = queryDevice(0).nvrtcArch();
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  for (const DType dtype : {DType::BFloat16, DType::Float16}) {
    for (const chain::RotaryShape shape : {chain::RotaryShape{1, 32, 4096, 128}, chain::RotaryShape{1, 8, 4096, 128},
                                           chain::RotaryShape{2, 4, 64, 64}}) {
      const int64_t b = shape.batch, h = shape.heads, s = shape.seq, d = shape.headDim, half = d / 2;
      const ChainIR ir = chain::rotaryChain(dtype, d);
      const chain::ChainLayout layout = chain::rotaryLayout(shape);
      const int64_t rows = chain::rotaryRows(shape);
      const auto opts = at::TensorOptions().device(at::kCUDA).dtype(chainScalarType(dtype));
      const at::Tensor projection = (at::rand({b, s, h * d}, opts.dtype(at::kFloat)) * 4 - 2).to(chainScalarType(dtype));
      const at::Tensor cos = (at::rand({b, s, d}, opts.dtype(at::kFloat)) * 2 - 1).to(chainScalarType(dtype));
      const at::Tensor sin = (at::rand({b, s, d}, opts.dtype(at::kFloat)) * 2 - 1).to(chainScalarType(dtype));
      // Eager, as HF writes it.
      const at::Tensor x = projection.view({b, s, h, d}).transpose(1, 2);
      const at::Tensor c4 = cos.unsqueeze(1), s4 = sin.unsqueeze(1);
      const at::Tensor rotated = at::cat({x.narrow(-1, half, d - half).neg(), x.narrow(-1, 0, half)}, -1);
      const at::Tensor eager = x * c4 + rotated * s4;
      // The interpreter's Fused mode on the same memory.
      const auto span = [&](size_t arg) { return chain::layoutSpan(ir, layout, arg, rows, d); };
      const auto fused = chain::interpretChain(
          ir, rows, d, layout,
          {memoryOf(projection, 0, span(0)), memoryOf(cos, 0, span(1)), memoryOf(projection, half, span(2)),
           memoryOf(projection, 0, span(3)), memoryOf(sin, 0, span(4))},
          chain::EvalMode::Fused);
      const std::vector<chain::ChainInputValue> args = {
          {projection.const_data_ptr(), 0}, {cos.const_data_ptr(), 0},
          {static_cast<const char*>(projection.const_data_ptr()) + half * projection.element_size(), 0},
          {projection.const_data_ptr(), 0}, {sin.const_data_ptr(), 0}};
      int served = 0;
      // Note [Folded segments]: the halves folded into one thread, too.
      for (const chain::ChainKernelParams& p :
           {chain::ChainKernelParams{256, 8}, chain::ChainKernelParams{128, 8}, chain::ChainKernelParams{512, 4},
            chain::ChainKernelParams{1024, 2}, chain::ChainKernelParams{128, 8, 1, 0, false, true},
            chain::ChainKernelParams{256, 4, 1, 0, false, true},
            // Note [Unrolled elementwise chains]: every vector's loads first, the last step guarded.
            chain::ChainKernelParams{128, 8, 1, 2, false, true}, chain::ChainKernelParams{256, 4, 1, 4, false, true}}) {
        if (!chain::chainVariantProblem(ir, p, rows, d, layout).empty()) continue;
        SCOPED_TRACE(std::string(chain::shortDTypeName(dtype)) + " " + chain::layoutText(layout) + " at " + p.describe());
        const std::string cubin = compileToCubin(chain::generateChainSource(ir, p, layout), "rotary.cu", arch,
                                                 chain::chainCompileOptions())
                                      .cubin;
        const chain::LaunchGeometry g = chain::chainLaunchGeometry(ir, p, rows, d, layout);
        auto launcher = CudaKernelLauncher::load(0, cubin, chain::kChainKernelName,
                                                 LaunchGeometry{g.gridX, g.blockX, g.sharedBytes}, 16, "rotary");
        at::Tensor out = at::empty_strided(eager.sizes(), eager.strides(), opts).fill_(std::nan(""));
        ASSERT_EQ(out.strides(), x.strides()) << "eager's output follows x * cos";
        ASSERT_TRUE(launcher->launchArgs(chain::chainKernelArgs(ir, args, {out.mutable_data_ptr()}, rows, d), stream));
        // The output's values row-major over (batch, heads, positions), as the interpreter returns them.
        const ChainDifference vsFused = compareWithInterpreted(out.contiguous(), fused[0], dtype);
        EXPECT_LE(vsFused.worstUnits, 0.0) << "the kernel's arithmetic is the Fused mode's";
        const at::Tensor ref = eager.to(at::kFloat), got = out.to(at::kFloat);
        EXPECT_LE((got - ref).abs().sub(ref.abs().add(1.0).mul(1.0 / 16)).max().item<double>(), 0.0);
        EXPECT_FALSE(got.isnan().any().item<bool>()) << "not written everywhere";
        ++served;
      }
      EXPECT_GE(served, 5);
    }
  }
}

// Seeded random chains (with cats, and with reductions) in random strided and broadcast layouts: the
// kernel reads and writes memory through the layout; its outputs, gathered back through the layout
// here, are the interpreter's Fused mode on the same memory (within Note [Interpreter modes
// tolerance]'s bound: the device's transcendentals and sum order move a 16-bit rounding at most),
// written everywhere, and nothing between an output's rows is written.
TEST(ChainKernelGpuTest, GivenRandomChainsInRandomLayoutsWhenRunAsFusedKernelsThenTheyComputeTheInterpretersFusedMode) {
  REQUIRE_CUDA();
  const std::string arch = queryDevice(0).nvrtcArch();
  void* stream = c10::cuda::getCurrentCUDAStream(0).stream();
  const int64_t cols = 64;
  const std::vector<int64_t> dims = {3, 5, 7};
  const int64_t rows = 3 * 5 * 7;
  int launched = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    chain::RandomChainOptions o;
    if (seed % 2 == 1) {
      o.catWidth = cols;
      o.reductions = false;
    }
    const ChainIR ir = chain::randomChain(seed, o);
    const chain::ChainLayout layout = chain::randomChainLayout(ir, dims, cols, seed);
    const std::vector<chain::ChainKernelParams> space = chain::chainParameterSpace(ir, rows, cols, layout);
    if (space.empty()) continue;
    const chain::ChainKernelParams p = space[seed % space.size()];
    SCOPED_TRACE("seed " + std::to_string(seed) + " at " + p.describe() + ", layout " + chain::layoutText(layout));
    const auto memory = chain::randomChainInputs(ir, rows, cols, layout, seed);
    const auto fused = chain::interpretChain(ir, rows, cols, layout, memory, chain::EvalMode::Fused);
    std::vector<at::Tensor> keep;
    std::vector<chain::ChainInputValue> args;
    for (size_t k = 0; k < memory.size(); ++k) {
      const chain::Node& n = ir.node(ir.inputs()[k]);
      chain::ChainInputValue v;
      if (n.shape == ShapeClass::Scalar) {
        v.scalar = memory[k][0];
      } else {
        keep.push_back(at::tensor(memory[k]).to(at::kCUDA).to(chainScalarType(n.dtype)));
        v.pointer = keep.back().const_data_ptr();
      }
      args.push_back(v);
    }
    const size_t tensorInputs = chain::chainTensorArgs(ir).size() - ir.outputs().size();
    std::vector<at::Tensor> outs;
    std::vector<void*> outPointers;
    for (size_t m = 0; m < ir.outputs().size(); ++m) {
      const chain::Node& n = ir.node(ir.outputs()[m]);
      outs.push_back(at::full({chain::layoutSpan(ir, layout, tensorInputs + m, rows, cols)}, std::nan(""),
                              at::TensorOptions().device(at::kCUDA).dtype(chainScalarType(n.dtype))));
      outPointers.push_back(outs.back().mutable_data_ptr());
    }
    const std::string cubin =
        compileToCubin(chain::generateChainSource(ir, p, layout), "random.cu", arch, chain::chainCompileOptions()).cubin;
    const chain::LaunchGeometry g = chain::chainLaunchGeometry(ir, p, rows, cols, layout);
    auto launcher = CudaKernelLauncher::load(0, cubin, chain::kChainKernelName,
                                             LaunchGeometry{g.gridX, g.blockX, g.sharedBytes}, 16, "random");
    ASSERT_TRUE(launcher->launchArgs(chain::chainKernelArgs(ir, args, outPointers, rows, cols), stream));
    for (size_t m = 0; m < outs.size(); ++m) {
      const chain::Node& n = ir.node(ir.outputs()[m]);
      const at::Tensor host = outs[m].to(at::kFloat).cpu().contiguous();
      const float* got = host.data_ptr<float>();
      const std::vector<int64_t> dimsOf = chain::layoutRowDims(layout, rows);
      const std::vector<int64_t> strides = chain::layoutStrides(ir, layout, tensorInputs + m, rows, cols);
      std::vector<bool> written(static_cast<size_t>(host.numel()), false);
      const int64_t width = n.shape == ShapeClass::Full || n.shape == ShapeClass::Column ? cols : 1;
      for (int64_t r = 0; r < (n.shape == ShapeClass::Column ? 1 : rows); ++r) {
        const int64_t base = chain::layoutRowOffset(dimsOf, strides, r);
        for (int64_t c = 0; c < width; ++c) {
          const float x = got[base + c];
          const float f = fused[m][static_cast<size_t>(n.shape == ShapeClass::Full ? r * cols + c : n.shape == ShapeClass::Column ? c : r)];
          written[static_cast<size_t>(base + c)] = true;
          ASSERT_FALSE(std::isnan(x)) << "output " << m << " (" << r << ", " << c << ") not written";
          ASSERT_LE(std::fabs(static_cast<double>(x) - f), 0x1p-4 * (1.0 + std::fabs(static_cast<double>(f))))
              << "output " << m << " (" << r << ", " << c << "): " << x << " vs " << f;
        }
      }
      for (int64_t e = 0; e < host.numel(); ++e) {
        if (!written[static_cast<size_t>(e)]) ASSERT_TRUE(std::isnan(got[e])) << "output " << m << " element " << e << " written between rows";
      }
    }
    ++launched;
  }
  EXPECT_GE(launched, 30);
}

}  // namespace
}  // namespace hotkernel
