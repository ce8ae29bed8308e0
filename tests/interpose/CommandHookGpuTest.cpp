// The shim's flush net on a GPU (Note [Flush before foreign commands] in
// interpose/preload/CommandHook.h): command_hook_gpu_probe.py under the
// preload, with a hook that counts commands by kind and issuing library.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = ::pclose(p);
  return out;
}

TEST(CommandHookGpuTest, GivenTorchUnderTheShimWhenOpsMatmulsCopiesEventsSyncsAndGraphsRunThenTheHookFiresForEach) {
  const std::string bin = HOTKERNEL_TEST_BINARY_DIR;
  const std::string cmd = "HOTKERNEL=0 LD_PRELOAD=" + bin + "/lib/libhotkernel_preload.so " + HOTKERNEL_PYTHON +
                          " " + HOTKERNEL_TEST_SOURCE_DIR + "/tests/interpose/command_hook_gpu_probe.py " +
                          HOTKERNEL_PROBE_LIBRARY + " 2>&1";
  int status = -1;
  const std::string out = run(cmd, &status);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

}  // namespace
