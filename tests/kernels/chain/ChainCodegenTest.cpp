// Tests of the chain kernel generator (ChainCodegen.h): the named chains
// compile with NVRTC (no GPU needed) at streaming, register-resident and
// several-rows points without spills; what the source stores and reduces;
// the parameter checks, launch geometry and argument list.

#include "hotkernel/chain/ChainCodegen.h"

#include <gtest/gtest.h>

#include <string>

#include "ChainCompileUtil.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

using testutil::ChainCompileJob;

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The text after the device library: the kernel itself.
std::string kernelOf(const std::string& source) { return source.substr(source.find("extern \"C\" __global__")); }

TEST(ChainCodegenTest, GivenTheNamedChainsWhenCompiledWithNvrtcThenEachIsACubinWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<ChainCompileJob> jobs;
  const ChainKernelParams stream{256, 8, 1, 0}, resident{256, 8, 1, 2}, rows4{128, 4, 4, 4}, warp{32, 8, 1, 0};
  for (const ChainKernelParams& p : {stream, resident, rows4, warp}) {
    jobs.push_back({"rms_norm_bf16", rmsNormChain(DType::BFloat16, 1e-6), p});
  }
  jobs.push_back({"rms_norm_f16_noweight", rmsNormChain(DType::Float16, 1e-5, false), stream});
  jobs.push_back({"rms_norm_f32", rmsNormChain(DType::Float32, 1e-6), ChainKernelParams{512, 4, 1, 4}});
  jobs.push_back({"rms_norm_bf16_sm80", rmsNormChain(DType::BFloat16, 1e-6), stream, "sm_80"});
  for (DType d : kernels::kAllDTypes) {
    jobs.push_back({std::string("swiglu_") + dtypeName(d), swigluChain(d), ChainKernelParams{256, 8, 1, 0}});
    jobs.push_back({std::string("new_gelu_") + dtypeName(d), newGeluChain(d), ChainKernelParams{256, 4, 1, 0}});
  }
  jobs.push_back({"residual_add_cast", residualAddCastChain(DType::BFloat16, DType::Float32), ChainKernelParams{128, 8}});
  jobs.push_back({"swiglu_sm80", swigluChain(DType::BFloat16), ChainKernelParams{1024, 2}, "sm_80"});
  testutil::expectCompiledWithoutSpills(jobs, testutil::compileChains(jobs));
}

TEST(ChainCodegenTest, GivenRmsNormWhenGeneratedThenOnlyTheOutputIsStoredAfterOneRowReduction) {
  const ChainIR ir = rmsNormChain(DType::BFloat16, 1e-6);
  const std::string streaming = generateChainSource(ir, ChainKernelParams{256, 8, 1, 0});
  EXPECT_EQ(streaming, generateChainSource(ir, ChainKernelParams{256, 8, 1, 0}));  // deterministic
  const std::string kernel = kernelOf(streaming);
  EXPECT_NE(kernel.find("hk_chain(const void* in0_, const void* in1_, void* out0_, long long rows, long long cols)"),
            std::string::npos)
      << kernel;
  EXPECT_EQ(count(kernel, "hk_store_"), 1u) << kernel;  // the bf16 output; no intermediate
  EXPECT_EQ(count(kernel, "hk_store_bf16(out0 + hk_base"), 1u) << kernel;
  EXPECT_EQ(count(kernel, "hk_row_sum("), 1u) << kernel;
  EXPECT_EQ(count(kernel, "hk_mean_factor)"), 1u) << kernel;
  EXPECT_NE(kernel.find("hk_round_bf16("), std::string::npos) << kernel;  // the explicit cast
  EXPECT_NE(kernel.find("rsqrtf("), std::string::npos) << kernel;
  // Two passes, each loading x; the weight only in the last.
  EXPECT_EQ(count(kernel, "hk_load_bf16(in0 + hk_base"), 2u) << kernel;
  EXPECT_EQ(count(kernel, "hk_load_bf16(in1 + hk_v * HK_VEC"), 1u) << kernel;
  // Register-resident: one load of each input, before the passes.
  const std::string resident = kernelOf(generateChainSource(ir, ChainKernelParams{256, 8, 1, 2}));
  EXPECT_EQ(count(resident, "hk_load_bf16(in0"), 1u) << resident;
  EXPECT_NE(resident.find("float x0[HK_ITEMS][HK_VEC]"), std::string::npos) << resident;
  // The key's text heads the source.
  EXPECT_NE(streaming.find("//   %4 = mean f32 row %3 keepdim"), std::string::npos) << streaming.substr(0, 800);
  EXPECT_NE(streaming.find("#define HK_ITEMS 0"), std::string::npos);
}

TEST(ChainCodegenTest, GivenPointwiseChainsWhenGeneratedThenTheyStrideTheGridAndFoldScalars) {
  const std::string gelu = kernelOf(generateChainSource(newGeluChain(DType::BFloat16), ChainKernelParams{256, 8}));
  EXPECT_NE(gelu.find("hk_v += static_cast<long long>(gridDim.x) * HK_THREADS"), std::string::npos) << gelu;
  EXPECT_EQ(gelu.find("hk_red"), std::string::npos) << gelu;
  EXPECT_EQ(gelu.find("hk_v / hk_cvec"), std::string::npos) << gelu;  // all Full: no row or column index
  // 0.044715 as a float32 (0x3d372713), ATen's opmath scalar; pow(x, 3) rounds x * x to bf16 first.
  EXPECT_NE(gelu.find("__uint_as_float(0x3d372713u)"), std::string::npos) << gelu;
  EXPECT_NE(gelu.find("hk_round_bf16(hk_sq("), std::string::npos) << gelu;
  EXPECT_EQ(count(gelu, "hk_store_bf16"), 1u) << gelu;
  // Two outputs of two dtypes, each stored once.
  const std::string residual =
      kernelOf(generateChainSource(residualAddCastChain(DType::BFloat16, DType::Float32), ChainKernelParams{128, 4}));
  EXPECT_EQ(count(residual, "hk_store_bf16(out0"), 1u) << residual;
  EXPECT_EQ(count(residual, "hk_store_f32(out1"), 1u) << residual;
  // A Column output is written by row 0, a Row output by column 0.
  ChainIR mixed;
  const int w = mixed.addInput(DType::Float32, ShapeClass::Column);
  const int r = mixed.addInput(DType::Float16, ShapeClass::Row);
  mixed.markOutput(mixed.addUnary(OpKind::Exp, w));
  mixed.markOutput(mixed.addUnary(OpKind::Neg, r));
  mixed.markOutput(mixed.addBinary(OpKind::Div, w, r));
  const std::string m = kernelOf(generateChainSource(mixed, ChainKernelParams{64, 2}));
  EXPECT_NE(m.find("if (row == 0) hk_store_f32(out0"), std::string::npos) << m;
  EXPECT_NE(m.find("if (hk_cv == 0) hk_st_f16(out1 + row"), std::string::npos) << m;
  EXPECT_NE(m.find("hk_store_f32(out2 + hk_v * HK_VEC"), std::string::npos) << m;
  EXPECT_NE(m.find("__fdiv_rn("), std::string::npos) << m;
}

TEST(ChainCodegenTest, GivenParametersWhenCheckedThenOutOfRangeOnesAreRefused) {
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{48, 4}), Error);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{2048, 4}), Error);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{256, 3}), Error);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{256, 4, 2, 0}), Error);  // 128 threads a row
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{256, 4, 1, 17}), Error);
  EXPECT_NO_THROW(generateChainSource(rms, ChainKernelParams{256, 4, 8, 1}));
  EXPECT_THROW(generateChainSource(swigluChain(DType::BFloat16), ChainKernelParams{256, 4, 1, 2}), Error);
  ChainIR wide;
  int acc = wide.addInput(DType::Float32, ShapeClass::Full);
  for (int k = 0; k < 10; ++k) acc = wide.addBinary(OpKind::Add, acc, wide.addInput(DType::Float32, ShapeClass::Full));
  wide.markOutput(acc);
  try {
    generateChainSource(wide, ChainKernelParams{});
    ADD_FAILURE() << "11 inputs and an output were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 10 inputs and outputs"), std::string::npos) << e.what();
  }
}

TEST(ChainCodegenTest, GivenVariantsWhenGeometryIsAskedThenGridsCoverTheRowsOrElements) {
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);
  const LaunchGeometry g = chainLaunchGeometry(rms, ChainKernelParams{256, 8, 1, 0}, 4096, 4096);
  EXPECT_EQ(g.gridX, 4096u);
  EXPECT_EQ(g.blockX, 256u);
  EXPECT_EQ(g.sharedBytes, 0u);
  EXPECT_EQ(chainLaunchGeometry(rms, ChainKernelParams{128, 4, 4, 1}, 10, 128).gridX, 3u);
  EXPECT_EQ(chainVariantProblem(rms, ChainKernelParams{256, 8, 1, 2}, 8, 4096), "");
  EXPECT_NE(chainVariantProblem(rms, ChainKernelParams{256, 8, 1, 2}, 8, 4104).find("over the registers' 4096"),
            std::string::npos);
  EXPECT_NE(chainVariantProblem(rms, ChainKernelParams{256, 8}, 8, 4100).find("not a multiple of vec 8"),
            std::string::npos);
  EXPECT_THROW(chainLaunchGeometry(rms, ChainKernelParams{256, 8}, 0, 4096), Error);
  const ChainIR swiglu = swigluChain(DType::BFloat16);
  EXPECT_EQ(chainLaunchGeometry(swiglu, ChainKernelParams{256, 8}, 16384, 8192).gridX, kMaxPointwiseCtas);
  EXPECT_EQ(chainLaunchGeometry(swiglu, ChainKernelParams{256, 8}, 3, 64).gridX, 1u);
  EXPECT_EQ(chainLaunchGeometry(swiglu, ChainKernelParams{128, 2}, 100, 64).gridX, 25u);  // 3200 vectors
}

TEST(ChainCodegenTest, GivenAChainWhenItsArgumentsAreLaidOutThenTheyFollowTheKernelsParameters) {
  ChainIR ir;
  const int x = ir.addInput(DType::BFloat16, ShapeClass::Full);
  const int s = ir.addInput(DType::Float32, ShapeClass::Scalar);
  const int r = ir.addInput(DType::Float16, ShapeClass::Row);
  ir.markOutput(ir.addBinary(OpKind::Mul, ir.addBinary(OpKind::Add, x, s), r));
  const std::vector<ChainArg> layout = chainKernelLayout(ir, ChainKernelParams{256, 8});
  ASSERT_EQ(layout.size(), 6u);
  EXPECT_EQ(layout[0].kind, ChainArg::Kind::Input);
  EXPECT_EQ(layout[0].alignmentBytes, 16u);  // 8 bf16
  EXPECT_EQ(layout[1].kind, ChainArg::Kind::ScalarInput);
  EXPECT_EQ(layout[2].alignmentBytes, 2u);  // a Row input is read one element at a time
  EXPECT_EQ(layout[3].kind, ChainArg::Kind::Output);
  EXPECT_EQ(layout[3].dtype, DType::Float32);  // bf16 + f32 scalar -> bf16; * f16 row -> f32
  EXPECT_EQ(layout[3].alignmentBytes, 32u);
  EXPECT_EQ(layout[4].kind, ChainArg::Kind::Rows);
  int a = 0, b = 0;
  float out[4];
  const KernelArgs args = chainKernelArgs(ir, {{&a, 0.0f}, {nullptr, 2.5f}, {&b, 0.0f}}, {out}, 7, 64);
  ASSERT_EQ(args.size(), 6u);
  EXPECT_EQ(args.pointerAt(0), &a);
  EXPECT_EQ(args.float32At(1), 2.5f);
  EXPECT_EQ(args.pointerAt(2), &b);
  EXPECT_EQ(args.pointerAt(3), out);
  EXPECT_EQ(args.int64At(4), 7);
  EXPECT_EQ(args.int64At(5), 64);
  EXPECT_EQ(generateChainSource(ir, ChainKernelParams{256, 8}).find("float s1, const void* in2_") != std::string::npos,
            true);
  EXPECT_THROW(chainKernelArgs(ir, {{&a, 0.0f}}, {out}, 7, 64), Error);
}

}  // namespace
}  // namespace hotkernel::chain
