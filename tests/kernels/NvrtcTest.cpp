// Tests of the NVRTC wrapper (runtime/include/hotkernel/runtime/Nvrtc.h).
// CPU only: NVRTC compiles to cubin without a GPU.

#include "hotkernel/runtime/Nvrtc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

const char* kTrivialKernel = R"(
extern "C" __global__ void hk_trivial(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * i;
}
)";

bool isElf(const std::string& image) { return image.size() > 4 && image.compare(0, 4, "\x7f" "ELF") == 0; }

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

// The build requires the CUDA toolkit, so its NVRTC must be found at run time;
// this is the one test that fails (rather than skips) when it is not.
TEST(NvrtcTest, GivenCudaToolkitWhenLoadingNvrtcThenItIsAvailableWithAVersion) {
  ASSERT_TRUE(nvrtcAvailable()) << nvrtcUnavailableReason();
  EXPECT_EQ(nvrtcUnavailableReason(), "");
  EXPECT_GE(nvrtcVersion(), 12000);
  EXPECT_EQ(nvrtcVersion() % 10, 0);
  EXPECT_FALSE(nvrtcLibraryPath().empty());
}

TEST(NvrtcTest, GivenTrivialKernelWhenCompiledForSm80AndSm90aThenEachCubinIsAnElfImage) {
  SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcOutput out = compileToCubin(kTrivialKernel, "trivial.cu", arch, {});
    EXPECT_TRUE(isElf(out.cubin)) << arch;
    EXPECT_NE(out.cubin.find("hk_trivial"), std::string::npos) << "kernel symbol missing for " << arch;
    EXPECT_GT(out.compileSeconds, 0.0);
    EXPECT_LT(out.compileSeconds, 60.0);
  }
}

TEST(NvrtcTest, GivenTwoArchitecturesWhenCompiledThenTheCubinsDiffer) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_NE(compileToCubin(kTrivialKernel, "trivial.cu", "sm_80", {}).cubin,
            compileToCubin(kTrivialKernel, "trivial.cu", "sm_90a", {}).cubin);
}

TEST(NvrtcTest, GivenSyntaxErrorWhenCompiledThenErrorCarriesTheCompileLog) {
  SKIP_WITHOUT_NVRTC();
  const std::string broken = "extern \"C\" __global__ void hk_broken(float* out) {\n  out[0] = undeclared_name;\n}\n";
  try {
    compileToCubin(broken, "broken_program.cu", "sm_90a", {});
    FAIL() << "compiling a broken kernel did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("broken_program.cu"), std::string::npos) << what;
    EXPECT_NE(what.find("undeclared_name"), std::string::npos) << what;  // from the log
    EXPECT_NE(what.find("NVRTC_ERROR_COMPILATION"), std::string::npos) << what;
    EXPECT_NE(what.find("--gpu-architecture=sm_90a"), std::string::npos) << what;
    EXPECT_FALSE(e.internal());
  }
}

TEST(NvrtcTest, GivenExtraDefinesWhenCompiledThenTheyReachThePreprocessor) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = "#if HK_VALUE != 7\n#error HK_VALUE is not 7\n#endif\n" + std::string(kTrivialKernel);
  EXPECT_NO_THROW(compileToCubin(source, "defines.cu", "sm_90a", {"-DHK_VALUE=7"}));
  EXPECT_THROW(compileToCubin(source, "defines.cu", "sm_90a", {"-DHK_VALUE=8"}), Error);
}

// NVRTC always defines __USE_FAST_MATH__: 0 by default, 1 under --use_fast_math.
TEST(NvrtcTest, GivenDefaultOptionsWhenCompiledThenFastMathIsOff) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = "#if __USE_FAST_MATH__\n#error fast math\n#endif\n" + std::string(kTrivialKernel);
  EXPECT_NO_THROW(compileToCubin(source, "fastmath.cu", "sm_90a", {}));
  EXPECT_THROW(compileToCubin(source, "fastmath.cu", "sm_90a", {"--use_fast_math"}), Error);
}

TEST(NvrtcTest, GivenPtxasVerboseWhenCompiledThenTheLogReportsRegisters) {
  SKIP_WITHOUT_NVRTC();
  NvrtcOutput out = compileToCubin(kTrivialKernel, "verbose.cu", "sm_90a", {"--ptxas-options=-v"});
  EXPECT_NE(out.log.find("registers"), std::string::npos) << out.log;
  EXPECT_NE(out.log.find("hk_trivial"), std::string::npos) << out.log;
}

TEST(NvrtcTest, GivenVirtualArchitectureWhenCompiledThenRefusedBeforeCompiling) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_THROW(compileToCubin(kTrivialKernel, "trivial.cu", "compute_90", {}), Error);
  EXPECT_THROW(compileToCubin(kTrivialKernel, "trivial.cu", "", {}), Error);
}

TEST(NvrtcTest, GivenUnknownOptionWhenCompiledThenThrows) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_THROW(compileToCubin(kTrivialKernel, "trivial.cu", "sm_90a", {"--no-such-option"}), Error);
}

TEST(NvrtcTest, GivenEightThreadsWhenCompilingConcurrentlyThenEveryCompileSucceedsWithItsOwnDefines) {
  SKIP_WITHOUT_NVRTC();
  constexpr int kThreads = 8;
  std::vector<std::string> cubins(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &cubins, &errors] {
      try {
        const std::string source = "extern \"C\" __global__ void hk_k(float* o) { o[0] = " + std::to_string(t) +
                                   ".5f * HK_SCALE; }\n";
        cubins[t] = compileToCubin(source, "k" + std::to_string(t) + ".cu", t % 2 ? "sm_80" : "sm_90a",
                                   {"-DHK_SCALE=" + std::to_string(t + 1)})
                        .cubin;
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_TRUE(isElf(cubins[t])) << "thread " << t;
    for (int u = 0; u < t; ++u) EXPECT_NE(cubins[t], cubins[u]) << t << " vs " << u;
  }
}

// The library is loaded once per process, so the override is tested in a
// fresh child process (threadsafe death-test style re-executes this binary).
TEST(NvrtcTest, GivenOverridePathThatDoesNotExistWhenLoadingThenUnavailableAndTheReasonNamesThePath) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        ::setenv("HOTKERNEL_NVRTC_PATH", "/nonexistent/libnvrtc-hotkernel-test.so", 1);
        bool ok = !nvrtcAvailable() &&
                  nvrtcUnavailableReason().find("/nonexistent/libnvrtc-hotkernel-test.so") != std::string::npos;
        try {
          nvrtcVersion();
          ok = false;
        } catch (const Error&) {
        }
        std::exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(NvrtcTest, GivenOverridePathToAnExistingNvrtcWhenLoadingThenExactlyThatPathIsUsed) {
  // Nothing may touch NVRTC before EXPECT_EXIT: the child runs this body from the top.
  const std::string path = "/usr/local/cuda/lib64/libnvrtc.so.13";
  if (::access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " does not exist";
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        ::setenv("HOTKERNEL_NVRTC_PATH", path.c_str(), 1);
        std::exit(nvrtcAvailable() && nvrtcLibraryPath() == path ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace hotkernel
