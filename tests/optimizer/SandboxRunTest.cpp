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
      {"cubinBytes", -8},       {"kernelName", 7},  {"version", 3},
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

SandboxRunRequest harnessRequest() {
  SandboxRunRequest r = tinyRequest();
  AgentLaunch launch;
  launch.block = 128;
  launch.rowsPerBlock = 2;
  launch.sharedBytes = 512;
  r.harness = SandboxHarnessRequest{launch, 42};
  return r;
}

TEST(SandboxRunTest, GivenAHarnessRequestWhenWrittenAndReadThenVersion2CarriesTheLaunchAndSeed) {
  const std::string line = sandboxRunHeaderLine(harnessRequest());
  EXPECT_EQ(nlohmann::json::parse(line)["version"], 2);
  const SandboxRunHeader h = parseSandboxRunHeader(line);
  ASSERT_TRUE(h.request.harness.has_value());
  EXPECT_EQ(h.request.harness->launch, harnessRequest().harness->launch);
  EXPECT_EQ(h.request.harness->seed, 42u);
  EXPECT_EQ(sandboxRunHeaderLine(h.request), sandboxRunHeaderLine([] {
              SandboxRunRequest r = harnessRequest();
              r.cubin.clear();
              return r;
            }()));
  // Without one, no "harness" key: a first run only.
  EXPECT_FALSE(parseSandboxRunHeader(sandboxRunHeaderLine(tinyRequest())).request.harness.has_value());
  EXPECT_FALSE(nlohmann::json::parse(sandboxRunHeaderLine(tinyRequest())).contains("harness"));
}

TEST(SandboxRunTest, GivenAVersion1RequestWhenReadThenItIsAFirstRunAndAHarnessInItIsRefused) {
  nlohmann::json v1 = nlohmann::json::parse(sandboxRunHeaderLine(tinyRequest()));
  v1["version"] = 1;
  const SandboxRunHeader h = parseSandboxRunHeader(v1.dump());
  EXPECT_FALSE(h.request.harness.has_value());
  EXPECT_EQ(h.request.rows, tinyRequest().rows);
  v1["harness"] = nlohmann::json::parse(sandboxRunHeaderLine(harnessRequest()))["harness"];
  try {
    parseSandboxRunHeader(v1.dump());
    ADD_FAILURE() << "accepted " << v1.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("harness needs version 2"), std::string::npos) << e.what();
  }
}

TEST(SandboxRunTest, GivenHarnessFieldsOfTheWrongShapeWhenReadThenErrorNamesTheHarness) {
  const nlohmann::json base = nlohmann::json::parse(sandboxRunHeaderLine(harnessRequest()));
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"/harness", 1},
      {"/harness", nlohmann::json::object()},
      {"/harness/seed", -1},
      {"/harness/seed", 1.5},
      {"/harness/extra", true},
      {"/harness/launch/block", 33},
      {"/harness/launch/rowsPerBlock", 0},
      {"/harness/launch/sharedBytes", -4},
      {"/harness/launch", "256"}};
  for (const auto& [pointer, value] : bad) {
    nlohmann::json j = base;
    j[nlohmann::json::json_pointer(pointer)] = value;
    try {
      parseSandboxRunHeader(j.dump());
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("sandbox run request"), std::string::npos) << pointer << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("harness"), std::string::npos) << pointer << ": " << e.what();
    }
  }
}

std::string stagesReply(bool ok, int passed, bool lastFails, const std::string& error = "") {
  nlohmann::json stages = nlohmann::json::array();
  for (int i = 0; i < passed; ++i) {
    stages.push_back({{"stage", sandboxStageNames()[i]}, {"passed", true}, {"detail", ""}});
  }
  if (lastFails) stages.push_back({{"stage", sandboxStageNames()[passed]}, {"passed", false}, {"detail", "row 3"}});
  nlohmann::json reply = {{"ok", ok}, {"seconds", 0.5}, {"stages", stages}};
  if (!error.empty()) reply["error"] = error;
  return reply.dump() + "\n";
}

TEST(SandboxRunTest, GivenAHarnessReplyWhenReadThenOkOnlyWithTheFiveStagesPassedInOrder) {
  const SandboxRunResult all = parseSandboxRunReply(stagesReply(true, 5, false), true, "exit 0", true);
  EXPECT_TRUE(all.ok) << all.error;
  ASSERT_EQ(all.stages.size(), 5u);
  EXPECT_EQ(all.stages[4].stage, "edge-cases");
  EXPECT_FALSE(all.failedInStage());

  const SandboxRunResult failed =
      parseSandboxRunReply(stagesReply(false, 2, true, "stability stage: row 3"), false, "exit 1", true);
  EXPECT_FALSE(failed.ok);
  EXPECT_TRUE(failed.failedInStage());
  EXPECT_EQ(failed.error, "stability stage: row 3");
  ASSERT_EQ(failed.stages.size(), 3u);
  EXPECT_EQ(failed.stages.back().detail, "row 3");

  // A helper that claims ok without every stage (or without any) did not check the kernel.
  for (const std::string& reply : {stagesReply(true, 4, false), std::string("{\"ok\":true,\"seconds\":0.1}\n")}) {
    const SandboxRunResult r = parseSandboxRunReply(reply, true, "exit 0", true);
    EXPECT_FALSE(r.ok) << reply;
    EXPECT_NE(r.error.find("without the five harness stages passed"), std::string::npos) << r.error;
  }
  // Stages out of order do not count either.
  nlohmann::json swapped = nlohmann::json::parse(stagesReply(true, 5, false));
  std::swap(swapped["stages"][0], swapped["stages"][1]);
  EXPECT_FALSE(parseSandboxRunReply(swapped.dump(), true, "exit 0", true).ok);
  // A first run only (no stages asked for) is ok as before.
  EXPECT_TRUE(parseSandboxRunReply("{\"ok\":true,\"seconds\":0.1}\n", true, "exit 0").ok);
}

TEST(SandboxRunTest, GivenAHarnessRequestWithoutAGpuWhenRunThenTheHelperAnswersThroughTheProtocol) {
  unsetenv("HOTKERNEL_SANDBOX_RUN");
  const SandboxRunResult r = sandboxRun(harnessRequest(), 60.0);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.failedInStage());  // the first run fails before any stage
  if (cudaDriver() == nullptr) EXPECT_NE(r.error.find("no CUDA driver"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace hotkernel
