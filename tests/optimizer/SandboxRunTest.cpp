// The sandbox-run helper's protocol and lookup, on any machine: without a GPU
// the helper answers "no CUDA driver" through the documented reply; a missing
// helper is reported, never thrown. (Kernels that fault or hang: tests/gpu.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/optimizer/SandboxRun.h"
#include "hotkernel/runtime/Check.h"
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

// Found while writing fuzz_sandbox_run (tests/fuzz), which reads both lines
// through these functions: the helper converted request fields without checking them (a float or out-of-range value converted to an integer
// type, rows * cols * elementSize overflowing), and the parent read a reply's
// "ok" and "error" with nlohmann's throwing accessors.
TEST(SandboxRunTest, GivenHeaderWithFloatOrOutOfRangeFieldsWhenParsedThenError) {
  const std::string good = sandboxRunHeaderLine(tinyRequest());
  const SandboxRunHeader h = parseSandboxRunHeader(good);
  EXPECT_EQ(h.cubinBytes, tinyRequest().cubin.size());
  EXPECT_EQ(h.request.rows, 2);
  EXPECT_EQ(sandboxRunHeaderLine(h.request), sandboxRunHeaderLine(SandboxRunRequest{
                                                 "", "k", LaunchGeometry{1, 32, 0}, 2, 8, 4, false, 0}));
  const nlohmann::json base = nlohmann::json::parse(good);
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"rows", 1e300},          {"rows", 2.5},      {"rows", 0},
      {"cols", -1},             {"elementSize", 3}, {"elementSize", 1e10},
      {"block", 4294967296ll},  {"gridX", -1},      {"sharedBytes", 1e300},
      {"device", -1},           {"half", 1},        {"cubinBytes", 18446744073709551615ull},
      {"cubinBytes", -8},       {"kernelName", 7},  {"version", 2},
      {"rows", 4611686018427387904ll}};  // 2^62 rows of 8 columns overflow int64 bytes
  for (const auto& [key, value] : bad) {
    nlohmann::json j = base;
    j[key] = value;
    try {
      parseSandboxRunHeader(j.dump());
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const Error& e) {  // the message names the field (Note [Strict JSON fields])
      EXPECT_NE(std::string(e.what()).find("sandbox run request"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parseSandboxRunHeader("not json"), Error);
}

TEST(SandboxRunTest, GivenMalformedReplyWhenReadThenFailedRunNotException) {
  EXPECT_TRUE(parseSandboxRunReply("{\"ok\":true,\"seconds\":0.1}\n", true, "exit 0").ok);
  EXPECT_FALSE(parseSandboxRunReply("{\"ok\":true}\n", false, "exit 1").ok);
  for (const char* reply : {"{\"ok\":1}", "{\"ok\":\"yes\",\"error\":3}", "[1]", "", "{\"error\":null}"}) {
    SandboxRunResult r;
    EXPECT_NO_THROW(r = parseSandboxRunReply(reply, true, "exit 0")) << reply;
    EXPECT_FALSE(r.ok) << reply;
    EXPECT_EQ(r.error, "sandbox run failed: exit 0") << reply;
  }
  EXPECT_EQ(parseSandboxRunReply("{\"ok\":false,\"error\":\"no CUDA driver\"}\n", false, "exit 1").error,
            "no CUDA driver");
}

}  // namespace
}  // namespace hotkernel
