// prepareFunction (Note [Function attributes before launch]) and launchKernelOn
// (Note [Cooperative launches]) against a table of fake driver calls: which
// attributes a loaded function gets before its first launch, how a failing
// call is reported, and which launch call a geometry takes. No GPU or libcuda
// needed.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {
namespace {

// What the fakes answer and what they saw (one test at a time).
struct FakeFunction {
  CUresult widthQuery = CUDA_SUCCESS;  // cuFuncGetAttribute(REQUIRED_CLUSTER_WIDTH)'s status
  int clusterWidth = 0;                // its answer
  CUresult setStatus = CUDA_SUCCESS;   // every cuFuncSetAttribute's status
  CUfunction_attribute failOnly = CU_FUNC_ATTRIBUTE_MAX;  // when set, only this attribute fails
  std::vector<std::pair<CUfunction_attribute, int>> sets;
  std::vector<CUfunction_attribute> gets;
};
FakeFunction fake;
CUfunction const kFunction = reinterpret_cast<CUfunction>(0x1234);

CUresult fakeSetAttribute(CUfunction f, CUfunction_attribute a, int value) {
  EXPECT_EQ(f, kFunction);
  fake.sets.emplace_back(a, value);
  if (fake.failOnly != CU_FUNC_ATTRIBUTE_MAX && a != fake.failOnly) return CUDA_SUCCESS;
  return fake.setStatus;
}

CUresult fakeGetAttribute(int* value, CUfunction_attribute a, CUfunction f) {
  EXPECT_EQ(f, kFunction);
  fake.gets.push_back(a);
  if (a != CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH) return CUDA_ERROR_INVALID_VALUE;
  if (fake.widthQuery != CUDA_SUCCESS) return fake.widthQuery;
  *value = fake.clusterWidth;
  return CUDA_SUCCESS;
}

CudaDriverApi fakeDriver() {
  CudaDriverApi d;
  std::memset(&d, 0, sizeof(d));  // any other call would crash the test: prepareFunction makes none
  d.cuFuncSetAttribute = fakeSetAttribute;
  d.cuFuncGetAttribute = fakeGetAttribute;
  return d;
}

class PrepareFunctionTest : public ::testing::Test {
 protected:
  void SetUp() override { fake = FakeFunction{}; }
  const CudaDriverApi driver_ = fakeDriver();
};

TEST_F(PrepareFunctionTest, GivenAClusterOfSixteenWhenPreparedThenNonPortableClustersAllowed) {
  fake.clusterWidth = 16;
  EXPECT_EQ(prepareFunction(driver_, kFunction, 0), CUDA_SUCCESS);
  ASSERT_EQ(fake.gets.size(), 1u);
  EXPECT_EQ(fake.gets[0], CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH);
  ASSERT_EQ(fake.sets.size(), 1u);
  EXPECT_EQ(fake.sets[0].first, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
  EXPECT_EQ(fake.sets[0].second, 1);
}

TEST_F(PrepareFunctionTest, GivenPortableOrNoClustersWhenPreparedThenNoClusterAttributeSet) {
  for (int width : {0, 1, 2, 4, kPortableClusterSize}) {
    fake = FakeFunction{};
    fake.clusterWidth = width;
    EXPECT_EQ(prepareFunction(driver_, kFunction, 0), CUDA_SUCCESS) << width;
    EXPECT_TRUE(fake.sets.empty()) << "cluster width " << width;
  }
}

TEST_F(PrepareFunctionTest, GivenDynamicSharedMemoryAndAWideClusterWhenPreparedThenBothOptIns) {
  fake.clusterWidth = 16;
  EXPECT_EQ(prepareFunction(driver_, kFunction, 16384), CUDA_SUCCESS);
  ASSERT_EQ(fake.sets.size(), 2u);
  EXPECT_EQ(fake.sets[0].first, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  EXPECT_EQ(fake.sets[0].second, 16384);
  EXPECT_EQ(fake.sets[1].first, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
  // Any dynamic size opts in, not only above 48 KiB (Note [Dynamic shared memory opt-in]).
  fake = FakeFunction{};
  EXPECT_EQ(prepareFunction(driver_, kFunction, 1024), CUDA_SUCCESS);
  ASSERT_EQ(fake.sets.size(), 1u);
  EXPECT_EQ(fake.sets[0], std::make_pair(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024));
}

TEST_F(PrepareFunctionTest, GivenTheNonPortableOptInRefusedWhenPreparedThenItsStatusAndNameReturned) {
  fake.clusterWidth = 16;
  fake.setStatus = CUDA_ERROR_NOT_SUPPORTED;
  fake.failOnly = CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED;
  const char* step = "untouched";
  EXPECT_EQ(prepareFunction(driver_, kFunction, 4096, &step), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_STREQ(step, "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
  EXPECT_EQ(fake.sets.size(), 2u);  // the shared-memory opt-in went through first
}

TEST_F(PrepareFunctionTest, GivenTheSharedMemoryOptInRefusedWhenPreparedThenStopsThere) {
  fake.clusterWidth = 16;
  fake.setStatus = CUDA_ERROR_INVALID_VALUE;
  const char* step = nullptr;
  EXPECT_EQ(prepareFunction(driver_, kFunction, 300000, &step), CUDA_ERROR_INVALID_VALUE);
  EXPECT_STREQ(step, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  EXPECT_EQ(fake.sets.size(), 1u);
  EXPECT_TRUE(fake.gets.empty()) << "nothing after the first failure";
  // No name wanted: the status alone.
  fake = FakeFunction{};
  fake.setStatus = CUDA_ERROR_INVALID_VALUE;
  EXPECT_EQ(prepareFunction(driver_, kFunction, 300000), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(PrepareFunctionTest, GivenADriverThatCannotReportClustersWhenPreparedThenNothingSetAndSuccess) {
  fake.widthQuery = CUDA_ERROR_INVALID_VALUE;  // an attribute older drivers do not know
  fake.clusterWidth = 16;                      // never read
  const char* step = "untouched";
  EXPECT_EQ(prepareFunction(driver_, kFunction, 0, &step), CUDA_SUCCESS);
  EXPECT_TRUE(fake.sets.empty());
  EXPECT_STREQ(step, "untouched");
}

// What the fake launch calls saw.
struct FakeLaunch {
  std::string call;  // "plain" or "cooperative"
  unsigned grid = 0, block = 0, shared = 0;
  CUstream stream = nullptr;
  void** params = nullptr;
  CUresult status = CUDA_SUCCESS;
};
FakeLaunch launched;

CUresult fakeLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                    unsigned shared, CUstream stream, void** params, void** extra) {
  EXPECT_EQ(f, kFunction);
  EXPECT_EQ(gy * gz * by * bz, 1u);
  EXPECT_EQ(extra, nullptr);
  launched = FakeLaunch{"plain", gx, bx, shared, stream, params, launched.status};
  return launched.status;
}

CUresult fakeCooperativeLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream stream, void** params) {
  EXPECT_EQ(f, kFunction);
  EXPECT_EQ(gy * gz * by * bz, 1u);
  launched = FakeLaunch{"cooperative", gx, bx, shared, stream, params, launched.status};
  return launched.status;
}

class LaunchKernelOnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    launched = FakeLaunch{};
    std::memset(&driver_, 0, sizeof(driver_));  // any other call would crash the test
    driver_.cuLaunchKernel = fakeLaunch;
    driver_.cuLaunchCooperativeKernel = fakeCooperativeLaunch;
  }
  CudaDriverApi driver_;
  CUstream const stream_ = reinterpret_cast<CUstream>(0x77);
  void* params_[1] = {nullptr};
};

TEST_F(LaunchKernelOnTest, GivenAPlainGeometryWhenLaunchedThenCuLaunchKernelWithItsGridBlockAndSharedMemory) {
  EXPECT_EQ(launchKernelOn(driver_, kFunction, LaunchGeometry{12, 256, 4096}, stream_, params_), CUDA_SUCCESS);
  EXPECT_EQ(launched.call, "plain");
  EXPECT_EQ(launched.grid, 12u);
  EXPECT_EQ(launched.block, 256u);
  EXPECT_EQ(launched.shared, 4096u);
  EXPECT_EQ(launched.stream, stream_);
  EXPECT_EQ(launched.params, params_);
}

TEST_F(LaunchKernelOnTest, GivenACooperativeGeometryWhenLaunchedThenCuLaunchCooperativeKernel) {
  LaunchGeometry g{128, 1024, 0};
  g.cooperative = true;
  EXPECT_EQ(launchKernelOn(driver_, kFunction, g, stream_, params_), CUDA_SUCCESS);
  EXPECT_EQ(launched.call, "cooperative");
  EXPECT_EQ(launched.grid, 128u);
  EXPECT_EQ(launched.block, 1024u);
  EXPECT_EQ(launched.stream, stream_);
  EXPECT_EQ(launched.params, params_);
}

TEST_F(LaunchKernelOnTest, GivenAGridTooWideToBeCoResidentWhenLaunchedThenTheDriversRefusalIsReturned) {
  launched.status = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  LaunchGeometry g{100000, 1024, 0};
  g.cooperative = true;
  EXPECT_EQ(launchKernelOn(driver_, kFunction, g, stream_, params_), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  EXPECT_EQ(launched.call, "cooperative");
}

}  // namespace
}  // namespace hotkernel
