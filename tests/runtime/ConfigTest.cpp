#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "StderrCapture.h"
#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

using test::countOf;
using test::StderrCapture;

// Reads the configuration with `name` set to `value` (nullptr: unset); returns it and what was logged.
struct Read {
  Config config;
  std::string logged;
};
Read readWith(const char* name, const char* value) {
  setLogLevel(LogLevel::Warn);
  const char* old = std::getenv(name);
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  if (value != nullptr) {
    ::setenv(name, value, 1);
  } else {
    ::unsetenv(name);
  }
  Read r;
  {
    StderrCapture capture;
    r.config = Config::fromEnvironment();
    r.logged = capture.text();
  }
  if (saved) {
    ::setenv(name, saved->c_str(), 1);
  } else {
    ::unsetenv(name);
  }
  return r;
}

// One numeric variable of the table in Config.h, and where Config keeps it.
struct NumericVariable {
  const char* name;
  int64_t minimum;
  int64_t maximum;
  int64_t fallback;
  int64_t (*field)(const Config&);
};

const std::vector<NumericVariable>& numericVariables() {
  static const std::vector<NumericVariable> all = {
      {"HOTKERNEL_HOT_CALLS", 1, Config::kMaxHotCalls, 50, [](const Config& c) { return c.hotCalls; }},
      {"HOTKERNEL_IDLE_MS", 1, Config::kMaxIdleMs, 50, [](const Config& c) { return c.idleMs; }},
      {"HOTKERNEL_OPT_MEM_MB", 1, Config::kMaxOptimizerMemoryMb, 0,
       [](const Config& c) { return c.optimizerMemoryMb; }},
      {"HOTKERNEL_IDLE_MAX_UTIL", 0, 100, -1, [](const Config& c) { return int64_t{c.idleMaxUtil}; }},
      {"HOTKERNEL_REMOTE_TIMEOUT_MS", 1, Config::kMaxRemoteTimeoutMs, 100,
       [](const Config& c) { return c.remoteTimeoutMs; }},
      {"HOTKERNEL_REMOTE_LEASE_MS", 1000, Config::kMaxIdleMs, 30000, [](const Config& c) { return c.remoteLeaseMs; }},
      {"HOTKERNEL_REMOTE_LEASE_MAX_MS", 1000, Config::kMaxIdleMs, 600000,
       [](const Config& c) { return c.remoteLeaseMaxMs; }},
      {"HOTKERNEL_REMOTE_POLL_MS", 100, Config::kMaxIdleMs, 5000, [](const Config& c) { return c.remotePollMs; }},
  };
  return all;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ConfigTest, GivenProfilePatternsWhenExpandedForAProcessThenPidAndPercentSubstituted) {
  EXPECT_EQ(profilePathFor("profile-%p.json", 4242), "profile-4242.json");
  EXPECT_EQ(profilePathFor("/tmp/%p/%p.json", 7), "/tmp/7/7.json");
  EXPECT_EQ(profilePathFor("100%%-%p", 9), "100%-9");
  EXPECT_EQ(profilePathFor("plain.json", 9), "plain.json");
  EXPECT_EQ(profilePathFor("odd%d%", 9), "odd%d%");  // other % sequences stay
  EXPECT_EQ(profilePathFor("", 9), "");
}

TEST(ConfigTest, GivenNoEnvironmentWhenReadThenDefaults) {
  unsetenv("HOTKERNEL");
  unsetenv("HOTKERNEL_OPS");
  unsetenv("HOTKERNEL_HOT_CALLS");
  setenv("HOTKERNEL_CACHE_DIR", "/tmp/hk-config-test", 1);
  Config c = Config::fromEnvironment();
  EXPECT_TRUE(c.enabled);
  EXPECT_TRUE(c.optimize);
  EXPECT_EQ(c.hotCalls, 50);
  EXPECT_EQ(c.cacheDir, "/tmp/hk-config-test");
  const std::vector<std::string> want{"_softmax", "_log_softmax", "_fused_rms_norm", "native_layer_norm",
                                      "cross_entropy_loss", "mm", "addmm", "sum.dim_IntList", "mean.dim",
                                      "amax", "argmax", "amin", "argmin", "max.dim", "min.dim"};
  EXPECT_EQ(c.ops, want);
}

TEST(ConfigTest, GivenOffSwitchAndBadNumberWhenReadThenDisabledAndDefaultKept) {
  setenv("HOTKERNEL", "0", 1);
  setenv("HOTKERNEL_HOT_CALLS", "lots", 1);
  Config c = Config::fromEnvironment();
  EXPECT_FALSE(c.enabled);
  EXPECT_EQ(c.hotCalls, 50);
  unsetenv("HOTKERNEL");
  unsetenv("HOTKERNEL_HOT_CALLS");
}

TEST(ConfigTest, GivenOverflowingOptimizerMemoryWhenReadThenClampedWithWarningAndStillEnabled) {
  const Read r = readWith("HOTKERNEL_OPT_MEM_MB", "9223372036854775807");
  EXPECT_TRUE(r.config.enabled);
  EXPECT_TRUE(r.config.optimize);
  EXPECT_EQ(r.config.optimizerMemoryMb, Config::kMaxOptimizerMemoryMb);
  EXPECT_EQ(countOf(r.logged, "HOTKERNEL_OPT_MEM_MB='9223372036854775807'"), 1u) << r.logged;
  EXPECT_TRUE(contains(r.logged, "using the maximum, 1073741824")) << r.logged;
  // What the runtime computes from it (interpose/engine/Engine.cpp) stays in int64_t.
  static_assert(Config::kMaxOptimizerMemoryMb <= (std::numeric_limits<int64_t>::max() >> 20),
                "optimizerMemoryMb << 20 must not overflow");
  EXPECT_EQ(r.config.optimizerMemoryMb << 20, int64_t{1} << 50);
}

TEST(ConfigTest, GivenValuesPastTheMaximumWhenReadThenEachVariableIsClampedWithOneWarningNamingIt) {
  for (const NumericVariable& v : numericVariables()) {
    const std::string onePast = std::to_string(v.maximum + 1);
    for (const std::string& value : {onePast, std::string("9223372036854775807"),
                                     std::string("99999999999999999999999"), std::string("+99999999999999999999")}) {
      const Read r = readWith(v.name, value.c_str());
      EXPECT_EQ(v.field(r.config), v.maximum) << v.name << "=" << value;
      EXPECT_EQ(countOf(r.logged, v.name), 1u) << r.logged;
      EXPECT_TRUE(contains(r.logged, std::string(v.name) + "='" + value + "'")) << r.logged;
      EXPECT_TRUE(contains(r.logged, std::to_string(v.maximum))) << r.logged;
      EXPECT_TRUE(r.config.enabled);
    }
  }
}

TEST(ConfigTest, GivenGarbageNegativeOrBelowRangeWhenReadThenDefaultWithOneWarningNamingIt) {
  for (const NumericVariable& v : numericVariables()) {
    std::vector<std::string> bad = {"lots", "10%", "5 ms", "0x10", "1.5", "-5", "-99999999999999999999", "--1", " "};
    if (v.minimum > 0) bad.push_back("0");
    for (const std::string& value : bad) {
      const Read r = readWith(v.name, value.c_str());
      EXPECT_EQ(v.field(r.config), v.fallback) << v.name << "=" << value;
      EXPECT_EQ(countOf(r.logged, v.name), 1u) << v.name << "=" << value << ": " << r.logged;
      EXPECT_TRUE(contains(r.logged, std::string(v.name) + "='" + value + "'")) << r.logged;
      EXPECT_TRUE(contains(r.logged, "using")) << r.logged;
    }
  }
}

TEST(ConfigTest, GivenEmptyOrUnsetWhenReadThenDefaultWithoutWarning) {
  for (const NumericVariable& v : numericVariables()) {
    for (const char* value : {static_cast<const char*>(nullptr), ""}) {
      const Read r = readWith(v.name, value);
      EXPECT_EQ(v.field(r.config), v.fallback) << v.name;
      EXPECT_EQ(countOf(r.logged, v.name), 0u) << r.logged;
    }
  }
}

TEST(ConfigTest, GivenValuesInRangeWhenReadThenTakenWithoutWarning) {
  for (const NumericVariable& v : numericVariables()) {
    for (const int64_t n : {v.minimum, std::clamp(int64_t{7}, v.minimum, v.maximum), v.maximum}) {
      for (const std::string& value : {std::to_string(n), " " + std::to_string(n) + "\n"}) {
        const Read r = readWith(v.name, value.c_str());
        EXPECT_EQ(v.field(r.config), n) << v.name << "=" << value;
        EXPECT_EQ(countOf(r.logged, v.name), 0u) << r.logged;
      }
    }
  }
}

TEST(ConfigTest, GivenIdleMaxUtilWhenReadThenPercentClampedOrUnusedForBadValues) {
  EXPECT_EQ(readWith("HOTKERNEL_IDLE_MAX_UTIL", nullptr).config.idleMaxUtil, -1);
  EXPECT_EQ(readWith("HOTKERNEL_IDLE_MAX_UTIL", "20").config.idleMaxUtil, 20);
  EXPECT_EQ(readWith("HOTKERNEL_IDLE_MAX_UTIL", "0").config.idleMaxUtil, 0);
  EXPECT_EQ(readWith("HOTKERNEL_IDLE_MAX_UTIL", "101").config.idleMaxUtil, 100);
  for (const char* bad : {"-5", "busy", "10%"}) {
    EXPECT_EQ(readWith("HOTKERNEL_IDLE_MAX_UTIL", bad).config.idleMaxUtil, -1) << bad;
  }
}

TEST(ConfigTest, GivenHotkernelFusionWhenReadThenOnByDefaultAndOnlyABooleanTurnsItOff) {
  unsetenv("HOTKERNEL_FUSION");
  EXPECT_TRUE(Config::fromEnvironment().fusion);
  EXPECT_TRUE(readWith("HOTKERNEL_FUSION", "1").config.fusion);
  EXPECT_FALSE(readWith("HOTKERNEL_FUSION", "0").config.fusion);
  const Read r = readWith("HOTKERNEL_FUSION", "fast");
  EXPECT_TRUE(r.config.fusion);  // the default, with a warning
  EXPECT_EQ(countOf(r.logged, "HOTKERNEL_FUSION='fast'"), 1u) << r.logged;
}

TEST(ConfigTest, GivenHotkernelFusionStartWhenReadThenAlwaysByDefaultAndOnlyBusyAsksTheStream) {
  unsetenv("HOTKERNEL_FUSION_START");
  EXPECT_FALSE(Config::fromEnvironment().fusionStartBusy);
  EXPECT_TRUE(readWith("HOTKERNEL_FUSION_START", "busy").config.fusionStartBusy);
  EXPECT_FALSE(readWith("HOTKERNEL_FUSION_START", "always").config.fusionStartBusy);
  const Read r = readWith("HOTKERNEL_FUSION_START", "1");
  EXPECT_FALSE(r.config.fusionStartBusy);
  EXPECT_EQ(countOf(r.logged, "HOTKERNEL_FUSION_START='1'"), 1u) << r.logged;
}

// The fusion engine's boolean flags: each has its default, reads 1 / 0 as a bool, and keeps its default (said once)
// for a value that is neither.
TEST(ConfigTest, GivenTheFusionStepFlagsWhenReadThenEachHasItsDefaultAndReadsAsABool) {
  struct Flag {
    const char* name;
    bool Config::*member;
    bool byDefault;
  };
  for (const Flag& f : {Flag{"HOTKERNEL_FUSION_BATCH_NORM", &Config::fusionBatchNorm, true},
                        Flag{"HOTKERNEL_FUSION_IN_PLACE", &Config::fusionInPlace, true},
                        Flag{"HOTKERNEL_FUSION_PASS_CONVOLUTIONS", &Config::fusionPassConvolutions, true}}) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(readWith(f.name, nullptr).config.*f.member, f.byDefault);
    EXPECT_TRUE(readWith(f.name, "1").config.*f.member);
    EXPECT_FALSE(readWith(f.name, "0").config.*f.member);
    const Read r = readWith(f.name, "sometimes");
    EXPECT_EQ(r.config.*f.member, f.byDefault);
    EXPECT_EQ(countOf(r.logged, std::string(f.name) + "='sometimes'"), 1u) << r.logged;
  }
}

TEST(ConfigTest, GivenHotkernelFusionRoundingWhenReadThenFusedByDefaultAndOnlyEagerRoundsAsEager) {
  unsetenv("HOTKERNEL_FUSION_ROUNDING");
  EXPECT_FALSE(Config::fromEnvironment().fusionEagerRounding);
  EXPECT_TRUE(readWith("HOTKERNEL_FUSION_ROUNDING", "eager").config.fusionEagerRounding);
  EXPECT_FALSE(readWith("HOTKERNEL_FUSION_ROUNDING", "fused").config.fusionEagerRounding);
  const Read r = readWith("HOTKERNEL_FUSION_ROUNDING", "aten");
  EXPECT_FALSE(r.config.fusionEagerRounding);
  EXPECT_EQ(countOf(r.logged, "HOTKERNEL_FUSION_ROUNDING='aten'"), 1u) << r.logged;
}

TEST(ConfigTest, GivenHotkernelNvtxWhenReadThenOnByDefaultAndOnlyABooleanTurnsItOff) {
  unsetenv("HOTKERNEL_NVTX");
  EXPECT_TRUE(Config::fromEnvironment().nvtx);
  EXPECT_FALSE(readWith("HOTKERNEL_NVTX", "0").config.nvtx);
  EXPECT_FALSE(readWith("HOTKERNEL_NVTX", "off").config.nvtx);
  EXPECT_TRUE(readWith("HOTKERNEL_NVTX", "1").config.nvtx);
  const Read r = readWith("HOTKERNEL_NVTX", "quiet");
  EXPECT_TRUE(r.config.nvtx);
  EXPECT_EQ(countOf(r.logged, "HOTKERNEL_NVTX='quiet'"), 1u) << r.logged;
}

TEST(ConfigTest, GivenHotkernelCuptiWhenReadThenOffByDefaultAndOnlyABooleanTurnsItOn) {
  unsetenv("HOTKERNEL_CUPTI");
  EXPECT_FALSE(Config::fromEnvironment().cupti);
  EXPECT_TRUE(readWith("HOTKERNEL_CUPTI", "1").config.cupti);
  EXPECT_FALSE(readWith("HOTKERNEL_CUPTI", "0").config.cupti);
  const Read r = readWith("HOTKERNEL_CUPTI", "sometimes");
  EXPECT_FALSE(r.config.cupti);
  EXPECT_EQ(countOf(r.logged, "HOTKERNEL_CUPTI='sometimes'"), 1u) << r.logged;
}

TEST(ConfigTest, GivenMalformedBooleanWhenReadThenDefaultWithWarning) {
  const Read r = readWith("HOTKERNEL_OPTIMIZE", "maybe");
  EXPECT_TRUE(r.config.optimize);
  EXPECT_EQ(countOf(r.logged, "HOTKERNEL_OPTIMIZE='maybe'"), 1u) << r.logged;
}

TEST(ConfigTest, GivenNoCacheDirWhenReadThenXdgOrHomeDefault) {
  unsetenv("HOTKERNEL_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(Config::fromEnvironment().cacheDir, "/tmp/xdg/hotkernel");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/tmp/home", 1);
  EXPECT_EQ(Config::fromEnvironment().cacheDir, "/tmp/home/.cache/hotkernel");
}

TEST(ConfigTest, GivenSamplingProbabilitiesWhenReadThenValidOnesAreKeptAndOthersTakeTheDefaultWithOneWarning) {
  EXPECT_DOUBLE_EQ(readWith("HOTKERNEL_SAMPLE", nullptr).config.samplingProb, 0.05);
  EXPECT_DOUBLE_EQ(readWith("HOTKERNEL_SAMPLE", "1").config.samplingProb, 1.0);
  EXPECT_DOUBLE_EQ(readWith("HOTKERNEL_SAMPLE", "0.25").config.samplingProb, 0.25);
  for (const char* bad : {"0", "-0.5", "1.5", "nan", "abc", "0.5x", "1e999"}) {
    const Read r = readWith("HOTKERNEL_SAMPLE", bad);
    EXPECT_DOUBLE_EQ(r.config.samplingProb, 0.05) << bad;
    EXPECT_EQ(countOf(r.logged, std::string("HOTKERNEL_SAMPLE='") + bad + "'"), 1u) << r.logged;
    EXPECT_TRUE(r.config.enabled) << bad;
  }
}

TEST(ConfigTest, GivenACachePathWhenReadThenItsDirectoriesInOrderWithoutEmptyItems) {
  EXPECT_EQ(readWith("HOTKERNEL_CACHE_PATH", nullptr).config.cachePath, std::vector<std::string>{});
  EXPECT_EQ(readWith("HOTKERNEL_CACHE_PATH", "/a").config.cachePath, std::vector<std::string>{"/a"});
  EXPECT_EQ(readWith("HOTKERNEL_CACHE_PATH", "::/a::/b/c:").config.cachePath,
            (std::vector<std::string>{"/a", "/b/c"}));
}

TEST(ConfigTest, GivenLazyVariablesWhenReadThenEachCallSeesTheEnvironmentNowUnderItsOwnName) {
  const std::pair<LazyVariable, const char*> all[] = {
      {LazyVariable::LogLevel, "HOTKERNEL_LOG_LEVEL"},
      {LazyVariable::AgentCommand, "HOTKERNEL_AGENT_CMD"},
      {LazyVariable::AgentTimeout, "HOTKERNEL_AGENT_TIMEOUT"},
      {LazyVariable::NvrtcPath, "HOTKERNEL_NVRTC_PATH"},
      {LazyVariable::SandboxCompile, "HOTKERNEL_SANDBOX_COMPILE"},
      {LazyVariable::SandboxRun, "HOTKERNEL_SANDBOX_RUN"},
      {LazyVariable::SandboxTestCrash, "HOTKERNEL_SANDBOX_TEST_CRASH"},
      {LazyVariable::SandboxTestHang, "HOTKERNEL_SANDBOX_TEST_HANG"},
      {LazyVariable::SandboxTestGarbage, "HOTKERNEL_SANDBOX_TEST_GARBAGE"},
  };
  for (const auto& [variable, name] : all) {
    EXPECT_STREQ(lazyVariableName(variable), name);
    const char* before = std::getenv(name);
    const std::string saved = before ? before : "";
    unsetenv(name);
    EXPECT_EQ(lazyVariable(variable), "") << name;
    setenv(name, "", 1);
    EXPECT_EQ(lazyVariable(variable), "") << name;
    setenv(name, "value of it", 1);
    EXPECT_EQ(lazyVariable(variable), "value of it") << name;  // read at the call, not cached
    if (before) {
      setenv(name, saved.c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
}

}  // namespace
}  // namespace hotkernel
