// The sandbox-run helper's protocol and lookup, on any machine: without a GPU
// the helper answers "no CUDA driver" through the documented reply; a missing
// helper is reported, never thrown. (Kernels that fault or hang: tests/gpu.)
#include <gtest/gtest.h>

#include <cstdlib>

#include "hotkernel/optimizer/SandboxRun.h"
#include "hotkernel/runtime/CudaDriver.h"

namespace hotkernel {
namespace {

SandboxRunRequest tinyRequest() {
  return SandboxRunRequest{std::string("not a cubin"), "k", LaunchGeometry{1, 32, 0}, 2, 8, 4, false, 0};
}

TEST(SandboxRunTest, GivenHelperNextToTheBinaryWhenRunThenItAnswersThroughTheProtocol) {
  unsetenv("HOTKERNEL_SANDBOX_RUN");
  SandboxRunResult r = sandboxRun(tinyRequest(), 30.0);
  EXPECT_FALSE(r.ok);  // garbage cubin, or no GPU here
  if (cudaDriver() == nullptr) {
    EXPECT_NE(r.error.find("no CUDA driver"), std::string::npos) << r.error;
  } else {
    EXPECT_NE(r.error.find("cuModuleLoadData"), std::string::npos) << r.error;
  }
}

TEST(SandboxRunTest, GivenHelperPathThatIsNotExecutableWhenRunThenReportedNotThrown) {
  setenv("HOTKERNEL_SANDBOX_RUN", "/nonexistent/hotkernel-sandbox-run", 1);
  SandboxRunResult r;
  EXPECT_NO_THROW(r = sandboxRun(tinyRequest(), 5.0));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("HOTKERNEL_SANDBOX_RUN"), std::string::npos) << r.error;
  unsetenv("HOTKERNEL_SANDBOX_RUN");
}

}  // namespace
}  // namespace hotkernel
