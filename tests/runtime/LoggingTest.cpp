// Tests of the logger's level (runtime/include/hotkernel/runtime/Logging.h), in
// particular an unknown HOTKERNEL_LOG_LEVEL (Note [An unknown log level]).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "StderrCapture.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

using test::countOf;
using test::StderrCapture;

TEST(LoggingTest, GivenLevelNamesWhenParsedThenLevels) {
  EXPECT_EQ(parseLogLevel("debug", LogLevel::Warn), LogLevel::Debug);
  EXPECT_EQ(parseLogLevel("info", LogLevel::Warn), LogLevel::Info);
  EXPECT_EQ(parseLogLevel("warning", LogLevel::Error), LogLevel::Warn);
  EXPECT_EQ(parseLogLevel("error", LogLevel::Warn), LogLevel::Error);
  EXPECT_EQ(parseLogLevel("bogus", LogLevel::Info), LogLevel::Info);
}

TEST(LoggingTest, GivenKnownUnsetOrEmptyLevelWhenReadFromTheEnvironmentThenNoWarning) {
  StderrCapture capture;
  EXPECT_EQ(logLevelFromEnvironmentValue(nullptr), LogLevel::Warn);
  EXPECT_EQ(logLevelFromEnvironmentValue(""), LogLevel::Warn);
  EXPECT_EQ(logLevelFromEnvironmentValue("debug"), LogLevel::Debug);
  EXPECT_EQ(logLevelFromEnvironmentValue("error"), LogLevel::Error);
  EXPECT_EQ(capture.text(), "");
}

TEST(LoggingTest, GivenUnknownLevelWhenReadFromTheEnvironmentThenWarnWithOneLineNamingTheAcceptedValues) {
  for (const char* unknown : {"verbose", "DEBUG", "2", " warn"}) {
    StderrCapture capture;
    EXPECT_EQ(logLevelFromEnvironmentValue(unknown), LogLevel::Warn) << unknown;
    const std::string logged = capture.text();
    EXPECT_EQ(countOf(logged, "\n"), 1u) << logged;
    EXPECT_NE(logged.find(std::string("HOTKERNEL_LOG_LEVEL='") + unknown + "'"), std::string::npos) << logged;
    EXPECT_NE(logged.find("error, warn, info, debug"), std::string::npos) << logged;
    EXPECT_NE(logged.find("using warn"), std::string::npos) << logged;
  }
}

// The level is read once per process, on first use: the check runs in a fresh
// process (a death test's child re-executes this binary with only this test).
// The child exits 0 when the first logging of the process warned exactly once
// and the level in force is warn.
TEST(LoggingTest, GivenUnknownLevelInTheEnvironmentWhenAProcessLogsThenOneWarningAndWarnLevel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("HOTKERNEL_LOG_LEVEL", "chatty", 1);
  EXPECT_EXIT(
      {
        std::string logged;
        {
          StderrCapture capture;
          HOTKERNEL_LOG(Info) << "an info line";
          HOTKERNEL_LOG(Warn) << "a warn line";
          HOTKERNEL_LOG(Error) << "an error line";
          logged = capture.text();
        }
        int failed = 0;
        if (logLevel() != LogLevel::Warn) failed |= 1;
        if (countOf(logged, "HOTKERNEL_LOG_LEVEL='chatty'") != 1) failed |= 2;
        if (countOf(logged, "an info line") != 0 || countOf(logged, "a warn line") != 1) failed |= 4;
        if (failed != 0) std::fprintf(stderr, "logged: %s\n", logged.c_str());
        std::_Exit(failed);
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv("HOTKERNEL_LOG_LEVEL");
}

}  // namespace
}  // namespace hotkernel
