// What users read of errors and option ranges: ErrorText.h and RangeCheck.h.

#include <gtest/gtest.h>

#include "ErrorText.h"
#include "RangeCheck.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cli {
namespace {

TEST(ErrorTextTest, GivenTrailingSourceLocationWhenShownThenRemoved) {
  EXPECT_EQ(withoutSourceLocation("refusing cache directory /x: mode 0777 (SafePath.cpp:42)"),
            "refusing cache directory /x: mode 0777");
  EXPECT_EQ(withoutSourceLocation("bad (Preload.c:7)"), "bad");
}

TEST(ErrorTextTest, GivenParenthesesThatAreNoSourceLocationWhenShownThenKept) {
  for (const char* text : {"it is writable (mode 0777)", "see (a.cpp)", "at (x:12)", "(SafePath.cpp:42) first",
                           "path (/tmp/a.cpp:12)", ""}) {
    EXPECT_EQ(withoutSourceLocation(text), text);
  }
}

TEST(ErrorTextTest, GivenHotkernelErrorWhenUserMessageThenLocationOnlyForInternalErrors) {
  try {
    HOTKERNEL_REQUIRE(false, "cannot write ", "/x.svg");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(userMessage(e), "cannot write /x.svg");
  }
  try {
    HOTKERNEL_INTERNAL_ASSERT(false, "bug");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(userMessage(e).find("ErrorTextTest.cpp:"), std::string::npos) << userMessage(e);
  }
}

TEST(ErrorTextTest, GivenLinesWhenOneLineThenJoined) {
  EXPECT_EQ(oneLine("could not load:\n  a: missing\n  b: missing"), "could not load: a: missing; b: missing");
  EXPECT_EQ(oneLine("one line"), "one line");
  EXPECT_EQ(oneLine("trailing\n"), "trailing");
}

TEST(RangeCheckTest, GivenValuesWhenCheckedThenOnlyIntegersInTheRangePass) {
  CLI::Validator check = integerInRange(1, 1000000);
  for (std::string ok : {"1", "1000000", " 42 "}) EXPECT_EQ(check(ok), "") << ok;
  for (std::string bad : {"0", "-1", "1000001", "1e3", "", "abc", "5x", "99999999999999999999999"}) {
    EXPECT_EQ(check(bad), "must be an integer in [1, 1000000], got '" + bad + "'");
  }
}

}  // namespace
}  // namespace hotkernel::cli
