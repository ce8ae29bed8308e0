// Tests of the chain kernel generator (ChainCodegen.h): the named chains
// compile with NVRTC (no GPU needed) at streaming, register-resident and
// several-rows points without spills; what the source stores and reduces;
// the parameter checks, launch geometry and argument list.

#include "hotkernel/chain/ChainCodegen.h"

#include <gtest/gtest.h>

#include <string>

#include "ChainCompileUtil.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/ChainLayout.h"
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
  EXPECT_NE(m.find("hk_div_row("), std::string::npos) << m;  // by a Row value (Note [Division by a row value])
}

// The second vocabulary (Note [Chain op arithmetic]): every op in one chain, each dtype, an elementwise and a row
// kernel (its sum reads them).
TEST(ChainCodegenTest, GivenEveryOpOfTheSecondVocabularyWhenCompiledWithNvrtcThenEachIsACubinWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<ChainCompileJob> jobs;
  for (DType d : kernels::kAllDTypes) {
    ChainIR ir;
    const int x = ir.addInput(d, ShapeClass::Full);
    const int y = ir.addInput(d, ShapeClass::Full);
    int v = ir.addBinary(OpKind::Maximum, ir.addUnary(OpKind::Sin, x), ir.addUnary(OpKind::Cos, y));
    v = ir.addBinary(OpKind::Minimum, ir.addUnary(OpKind::Erf, v), ir.addConstant(0.75));
    v = ir.addUnary(OpKind::Hardswish, ir.addUnary(OpKind::Expm1, v));
    v = ir.addUnary(OpKind::Log1p, ir.addUnary(OpKind::Hardsigmoid, ir.addUnary(OpKind::LeakyRelu, v, 0.1)));
    v = ir.addUnary(OpKind::Mish, ir.addUnary(OpKind::Softplus, v));  // Note [Softplus and Mish in a chain]
    ChainIR rows = ir;
    ir.markOutput(v);
    rows.markOutput(rows.addBinary(OpKind::Div, v, rows.addReduce(OpKind::Sum, v, /*keepdim=*/true)));
    const std::string name = std::string("vocabulary2_") + dtypeName(d);
    jobs.push_back({name, ir, ChainKernelParams{256, 4, 1, 0}});
    jobs.push_back({name + "_rows", rows, ChainKernelParams{128, 4, 1, 2}});
  }
  testutil::expectCompiledWithoutSpills(jobs, testutil::compileChains(jobs));
  // Each op's device function or expression is in the source.
  const std::string source = generateChainSource(jobs[0].chain, jobs[0].params);
  for (const char* call : {"sinf(", "cosf(", "erff(", "expm1f(", "log1pf(", "hk_hardswish(", "hk_hardsigmoid(",
                           "hk_maximum(", "hk_minimum(", "hk_leaky_relu(", "hk_softplus(", "hk_mish("}) {
    EXPECT_NE(kernelOf(source).find(call), std::string::npos) << call;
  }
}

TEST(ChainCodegenTest, GivenParametersWhenCheckedThenOutOfRangeOnesAreRefused) {
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{48, 4}), Error);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{2048, 4}), Error);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{256, 3}), Error);
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{256, 4, 2, 0}), Error);  // 128 threads a row
  EXPECT_THROW(generateChainSource(rms, ChainKernelParams{256, 4, 1, 17}), Error);
  EXPECT_NO_THROW(generateChainSource(rms, ChainKernelParams{256, 4, 8, 1}));
  // Elementwise: one row a CTA, at most 4 vectors a thread a step (Note [Unrolled elementwise chains]).
  EXPECT_NO_THROW(generateChainSource(swigluChain(DType::BFloat16), ChainKernelParams{256, 4, 1, 4}));
  EXPECT_THROW(generateChainSource(swigluChain(DType::BFloat16), ChainKernelParams{256, 4, 1, 5}), Error);
  EXPECT_THROW(generateChainSource(swigluChain(DType::BFloat16), ChainKernelParams{256, 4, 2, 0}), Error);
  ChainIR wide;
  int acc = wide.addInput(DType::Float32, ShapeClass::Full);
  for (int k = 0; k < 16; ++k) acc = wide.addBinary(OpKind::Add, acc, wide.addInput(DType::Float32, ShapeClass::Full));
  wide.markOutput(acc);
  EXPECT_NO_THROW(generateChainSource(wide, ChainKernelParams{}));  // 17 inputs and an output: at the limit
  acc = wide.addBinary(OpKind::Add, acc, wide.addInput(DType::Float32, ShapeClass::Full));
  wide.markOutput(acc);
  try {
    generateChainSource(wide, ChainKernelParams{});
    ADD_FAILURE() << "18 inputs and two outputs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 18 inputs and outputs"), std::string::npos) << e.what();
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

TEST(ChainCodegenTest, GivenTheRotaryChainInItsLayoutsWhenCompiledWithNvrtcThenEachIsACubinWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<ChainCompileJob> jobs;
  for (const DType d : {DType::BFloat16, DType::Float16}) {
    const std::string name = std::string("rotary_") + dtypeName(d);
    jobs.push_back({name + "_q", rotaryChain(d, 128), ChainKernelParams{256, 8}, "sm_90a", rotaryLayout({1, 32, 4096, 128})});
    jobs.push_back({name + "_k", rotaryChain(d, 128), ChainKernelParams{128, 8}, "sm_90a", rotaryLayout({1, 8, 4096, 128})});
    jobs.push_back({name + "_small", rotaryChain(d, 64), ChainKernelParams{256, 4}, "sm_90a", rotaryLayout({2, 4, 64, 64})});
    jobs.push_back({name + "_contiguous", rotaryChain(d, 128), ChainKernelParams{512, 8}});
    // Note [Folded segments]: the halves in one thread.
    jobs.push_back({name + "_q_folded", rotaryChain(d, 128), ChainKernelParams{128, 8, 1, 0, false, true}, "sm_90a",
                    rotaryLayout({1, 32, 4096, 128})});
    jobs.push_back({name + "_contiguous_folded", rotaryChain(d, 128), ChainKernelParams{256, 4, 1, 0, false, true}});
  }
  testutil::expectCompiledWithoutSpills(jobs, testutil::compileChains(jobs));
}

// Note [Softmax in a chain]: two dependent row reductions (the sum reads the max), GPT-2's attention scores with
// the mask broadcast over the heads, at every point of their spaces (the tuner may pick any).
TEST(ChainCodegenTest, GivenSoftmaxChainsAndRelayoutCopiesWhenCompiledAtEveryPointOfTheirSpacesThenEachIsACubinWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<ChainCompileJob> jobs;
  const AttentionShape gpt2{16, 12, 512, 512};
  for (const ChainKernelParams& p : chainParameterSpace(attentionSoftmaxChain(DType::Float16, 0.125),
                                                        attentionRows(gpt2), 512, attentionSoftmaxLayout(gpt2))) {
    jobs.push_back({"attention_softmax_f16", attentionSoftmaxChain(DType::Float16, 0.125), p, "sm_90a",
                    attentionSoftmaxLayout(gpt2)});
  }
  const size_t attentionPoints = jobs.size();
  // Note [Relayout copies]: GPT-2's q copied out of its fused QKV projection, at every point of its space.
  const RotaryShape heads{16, 12, 512, 64};
  for (const ChainKernelParams& p :
       chainParameterSpace(relayoutCopyChain(DType::Float16), 16 * 12 * 512, 64, headViewCopyLayout(heads, 3))) {
    jobs.push_back({"relayout_copy_f16", relayoutCopyChain(DType::Float16), p, "sm_90a", headViewCopyLayout(heads, 3)});
  }
  // Note [Transposed copies]: GPT-2's k^T copied contiguous, at every point of its space.
  const size_t before = jobs.size();
  for (const ChainKernelParams& p :
       chainParameterSpace(relayoutCopyChain(DType::Float16), 16 * 12 * 64, 512, headTransposeCopyLayout(heads, 3))) {
    jobs.push_back({"transposed_copy_f16", relayoutCopyChain(DType::Float16), p, "sm_90a",
                    headTransposeCopyLayout(heads, 3)});
  }
  EXPECT_EQ(jobs.size() - before, 13u) << "vec 2 and 1, tiles of 64 and 32 at 256, 512, 128 and 1024 threads, "
                                          "each thread two vectors of the tile at least (a tile of 32: at most 256 "
                                          "threads at vec 2, 512 at vec 1)";
  for (const ChainKernelParams& p : chainParameterSpace(softmaxChain(DType::BFloat16, true), 64, 32000)) {
    jobs.push_back({"log_softmax_bf16", softmaxChain(DType::BFloat16, true), p});
  }
  EXPECT_GE(attentionPoints, 2u);
  EXPECT_GT(jobs.size(), attentionPoints);
  testutil::expectCompiledWithoutSpills(jobs, testutil::compileChains(jobs));
  // The max and then the sum of exp(x - max) are two passes over the row, then the output pass.
  const std::string source = kernelOf(generateChainSource(softmaxChain(DType::Float32), ChainKernelParams{256, 4}));
  const size_t max = source.find("hk_row_max("), sum = source.find("hk_row_sum("), store = source.find("hk_store_f32(");
  ASSERT_NE(max, std::string::npos) << source;
  ASSERT_NE(sum, std::string::npos) << source;
  EXPECT_LT(max, sum);
  EXPECT_LT(sum, store);
  EXPECT_LT(source.find("expf(", max), sum);  // the sum's pass computes exp(x - max)
}

// Note [Transposed copies]: the tile is read along the input's stride-1 row dim and written along the output's
// columns through a padded float32 tile; only tiles of 32 or 64 at vec 1 serve a transposed layout, and a tile
// serves no other.
TEST(ChainCodegenTest, GivenATransposedCopyWhenGeneratedThenItIsATiledTransposeAndOnlyTilePointsServeIt) {
  const ChainIR copy = relayoutCopyChain(DType::BFloat16);
  const RotaryShape heads{16, 12, 512, 64};
  const ChainLayout kt = headTransposeCopyLayout(heads, 3);
  const int64_t rows = 16 * 12 * 64, cols = 512;
  const std::string source = kernelOf(generateChainSource(copy, ChainKernelParams{256, 1, 64, 0}, kt));
  EXPECT_NE(source.find("__shared__ float hk_tile[HK_ROWS][HK_ROWS + 1];"), std::string::npos) << source;
  EXPECT_NE(source.find("hk_src = in0 + hk_o0 + hk_t0 + hk_lane;"), std::string::npos) << source;
  EXPECT_NE(source.find("hk_load_bf16(hk_src + hk_c * 2304LL, hk_v[hk_i]);"), std::string::npos) << source;
  EXPECT_NE(source.find("hk_dst = out0 + hk_o1 + hk_c0 + hk_lane;"), std::string::npos) << source;
  EXPECT_NE(source.find("hk_store_bf16(hk_dst + (hk_t0 + hk_dt) * 512LL, hk_o);"), std::string::npos) << source;
  // Every load of a thread comes before the tile is written.
  EXPECT_LT(source.find("hk_load_bf16(hk_src"), source.find("hk_tile[hk_first + hk_i * HK_STEP][hk_lane + j] ="));
  // 192 (batch, head) pairs, one tile of the 64-long head dim, 8 of the 512 positions.
  EXPECT_EQ(chainLaunchGeometry(copy, ChainKernelParams{256, 1, 64, 0}, rows, cols, kt).gridX, 192u * 8u);
  EXPECT_EQ(chainLaunchGeometry(copy, ChainKernelParams{256, 1, 32, 0}, rows, cols, kt).gridX, 192u * 2u * 16u);
  EXPECT_NE(chainVariantProblem(copy, ChainKernelParams{256, 8, 1, 0}, rows, cols, kt).find("a tile of 32 or 64"),
            std::string::npos);
  EXPECT_NE(chainVariantProblem(copy, ChainKernelParams{256, 1, 16, 0}, rows, cols, kt).find("a tile of 32 or 64"),
            std::string::npos);
  EXPECT_NE(chainVariantProblem(copy, ChainKernelParams{256, 1, 64, 0}, 16 * 12 * 512, 64, headViewCopyLayout(heads, 3))
                .find("is a transposed copy's tile"),
            std::string::npos);
  EXPECT_THROW(checkChainKernel(swigluChain(DType::BFloat16), ChainKernelParams{256, 1, 64, 0}), Error);
  // The generator refuses a transposed layout at a point that is no tile.
  EXPECT_THROW(generateChainSource(copy, ChainKernelParams{256, 8, 1, 0}, kt), Error);
  EXPECT_THROW(generateChainSource(copy, ChainKernelParams{256, 1, 64, 2}, kt), Error);
  EXPECT_NE(chainVariantProblem(copy, ChainKernelParams{1024, 2, 32, 0}, rows, cols, kt).find("square of elements"),
            std::string::npos);
  for (const ChainKernelParams& p : chainParameterSpace(copy, rows, cols, kt)) {
    EXPECT_TRUE(p.vec == 1 || p.vec == 2) << p.describe();
    EXPECT_TRUE(p.rowsPerCta == 32 || p.rowsPerCta == 64) << p.describe();
  }
  // vec 2 only where it divides every stride: a column stride of 2303 leaves vec 1.
  ChainLayout odd = kt;
  odd.colStrides[0] = 2303;
  EXPECT_NE(chainVariantProblem(copy, ChainKernelParams{256, 2, 64, 0}, rows, cols, odd).find("stride 2303"),
            std::string::npos);
  EXPECT_EQ(chainVariantProblem(copy, ChainKernelParams{256, 1, 64, 0}, rows, cols, odd), "");
}

TEST(ChainCodegenTest, GivenAtenRoundingWhenGeneratedThenEvery16BitComputedValueIsRoundedAndItCompiles) {
  // Note [ATen rounding in a fused kernel]
  ChainKernelParams aten{256, 8, 1, 0};
  aten.atenRounding = true;
  const ChainIR rotary = rotaryChain(DType::BFloat16, 128);
  const std::string fused = kernelOf(generateChainSource(rotary, ChainKernelParams{256, 8, 1, 0}));
  const std::string rounded = kernelOf(generateChainSource(rotary, aten));
  EXPECT_EQ(count(fused, "hk_round_bf16("), 0u) << fused;  // intermediates in float32, the store rounds
  // x * cos, the negated half, rot * sin and their sum: each rounded as ATen stores it.
  EXPECT_GE(count(rounded, "hk_round_bf16("), 4u) << rounded;
  EXPECT_NE(generateChainSource(rotary, aten).find("parameters t256 v8 r1 i0 aten"), std::string::npos);
  // A row reduction of a 16-bit value is rounded too; float32 chains are unchanged.
  EXPECT_TRUE(atenRoundingApplies(rotary));
  EXPECT_TRUE(atenRoundingApplies(swigluChain(DType::Float16)));
  EXPECT_FALSE(atenRoundingApplies(swigluChain(DType::Float32)));
  EXPECT_TRUE(atenRoundingApplies(rmsNormChain(DType::BFloat16, 1e-6)));  // its last mul (weight * h) is bf16
  ChainKernelParams aten32{256, 4, 1, 0};
  aten32.atenRounding = true;
  EXPECT_EQ(kernelOf(generateChainSource(swigluChain(DType::Float32), aten32)),
            kernelOf(generateChainSource(swigluChain(DType::Float32), ChainKernelParams{256, 4, 1, 0})));
  // Note [Division by a row value]: a float32 softmax divides by its sum when rounding as ATen, and multiplies by the
  // sum's scaled reciprocal, computed once a row, otherwise.
  const ChainIR softmax32 = softmaxChain(DType::Float32);
  EXPECT_TRUE(atenRoundingApplies(softmax32));
  const std::string fusedSoftmax = kernelOf(generateChainSource(softmax32, ChainKernelParams{256, 4, 1, 0}));
  const std::string atenSoftmax = kernelOf(generateChainSource(softmax32, aten32));
  EXPECT_EQ(count(fusedSoftmax, "_k = hk_row_scale(r"), 1u) << fusedSoftmax;
  EXPECT_EQ(count(fusedSoftmax, "_rcp = __fdiv_rn(1.0f, __fmul_rn(r"), 1u) << fusedSoftmax;
  EXPECT_EQ(fusedSoftmax.find("__fdiv_rn(v"), std::string::npos) << fusedSoftmax;
  EXPECT_EQ(atenSoftmax.find("_rcp"), std::string::npos) << atenSoftmax;
  EXPECT_NE(atenSoftmax.find("__fdiv_rn(v"), std::string::npos) << atenSoftmax;
  SKIP_WITHOUT_NVRTC();
  std::vector<ChainCompileJob> jobs{{"rotary_bf16_aten", rotary, aten},
                                    {"swiglu_f16_aten", swigluChain(DType::Float16), aten}};
  ChainKernelParams resident{256, 8, 1, 2};
  resident.atenRounding = true;
  jobs.push_back({"rms_norm_bf16_aten", rmsNormChain(DType::BFloat16, 1e-6), resident});
  testutil::expectCompiledWithoutSpills(jobs, testutil::compileChains(jobs));
}

TEST(ChainCodegenTest, GivenTheRotaryChainWhenGeneratedThenTheLayoutIsConstantsAndEachSegmentReadsItsPart) {
  const ChainLayout layout = rotaryLayout({1, 32, 4096, 128});
  const std::string source = generateChainSource(rotaryChain(DType::BFloat16, 128), ChainKernelParams{256, 8}, layout);
  const std::string kernel = kernelOf(source);
  EXPECT_NE(source.find("// layout 32x4096:128,4096|0,128|128,4096|128,4096|0,128|128,4096"), std::string::npos);
  // The row splits into (head, position) by constants, 32-bit: the rows fit.
  EXPECT_NE(kernel.find("hk_r % 4096u"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("const long long hk_o0 = hk_i0 * 128LL + hk_i1 * 4096LL;"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("const long long hk_o1 = hk_i1 * 128LL;"), std::string::npos) << kernel;  // cos: no head
  // Two segments: the first reads x2 (-x2 * sin), the second x1 64 columns to the left.
  EXPECT_NE(kernel.find("if (hk_c < 64) {"), std::string::npos) << kernel;
  EXPECT_EQ(count(kernel, "hk_load_bf16(in3 + hk_o2 + hk_c, x3)"), 1u) << kernel;           // x2: node 3, argument 2
  EXPECT_EQ(count(kernel, "hk_load_bf16(in5 + hk_o3 + (hk_c - 64), x5s64)"), 1u) << kernel;  // x1: node 5, argument 3
  EXPECT_EQ(count(kernel, "hk_load_bf16(in7 + hk_o4 + hk_c, x7)"), 2u) << kernel;           // sin in both segments
  EXPECT_EQ(count(kernel, "hk_load_bf16(in0 + hk_o0 + hk_c, x0)"), 2u) << kernel;  // x in both segments
  EXPECT_EQ(count(kernel, "hk_store_bf16(out0 + hk_o5 + hk_c, o0)"), 1u) << kernel;
  EXPECT_EQ(count(kernel, "cols / HK_VEC"), 0u) << "a width-fixed chain divides by its width";
  // A contiguous variant's source carries no layout; the width-free chains' sources do not change with layouts.
  EXPECT_EQ(generateChainSource(swigluChain(DType::BFloat16), ChainKernelParams{256, 8}, ChainLayout{}),
            generateChainSource(swigluChain(DType::BFloat16), ChainKernelParams{256, 8}));
  EXPECT_EQ(generateChainSource(rotaryChain(DType::BFloat16, 128), ChainKernelParams{256, 8}).find("// layout"),
            std::string::npos);
}

// Note [Unrolled elementwise chains]: at items k a thread takes k vectors a step, HK_THREADS apart; where all k
// exist it loads every vector's inputs into arrays before any arithmetic or store, and the last step runs the
// one-vector body guarded; the pointers are restrict and the grid k times smaller; items 0 is the one-vector
// kernel, unchanged, without restrict.
TEST(ChainCodegenTest, GivenUnrolledElementwisePointsWhenGeneratedThenEveryVectorsLoadsComeFirstWithRestrictPointers) {
  const ChainIR swiglu = swigluChain(DType::BFloat16);
  const std::string one = kernelOf(generateChainSource(swiglu, ChainKernelParams{256, 8}));
  EXPECT_EQ(one.find("__restrict__"), std::string::npos) << one;
  EXPECT_EQ(one.find("long long hk_t "), std::string::npos) << one;
  const std::string four = kernelOf(generateChainSource(swiglu, ChainKernelParams{256, 8, 1, 4}));
  EXPECT_NE(four.find("const unsigned short* __restrict__ in0 = "), std::string::npos) << four;
  EXPECT_NE(four.find("  unsigned short* __restrict__ out0 = "), std::string::npos) << four;
  EXPECT_NE(four.find("hk_t += static_cast<long long>(gridDim.x) * (HK_THREADS * HK_ITEMS)"), std::string::npos)
      << four;
  const size_t full = four.find("if (hk_t + (HK_ITEMS - 1) * HK_THREADS < hk_nvec) {");
  const size_t partial = four.find("hk_u < HK_ITEMS && hk_t + hk_u * HK_THREADS < hk_nvec");
  ASSERT_NE(full, std::string::npos) << four;
  ASSERT_NE(partial, std::string::npos) << four;
  // The full step: both inputs of every vector into arrays, then the arithmetic on them and the stores.
  EXPECT_NE(four.find("float x0[HK_ITEMS][HK_VEC];"), std::string::npos) << four;
  const size_t lastLoad = four.find("hk_load_bf16(in1 + hk_v * HK_VEC, x1[hk_u]);");
  ASSERT_NE(lastLoad, std::string::npos) << four;
  EXPECT_LT(four.find("hk_load_bf16(in0 + hk_v * HK_VEC, x0[hk_u]);"), lastLoad) << four;
  const size_t firstStore = four.find("hk_store_bf16(out0 + hk_v * HK_VEC");
  EXPECT_LT(lastLoad, four.find("x0[hk_u][j]")) << four;
  EXPECT_LT(lastLoad, firstStore) << four;
  EXPECT_LT(firstStore, partial) << four;
  EXPECT_EQ(count(four, "const long long hk_v = hk_t + hk_u * HK_THREADS;"), 3u) << four;  // loads, rest, last step
  EXPECT_EQ(count(four, "hk_store_bf16(out0 + hk_v * HK_VEC"), 2u) << four;
  EXPECT_EQ(count(four, "hk_load_bf16("), 4u) << four;  // gate and up, in each step kind
  EXPECT_EQ(count(four.substr(partial), "[hk_u]"), 0u) << "the last step is the one-vector body";
  // The grid: items times fewer CTAs, under the same cap.
  EXPECT_EQ(chainLaunchGeometry(swiglu, ChainKernelParams{256, 8, 1, 4}, 4096, 4096).gridX, 2048u);
  EXPECT_EQ(chainLaunchGeometry(swiglu, ChainKernelParams{256, 8}, 4096, 4096).gridX, 8192u);
  EXPECT_EQ(chainLaunchGeometry(swiglu, ChainKernelParams{128, 2, 1, 2}, 100, 64).gridX, 13u);  // 3200 vectors
  EXPECT_EQ(chainLaunchGeometry(swiglu, ChainKernelParams{256, 8, 1, 2}, 16384, 8192 * 8).gridX, kMaxPointwiseCtas);
  // Folded rotary: every load of both halves gathered; the Row-free layout offsets are the position.
  const ChainLayout layout = rotaryLayout({1, 8, 4096, 128});
  const ChainIR rotary = rotaryChain(DType::BFloat16, 128);
  const std::string folded = kernelOf(generateChainSource(rotary, ChainKernelParams{128, 8, 1, 2, false, true}, layout));
  EXPECT_EQ(count(folded, "hk_store_bf16(out0 + hk_o5 + "), 4u) << folded;  // both halves, full and last step
  EXPECT_EQ(count(folded, "hk_load_bf16(in0 + hk_o0 + (hk_p + 64), x0a64[hk_u]);"), 1u) << folded;
  EXPECT_NE(folded.find("__restrict__ in0"), std::string::npos) << folded;
  EXPECT_LT(folded.rfind("[hk_u]);"), folded.find("__fmul_rn")) << folded;
  // Unfolded, a Cat's segments pick their loads per vector: no items there.
  EXPECT_THROW(generateChainSource(rotary, ChainKernelParams{128, 8, 1, 2}, layout), Error);
  // A layout without a Cat (GPT-2's relayout copy of a head view): one segment, its loads gathered.
  const std::string copy = kernelOf(generateChainSource(relayoutCopyChain(DType::Float16), ChainKernelParams{128, 8, 1, 4},
                                                        headViewCopyLayout({16, 12, 512, 64}, 3)));
  EXPECT_NE(copy.find("float x0[HK_ITEMS][HK_VEC];"), std::string::npos) << copy;
  EXPECT_LT(copy.find("x0[hk_u]);"), copy.find("hk_store_f16(")) << copy;
  // A row kernel's items keep their meaning (the row in registers): no unrolled loop, no restrict.
  const std::string rms = kernelOf(generateChainSource(rmsNormChain(DType::BFloat16, 1e-6), ChainKernelParams{256, 8, 1, 2}));
  EXPECT_EQ(rms.find("long long hk_t "), std::string::npos) << rms;
  EXPECT_EQ(rms.find("__restrict__"), std::string::npos) << rms;
}

// Note [One store a vector]: a chain with a layout or a Cat stores each vector by one PTX vector store (its
// address defeats LLVM's store vectorizer), but a row kernel holding its row in registers; a contiguous chain
// keeps the struct store, its source as before.
TEST(ChainCodegenTest, GivenLayoutAndCatChainsWhenGeneratedThenTheirVectorStoresAreWrittenInPtx) {
  const ChainLayout rotary = rotaryLayout({1, 8, 4096, 128});
  const std::string strided = generateChainSource(rotaryChain(DType::BFloat16, 128), ChainKernelParams{128, 8}, rotary);
  EXPECT_NE(strided.find("st.global.v4.b32 [%0], {%1, %2, %3, %4};"), std::string::npos) << strided;
  EXPECT_NE(strided.find("st.global.v4.f32"), std::string::npos) << "every dtype's store, float32's too";
  // The first element in the low half of its word, as memory holds it.
  EXPECT_NE(strided.find("w[i] = static_cast<unsigned>(hk_f32_to_bf16(f[2 * i])) | "
                         "(static_cast<unsigned>(hk_f32_to_bf16(f[2 * i + 1])) << 16);"),
            std::string::npos)
      << strided;
  EXPECT_EQ(strided.find("c[k] = w;"), std::string::npos) << strided;
  const std::string cat = generateChainSource(rotaryChain(DType::Float16, 64), ChainKernelParams{256, 4});  // no layout
  EXPECT_NE(cat.find("st.global.v2.b32"), std::string::npos) << cat;
  // A row kernel streaming its row stores in PTX; one holding its row in registers keeps the struct store.
  const AttentionShape gpt2{16, 12, 512, 512};
  const ChainIR scores = attentionSoftmaxChain(DType::Float16, 0.125);
  EXPECT_NE(generateChainSource(scores, ChainKernelParams{128, 8, 4, 0}, attentionSoftmaxLayout(gpt2)).find("st.global.v4.b32"),
            std::string::npos);
  const std::string resident = generateChainSource(scores, ChainKernelParams{128, 8, 4, 2}, attentionSoftmaxLayout(gpt2));
  EXPECT_EQ(resident.find("st.global"), std::string::npos);
  EXPECT_NE(resident.find("c[k] = w;"), std::string::npos);
  for (const ChainKernelParams& p : {ChainKernelParams{256, 8}, ChainKernelParams{256, 8, 1, 4}}) {
    const std::string plain = generateChainSource(swigluChain(DType::BFloat16), p);
    EXPECT_EQ(plain.find("st.global"), std::string::npos) << p.describe();
    EXPECT_NE(plain.find("c[k] = w;"), std::string::npos) << p.describe();
  }
}

TEST(ChainCodegenTest, GivenUnrolledElementwisePointsWhenCompiledWithNvrtcThenEachIsACubinWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<ChainCompileJob> jobs;
  for (int items : {2, 4}) {
    const std::string i = std::to_string(items);
    jobs.push_back({"swiglu_bf16_i" + i, swigluChain(DType::BFloat16), ChainKernelParams{256, 8, 1, items}});
    jobs.push_back({"new_gelu_f32_i" + i, newGeluChain(DType::Float32), ChainKernelParams{128, 4, 1, items}});
    jobs.push_back({"residual_add_cast_i" + i, residualAddCastChain(DType::BFloat16, DType::Float32),
                    ChainKernelParams{128, 8, 1, items}});
    jobs.push_back({"relayout_copy_i" + i, relayoutCopyChain(DType::Float16), ChainKernelParams{128, 8, 1, items},
                    "sm_90a", headViewCopyLayout({16, 12, 512, 64}, 3)});
    jobs.push_back({"relayout_copy_f32_i" + i, relayoutCopyChain(DType::Float32), ChainKernelParams{128, 4, 1, items},
                    "sm_90a", headViewCopyLayout({16, 12, 512, 64}, 3)});
    jobs.push_back({"rotary_f16_vec2_i" + i, rotaryChain(DType::Float16, 64), ChainKernelParams{128, 2, 1, items, false, true}});
    jobs.push_back({"rotary_k_folded_i" + i, rotaryChain(DType::BFloat16, 128),
                    ChainKernelParams{128, 8, 1, items, false, true}, "sm_90a", rotaryLayout({1, 8, 4096, 128})});
  }
  jobs.push_back({"swiglu_bf16_i4_sm80", swigluChain(DType::BFloat16), ChainKernelParams{256, 8, 1, 4}, "sm_80"});
  testutil::expectCompiledWithoutSpills(jobs, testutil::compileChains(jobs));
}

// Note [Folded segments]: one thread a position in each half, every load before any arithmetic or store, a
// column both halves read loaded once, no branch on the segment; the grid covers half the vectors.
TEST(ChainCodegenTest, GivenTheRotaryChainFoldedWhenGeneratedThenEachThreadLoadsOnceAndStoresBothHalvesWithoutBranching) {
  const ChainIR ir = rotaryChain(DType::BFloat16, 128);
  const ChainLayout layout = rotaryLayout({1, 32, 4096, 128});
  const ChainKernelParams folded{128, 8, 1, 0, false, true};
  EXPECT_EQ(folded.describe(), "t128 v8 r1 i0 fold");
  const std::string kernel = kernelOf(generateChainSource(ir, folded, layout));
  EXPECT_NE(kernel.find("const long long hk_fvec = 64LL / HK_VEC;"), std::string::npos) << kernel;
  EXPECT_EQ(count(kernel, "if (hk_c"), 0u) << kernel;
  EXPECT_EQ(count(kernel, "hk_load_bf16(in0 + hk_o0 + hk_p, x0a0)"), 1u) << kernel;          // x, first half
  EXPECT_EQ(count(kernel, "hk_load_bf16(in0 + hk_o0 + (hk_p + 64), x0a64)"), 1u) << kernel;  // x, second half
  EXPECT_EQ(count(kernel, "hk_load_bf16(in3 + hk_o2 + hk_p, x3a0)"), 1u) << kernel;          // x2 for the first
  EXPECT_EQ(count(kernel, "hk_load_bf16(in5 + hk_o3 + hk_p, x5a0)"), 1u) << kernel;          // x1 for the second
  EXPECT_EQ(count(kernel, "hk_load_"), 8u) << kernel;  // x, cos, sin at both halves; x2 and x1 once
  EXPECT_EQ(count(kernel, "hk_store_bf16(out0 + hk_o5 + hk_p, o0f0)"), 1u) << kernel;
  EXPECT_EQ(count(kernel, "hk_store_bf16(out0 + hk_o5 + hk_p + 64, o0f1)"), 1u) << kernel;
  EXPECT_LT(kernel.rfind("hk_load_"), kernel.find("__fmul_rn")) << "every load comes first";
  const int64_t rows = 32 * 4096;
  EXPECT_EQ(chainLaunchGeometry(ir, folded, rows, 128, layout).gridX,
            chainLaunchGeometry(ir, ChainKernelParams{128, 8}, rows, 128, layout).gridX / 2);
  // Only chains whose cats cut equal segments fold.
  EXPECT_EQ(chainFoldWidth(ir, 128), 64);
  EXPECT_EQ(chainFoldWidth(swigluChain(DType::BFloat16), 4096), 0);
  EXPECT_THROW(checkChainKernel(swigluChain(DType::BFloat16), folded), Error);
  ChainIR uneven;
  const int a = uneven.addInput(DType::Float32, ShapeClass::Full, 8);
  const int b = uneven.addInput(DType::Float32, ShapeClass::Full, 24);
  uneven.markOutput(uneven.addCat({a, b}));
  EXPECT_EQ(chainFoldWidth(uneven, 32), 0);
  EXPECT_THROW(checkChainKernel(uneven, ChainKernelParams{128, 4, 1, 0, false, true}), Error);
  ChainIR thirds;
  const int c = thirds.addInput(DType::Float32, ShapeClass::Full, 8);
  const int e = thirds.addInput(DType::Float32, ShapeClass::Full, 8);
  const int f = thirds.addInput(DType::Float32, ShapeClass::Full, 8);
  thirds.markOutput(thirds.addCat({c, e, f}));
  EXPECT_EQ(chainFoldWidth(thirds, 24), 8);
  EXPECT_NO_THROW(checkChainKernel(thirds, ChainKernelParams{128, 4, 1, 0, false, true}));
}

// Note [Values kept across passes]: with the row in registers, the attention scores' scale-and-mask is computed
// in the max's pass only and exp(x - max) in the sum's pass only, both kept for the passes after; a streaming
// point (items 0) keeps nothing, and neither does a point whose arrays would pass 64 floats a thread.
TEST(ChainCodegenTest, GivenTheAttentionScoresInRegistersWhenGeneratedThenEachValueIsComputedInOnePassAndKept) {
  const ChainIR ir = attentionSoftmaxChain(DType::Float16, 0.125);
  const ChainLayout layout = attentionSoftmaxLayout({16, 12, 512, 512});
  const std::string kept = kernelOf(generateChainSource(ir, ChainKernelParams{128, 8, 4, 2}, layout));
  EXPECT_EQ(count(kept, "expf("), 1u) << kept;
  EXPECT_EQ(count(kept, "__fmul_rn(x0[hk_it][j]"), 1u) << kept;  // the scale, in the max's pass only
  EXPECT_EQ(count(kept, "float c5[HK_ITEMS][HK_VEC];"), 1u) << kept;
  EXPECT_EQ(count(kept, "c5[hk_it][j] = v5;"), 1u) << kept;
  EXPECT_EQ(count(kept, "const float v5 = c5[hk_it][j];"), 1u) << kept;
  EXPECT_EQ(count(kept, "c8[hk_it][j] = v8;"), 1u) << kept;
  EXPECT_EQ(count(kept, "const float v8 = c8[hk_it][j];"), 1u) << kept;
  const std::string streaming = kernelOf(generateChainSource(ir, ChainKernelParams{128, 8, 4, 0}, layout));
  EXPECT_EQ(count(streaming, "expf("), 2u) << streaming;
  EXPECT_EQ(count(streaming, "[HK_ITEMS][HK_VEC];"), 0u) << streaming;
  // 16 items of 8: 128 floats a kept array, over the room.
  const std::string wide = kernelOf(generateChainSource(softmaxChain(DType::Float32), ChainKernelParams{256, 8, 1, 16}));
  EXPECT_EQ(count(wide, "float c"), 0u) << wide;
}

TEST(ChainCodegenTest, GivenCatBoundariesAndStridesWhenVariantsAreCheckedThenVecMustDivideThem) {
  const ChainIR rotary = rotaryChain(DType::BFloat16, 128);
  const ChainLayout layout = rotaryLayout({1, 32, 4096, 128});
  EXPECT_EQ(chainCatBoundaries(rotary), std::vector<int64_t>{64});
  EXPECT_EQ(chainVariantProblem(rotary, ChainKernelParams{256, 8}, 32 * 4096, 128, layout), "");
  EXPECT_NE(chainVariantProblem(rotary, ChainKernelParams{256, 8}, 32 * 4096, 256, layout).find("width is 128"),
            std::string::npos);
  // A head dim of 20: the halves meet at 10, which vec 4 does not divide.
  const ChainIR odd = rotaryChain(DType::BFloat16, 20);
  EXPECT_NE(chainVariantProblem(odd, ChainKernelParams{256, 4}, 8, 20).find("is not a multiple of vec 4"), std::string::npos);
  EXPECT_EQ(chainVariantProblem(odd, ChainKernelParams{256, 2}, 8, 20), "");
  // A row stride that vec does not divide.
  ChainLayout skewed = rotaryLayout({1, 2, 4, 16});
  skewed.strides[1].back() = 20;
  EXPECT_NE(chainVariantProblem(rotaryChain(DType::BFloat16, 16), ChainKernelParams{128, 8}, 8, 16, skewed)
                .find("row stride 20 is not a multiple of vec 8"),
            std::string::npos);
  // A row kernel takes no cat.
  ChainIR reduced;
  const int a = reduced.addInput(DType::Float32, ShapeClass::Full, 8);
  const int b = reduced.addInput(DType::Float32, ShapeClass::Full, 8);
  const int cat = reduced.addCat({a, b});
  reduced.markOutput(reduced.addReduce(OpKind::Sum, cat, true));
  EXPECT_THROW(checkChainKernel(reduced, ChainKernelParams{128, 4, 1, 0}), Error);
}

}  // namespace
}  // namespace hotkernel::chain

namespace hotkernel::chain {
namespace {

// Note [Rows split over a cluster]: a cluster's row kernel carries __cluster_dims__, takes its slice from hk_v0,
// combines each reduction with the peers' (rank 0 alone writes row outputs) and waits for them before it exits;
// a kernel without a cluster has none of it. Every cluster point of the VAE's and a UNet block's group norm and of
// a long-row softmax compiles for sm_90a without spills; sm_80 has no clusters.
TEST(ChainCodegenTest, GivenClusterPointsWhenGeneratedThenEachCtaReducesItsSliceWithItsPeersAndTheyCompile) {
  const GroupNormShape vae{1, 512, 128 * 128, 32};
  const ChainIR gn = groupNormActChain(DType::Float16, 1e-5, OpKind::Silu);
  const ChainLayout layout = groupNormActLayout(vae);
  const ChainKernelParams clustered{1024, 8, 1, 8, false, false, 4};
  const std::string source = generateChainSource(gn, clustered, layout);
  const std::string kernel = kernelOf(source);
  EXPECT_NE(source.find("#define HK_CLUSTER 4"), std::string::npos);
  EXPECT_NE(kernel.find("__cluster_dims__(HK_CLUSTER, 1, 1)"), std::string::npos);
  EXPECT_NE(kernel.find("const int hk_v = hk_v0 + hk_it * HK_ROW_THREADS + hk_tid;"), std::string::npos) << kernel;
  EXPECT_EQ(count(kernel, "hk_cluster_sum("), 2u) << "the mean and the variance";
  EXPECT_EQ(count(kernel, "hk_cluster_sync();"), 1u) << "the last barrier before the CTA exits";
  const std::string plain = generateChainSource(gn, ChainKernelParams{1024, 8, 1, 0}, layout);
  for (const char* text : {"HK_CLUSTER", "__cluster_dims__", "hk_v0", "hk_cluster_"}) {
    EXPECT_EQ(plain.find(text), std::string::npos) << text;
  }
  // A row output (the softmax's sum kept) is written by rank 0 alone.
  ChainIR sums;
  const int x = sums.addInput(DType::Float32, ShapeClass::Full);
  sums.markOutput(sums.addReduce(OpKind::Amax, x, true));
  EXPECT_NE(kernelOf(generateChainSource(sums, {1024, 4, 1, 0, false, false, 2})).find("hk_live_row && hk_rank == 0"),
            std::string::npos);
  SKIP_WITHOUT_NVRTC();
  std::vector<ChainCompileJob> jobs;
  for (const ChainKernelParams& p : chainParameterSpace(gn, groupNormRows(vae), groupNormCols(vae), layout)) {
    if (p.cluster > 1) jobs.push_back({"group_norm_silu_vae", gn, p, "sm_90a", layout});
  }
  ASSERT_GE(jobs.size(), 6u);
  const GroupNormShape unet{2, 640, 64 * 64, 32};  // register-resident cluster points too
  for (const ChainKernelParams& p :
       chainParameterSpace(gn, groupNormRows(unet), groupNormCols(unet), groupNormActLayout(unet))) {
    if (p.cluster > 1) jobs.push_back({"group_norm_silu_unet", gn, p, "sm_90a", groupNormActLayout(unet)});
  }
  for (const ChainKernelParams& p : chainParameterSpace(softmaxChain(DType::BFloat16), 8, 1 << 18)) {
    if (p.cluster > 1) jobs.push_back({"softmax_bf16_long", softmaxChain(DType::BFloat16), p});
  }
  testutil::expectCompiledWithoutSpills(jobs, testutil::compileChains(jobs));
  const std::vector<ChainCompileJob> old = {{"cluster_sm80", gn, clustered, "sm_80", layout}};
  EXPECT_FALSE(testutil::compileChains(old)[0].ok) << "clusters need sm_90";
}

}  // namespace
}  // namespace hotkernel::chain
