// The contract every kernel family meets, checked once for the five families
// by a typed suite (one traits struct per family says how to build its
// variants and options): guards, parameter space, launch geometry, alignment,
// compile options, bytes, params JSON, the template, and a few NVRTC compiles.
// What only one family does stays in its own test file.

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "CompileCache.h"
#include "FamilyShapes.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

// The launch limits every point must meet on the H200 (sm_90): cuLaunchKernel's
// gridDim.x, a CTA's threads, and the dynamic shared memory a kernel may opt in
// to (227 KiB).
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
constexpr unsigned kMaxBlock = 1024;
constexpr unsigned kMaxSharedOptIn = 227 * 1024;

using testutil::Shapes;

template <typename Family>
struct Traits;

template <>
struct Traits<SoftmaxFamily> {
  using Variant = SoftmaxVariant;
  using Params = SoftmaxParams;
  static constexpr const char* kPath = "kernels/softmax/softmax_lastdim.cu";
  static constexpr const char* kRequiredKeys[] = {"threads", "vec", "items"};
  static Shapes namedShapes() { return testutil::namedSoftmaxShapes(); }
  // Every flag combination of a shape (softmax has none).
  static std::vector<Variant> variants(DType d, int64_t rows, int64_t cols) { return {{d, rows, cols}}; }
  static std::vector<Variant> unsupported() { return {}; }
  // The spaces the optimizer asks for: any GPU, and sm_90 (clusters).
  static constexpr int kComputeCapabilities[] = {0, 90};
  static std::vector<Params> space(const Variant& v, int cc) { return SoftmaxFamily::parameterSpace(v, cc); }
  // Every option set a point compiles under (the ops the template serves); a staged point's also as its
  // pipelined twin (a seed the space adds beside the listed points: Note [Pipelined slices]).
  static std::vector<std::vector<std::string>> optionSets(DType d, const Params& p) {
    std::vector<std::vector<std::string>> out = {SoftmaxFamily::compileOptions(d, p),
                                                 SoftmaxFamily::compileOptions(d, p, SoftmaxOp::LogSoftmax)};
    Params piped = p;
    piped.clusterRows = SoftmaxFamily::kPipelinedClusterRows[0];
    if (p.smem && SoftmaxFamily::guardParams({d, 1, p.cluster * p.threads * p.items * p.vec}, piped)) {
      out.push_back(SoftmaxFamily::compileOptions(d, piped));
    }
    return out;
  }
  static std::vector<std::string> options(const Variant& v, const Params& p) {
    return SoftmaxFamily::compileOptions(v.dtype, p);
  }
  static int cluster(const Params& p) { return p.cluster; }
  static int clusterRows(const Params& p) { return p.clusterRows; }
  static int minComputeCapability(const Params& p) { return p.minComputeCapability(); }
};

template <typename Family, typename Variant>
struct NormTraitsBase {
  using Params = NormParams;
  static constexpr const char* kRequiredKeys[] = {"threads", "vec", "items"};
  static Shapes namedShapes() { return testutil::namedNormShapes(); }
  static std::vector<Variant> unsupported() { return {}; }
  static constexpr int kComputeCapabilities[] = {0};
  static std::vector<Params> space(const Variant& v, int) { return Family::parameterSpace(v); }
  static int cluster(const Params&) { return 1; }
  static int clusterRows(const Params&) { return 1; }
  static int minComputeCapability(const Params&) { return 0; }
};

template <>
struct Traits<RmsNormFamily> : NormTraitsBase<RmsNormFamily, RmsNormVariant> {
  using Variant = RmsNormVariant;
  static constexpr const char* kPath = "kernels/norm/rms_norm.cu";
  static std::vector<Variant> variants(DType d, int64_t rows, int64_t cols) {
    return {{d, rows, cols, true}, {d, rows, cols, false}};
  }
  // With and without the weight, for any column count and for one (HK_COLS).
  static std::vector<std::vector<std::string>> optionSets(DType d, const Params& p) {
    return {RmsNormFamily::compileOptions(d, p, true), RmsNormFamily::compileOptions(d, p, false),
            RmsNormFamily::compileOptions(d, p, true, 4096)};
  }
  static std::vector<std::string> options(const Variant& v, const Params& p) {
    return RmsNormFamily::compileOptions(v.dtype, p, v.hasWeight, v.cols);
  }
};

template <>
struct Traits<LayerNormFamily> : NormTraitsBase<LayerNormFamily, LayerNormVariant> {
  using Variant = LayerNormVariant;
  static constexpr const char* kPath = "kernels/norm/layer_norm.cu";
  static std::vector<Variant> variants(DType d, int64_t rows, int64_t cols) {
    return {{d, rows, cols, true, true}, {d, rows, cols, true, false}, {d, rows, cols, false, true},
            {d, rows, cols, false, false}};
  }
  static std::vector<std::vector<std::string>> optionSets(DType d, const Params& p) {
    std::vector<std::vector<std::string>> out;
    for (bool w : {true, false}) {
      for (bool b : {true, false}) out.push_back(LayerNormFamily::compileOptions(d, p, w, b));
    }
    out.push_back(LayerNormFamily::compileOptions(d, p, true, true, 4096));
    // The template's group mode is group_norm's (GroupNormFamily; its own tests compile it).
    const GroupNormVariant group{d, 64, 10 * 4096, 32, 4096, true, true};
    if (GroupNormFamily::guardParams(group, p)) out.push_back(GroupNormFamily::compileOptions(group, p));
    return out;
  }
  static std::vector<std::string> options(const Variant& v, const Params& p) {
    return LayerNormFamily::compileOptions(v.dtype, p, v.hasWeight, v.hasBias, v.cols);
  }
};

template <>
struct Traits<CrossEntropyFamily> {
  using Variant = CrossEntropyVariant;
  using Params = CrossEntropyParams;
  using R = CrossEntropyReduction;
  static constexpr const char* kPath = "kernels/cross_entropy/cross_entropy.cu";
  static constexpr const char* kRequiredKeys[] = {"threads", "vec", "unroll"};
  static Shapes namedShapes() { return testutil::namedCrossEntropyShapes(); }
  static std::vector<Variant> variants(DType d, int64_t rows, int64_t cols) {
    return {{d, rows, cols, R::None}, {d, rows, cols, R::Mean}, {d, rows, cols, R::Sum}};
  }
  static std::vector<Variant> unsupported() { return {{DType::Float32, 1, 1, static_cast<R>(3)}}; }
  static constexpr int kComputeCapabilities[] = {0, 80, 90};
  static std::vector<Params> space(const Variant& v, int cc) { return CrossEntropyFamily::parameterSpace(v, cc); }
  static std::vector<std::vector<std::string>> optionSets(DType d, const Params& p) {
    return {CrossEntropyFamily::compileOptions(d, p, R::None), CrossEntropyFamily::compileOptions(d, p, R::Mean),
            CrossEntropyFamily::compileOptions(d, p, R::Sum)};
  }
  static std::vector<std::string> options(const Variant& v, const Params& p) {
    return CrossEntropyFamily::compileOptions(v.dtype, p, v.reduction);
  }
  static int cluster(const Params& p) { return p.cluster; }
  static int clusterRows(const Params&) { return 1; }
  static int minComputeCapability(const Params& p) { return p.minComputeCapability(); }
};

template <>
struct Traits<ReduceFamily> {
  using Variant = ReduceVariant;
  using Params = ReduceParams;
  static constexpr const char* kPath = "kernels/reduce/reduce_lastdim.cu";
  static constexpr const char* kRequiredKeys[] = {"threads", "vec", "unroll"};
  static Shapes namedShapes() { return testutil::namedReduceShapes(); }
  static std::vector<Variant> variants(DType d, int64_t rows, int64_t cols) {
    std::vector<Variant> out;
    for (ReduceOp op : kAllReduceOps) out.push_back({d, rows, cols, op});
    return out;
  }
  static std::vector<Variant> unsupported() { return {{DType::Float32, 4, 4, static_cast<ReduceOp>(kReduceOpCount)}}; }
  static constexpr int kComputeCapabilities[] = {0};
  static std::vector<Params> space(const Variant& v, int) { return ReduceFamily::parameterSpace(v); }
  static std::vector<std::vector<std::string>> optionSets(DType d, const Params& p) {
    std::vector<std::vector<std::string>> out;
    for (ReduceOp op : kAllReduceOps) out.push_back(ReduceFamily::compileOptions(d, p, op));
    return out;
  }
  static std::vector<std::string> options(const Variant& v, const Params& p) {
    return ReduceFamily::compileOptions(v.dtype, p, v.op);
  }
  static int cluster(const Params&) { return 1; }
  static int clusterRows(const Params&) { return 1; }
  static int minComputeCapability(const Params&) { return 0; }
};

template <typename Family>
class FamilyConformanceTest : public ::testing::Test {
 protected:
  using T = Traits<Family>;
  using Variant = typename T::Variant;
  using Params = typename T::Params;

  // The first variant of a shape: the family's default flags.
  static Variant plain(DType d, int64_t rows, int64_t cols) { return T::variants(d, rows, cols).front(); }

  static std::string name(const Variant& v) {
    return std::string(Family::kName) + " " + dtypeName(v.dtype) + "[" + std::to_string(v.rows) + "," +
           std::to_string(v.cols) + "]";
  }

  // Every flag combination of every named shape, in every dtype.
  static std::vector<Variant> served() {
    std::vector<Variant> out;
    for (DType d : kAllDTypes) {
      for (auto [rows, cols] : T::namedShapes()) {
        for (const Variant& v : T::variants(d, rows, cols)) out.push_back(v);
      }
    }
    return out;
  }

  // Points a space may hold for `v` at compute capability `cc`: at most 12,
  // unique, each guarded and runnable there, and a vec == 1 point among them
  // (the fallback for unaligned data).
  static ::testing::AssertionResult wellFormedSpace(const Variant& v, const std::vector<Params>& space, int cc) {
    if (space.empty()) return ::testing::AssertionFailure() << name(v) << ": empty space";
    if (space.size() > 12) return ::testing::AssertionFailure() << name(v) << ": " << space.size() << " points";
    bool scalar = false;
    for (size_t i = 0; i < space.size(); ++i) {
      const Params& p = space[i];
      if (!Family::guardParams(v, p)) return ::testing::AssertionFailure() << name(v) << ": " << p.describe();
      if (T::minComputeCapability(p) > cc) {
        return ::testing::AssertionFailure() << name(v) << ": needs sm_" << T::minComputeCapability(p) << " "
                                             << p.describe();
      }
      for (size_t j = 0; j < i; ++j) {
        if (space[j] == p) return ::testing::AssertionFailure() << name(v) << ": twice " << p.describe();
      }
      scalar = scalar || p.vec == 1;
    }
    if (!scalar) return ::testing::AssertionFailure() << name(v) << ": no vec == 1 point";
    return ::testing::AssertionSuccess();
  }

  static ::testing::AssertionResult withinLaunchLimits(const Variant& v, const Params& p) {
    const LaunchGeometry g = Family::launchGeometry(v, p);
    const int64_t cluster = T::cluster(p);
    auto fail = [&]() {
      return ::testing::AssertionFailure() << name(v) << " " << p.describe() << ": grid " << g.gridX << ", block "
                                           << g.blockX << ", shared " << g.sharedBytes << ": ";
    };
    if (g.blockX != static_cast<unsigned>(p.threads) || g.blockX < 32 || g.blockX > kMaxBlock) {
      return fail() << "block out of range";
    }
    if (g.gridX < 1 || g.gridX > kMaxGridX || g.gridX % cluster != 0) return fail() << "grid out of range";
    if (g.sharedBytes > kMaxSharedOptIn) return fail() << "more dynamic shared memory than the H200 allows";
    // The grid covers the rows, or is as large as a launch can be (the kernel strides).
    const int64_t rowsCovered = static_cast<int64_t>(g.gridX) / cluster * p.rowsPerCta * T::clusterRows(p);
    if (rowsCovered < v.rows && static_cast<int64_t>(g.gridX) + cluster <= kMaxGridX) {
      return fail() << "the grid covers " << rowsCovered << " rows";
    }
    return ::testing::AssertionSuccess();
  }

  // Every option set of every point of every dtype.
  static std::vector<std::vector<std::string>> allOptionSets() {
    std::vector<std::vector<std::string>> out;
    for (DType d : kAllDTypes) {
      for (const Params& p : Family::allParameterPoints(d)) {
        for (auto& o : T::optionSets(d, p)) out.push_back(std::move(o));
      }
    }
    return out;
  }
};

using Families = ::testing::Types<SoftmaxFamily, RmsNormFamily, LayerNormFamily, CrossEntropyFamily, ReduceFamily>;

class FamilyNames {
 public:
  template <typename Family>
  static std::string GetName(int) {
    return Family::kName;
  }
};

TYPED_TEST_SUITE(FamilyConformanceTest, Families, FamilyNames);

// --- guards ------------------------------------------------------------------

TYPED_TEST(FamilyConformanceTest, GivenEmptyOversizedOrUnknownVariantsWhenGuardedThenRefusedWithAnEmptySpace) {
  using T = Traits<TypeParam>;
  std::vector<typename TestFixture::Variant> refused = T::unsupported();
  for (DType d : kAllDTypes) {
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 10}, {10, 0}, {-1, 10}, {10, -4}, {1, TypeParam::kMaxCols + 1}, {INT64_MAX / 2, 1024}}) {
      for (const auto& v : T::variants(d, rows, cols)) refused.push_back(v);
    }
  }
  for (int unknown : {3, 7}) {
    for (const auto& v : T::variants(static_cast<DType>(unknown), 1, 1)) refused.push_back(v);
  }
  for (const auto& v : refused) {
    EXPECT_FALSE(TypeParam::guardVariant(v)) << this->name(v);
    for (int cc : T::kComputeCapabilities) EXPECT_TRUE(T::space(v, cc).empty()) << this->name(v);
  }
}

TYPED_TEST(FamilyConformanceTest, GivenTheNamedShapesAndTheLongestRowWhenGuardedThenAccepted) {
  for (const auto& v : this->served()) EXPECT_TRUE(TypeParam::guardVariant(v)) << this->name(v);
  for (DType d : kAllDTypes) {
    EXPECT_TRUE(TypeParam::guardVariant(this->plain(d, 1, TypeParam::kMaxCols))) << dtypeName(d);
  }
}

// --- parameter space ---------------------------------------------------------

TYPED_TEST(FamilyConformanceTest, GivenTheNamedShapesWhenAskedForTheSpaceThenAtMostTwelveGuardedPointsAndAScalarOne) {
  using T = Traits<TypeParam>;
  for (const auto& v : this->served()) {
    for (int cc : T::kComputeCapabilities) EXPECT_TRUE(this->wellFormedSpace(v, T::space(v, cc), cc));
  }
}

TYPED_TEST(FamilyConformanceTest, GivenASweepOfShapesWhenAskedForTheSpaceThenAtMostTwelveGuardedPointsAndAScalarOne) {
  using T = Traits<TypeParam>;
  std::vector<int64_t> colsList;
  for (int64_t c = 1; c <= 300; ++c) colsList.push_back(c);
  for (int64_t c = 256; c <= (int64_t{1} << 20); c *= 2) {
    for (int64_t delta : {-1, 0, 1, 8, 24}) colsList.push_back(c + delta);
  }
  for (int64_t c : {32000, 50257, 128256, 151936, 256000}) colsList.push_back(c);
  for (DType d : kAllDTypes) {
    for (int64_t rows : {1, 32, 255, 256, 263, 264, 8192, 100000}) {
      for (int64_t cols : colsList) {
        const auto v = this->plain(d, rows, cols);
        for (int cc : T::kComputeCapabilities) ASSERT_TRUE(this->wellFormedSpace(v, T::space(v, cc), cc));
      }
    }
  }
}

TYPED_TEST(FamilyConformanceTest, GivenEveryPointWhenListedThenUniqueWellFormedAndServingARowOfOneVector) {
  for (DType d : kAllDTypes) {
    const auto all = TypeParam::allParameterPoints(d);
    ASSERT_FALSE(all.empty()) << dtypeName(d);
    std::set<std::string> seen;
    for (const auto& p : all) {
      EXPECT_TRUE(seen.insert(p.toJson().dump()).second) << dtypeName(d) << " twice: " << p.describe();
      EXPECT_GE(p.threads, 32) << p.describe();
      EXPECT_LE(p.threads, 1024) << p.describe();
      EXPECT_EQ(p.threads & (p.threads - 1), 0) << p.describe();
      EXPECT_GE(p.vec, 1) << p.describe();
      EXPECT_EQ(p.vec & (p.vec - 1), 0) << p.describe();
      EXPECT_LE(p.vec * static_cast<int>(elementSize(d)), 16) << dtypeName(d) << " " << p.describe();
      ASSERT_GE(p.rowsPerCta, 1) << p.describe();
      EXPECT_EQ(p.threads % p.rowsPerCta, 0) << p.describe();
      if (p.rowsPerCta > 1) EXPECT_LE(p.rowThreads(), 32) << "a row spans warps: " << p.describe();
      EXPECT_TRUE(TypeParam::guardParams(this->plain(d, 1, p.vec), p)) << dtypeName(d) << " " << p.describe();
    }
  }
}

TYPED_TEST(FamilyConformanceTest, GivenPointsOffTheWhitelistWhenGuardedOrCompiledThenRefused) {
  using T = Traits<TypeParam>;
  for (DType d : kAllDTypes) {
    const auto valid = TypeParam::allParameterPoints(d).front();
    const auto v = this->plain(d, 64, 4096);
    std::vector<typename TestFixture::Params> off;
    for (int threads : {16, 384, 2048}) {
      off.push_back(valid);
      off.back().threads = threads;
    }
    for (int vec : {0, 3, static_cast<int>(32 / elementSize(d))}) {
      off.push_back(valid);
      off.back().vec = vec;
    }
    for (const auto& p : off) {
      EXPECT_FALSE(TypeParam::guardParams(v, p)) << dtypeName(d) << " " << p.describe();
      EXPECT_THROW(T::optionSets(d, p), Error) << dtypeName(d) << " " << p.describe();
    }
  }
}

// --- launch ------------------------------------------------------------------

TYPED_TEST(FamilyConformanceTest, GivenEveryPointOfTheNamedSpacesWhenAskedForGeometryThenWithinTheLaunchLimits) {
  using T = Traits<TypeParam>;
  for (const auto& v : this->served()) {
    for (int cc : T::kComputeCapabilities) {
      for (const auto& p : T::space(v, cc)) EXPECT_TRUE(this->withinLaunchLimits(v, p));
    }
  }
}

TYPED_TEST(FamilyConformanceTest, GivenEveryPointOnManyRowsWhenAskedForGeometryThenWithinTheLaunchLimits) {
  for (DType d : kAllDTypes) {
    for (const auto& p : TypeParam::allParameterPoints(d)) {
      for (int64_t rows : {int64_t{1}, int64_t{100000}, kMaxGridX}) {
        const auto v = this->plain(d, rows, p.vec);
        if (!TypeParam::guardParams(v, p)) continue;  // e.g. cross_entropy's row limit
        EXPECT_TRUE(this->withinLaunchLimits(v, p));
      }
    }
  }
}

TYPED_TEST(FamilyConformanceTest, GivenEveryPointWhenAskedForAlignmentThenAPowerOfTwoUpTo16BytesOfWholeElements) {
  for (DType d : kAllDTypes) {
    for (const auto& p : TypeParam::allParameterPoints(d)) {
      const size_t a = TypeParam::requiredAlignment(d, p);
      EXPECT_GE(a, 1u) << p.describe();
      EXPECT_EQ(a & (a - 1), 0u) << dtypeName(d) << " " << p.describe();
      EXPECT_LE(a, 16u) << dtypeName(d) << " " << p.describe();
      EXPECT_EQ(a % elementSize(d), 0u) << dtypeName(d) << " " << p.describe();
    }
  }
}

TYPED_TEST(FamilyConformanceTest, GivenEveryPointWhenAskedForOptionsTwiceThenTheSameAndNoTwoPointsShareThem) {
  using T = Traits<TypeParam>;
  const auto first = this->allOptionSets();
  const auto second = this->allOptionSets();
  ASSERT_EQ(first, second);
  std::set<std::vector<std::string>> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), first.size()) << "two points (or ops) compile to the same kernel";
  for (DType d : kAllDTypes) {
    const std::string dtypeDefine = "-DHK_DTYPE=" + std::to_string(static_cast<int>(d));
    for (const auto& p : TypeParam::allParameterPoints(d)) {
      for (const auto& o : T::optionSets(d, p)) {
        EXPECT_EQ(std::count(o.begin(), o.end(), dtypeDefine), 1) << dtypeName(d) << " " << p.describe();
      }
    }
  }
}

TYPED_TEST(FamilyConformanceTest, GivenTheNamedShapesWhenAskedForBytesThenAtLeastTheInputOnce) {
  for (const auto& v : this->served()) {
    const double input = static_cast<double>(v.rows) * static_cast<double>(v.cols) * elementSize(v.dtype);
    const double bytes = TypeParam::bytesMoved(v);
    EXPECT_TRUE(std::isfinite(bytes)) << this->name(v);
    EXPECT_GE(bytes, input) << this->name(v);
  }
}

// --- params JSON -------------------------------------------------------------

TYPED_TEST(FamilyConformanceTest, GivenEveryPointWhenRoundTrippedThroughJsonTextThenEqual) {
  using P = typename TestFixture::Params;
  for (DType d : kAllDTypes) {
    for (const auto& p : TypeParam::allParameterPoints(d)) {
      EXPECT_EQ(P::fromJson(p.toJson()), p) << p.describe();
      EXPECT_EQ(P::fromJson(nlohmann::json::parse(p.toJson().dump())), p) << p.toJson().dump();
    }
  }
}

TYPED_TEST(FamilyConformanceTest, GivenMalformedJsonWhenParsedThenThrows) {
  using T = Traits<TypeParam>;
  using P = typename TestFixture::Params;
  for (const nlohmann::json& j : {nlohmann::json::array(), nlohmann::json(), nlohmann::json("threads"),
                                  nlohmann::json(512), nlohmann::json::object()}) {
    EXPECT_THROW(P::fromJson(j), Error) << j.dump();
  }
  // The first and the last point of the whitelist (the last holds every optional key
  // some families have: clusters, staging).
  const auto all = TypeParam::allParameterPoints(DType::BFloat16);
  for (const auto& p : {all.front(), all.back()}) {
    const nlohmann::json good = p.toJson();
    for (const char* key : T::kRequiredKeys) {
      nlohmann::json missing = good;
      ASSERT_EQ(missing.erase(key), 1u) << good.dump();
      EXPECT_THROW(P::fromJson(missing), Error) << missing.dump();
    }
    for (const auto& item : good.items()) {
      for (const nlohmann::json& bad : {nlohmann::json("8"), nlohmann::json(1.5), nlohmann::json()}) {
        nlohmann::json j = good;
        j[item.key()] = bad;
        EXPECT_THROW(P::fromJson(j), Error) << j.dump();
      }
    }
  }
}

// --- template ----------------------------------------------------------------

TYPED_TEST(FamilyConformanceTest, GivenTheFamilyWhenAskedForSourceThenOneSelfContainedTemplateNamingItsEntryPoint) {
  using T = Traits<TypeParam>;
  const KernelSource& s = kernelSource(TypeParam::kName);
  EXPECT_EQ(s.path, T::kPath);
  const std::string source = TypeParam::source();
  EXPECT_EQ(source, expandPrelude(s.text));
  EXPECT_EQ(source.find("#include"), std::string::npos);
  EXPECT_NE(source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(source.find(std::string(TypeParam::kKernelName) + "("), std::string::npos);
}

// A template's only overridable defines (an #ifndef default, an #ifdef) are
// ones its family's compileOptions passes: a probe's knob lives in the probe
// (kernels/README.md), and every kernel the optimizer compiles is the one the
// template states.
TYPED_TEST(FamilyConformanceTest, GivenTheTemplateWhenScannedThenEveryOverridableDefineIsOneTheFamilyPasses) {
  std::set<std::string> passed;
  const std::regex define(R"(^-D(HK_\w+)=)");
  for (const auto& o : this->allOptionSets()) {
    for (const std::string& option : o) {
      std::smatch m;
      if (std::regex_search(option, m, define)) passed.insert(m[1].str());
    }
  }
  const std::string source = TypeParam::source();
  const std::regex overridable(R"(#\s*if(?:n?def)\s+(HK_\w+))");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), overridable); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(passed.count((*it)[1].str()), 1u) << (*it)[0].str() << ": no compile option sets it";
  }
}

// --- NVRTC (CPU) -------------------------------------------------------------

// The first point of each dtype's space for a mid-sized variant (every flag
// combination) compiles for sm_90a into a cubin holding the entry point,
// without spills. The families' own tests compile every point.
TYPED_TEST(FamilyConformanceTest, GivenTheFirstPointOfASpaceWhenCompiledForSm90aThenACubinWithTheEntryPoint) {
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  using T = Traits<TypeParam>;
  struct Job {
    typename TestFixture::Variant v;
    typename TestFixture::Params p;
  };
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    for (const auto& v : T::variants(d, 512, 4096)) jobs.push_back({v, T::space(v, 90).front()});
  }
  std::vector<std::string> errors(jobs.size());
  const std::string source = TypeParam::source();
  const std::regex spills(R"(([1-9]\d*) bytes spill)");
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    try {
      std::vector<std::string> options = T::options(jobs[i].v, jobs[i].p);
      options.push_back("--ptxas-options=-v");
      const NvrtcOutput out = hotkernel::testutil::compileCached(source, std::string(TypeParam::kName) + ".cu", "sm_90a", options);
      if (out.cubin.compare(0, 4, "\x7f" "ELF") != 0) errors[i] = "not an ELF image";
      if (out.cubin.find(TypeParam::kKernelName) == std::string::npos) errors[i] += " no entry point";
      if (std::regex_search(out.log, spills)) errors[i] += " spills: " + out.log;
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(errors[i], "") << this->name(jobs[i].v) << " " << jobs[i].p.describe();
  }
}

}  // namespace
}  // namespace hotkernel::kernels
