#include <gtest/gtest.h>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel {
namespace {

TEST(CheckTest, GivenFalseConditionWhenCheckedThenRecoverableErrorWithMessage) {
  try {
    int n = 3;
    HOTKERNEL_CHECK(n == 4, "n is ", n);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_FALSE(e.internal());
    EXPECT_NE(std::string(e.what()).find("n is 3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("CheckTest.cpp"), std::string::npos);
  }
}

TEST(CheckTest, GivenFalseConditionWhenRequiredThenRecoverableErrorWithTheMessageAlone) {
  try {
    HOTKERNEL_REQUIRE(1 + 1 == 3, "the rule ", 2, " states this");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_FALSE(e.internal());
    EXPECT_EQ(std::string(e.what()).rfind("the rule 2 states this (CheckTest.cpp:", 0), 0u) << e.what();
  }
  EXPECT_NO_THROW(HOTKERNEL_REQUIRE(true, "never"));
}

TEST(CheckTest, GivenBrokenInvariantWhenAssertedThenInternalError) {
  try {
    HOTKERNEL_INTERNAL_ASSERT(1 + 1 == 3);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_TRUE(e.internal());
  }
}

TEST(CheckTest, GivenKnownInputWhenHashedThenSha256Matches) {
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace hotkernel
