#include <gtest/gtest.h>

#include <cstdlib>

#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

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
  ASSERT_EQ(c.ops.size(), 5u);
  EXPECT_EQ(c.ops[0], "_softmax");
  EXPECT_EQ(c.ops[1], "_log_softmax");
  EXPECT_EQ(c.ops[2], "_fused_rms_norm");
  EXPECT_EQ(c.ops[3], "native_layer_norm");
  EXPECT_EQ(c.ops[4], "cross_entropy_loss");
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

TEST(ConfigTest, GivenIdleMaxUtilWhenReadThenPercentOrUnusedForBadValues) {
  unsetenv("HOTKERNEL_IDLE_MAX_UTIL");
  EXPECT_EQ(Config::fromEnvironment().idleMaxUtil, -1);
  setenv("HOTKERNEL_IDLE_MAX_UTIL", "20", 1);
  EXPECT_EQ(Config::fromEnvironment().idleMaxUtil, 20);
  setenv("HOTKERNEL_IDLE_MAX_UTIL", "0", 1);
  EXPECT_EQ(Config::fromEnvironment().idleMaxUtil, 0);
  for (const char* bad : {"101", "-5", "busy", "10%"}) {
    setenv("HOTKERNEL_IDLE_MAX_UTIL", bad, 1);
    EXPECT_EQ(Config::fromEnvironment().idleMaxUtil, -1) << bad;
  }
  unsetenv("HOTKERNEL_IDLE_MAX_UTIL");
}

TEST(ConfigTest, GivenNoCacheDirWhenReadThenXdgOrHomeDefault) {
  unsetenv("HOTKERNEL_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(Config::fromEnvironment().cacheDir, "/tmp/xdg/hotkernel");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/tmp/home", 1);
  EXPECT_EQ(Config::fromEnvironment().cacheDir, "/tmp/home/.cache/hotkernel");
}

TEST(ConfigTest, GivenLevelNamesWhenParsedThenLevels) {
  EXPECT_EQ(parseLogLevel("debug", LogLevel::Warn), LogLevel::Debug);
  EXPECT_EQ(parseLogLevel("error", LogLevel::Warn), LogLevel::Error);
  EXPECT_EQ(parseLogLevel("bogus", LogLevel::Info), LogLevel::Info);
}

}  // namespace
}  // namespace hotkernel
