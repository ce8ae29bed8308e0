// The mm_pad_n family (kernels/MmPadFamily.h): guards, parameters, geometry,
// the descriptor, NVRTC compiles of every point, and the copy kernel's own
// source compiled for the host and run thread by thread on pad and copy-out
// shapes (Note [Chain kernels on the host] in tests/ChainHostKernels.h says
// why a kernel without inter-thread communication computes the same there).

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "CompileCache.h"
#include "TempDir.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel::kernels {
namespace {

MmPadVariant gpt2Head() { return {DType::Float16, 8192, 50257, 768}; }

TEST(MmPadFamilyTest, GivenSixteenBitMisalignedNWhenGuardedThenServed) {
  EXPECT_TRUE(MmPadFamily::guardVariant(gpt2Head()));
  EXPECT_TRUE(MmPadFamily::guardVariant({DType::BFloat16, 16384, 30522, 768}));
  EXPECT_TRUE(MmPadFamily::guardVariant({DType::Float16, 1, 1, 8}));
  EXPECT_EQ(gpt2Head().paddedN(), 50264);
  EXPECT_EQ((MmPadVariant{DType::Float16, 4, 9, 8}.paddedN()), 16);
}

TEST(MmPadFamilyTest, GivenAlignedNOrOtherDtypesOrBadExtentsWhenGuardedThenRefused) {
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float16, 8192, 50264, 768}));  // aligned: nothing to gain
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float32, 8192, 50257, 768}));
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float16, 8192, 50257, 770}));  // K rows misaligned
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float16, 0, 50257, 768}));
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float16, 8, 0, 768}));
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float16, 8, 9, 0}));
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float16, MmPadFamily::kMaxExtent + 1, 9, 8}));
  EXPECT_FALSE(MmPadFamily::guardVariant({DType::Float16, int64_t{1} << 30, int64_t{1} << 20 | 1, 8}));
}

TEST(MmPadFamilyTest, GivenTheSpaceWhenListedThenEveryPointGuardedAndTheWhitelistComplete) {
  const std::vector<MmPadParams> all = MmPadFamily::allParameterPoints();
  EXPECT_EQ(all.size(), 16u);
  const std::vector<MmPadParams> space = MmPadFamily::parameterSpace(gpt2Head());
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space.front(), (MmPadParams{256, 8}));
  for (const MmPadParams& p : space) {
    EXPECT_TRUE(MmPadFamily::guardParams(gpt2Head(), p)) << p.describe();
    EXPECT_NE(std::find(all.begin(), all.end(), p), all.end()) << p.describe();
  }
  EXPECT_TRUE(MmPadFamily::parameterSpace({DType::Float16, 8, 16, 8}).empty());
  EXPECT_FALSE(MmPadFamily::guardParams(gpt2Head(), {96, 8}));
  EXPECT_FALSE(MmPadFamily::guardParams(gpt2Head(), {256, 16}));
  EXPECT_THROW(MmPadFamily::compileOptions({256, 3}), Error);
  EXPECT_EQ(MmPadFamily::compileOptions({512, 4}), (std::vector<std::string>{"-DHK_THREADS=512", "-DHK_VEC=4"}));
  EXPECT_EQ(MmPadFamily::requiredAlignment(DType::Float16, {256, 8}), 16u);
  EXPECT_EQ(MmPadFamily::requiredAlignment(DType::BFloat16, {256, 1}), 2u);
}

TEST(MmPadFamilyTest, GivenParamsWhenWrittenAsJsonThenReadBackAndMalformedRefused) {
  const MmPadParams p{512, 4};
  EXPECT_EQ(p.toJson().dump(), R"({"threads":512,"vec":4})");
  EXPECT_EQ(MmPadParams::fromJson(p.toJson()), p);
  EXPECT_EQ(p.describe(), "threads=512 vec=4");
  EXPECT_THROW(MmPadParams::fromJson(nlohmann::json{{"threads", 256}}), Error);
  EXPECT_THROW(MmPadParams::fromJson(nlohmann::json{{"threads", "256"}, {"vec", 8}}), Error);
  EXPECT_THROW(MmPadParams::fromJson(nlohmann::json::array()), Error);
}

TEST(MmPadFamilyTest, GivenAVariantWhenItsGeometryIsTakenThenOneGridCoversTheLargerCopyWithinTheCap) {
  const MmPadVariant small{DType::Float16, 4, 9, 8};  // out 36 elements, padded weight 128
  const LaunchGeometry g = MmPadFamily::launchGeometry(small, {128, 8});
  EXPECT_EQ(g.blockX, 128u);
  EXPECT_EQ(g.gridX, 1u);
  const LaunchGeometry big = MmPadFamily::launchGeometry(gpt2Head(), {256, 8});
  EXPECT_EQ(big.gridX, (1u << 20) / 256);  // capped: a grid-stride loop does the rest
  EXPECT_THROW(MmPadFamily::launchGeometry(gpt2Head(), {96, 8}), Error);
  EXPECT_DOUBLE_EQ(MmPadFamily::bytesMoved(small), (4.0 * 8 + 9.0 * 8 + 4.0 * 9) * 2);
}

TEST(MmPadFamilyTest, GivenTheDescriptorWhenAskedThenItServesMmKeysOnly) {
  const FamilyDescriptor* f = familyForOp("aten::mm");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f, &mmPadDescriptor());
  EXPECT_EQ(familyNamed("mm_pad_n"), f);
  VariantKey key = mmPadKeyOf(gpt2Head(), 0);
  EXPECT_EQ(key.rows, 8192);
  EXPECT_EQ(key.cols, 50257);
  EXPECT_EQ(key.inner, 768);
  EXPECT_TRUE(f->servesKey(key));
  EXPECT_EQ(variantString(key), "dtype=float16;rows=8192;cols=50257;inner=768");
  const std::optional<VariantKey> parsed = parseVariantString(variantString(key), 0);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, key);
  VariantKey withOptions = key;
  withOptions.options = variant_options::kWeight;
  EXPECT_FALSE(f->servesKey(withOptions));
  EXPECT_DOUBLE_EQ(f->bytesMoved(key), MmPadFamily::bytesMoved(gpt2Head()));
  // A plan whose parameters do not fit is refused before any module is loaded.
  EXPECT_THROW(f->makePlan(key, nlohmann::json{{"threads", 96}, {"vec", 8}}, "not a cubin", 0), Error);
  EXPECT_THROW(f->makePlan(withOptions, MmPadParams{}.toJson(), "not a cubin", 0), Error);
}

TEST(MmPadFamilyTest, GivenTheAddmmDescriptorWhenAskedThenItServesBiasKeysOfAddmmOnly) {
  const FamilyDescriptor* f = familyForOp("aten::addmm");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f, &addmmPadDescriptor());
  EXPECT_EQ(familyNamed("addmm_pad_n"), f);
  MmPadVariant v = gpt2Head();
  v.bias = true;
  const VariantKey key = mmPadKeyOf(v, 0);
  EXPECT_EQ(key.options, variant_options::kBias);
  EXPECT_EQ(variantString(key), "dtype=float16;rows=8192;cols=50257;inner=768;bias=1");
  EXPECT_TRUE(mmPadVariantOf(key).bias);
  EXPECT_TRUE(f->servesKey(key));
  EXPECT_FALSE(mmPadDescriptor().servesKey(key));  // each op its own family
  EXPECT_EQ(&mmPadDescriptorOf(v), f);
  EXPECT_EQ(&mmPadDescriptorOf(gpt2Head()), &mmPadDescriptor());
  EXPECT_FALSE(f->servesKey(mmPadKeyOf(gpt2Head(), 0)));
  EXPECT_DOUBLE_EQ(f->bytesMoved(key), MmPadFamily::bytesMoved(gpt2Head()) + 50257.0 * 2);
  EXPECT_THROW(f->makePlan(mmPadKeyOf(gpt2Head(), 0), MmPadParams{}.toJson(), "not a cubin", 0), Error);
}

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

TEST(MmPadFamilyCompileTest, GivenEveryPointWhenCompiledForSm80AndSm90aThenCubins) {
  SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (const MmPadParams& p : MmPadFamily::allParameterPoints()) {
      const NvrtcOutput out =
          testutil::compileCached(MmPadFamily::source(), "pad_rows.cu", arch, MmPadFamily::compileOptions(p));
      EXPECT_FALSE(out.cubin.empty()) << arch << " " << p.describe();
      EXPECT_NE(out.cubin.find(MmPadFamily::kKernelName), std::string::npos) << arch << " " << p.describe();
    }
  }
}

TEST(MmPadFamilyCompileTest, GivenAVecOutsideTheSpaceWhenCompiledThenTheTemplateRefusesIt) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_THROW(compileToCubin(MmPadFamily::source(), "pad_rows.cu", "sm_90a", {"-DHK_THREADS=256", "-DHK_VEC=3"}),
               Error);
  EXPECT_THROW(compileToCubin(MmPadFamily::source(), "pad_rows.cu", "sm_90a", {"-DHK_THREADS=256"}), Error);
}

// --- the template run on the host ---------------------------------------------

#ifdef HOTKERNEL_TEST_CXX
// pad_rows.cu compiled by the host compiler, each point's kernel run one thread after the other.
class HostPadRows {
 public:
  explicit HostPadRows(const MmPadParams& p) {
    std::ostringstream tu;
    tu << "#include <cstdint>\n#define __global__\n#define __device__\n#define __forceinline__ inline\n"
       << "#define __launch_bounds__(...)\n#define HK_THREADS " << p.threads << "\n#define HK_VEC " << p.vec << "\n"
       << "struct hk_dim3 { unsigned x = 0; };\nstatic hk_dim3 blockIdx, threadIdx, gridDim;\n"
       << MmPadFamily::source()
       << "\nextern \"C\" void run(unsigned grid, const void* s, void* d, long long dr, long long dc, long long sr,"
          " long long sc, long long sl) {\n  gridDim.x = grid;\n  for (unsigned b = 0; b < grid; ++b)\n"
          "    for (unsigned t = 0; t < HK_THREADS; ++t) {\n      blockIdx.x = b;\n      threadIdx.x = t;\n"
          "      hk_pad_rows(s, d, dr, dc, sr, sc, sl);\n    }\n}\n";
    const std::string src = dir_.path() + "/pad_rows.cpp", lib = dir_.path() + "/pad_rows.so";
    std::ofstream(src) << tu.str();
    const std::string command = std::string("'") + HOTKERNEL_TEST_CXX + "' -std=c++17 -O1 -shared -fPIC -o '" + lib +
                                "' '" + src + "' > '" + dir_.path() + "/log' 2>&1";
    HOTKERNEL_CHECK(std::system(command.c_str()) == 0, "the host compile failed: ", command);
    handle_ = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    HOTKERNEL_CHECK(handle_ != nullptr, "dlopen: ", ::dlerror());
    run_ = reinterpret_cast<Run>(::dlsym(handle_, "run"));
    HOTKERNEL_CHECK(run_ != nullptr, "no run in the host kernel");
  }
  ~HostPadRows() {
    if (handle_) ::dlclose(handle_);
  }
  HostPadRows(const HostPadRows&) = delete;
  HostPadRows& operator=(const HostPadRows&) = delete;
  void operator()(unsigned grid, const uint16_t* src, uint16_t* dst, int64_t dstRows, int64_t dstCols,
                  int64_t srcRows, int64_t srcCols, int64_t srcLd) const {
    run_(grid, src, dst, dstRows, dstCols, srcRows, srcCols, srcLd);
  }

 private:
  using Run = void (*)(unsigned, const void*, void*, long long, long long, long long, long long, long long);
  test::TempDir dir_{"hotkernel-pad-rows"};
  void* handle_ = nullptr;
  Run run_ = nullptr;
};

// What hk_pad_rows must write.
std::vector<uint16_t> expected(const std::vector<uint16_t>& src, int64_t dstRows, int64_t dstCols, int64_t srcRows,
                               int64_t srcCols, int64_t srcLd) {
  std::vector<uint16_t> out(static_cast<size_t>(dstRows * dstCols));
  for (int64_t r = 0; r < dstRows; ++r) {
    for (int64_t c = 0; c < dstCols; ++c) {
      out[static_cast<size_t>(r * dstCols + c)] =
          r < srcRows && c < srcCols ? src[static_cast<size_t>(r * srcLd + c)] : uint16_t{0};
    }
  }
  return out;
}

TEST(MmPadFamilyHostTest, GivenEveryPointWhenItPadsAWeightAndCopiesAnOutputOnTheHostThenEveryElementIsRight) {
  for (const MmPadParams& p : MmPadFamily::allParameterPoints()) {
    const HostPadRows kernel(p);
    // The weight [n, k] padded to [n8, k], and the [m, n8] output copied into [m, n]: n odd, so the copy's
    // vectors cross rows and its rows start at every offset of a 16-byte source vector (the shifted loads of
    // vec 8, Note [Shifted source vectors]); small grids so that the grid-stride loop runs several times.
    using Shape = std::tuple<int64_t, int64_t, int64_t>;
    for (const auto& [m, n, k] : std::vector<Shape>{{3, 9, 8}, {5, 1, 16}, {7, 13, 24}, {17, 61, 8}}) {
      const int64_t n8 = (n + 7) / 8 * 8;
      std::vector<uint16_t> weight(static_cast<size_t>(n * k)), wide(static_cast<size_t>(m * n8));
      for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<uint16_t>(0x3c00 + i);
      for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<uint16_t>(0x4000 + 3 * i);
      // The copy's source 16-byte aligned, as a GEMM's buffer is: vec 8 takes the shifted loads.
      ASSERT_EQ(reinterpret_cast<uintptr_t>(wide.data()) % 16, 0u);
      for (unsigned grid : {1u, 2u}) {
        std::vector<uint16_t> w8(static_cast<size_t>(n8 * k), 0xffff), out(static_cast<size_t>(m * n), 0xffff);
        kernel(grid, weight.data(), w8.data(), n8, k, n, k, k);
        EXPECT_EQ(w8, expected(weight, n8, k, n, k, k)) << p.describe() << " pad " << m << "x" << n << "x" << k;
        kernel(grid, wide.data(), out.data(), m, n, m, n, n8);
        EXPECT_EQ(out, expected(wide, m, n, m, n, n8)) << p.describe() << " copy " << m << "x" << n << "x" << k;
        // A source 2-byte but not 16-byte aligned (the shifted vectors need 16): element by element.
        std::vector<uint16_t> misaligned(wide.size() + 1);
        std::copy(wide.begin(), wide.end(), misaligned.begin() + 1);
        std::fill(out.begin(), out.end(), uint16_t{0xffff});
        kernel(grid, misaligned.data() + 1, out.data(), m, n, m, n, n8);
        EXPECT_EQ(out, expected(wide, m, n, m, n, n8)) << p.describe() << " misaligned copy " << m << "x" << n;
        // One source row longer than the destination's rows (the precondition's srcRows <= 1 case): the vectors
        // that cross into the next destination row take zeros there, not the source row's further elements.
        std::fill(out.begin(), out.end(), uint16_t{0xffff});
        kernel(grid, wide.data(), out.data(), m, n, 1, std::min<int64_t>(n8, n + 7), n8);
        EXPECT_EQ(out, expected(wide, m, n, 1, std::min<int64_t>(n8, n + 7), n8)) << p.describe() << " long row";
      }
    }
  }
}
#endif

}  // namespace
}  // namespace hotkernel::kernels
