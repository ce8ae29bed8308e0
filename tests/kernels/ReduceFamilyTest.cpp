// Tests of the last-dim reduction family on the CPU: the call guard (what the
// overrides refuse), output sizes, the variant / parameter / pointer guards,
// the whitelist and its register budget, the parameter space, options,
// geometry, bytes and tolerance; and the template compiled with NVRTC (no GPU
// needed): every point for sm_90a and sm_80 (the op cycling over the points),
// every op and dtype at the largest unroll of each CTA shape, amax and argmax
// at every vector width on both architectures, without spills.
// HOTKERNEL_REDUCE_COMPILE_ALL=1: every point for every op.

#include "hotkernel/kernels/ReduceFamily.h"

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "CompileCache.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

using P = ReduceParams;
using V = ReduceVariant;

// A call the family serves: x.sum(-1) on a contiguous bf16 [8, 512, 4096].
ReduceCall servedCall(ReduceOp op = ReduceOp::Sum) {
  ReduceCall c;
  c.op = op;
  c.dtype = DType::BFloat16;
  c.sizes = {8, 512, 4096};
  c.strides = {512 * 4096, 4096, 1};
  c.dims = std::vector<int64_t>{-1};
  return c;
}

TEST(ReduceFamilyTest, GivenPlainCallsOfEveryOpWhenGuardedThenServedWithTheFlattenedVariant) {
  for (ReduceOp op : kAllReduceOps) {
    V v;
    ASSERT_TRUE(ReduceFamily::guardCall(servedCall(op), &v)) << reduceOpName(op);
    EXPECT_EQ(v.dtype, DType::BFloat16);
    EXPECT_EQ(v.rows, 8 * 512);
    EXPECT_EQ(v.cols, 4096);
    EXPECT_EQ(v.op, op);
  }
  ReduceCall positive = servedCall();
  positive.dims = std::vector<int64_t>{2};  // ndim - 1
  EXPECT_TRUE(ReduceFamily::guardCall(positive, nullptr));
  ReduceCall keep = servedCall(ReduceOp::Argmax);
  keep.keepdim = true;
  EXPECT_TRUE(ReduceFamily::guardCall(keep, nullptr));
}

TEST(ReduceFamilyTest, GivenOneDimensionalAndSizeOneInputsWhenGuardedThenOneRowAndAnyStrideOfSizeOneDims) {
  ReduceCall c = servedCall();
  c.sizes = {1000};
  c.strides = {1};
  c.dims = std::vector<int64_t>{0};
  V v;
  ASSERT_TRUE(ReduceFamily::guardCall(c, &v));
  EXPECT_EQ(v.rows, 1);
  EXPECT_EQ(v.cols, 1000);
  // torch's contiguity: the stride of a size-1 dim does not matter.
  c.sizes = {4, 1, 64};
  c.strides = {64, 7, 1};
  c.dims = std::vector<int64_t>{-1};
  ASSERT_TRUE(ReduceFamily::guardCall(c, &v));
  EXPECT_EQ(v.rows, 4);
  c.sizes = {4, 64, 1};  // a last dim of one column
  c.strides = {64, 1, 99};
  ASSERT_TRUE(ReduceFamily::guardCall(c, &v));
  EXPECT_EQ(v.rows, 256);
  EXPECT_EQ(v.cols, 1);
}

TEST(ReduceFamilyTest, GivenCallsAtenMustServeWhenGuardedThenRefused) {
  auto refused = [](const ReduceCall& c) { return !ReduceFamily::guardCall(c, nullptr); };
  ReduceCall c = servedCall();
  c.floating = false;  // an integer / double input
  EXPECT_TRUE(refused(c));
  c = servedCall();
  c.dtypeGiven = true;  // sum(dtype=float32)
  EXPECT_TRUE(refused(c));
  c = servedCall();
  c.dims = std::nullopt;  // every dim
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{};  // [] also means every dim
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{-2};
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{1};
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{0, 2};  // not the last k
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{-1, -1};  // a dim twice (ATen raises)
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{3};  // out of range (ATen raises)
  EXPECT_TRUE(refused(c));
  c.dims = std::vector<int64_t>{-4};
  EXPECT_TRUE(refused(c));
  ReduceCall a = servedCall(ReduceOp::Argmax);
  a.dims = std::nullopt;  // argmax(dim=None): flattened
  EXPECT_TRUE(refused(a));
  c = servedCall();
  c.strides = {512 * 4096, 1, 512};  // transposed
  EXPECT_TRUE(refused(c));
  c.strides = {512 * 4096 * 2, 4096 * 2, 2};  // a strided view
  EXPECT_TRUE(refused(c));
  c.strides = {512 * 4096, 4096};  // malformed
  EXPECT_TRUE(refused(c));
  c = servedCall();
  c.sizes = {};
  c.strides = {};
  c.dims = std::vector<int64_t>{-1};  // 0-dim
  EXPECT_TRUE(refused(c));
  c = servedCall();
  c.sizes = {8, 0, 4096};  // empty rows
  EXPECT_TRUE(refused(c));
  c = servedCall();
  c.sizes = {8, 512, 0};  // empty rows: sum 0, mean NaN, amax raises
  c.strides = {0, 0, 1};
  EXPECT_TRUE(refused(c));
  c = servedCall();
  c.sizes = {2, int64_t{1} << 31};
  c.strides = {int64_t{1} << 31, 1};  // cols past 2^30
  EXPECT_TRUE(refused(c));
  c = servedCall();
  c.dtype = static_cast<DType>(9);
  EXPECT_TRUE(refused(c));
}

TEST(ReduceFamilyTest, GivenTheLastKDimsInAnySpellingWhenGuardedThenFoldedIntoColsForTheValueOpsOnly) {
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{1, 2}, std::vector<int64_t>{-1, -2},
                                           std::vector<int64_t>{2, -2}}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Amax, ReduceOp::Amin}) {
      ReduceCall c = servedCall(op);
      c.dims = dims;
      V v;
      ASSERT_TRUE(ReduceFamily::guardCall(c, &v)) << reduceOpName(op) << " " << dims[0] << "," << dims[1];
      EXPECT_EQ(v.rows, 8);
      EXPECT_EQ(v.cols, 512 * 4096);
      EXPECT_EQ(ReduceFamily::outputSizes(c), (std::vector<int64_t>{8}));
      c.keepdim = true;
      EXPECT_EQ(ReduceFamily::outputSizes(c), (std::vector<int64_t>{8, 1, 1}));
    }
  }
  // Every dim: one row; without keepdim a 0-dim result.
  ReduceCall all = servedCall(ReduceOp::Amin);
  all.sizes = {4, 8, 16};
  all.strides = {128, 16, 1};
  all.dims = std::vector<int64_t>{0, 1, 2};
  V v;
  ASSERT_TRUE(ReduceFamily::guardCall(all, &v));
  EXPECT_EQ(v.rows, 1);
  EXPECT_EQ(v.cols, 512);
  EXPECT_TRUE(ReduceFamily::outputSizes(all).empty());
  // The index ops (max.dim and min.dim among them) take one dim: a list of two is not theirs.
  for (ReduceOp op : {ReduceOp::Argmin, ReduceOp::Argmax, ReduceOp::Max, ReduceOp::Min}) {
    ReduceCall index = servedCall(op);
    index.dims = std::vector<int64_t>{1, 2};
    EXPECT_FALSE(ReduceFamily::guardCall(index, nullptr)) << reduceOpName(op);
  }
  // trailingDims itself: k, or 0.
  const int64_t twoLast[] = {-2, 3}, gap[] = {1, 3}, twice[] = {3, -1};
  EXPECT_EQ(ReduceFamily::trailingDims(4, twoLast, 2), 2);
  EXPECT_EQ(ReduceFamily::trailingDims(4, gap, 2), 0);
  EXPECT_EQ(ReduceFamily::trailingDims(4, twice, 2), 0);
  EXPECT_EQ(ReduceFamily::trailingDims(4, twoLast, 0), 0);
  EXPECT_EQ(ReduceFamily::trailingDims(0, twoLast, 1), 0);
}

TEST(ReduceFamilyTest, GivenKeepdimOrNotWhenAskingForOutputSizesThenLeadingDimsAndOptionalOne) {
  ReduceCall c = servedCall();
  EXPECT_EQ(ReduceFamily::outputSizes(c), (std::vector<int64_t>{8, 512}));
  c.keepdim = true;
  EXPECT_EQ(ReduceFamily::outputSizes(c), (std::vector<int64_t>{8, 512, 1}));
  c.sizes = {1000};
  c.strides = {1};
  c.keepdim = false;
  EXPECT_TRUE(ReduceFamily::outputSizes(c).empty());  // 0-dim
  c.keepdim = true;
  EXPECT_EQ(ReduceFamily::outputSizes(c), (std::vector<int64_t>{1}));
}

// (Every point unique and well-formed: FamilyConformanceTest.)
TEST(ReduceFamilyTest, GivenEveryDTypeWhenListingAllPointsThenWithinTheRegisterBudgetAndServingA4096Row) {
  for (DType d : kAllDTypes) {
    const std::vector<P> all = ReduceFamily::allParameterPoints(d);
    ASSERT_FALSE(all.empty());
    bool multiRow = false;
    for (const P& p : all) {
      // Note [Reduction register budget]
      EXPECT_LE(p.unroll * p.vec * static_cast<int>(elementSize(d)), std::min(128, 65536 / p.threads)) << p.describe();
      multiRow = multiRow || p.rowsPerCta > 1;
      EXPECT_TRUE(ReduceFamily::guardParams({d, 64, 4096, ReduceOp::Sum}, p)) << p.describe();
    }
    EXPECT_TRUE(multiRow);
  }
  EXPECT_EQ(ReduceFamily::allParameterPoints(DType::BFloat16).size(), 159u);
  EXPECT_EQ(ReduceFamily::allParameterPoints(DType::Float32).size(), 119u);
}

TEST(ReduceFamilyTest, GivenPointsOffTheWhitelistOrVectorsThatDoNotDivideWhenGuardedThenRefused) {
  const V v{DType::BFloat16, 64, 4096, ReduceOp::Sum};
  // (Threads and vector widths off the axes: FamilyConformanceTest.)
  EXPECT_FALSE(ReduceFamily::guardParams(v, {256, 8, 3, 1}));   // unroll 3
  EXPECT_FALSE(ReduceFamily::guardParams(v, {1024, 8, 8, 1}));  // 128 bytes at 1024 threads
  EXPECT_TRUE(ReduceFamily::guardParams(v, {512, 8, 8, 1}));
  EXPECT_FALSE(ReduceFamily::guardParams(v, {256, 8, 1, 4}));   // several rows: 128 threads only
  EXPECT_FALSE(ReduceFamily::guardParams(v, {128, 8, 1, 2}));   // 64 threads a row
  EXPECT_TRUE(ReduceFamily::guardParams(v, {128, 8, 1, 32}));
  const V odd{DType::BFloat16, 64, 4097, ReduceOp::Argmax};
  EXPECT_FALSE(ReduceFamily::guardParams(odd, {256, 8, 1, 1}));
  EXPECT_FALSE(ReduceFamily::guardParams(odd, {256, 2, 1, 1}));
  EXPECT_TRUE(ReduceFamily::guardParams(odd, {256, 1, 8, 1}));
}

TEST(ReduceFamilyTest, GivenLongAndShortRowsWhenAskingForTheSpaceThenTheFirstGuessFitsTheRow) {
  const P longRow = ReduceFamily::parameterSpace({DType::BFloat16, 4096, 32000, ReduceOp::Sum}).front();
  EXPECT_EQ(longRow.threads, 1024);
  EXPECT_EQ(longRow.vec, 8);
  EXPECT_EQ(longRow.rowsPerCta, 1);
  const P shortRow = ReduceFamily::parameterSpace({DType::BFloat16, 32768, 128, ReduceOp::Amax}).front();
  EXPECT_GT(shortRow.rowsPerCta, 1);
  EXPECT_EQ(shortRow.vec, 8);
  EXPECT_GE(shortRow.rowThreads() * shortRow.unroll * shortRow.vec, 128);
  const P oneCol = ReduceFamily::parameterSpace({DType::Float32, 7, 1, ReduceOp::Mean}).front();
  EXPECT_EQ(oneCol.vec, 1);
}

TEST(ReduceFamilyTest, GivenPointersWhenGuardedThenInputAlignedToTheVectorOutputToItsElementAndDistinct) {
  alignas(64) static unsigned char buf[256];
  const V bf{DType::BFloat16, 4, 64, ReduceOp::Sum};
  const P p{256, 8, 1, 1};
  EXPECT_TRUE(ReduceFamily::guardPointers(buf, buf + 128, bf, p));
  EXPECT_TRUE(ReduceFamily::guardPointers(buf, buf + 130, bf, p));   // out: 2-byte elements
  EXPECT_FALSE(ReduceFamily::guardPointers(buf + 2, buf + 128, bf, p));
  EXPECT_FALSE(ReduceFamily::guardPointers(buf, buf + 129, bf, p));
  EXPECT_FALSE(ReduceFamily::guardPointers(buf, buf, bf, p));
  EXPECT_FALSE(ReduceFamily::guardPointers(nullptr, buf, bf, p));
  EXPECT_FALSE(ReduceFamily::guardPointers(buf, nullptr, bf, p));
  const V am{DType::BFloat16, 4, 64, ReduceOp::Argmax};
  EXPECT_TRUE(ReduceFamily::guardPointers(buf, buf + 128, am, p));
  EXPECT_FALSE(ReduceFamily::guardPointers(buf, buf + 130, am, p));  // int64 output
  EXPECT_EQ(ReduceFamily::outputElementSize(ReduceOp::Argmax, DType::BFloat16), 8u);
  EXPECT_EQ(ReduceFamily::outputElementSize(ReduceOp::Mean, DType::Float16), 2u);
  EXPECT_EQ(ReduceFamily::requiredAlignment(DType::Float32, {256, 4, 1, 1}), 16u);
  EXPECT_TRUE(ReduceFamily::guardPointers(buf + 4, buf + 128, {DType::Float32, 4, 63, ReduceOp::Amax}, {32, 1, 1, 1}));
}

TEST(ReduceFamilyTest, GivenAPairOpWhenItsPointersAreGuardedThenValuesAlignedToTheirElementAndIndicesTo8Bytes) {
  alignas(64) static unsigned char buf[256];
  const V mx{DType::BFloat16, 4, 64, ReduceOp::Max};
  const P p{256, 8, 1, 1};
  EXPECT_TRUE(ReduceFamily::guardPointers(buf, buf + 130, mx, p));  // the values: 2-byte elements
  EXPECT_FALSE(ReduceFamily::guardPointers(buf, buf + 129, mx, p));
  EXPECT_TRUE(ReduceFamily::guardIndices(buf, buf + 130, buf + 192));
  EXPECT_FALSE(ReduceFamily::guardIndices(buf, buf + 130, buf + 196));  // int64 indices
  EXPECT_FALSE(ReduceFamily::guardIndices(buf, buf + 128, buf + 128));  // the values' buffer
  EXPECT_FALSE(ReduceFamily::guardIndices(buf, buf + 128, buf));        // the input
  EXPECT_FALSE(ReduceFamily::guardIndices(buf, buf + 128, nullptr));
}

TEST(ReduceFamilyTest, GivenPointsWhenAskingForOptionsGeometryAndBytesThenTheTemplatesDefinesAndOneCtaPerRowGroup) {
  const std::vector<std::string> o = ReduceFamily::compileOptions(DType::Float16, {128, 4, 2, 8}, ReduceOp::Argmax);
  EXPECT_EQ(o, (std::vector<std::string>{"-DHK_DTYPE=1", "-DHK_OP=3", "-DHK_THREADS=128", "-DHK_ROWS=8", "-DHK_VEC=4",
                                         "-DHK_UNROLL=2"}));
  EXPECT_THROW(ReduceFamily::compileOptions(DType::Float32, {256, 4, 1, 1}, static_cast<ReduceOp>(kReduceOpCount)), Error);
  LaunchGeometry g = ReduceFamily::launchGeometry({DType::BFloat16, 1000, 64, ReduceOp::Sum}, {128, 8, 1, 8});
  EXPECT_EQ(g.gridX, 125u);
  EXPECT_EQ(g.blockX, 128u);
  EXPECT_EQ(g.sharedBytes, 0u);
  g = ReduceFamily::launchGeometry({DType::BFloat16, int64_t{1} << 33, 2, ReduceOp::Sum}, {256, 1, 1, 1});
  EXPECT_EQ(g.gridX, static_cast<unsigned>(std::numeric_limits<int32_t>::max()));
  EXPECT_DOUBLE_EQ(ReduceFamily::bytesMoved({DType::BFloat16, 10, 100, ReduceOp::Sum}), 10 * 100 * 2 + 10 * 2);
  EXPECT_DOUBLE_EQ(ReduceFamily::bytesMoved({DType::BFloat16, 10, 100, ReduceOp::Argmax}), 10 * 100 * 2 + 10 * 8);
  // A pair writes a value and an index a row.
  EXPECT_DOUBLE_EQ(ReduceFamily::bytesMoved({DType::BFloat16, 10, 100, ReduceOp::Max}), 10 * 100 * 2 + 10 * (2 + 8));
  EXPECT_DOUBLE_EQ(ReduceFamily::bytesMoved({DType::Float32, 10, 100, ReduceOp::Min}), 10 * 100 * 4 + 10 * (4 + 8));
}

// (Every point's round trip and malformed JSON: FamilyConformanceTest.)
TEST(ReduceFamilyTest, GivenParamsWithoutRowsPerCtaWhenParsedThenOneRowACtaAndTheTextNamesEveryField) {
  EXPECT_EQ(P::fromJson(nlohmann::json{{"threads", 256}, {"vec", 2}, {"unroll", 8}}), (P{256, 2, 8, 1}));
  EXPECT_EQ(P({128, 8, 4, 16}).describe(), "threads=128 vec=8 unroll=4 rowsPerCta=16");
}

TEST(ReduceFamilyTest, GivenEveryOpWhenNamingItsFamilyThenTheNameMapsBack) {
  std::set<std::string> names;
  for (ReduceOp op : kAllReduceOps) {
    names.insert(reduceFamilyName(op));
    EXPECT_EQ(reduceOpOfFamily(reduceFamilyName(op)), op);
  }
  EXPECT_EQ(names.size(), kReduceOpCount);
  EXPECT_STREQ(reduceAtenOpName(ReduceOp::Sum), "aten::sum.dim_IntList");
  EXPECT_STREQ(reduceAtenOpName(ReduceOp::Mean), "aten::mean.dim");
  for (ReduceOp op : kAllReduceOps) EXPECT_EQ(reduceOpOfAtenName(reduceAtenOpName(op)), op);
  EXPECT_FALSE(reduceOpOfAtenName("aten::sum").has_value());
  EXPECT_FALSE(reduceOpOfFamily("softmax_lastdim").has_value());
  EXPECT_STREQ(reduceOpName(ReduceOp::Argmax), "argmax");
  EXPECT_STREQ(reduceAtenOpName(ReduceOp::Amin), "aten::amin");
  EXPECT_STREQ(reduceFamilyName(ReduceOp::Argmin), "argmin_lastdim");
  EXPECT_STREQ(reduceAtenOpName(ReduceOp::Max), "aten::max.dim");
  EXPECT_STREQ(reduceAtenOpName(ReduceOp::Min), "aten::min.dim");
  EXPECT_STREQ(reduceFamilyName(ReduceOp::Max), "max_lastdim");
  EXPECT_FALSE(reduceOpOfAtenName("aten::max").has_value());  // the full reduction is another overload
  // Note [The reduction ops]: the index ops give int64, the pairs values too,
  // the extrema are exact, sums neither.
  for (ReduceOp op : kAllReduceOps) {
    EXPECT_EQ(reduceOpInfo(op).op, op);
    const bool pair = op == ReduceOp::Max || op == ReduceOp::Min;
    const bool index = op == ReduceOp::Argmax || op == ReduceOp::Argmin || pair;
    EXPECT_EQ(reduceOpInfo(op).index, index) << reduceOpName(op);
    EXPECT_EQ(reduceOpInfo(op).pair, pair) << reduceOpName(op);
    EXPECT_EQ(reduceOpInfo(op).exact, op != ReduceOp::Sum && op != ReduceOp::Mean) << reduceOpName(op);
    // The first output: the values of a pair, the indices of argmax / argmin.
    EXPECT_EQ(ReduceFamily::outputElementSize(op, DType::BFloat16), index && !pair ? 8u : 2u) << reduceOpName(op);
  }
  EXPECT_THROW(reduceOpInfo(static_cast<ReduceOp>(kReduceOpCount)), Error);
}

TEST(ReduceFamilyTest, GivenTheTolerancesThenMaximaExactAndSumsWidenWithTheRowAndTheOutputType) {
  for (DType d : kAllDTypes) {
    EXPECT_TRUE(ReduceFamily::tolerance(ReduceOp::Amax, d, 4096).exact);
    EXPECT_TRUE(ReduceFamily::tolerance(ReduceOp::Argmax, d, 4096).exact);
    EXPECT_TRUE(ReduceFamily::tolerance(ReduceOp::Amin, d, 4096).exact);
    EXPECT_TRUE(ReduceFamily::tolerance(ReduceOp::Argmin, d, 4096).exact);
    EXPECT_EQ(ReduceFamily::tolerance(ReduceOp::Argmax, d, 4096).bound(5.0, 100.0, 1.0), 0.0);
    const ReduceTolerance s = ReduceFamily::tolerance(ReduceOp::Sum, d, 4096);
    EXPECT_FALSE(s.exact);
    EXPECT_GT(ReduceFamily::tolerance(ReduceOp::Sum, d, 1 << 20).sumRel, s.sumRel);
    // ATen's own error counts in full.
    EXPECT_DOUBLE_EQ(s.bound(10.0, 100.0, 0.5) - s.bound(10.0, 100.0, 0.0), 0.5);
  }
  const double f32 = ReduceFamily::tolerance(ReduceOp::Mean, DType::Float32, 4096).outRel;
  const double f16 = ReduceFamily::tolerance(ReduceOp::Mean, DType::Float16, 4096).outRel;
  const double b16 = ReduceFamily::tolerance(ReduceOp::Mean, DType::BFloat16, 4096).outRel;
  EXPECT_LT(f32, f16);
  EXPECT_LT(f16, b16);
  EXPECT_DOUBLE_EQ(b16, 1.0 / 128.0);
  // A dropped element of a short row (|x| ~ 1 of sum |x| ~ 100) is outside the bound.
  EXPECT_LT(ReduceFamily::tolerance(ReduceOp::Sum, DType::Float32, 64).bound(100.0, 100.0, 0.0), 0.01);
}

// (The template's path, entry point and prelude: FamilyConformanceTest.)
TEST(ReduceFamilyTest, GivenTheEmbeddedTemplateThenItNamesEveryDefine) {
  const std::string s = ReduceFamily::source();
  for (const char* define : {"HK_DTYPE", "HK_OP", "HK_THREADS", "HK_ROWS", "HK_VEC", "HK_UNROLL"}) {
    EXPECT_NE(s.find(define), std::string::npos) << define;
  }
}

// ---- NVRTC compiles (CPU) ---------------------------------------------------------------------

struct Job {
  DType dtype;
  P params;
  ReduceOp op;
  std::string arch;
};

struct Result {
  bool ok = false;
  std::string error;
  int registers = -1, spillBytes = -1, stackBytes = -1;
};

std::string name(const Job& j) {
  return std::string(dtypeName(j.dtype)) + " " + j.params.describe() + " " + reduceOpName(j.op) + " " + j.arch;
}

int firstInt(const std::string& log, const std::regex& re) {
  std::smatch m;
  return std::regex_search(log, m, re) ? std::stoi(m[1].str()) : -1;
}

std::vector<Result> compileAll(const std::vector<Job>& jobs) {
  const std::string source = ReduceFamily::source();
  std::vector<Result> results(jobs.size());
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    Result& r = results[i];
    try {
      std::vector<std::string> options = ReduceFamily::compileOptions(jobs[i].dtype, jobs[i].params, jobs[i].op);
      options.push_back("--ptxas-options=-v");
      const NvrtcOutput out = hotkernel::testutil::compileCached(source, "reduce_lastdim.cu", jobs[i].arch, options);
      static const std::regex kRegisters(R"(Used (\d+) registers)");
      static const std::regex kStack(R"((\d+) bytes stack frame)");
      static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
      static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
      r.registers = firstInt(out.log, kRegisters);
      r.stackBytes = firstInt(out.log, kStack);
      const int stores = firstInt(out.log, kSpillStores), loads = firstInt(out.log, kSpillLoads);
      r.spillBytes = stores < 0 || loads < 0 ? -1 : stores + loads;
      r.ok = out.cubin.size() > 4 && out.cubin.compare(0, 4, "\x7f" "ELF") == 0 &&
             out.cubin.find(ReduceFamily::kKernelName) != std::string::npos;
      if (!r.ok) r.error = "not an ELF image holding hk_reduce_lastdim";
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  });
  return results;
}

void expectAllCompiledWithoutSpills(const std::vector<Job>& jobs, const std::vector<Result>& results) {
  ASSERT_EQ(jobs.size(), results.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Result& r = results[i];
    EXPECT_TRUE(r.ok) << name(jobs[i]) << ": " << r.error;
    if (!r.ok) continue;
    EXPECT_EQ(r.spillBytes, 0) << name(jobs[i]) << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stackBytes, 0) << name(jobs[i]) << " uses a stack frame";
    EXPECT_GT(r.registers, 0) << name(jobs[i]) << ": no register count in the ptxas report";
    EXPECT_LE(r.registers, 65536 / jobs[i].params.threads) << name(jobs[i]);
  }
}

bool compileEverything() {
  const char* e = std::getenv("HOTKERNEL_REDUCE_COMPILE_ALL");
  return e != nullptr && std::string(e) == "1";
}

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

TEST(ReduceFamilyCompileTest, GivenEveryPointWhenCompiledForSm90aAndSm80ThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<Job> jobs;
  size_t i = 0;
  for (DType d : kAllDTypes) {
    for (const P& p : ReduceFamily::allParameterPoints(d)) {
      if (compileEverything()) {
        for (ReduceOp op : kAllReduceOps) {
          jobs.push_back({d, p, op, "sm_90a"});
          jobs.push_back({d, p, op, "sm_80"});
        }
      } else {
        // Every point on both architectures; the op cycles, another one on each.
        jobs.push_back({d, p, kAllReduceOps[i % 4], "sm_90a"});
        jobs.push_back({d, p, kAllReduceOps[(i + 1) % 4], "sm_80"});
      }
      ++i;
    }
  }
  const std::vector<Result> results = compileAll(jobs);
  expectAllCompiledWithoutSpills(jobs, results);
}

TEST(ReduceFamilyCompileTest, GivenEveryOpAndDTypeAtTheLargestUnrollOfEachShapeWhenCompiledThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    std::map<std::tuple<int, int, int>, P> largest;
    for (const P& p : ReduceFamily::allParameterPoints(d)) {
      if (p.vec != 1 && p.vec != static_cast<int>(16 / elementSize(d))) continue;
      largest[{p.threads, p.rowsPerCta, p.vec}] = p;  // unroll ascends within a shape
    }
    for (const auto& [key, p] : largest) {
      for (ReduceOp op : kAllReduceOps) jobs.push_back({d, p, op, "sm_90a"});
    }
  }
  const std::vector<Result> results = compileAll(jobs);
  expectAllCompiledWithoutSpills(jobs, results);
  std::map<std::string, std::string> rows;  // the register report (printed, not asserted)
  for (size_t i = 0; i < jobs.size(); ++i) {
    const P& p = jobs[i].params;
    char key[96];
    std::snprintf(key, sizeof(key), "%-8s t=%4d r=%2d v=%d u=%d", dtypeName(jobs[i].dtype), p.threads, p.rowsPerCta,
                  p.vec, p.unroll);
    rows[key] += std::string(" ") + reduceOpName(jobs[i].op) + ":" + std::to_string(results[i].registers);
  }
  std::printf("registers per point (sm_90a), op:registers\n");
  for (const auto& [key, line] : rows) std::printf("  %s %s\n", key.c_str(), line.c_str());
}

TEST(ReduceFamilyCompileTest, GivenEveryVectorWidthWhenTheExtremaCompileForSm80AndSm90aThenCubinsWithoutSpills) {
  // The extrema fold packed words (Note [Packed maxima] in the template):
  // one 16-bit element, one pair, two or four pairs a vector for 16-bit types,
  // one to four floats for float32; each layout at the largest unroll of a
  // 1024-thread CTA (64 registers a thread), of 4 lanes a row and of one warp:
  // amax and argmax on both architectures (the max.NaN forms need sm_80),
  // amin and argmin (the same code with min.NaN) on sm_90a.
  SKIP_WITHOUT_NVRTC();
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    std::map<std::tuple<int, int, int>, P> largest;
    for (const P& p : ReduceFamily::allParameterPoints(d)) {
      const bool shape = (p.threads == 1024 && p.rowsPerCta == 1) || (p.threads == 128 && p.rowThreads() == 4) ||
                         (p.threads == 32 && p.rowsPerCta == 1);
      if (shape) largest[{p.threads, p.rowsPerCta, p.vec}] = p;  // unroll ascends within a shape
    }
    ASSERT_EQ(largest.size(), 3u * (d == DType::Float32 ? 3u : 4u)) << dtypeName(d);
    for (const auto& [key, p] : largest) {
      for (ReduceOp op : {ReduceOp::Amax, ReduceOp::Argmax}) {
        for (const char* arch : {"sm_80", "sm_90a"}) jobs.push_back({d, p, op, arch});
      }
      for (ReduceOp op : {ReduceOp::Amin, ReduceOp::Argmin}) jobs.push_back({d, p, op, "sm_90a"});
    }
  }
  const std::vector<Result> results = compileAll(jobs);
  expectAllCompiledWithoutSpills(jobs, results);
}

TEST(ReduceFamilyCompileTest, GivenDefinesOutsideTheTemplatesLimitsWhenCompiledThenTheTemplateRefuses) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = ReduceFamily::source();
  const std::vector<std::vector<std::string>> bad = {
      {"-DHK_DTYPE=2", "-DHK_OP=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=16", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_THREADS=384", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=3", "-DHK_OP=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_OP=8", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_UNROLL=3"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_THREADS=128", "-DHK_ROWS=2", "-DHK_VEC=4", "-DHK_UNROLL=1"},
      {"-DHK_DTYPE=0", "-DHK_OP=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4"},  // missing define
  };
  for (const std::vector<std::string>& options : bad) {
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "reduce_lastdim.cu", "sm_90a", options), Error) << options.back();
  }
  // The extrema below sm_80 (no max.NaN / min.NaN): the template says so, at a
  // point without L2 hints (vec 1), which would otherwise compile there.
  for (ReduceOp op : {ReduceOp::Amax, ReduceOp::Argmax, ReduceOp::Amin, ReduceOp::Argmin, ReduceOp::Max, ReduceOp::Min}) {
    try {
      const std::vector<std::string> options = ReduceFamily::compileOptions(DType::Float32, {256, 1, 2, 1}, op);
      hotkernel::testutil::compileCached(source, "reduce_lastdim.cu", "sm_75", options);
      ADD_FAILURE() << reduceOpName(op) << " compiled for sm_75";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("need sm_80 or later"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(hotkernel::testutil::compileCached(source, "reduce_lastdim.cu", "sm_75",
                                 ReduceFamily::compileOptions(DType::Float32, {256, 1, 2, 1}, ReduceOp::Sum)));
}

}  // namespace
}  // namespace hotkernel::kernels
