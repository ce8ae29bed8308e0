// Tests of the sandbox compile (optimizer/agent/include/hotkernel/optimizer/SandboxCompile.h): the
// helper binary hotkernel-sandbox-compile compiles in a child process; crashes, hangs and
// garbage of the helper are simulated through its test hooks and must not touch this process.

#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <climits>
#include <nlohmann/json.hpp>
#include <string>

#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kHelper = HOTKERNEL_TEST_BINARY_DIR "/bin/hotkernel-sandbox-compile";

const char* kKernel = R"(
extern "C" __global__ void hk_sandbox_test(const void* in, void* out, long long rows, long long cols) {
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < rows * cols; i += gridDim.x * blockDim.x)
    y[i] = 2.0f * x[i];
}
)";

SandboxCompileRequest request(const std::string& source = kKernel) {
  SandboxCompileRequest r;
  r.source = source;
  r.programName = "sandbox_test.cu";
  r.arch = "sm_90a";
  return r;
}

SandboxCompileOptions helperOptions(std::vector<std::pair<std::string, std::string>> env = {},
                                    double timeoutSeconds = 120.0) {
  SandboxCompileOptions o;
  o.helperPath = kHelper;
  o.env = std::move(env);
  o.timeoutSeconds = timeoutSeconds;
  return o;
}

bool hasNoChildren() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == -1 && errno == ECHILD;
}

bool isElf(const std::string& image) {
  return image.size() > 4 && image.compare(0, 4,
                                           "\x7f"
                                           "ELF") == 0;
}

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

TEST(SandboxCompileTest, givenValidKernel_whenCompiledInTheSandbox_thenTheCubinHoldsTheKernel) {
  SKIP_WITHOUT_NVRTC();
  const SandboxCompileResult r = sandboxCompile(request(), helperOptions());
  ASSERT_TRUE(r.compiled()) << r.error;
  EXPECT_EQ(r.failure, SandboxFailure::None);
  EXPECT_TRUE(isElf(r.cubin));
  EXPECT_NE(r.cubin.find("hk_sandbox_test"), std::string::npos);
  EXPECT_EQ(r.error, "");
  EXPECT_GT(r.compileSeconds, 0.0);
  EXPECT_GE(r.wallSeconds, r.compileSeconds);
  EXPECT_TRUE(hasNoChildren());
}

TEST(SandboxCompileTest, givenTheSameSource_whenCompiledInProcessAndInTheSandbox_thenTheCubinsAreEqual) {
  SKIP_WITHOUT_NVRTC();
  const SandboxCompileResult r = sandboxCompile(request(), helperOptions());
  ASSERT_TRUE(r.compiled()) << r.error;
  EXPECT_EQ(r.cubin, compileToCubin(kKernel, "sandbox_test.cu", "sm_90a", {}).cubin);
}

TEST(SandboxCompileTest, givenSyntaxError_whenCompiled_thenCompileErrorCarriesNvrtcsLog) {
  SKIP_WITHOUT_NVRTC();
  const SandboxCompileResult r =
      sandboxCompile(request("extern \"C\" __global__ void k() { this is not CUDA; }\n"), helperOptions());
  EXPECT_FALSE(r.compiled());
  EXPECT_EQ(r.failure, SandboxFailure::CompileError);
  EXPECT_TRUE(r.cubin.empty());
  EXPECT_NE(r.error.find("NVRTC failed to compile sandbox_test.cu"), std::string::npos) << r.error;
  EXPECT_NE(r.log.find("error"), std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("Nvrtc.cpp"), std::string::npos) << r.log;
}

TEST(SandboxCompileTest, givenCompilerThatCrashes_whenCompiled_thenItIsRejectedAndThisProcessIsUnharmed) {
  const SandboxCompileResult r = sandboxCompile(request(), helperOptions({{"HOTKERNEL_SANDBOX_TEST_CRASH", "1"}}));
  EXPECT_EQ(r.failure, SandboxFailure::Crashed);
  EXPECT_NE(r.error.find("signal 6 (SIGABRT)"), std::string::npos) << r.error;
  EXPECT_TRUE(r.cubin.empty());
  EXPECT_TRUE(hasNoChildren());
}

TEST(SandboxCompileTest, givenCompilerThatHangs_whenTheTimeoutPasses_thenItIsKilledWithinTheTimeout) {
  const auto t0 = Clock::now();
  const SandboxCompileResult r = sandboxCompile(request(), helperOptions({{"HOTKERNEL_SANDBOX_TEST_HANG", "1"}}, 1.0));
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.failure, SandboxFailure::TimedOut);
  EXPECT_NE(r.error.find("timed out"), std::string::npos) << r.error;
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 4.0);
  EXPECT_TRUE(hasNoChildren());
}

TEST(SandboxCompileTest, givenHelperWritingGarbage_whenCompiled_thenTheReplyIsRejected) {
  const SandboxCompileResult r = sandboxCompile(request(), helperOptions({{"HOTKERNEL_SANDBOX_TEST_GARBAGE", "1"}}));
  EXPECT_EQ(r.failure, SandboxFailure::HelperFailed);
  EXPECT_NE(r.error.find("without a valid reply"), std::string::npos) << r.error;
}

TEST(SandboxCompileTest, givenTinyMemoryLimit_whenCompiled_thenItFailsCleanly) {
  SandboxCompileOptions o = helperOptions();
  o.memoryLimitBytes = size_t{64} << 20;
  SandboxCompileResult r;
  EXPECT_NO_THROW(r = sandboxCompile(request(), o));
  EXPECT_FALSE(r.compiled());
  EXPECT_TRUE(r.failure == SandboxFailure::HelperFailed || r.failure == SandboxFailure::Crashed)
      << sandboxFailureName(r.failure) << ": " << r.error;
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(hasNoChildren());
}

TEST(SandboxCompileTest, givenNvrtcMissingInTheHelper_whenCompiled_thenHelperFailedSaysSo) {
  const SandboxCompileResult r =
      sandboxCompile(request(), helperOptions({{"HOTKERNEL_NVRTC_PATH", "/no/such/libnvrtc.so"}}));
  EXPECT_EQ(r.failure, SandboxFailure::HelperFailed);
  EXPECT_NE(r.error.find("NVRTC unavailable"), std::string::npos) << r.error;
}

TEST(SandboxCompileTest, givenMissingHelper_whenCompiled_thenHelperFailedWithoutThrowing) {
  SandboxCompileOptions o;
  o.helperPath = "/no/such/hotkernel-sandbox-compile";
  const SandboxCompileResult r = sandboxCompile(request(), o);
  EXPECT_EQ(r.failure, SandboxFailure::HelperFailed);
  EXPECT_NE(r.error.find("could not be started"), std::string::npos) << r.error;
}

TEST(SandboxCompileTest, givenNoOverride_whenLookingForTheHelper_thenTheBuiltOneNextToThisBinaryIsFound) {
  ::unsetenv("HOTKERNEL_SANDBOX_COMPILE");
  std::string why;
  const std::string found = sandboxCompileHelperPath(&why);
  char expected[PATH_MAX];
  ASSERT_NE(::realpath(kHelper.c_str(), expected), nullptr);
  char actual[PATH_MAX];
  ASSERT_NE(::realpath(found.c_str(), actual), nullptr) << why;
  EXPECT_STREQ(actual, expected);
}

TEST(SandboxCompileTest, givenOverrideEnvironment_whenLookingForTheHelper_thenOnlyItIsUsed) {
  ::setenv("HOTKERNEL_SANDBOX_COMPILE", kHelper.c_str(), 1);
  EXPECT_EQ(sandboxCompileHelperPath(), kHelper);
  ::setenv("HOTKERNEL_SANDBOX_COMPILE", "/no/such/helper", 1);
  std::string why;
  EXPECT_EQ(sandboxCompileHelperPath(&why), "");
  EXPECT_NE(why.find("HOTKERNEL_SANDBOX_COMPILE=/no/such/helper"), std::string::npos) << why;
  const SandboxCompileResult r = sandboxCompile(request());  // default options: the search
  EXPECT_EQ(r.failure, SandboxFailure::HelperFailed);
  ::unsetenv("HOTKERNEL_SANDBOX_COMPILE");
}

TEST(SandboxCompileTest, givenMalformedRequest_whenSentToTheHelper_thenItAnswersBadRequestWithStatusTwo) {
  SubprocessOptions o;
  o.argv = {kHelper};
  o.stdinData = "{\"format\":\"hotkernel-sandbox-compile-request\",\"version\":1}";
  o.timeoutSeconds = 30;
  const SubprocessResult r = runSubprocess(o);
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 2);
  const SandboxFrame f = decodeSandboxFrame(r.out);
  EXPECT_EQ(f.status, SandboxStatus::BadRequest);
  EXPECT_NE(f.message.find("sandbox compile request misses \"source\""), std::string::npos) << f.message;

  o.argv = {kHelper, "--frobnicate"};
  const SubprocessResult usage = runSubprocess(o);
  EXPECT_EQ(usage.exitCode, 2);
  EXPECT_EQ(decodeSandboxFrame(usage.out).status, SandboxStatus::BadRequest);
}

// The message of the Error that reading `text` as a request throws ("" when it does not throw).
std::string requestError(const std::string& text) {
  try {
    SandboxCompileRequest::fromJsonText(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SandboxCompileTest, givenRequestWithAFieldMissingOrOfTheWrongType_whenRead_thenTheErrorNamesTheField) {
  SandboxCompileRequest request;
  request.source = "__global__ void k() {}";
  request.arch = "sm_90a";
  request.options = {"-std=c++17"};
  const nlohmann::json good = nlohmann::json::parse(request.toJsonText());
  EXPECT_EQ(requestError(good.dump()), "");
  EXPECT_EQ(SandboxCompileRequest::fromJsonText(good.dump()).options, request.options);
  const struct {
    const char* key;
    nlohmann::json value;
    const char* expected;
  } cases[] = {
      {"format", "hotkernel-agent-reply", "request.format must be \"hotkernel-sandbox-compile-request\""},
      {"version", 2, "sandbox compile request.version must be 1"},
      {"source", 42, "sandbox compile request.source must be a string, got 42"},
      {"options", "-O3", "sandbox compile request.options must be an array, got string"},
      {"options", nlohmann::json::array({"-O3", 3}), "sandbox compile request.options must hold strings only, got 3"},
  };
  for (const auto& c : cases) {
    nlohmann::json bad = good;
    bad[c.key] = c.value;
    const std::string message = requestError(bad.dump());
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  EXPECT_NE(requestError("[1, 2]").find("sandbox compile request must be a JSON object, got array"), std::string::npos);
  EXPECT_NE(requestError("{\"format\"").find("sandbox compile request: it is not JSON"), std::string::npos);
}

TEST(SandboxCompileTest, givenFrame_whenEncodedAndDecoded_thenEveryFieldSurvives) {
  SandboxFrame f;
  f.status = SandboxStatus::Compiled;
  f.compileMicros = 123456789;
  f.message = "";
  f.log = "ptxas info: 0 bytes spill";
  f.cubin = std::string(
      "\x7f"
      "ELF\0\1\2",
      7);
  const std::string bytes = encodeSandboxFrame(f);
  EXPECT_EQ(bytes.substr(0, 4), "HKSC");
  EXPECT_EQ(bytes.size(), 24u + 3 * 8 + f.log.size() + f.cubin.size());
  const SandboxFrame back = decodeSandboxFrame(bytes);
  EXPECT_EQ(back.status, f.status);
  EXPECT_EQ(back.compileMicros, f.compileMicros);
  EXPECT_EQ(back.message, f.message);
  EXPECT_EQ(back.log, f.log);
  EXPECT_EQ(back.cubin, f.cubin);
}

TEST(SandboxCompileTest, givenDamagedFrames_whenDecoded_thenEachIsRejected) {
  SandboxFrame f;
  f.status = SandboxStatus::CompileError;
  f.message = "m";
  f.log = "log";
  const std::string good = encodeSandboxFrame(f);
  EXPECT_NO_THROW(decodeSandboxFrame(good));
  EXPECT_THROW(decodeSandboxFrame(""), Error);
  EXPECT_THROW(decodeSandboxFrame(good.substr(0, 20)), Error);               // short header
  EXPECT_THROW(decodeSandboxFrame(good.substr(0, good.size() - 1)), Error);  // truncated blob
  EXPECT_THROW(decodeSandboxFrame(good + "x"), Error);                       // trailing bytes
  std::string badMagic = good;
  badMagic[0] = 'X';
  EXPECT_THROW(decodeSandboxFrame(badMagic), Error);
  std::string badVersion = good;
  badVersion[4] = 2;
  EXPECT_THROW(decodeSandboxFrame(badVersion), Error);
  std::string badStatus = good;
  badStatus[8] = 9;
  EXPECT_THROW(decodeSandboxFrame(badStatus), Error);
  std::string hugeLength = good;
  hugeLength[24 + 7] = '\x7f';  // the message length's top byte
  EXPECT_THROW(decodeSandboxFrame(hugeLength), Error);
}

// Found by fuzz_sandbox_frame (tests/fuzz): a frame whose reserved word is not
// 0 was accepted, so two different byte strings decoded to the same frame.
TEST(SandboxCompileTest, givenFrameWithNonZeroReservedWord_whenDecoded_thenItIsRejected) {
  SandboxFrame f;
  f.status = SandboxStatus::Compiled;
  const std::string good = encodeSandboxFrame(f);
  ASSERT_NO_THROW(decodeSandboxFrame(good));
  for (size_t at = 12; at < 16; ++at) {
    std::string reserved = good;
    reserved[at] = 1;
    EXPECT_THROW(decodeSandboxFrame(reserved), Error) << "byte " << at;
  }
}

TEST(SandboxCompileTest, givenRequest_whenRoundTripped_thenEveryFieldSurvives) {
  SandboxCompileRequest r = request();
  r.options = {"-lineinfo", "-DX=1"};
  const SandboxCompileRequest back = SandboxCompileRequest::fromJsonText(r.toJsonText());
  EXPECT_EQ(back.source, r.source);
  EXPECT_EQ(back.programName, r.programName);
  EXPECT_EQ(back.arch, r.arch);
  EXPECT_EQ(back.options, r.options);
  EXPECT_THROW(SandboxCompileRequest::fromJsonText("nope"), Error);
  EXPECT_THROW(SandboxCompileRequest::fromJsonText("{\"format\":\"x\",\"version\":1}"), Error);
}

TEST(SandboxCompileTest, givenMisuse_whenCompiled_thenErrorIsThrown) {
  SandboxCompileOptions o = helperOptions();
  o.timeoutSeconds = 0;
  EXPECT_THROW(sandboxCompile(request(), o), Error);
}

}  // namespace
}  // namespace hotkernel
