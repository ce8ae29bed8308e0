// tests/kernels/CompileCache.h (Note [Compile results cached across test runs]): a result is read back for the
// same NVRTC, architecture, options and source, and only for those; failures are never kept; 0 turns it off.

#include "CompileCache.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "../TempDir.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::testutil {
namespace {

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

const char* kSource = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = HK_VALUE; }";

size_t filesIn(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

class ScopedCacheDir {
 public:
  explicit ScopedCacheDir(const std::string& value) {
    if (const char* old = std::getenv("HOTKERNEL_TEST_NVRTC_CACHE")) old_ = old, had_ = true;
    ::setenv("HOTKERNEL_TEST_NVRTC_CACHE", value.c_str(), 1);
  }
  ~ScopedCacheDir() {
    if (had_) {
      ::setenv("HOTKERNEL_TEST_NVRTC_CACHE", old_.c_str(), 1);
    } else {
      ::unsetenv("HOTKERNEL_TEST_NVRTC_CACHE");
    }
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(CompileCacheTest, GivenTheSameProgramTwiceWhenCompiledThenTheSecondIsReadBackWithTheSameCubin) {
  SKIP_WITHOUT_NVRTC();
  test::TempDir tmp;
  ScopedCacheDir env(tmp.sub("cache"));
  const NvrtcOutput first = compileCached(kSource, "k.cu", "sm_90a", {"-DHK_VALUE=1.0f"});
  ASSERT_FALSE(first.cubin.empty());
  EXPECT_EQ(filesIn(tmp.sub("cache")), 2u) << "a cubin and its log";
  const NvrtcOutput again = compileCached(kSource, "k.cu", "sm_90a", {"-DHK_VALUE=1.0f"});
  EXPECT_EQ(again.cubin, first.cubin);
  EXPECT_EQ(again.log, first.log);
  EXPECT_EQ(again.compileSeconds, 0.0) << "read back, not compiled";
  EXPECT_EQ(filesIn(tmp.sub("cache")), 2u);
}

TEST(CompileCacheTest, GivenAnotherOptionArchitectureOrSourceWhenCompiledThenANewEntry) {
  SKIP_WITHOUT_NVRTC();
  test::TempDir tmp;
  ScopedCacheDir env(tmp.sub("cache"));
  const NvrtcOutput one = compileCached(kSource, "k.cu", "sm_90a", {"-DHK_VALUE=1.0f"});
  const NvrtcOutput two = compileCached(kSource, "k.cu", "sm_90a", {"-DHK_VALUE=2.0f"});
  EXPECT_NE(one.cubin, two.cubin);
  compileCached(kSource, "k.cu", "sm_80", {"-DHK_VALUE=1.0f"});
  compileCached(std::string(kSource) + "\n", "k.cu", "sm_90a", {"-DHK_VALUE=1.0f"});
  EXPECT_EQ(filesIn(tmp.sub("cache")), 8u);
}

TEST(CompileCacheTest, GivenAProgramThatFailsWhenCompiledTwiceThenBothThrowAndNothingIsKept) {
  SKIP_WITHOUT_NVRTC();
  test::TempDir tmp;
  ScopedCacheDir env(tmp.sub("cache"));
  EXPECT_THROW(compileCached(kSource, "k.cu", "sm_90a", {}), Error);  // HK_VALUE undefined
  EXPECT_THROW(compileCached(kSource, "k.cu", "sm_90a", {}), Error);
  EXPECT_EQ(filesIn(tmp.sub("cache")), 0u);
}

TEST(CompileCacheTest, GivenTheCacheTurnedOffWhenCompiledThenNoFileAnywhere) {
  SKIP_WITHOUT_NVRTC();
  ScopedCacheDir env("0");
  EXPECT_EQ(compileCacheDir(), "");
  EXPECT_FALSE(compileCached(kSource, "k.cu", "sm_90a", {"-DHK_VALUE=1.0f"}).cubin.empty());
}

}  // namespace
}  // namespace hotkernel::testutil
