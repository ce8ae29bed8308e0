// Strict JSON field access (Note [Strict JSON fields]): each accessor's
// type and range rules and the path its Error names.
#include <gtest/gtest.h>

#include <string>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel {
namespace {

using nlohmann::json;

template <typename F>
std::string errorOf(F&& read) {
  try {
    read();
  } catch (const Error& e) {
    EXPECT_FALSE(e.internal());
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_WITH(read, fragment)                                           \
  do {                                                                              \
    const std::string message = errorOf([&] { (void)(read); });                     \
    EXPECT_NE(message.find(fragment), std::string::npos) << "message: " << message; \
  } while (0)

const json kDoc = json::parse(R"({"name":"bf16","rows":4096,"big":18446744073709551615,"neg":-3,"ratio":1.5,"on":true,)"
                              R"("list":["a","b"],"mixed":["a",1],"obj":{"k":1},"nothing":null})");

TEST(JsonFieldsTest, GivenFieldsOfTheirTypeWhenReadThenValuesComeBack) {
  EXPECT_EQ(jsonfield::string(kDoc, "name", "doc"), "bf16");
  EXPECT_EQ(jsonfield::integer(kDoc, "rows", "doc", 1, 1 << 20), 4096);
  EXPECT_EQ(jsonfield::integer(kDoc, "neg", "doc", -3, -3), -3);
  EXPECT_DOUBLE_EQ(jsonfield::number(kDoc, "ratio", "doc"), 1.5);
  EXPECT_DOUBLE_EQ(jsonfield::number(kDoc, "rows", "doc"), 4096.0);
  EXPECT_TRUE(jsonfield::boolean(kDoc, "on", "doc"));
  EXPECT_EQ(jsonfield::strings(kDoc, "list", "doc"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(jsonfield::objectField(kDoc, "obj", "doc").at("k"), 1);
  EXPECT_EQ(jsonfield::array(kDoc, "mixed", "doc").size(), 2u);
}

TEST(JsonFieldsTest, GivenAMissingFieldOrANonObjectWhenReadThenTheErrorNamesThePath) {
  EXPECT_ERROR_WITH(jsonfield::string(kDoc, "dtype", "variant"), "variant misses \"dtype\"");
  EXPECT_ERROR_WITH(jsonfield::get(json::array({1}), "dtype", "variant"), "variant must be a JSON object, got array");
  EXPECT_ERROR_WITH(jsonfield::object(json(7), "agent task"), "agent task must be a JSON object, got 7");
}

TEST(JsonFieldsTest, GivenAFieldOfTheWrongTypeWhenReadThenTheErrorSaysWhatItGot) {
  EXPECT_ERROR_WITH(jsonfield::string(kDoc, "rows", "variant"), "variant.rows must be a string, got 4096");
  EXPECT_ERROR_WITH(jsonfield::integer(kDoc, "name", "variant"), "variant.name must be an integer, got string");
  EXPECT_ERROR_WITH(jsonfield::integer(kDoc, "ratio", "variant"), "variant.ratio must be an integer, got 1.5");
  EXPECT_ERROR_WITH(jsonfield::number(kDoc, "on", "variant"), "variant.on must be a number, got boolean");
  EXPECT_ERROR_WITH(jsonfield::boolean(kDoc, "nothing", "variant"), "variant.nothing must be true or false, got null");
  EXPECT_ERROR_WITH(jsonfield::array(kDoc, "obj", "variant"), "variant.obj must be an array, got object");
  EXPECT_ERROR_WITH(jsonfield::objectField(kDoc, "list", "variant"), "variant.list must be an object, got array");
  EXPECT_ERROR_WITH(jsonfield::strings(kDoc, "mixed", "target"), "target.mixed must hold strings only, got 1");
}

TEST(JsonFieldsTest, GivenIntegersOutsideTheRangeWhenReadThenRefusedEvenWhenStoredUnsigned) {
  EXPECT_ERROR_WITH(jsonfield::integer(kDoc, "rows", "h", 1, 4095), "h.rows must be an integer in [1, 4095], got 4096");
  EXPECT_ERROR_WITH(jsonfield::integer(kDoc, "rows", "h", 4097, 5000), "in [4097, 5000]");
  EXPECT_ERROR_WITH(jsonfield::integer(kDoc, "neg", "h", 0, 10), "h.neg must be an integer in [0, 10], got -3");
  EXPECT_ERROR_WITH(jsonfield::integer(kDoc, "rows", "h", -10, -1), "got 4096");
  // 2^64 - 1 is stored unsigned: it must not read as -1.
  EXPECT_ERROR_WITH(jsonfield::integer(kDoc, "big", "h"), "got 18446744073709551615");
}

TEST(JsonFieldsTest, GivenOptionalFieldsWhenAbsentOrNullThenNulloptElseTheTypeIsRequired) {
  EXPECT_FALSE(jsonfield::optionalString(kDoc, "absent", "doc").has_value());
  EXPECT_FALSE(jsonfield::optionalInteger(kDoc, "nothing", "doc").has_value());
  EXPECT_FALSE(jsonfield::optionalNumber(kDoc, "nothing", "doc").has_value());
  EXPECT_FALSE(jsonfield::optionalBoolean(kDoc, "absent", "doc").has_value());
  EXPECT_EQ(jsonfield::optionalInteger(kDoc, "rows", "doc"), 4096);
  EXPECT_EQ(jsonfield::optionalBoolean(kDoc, "on", "doc"), true);
  EXPECT_ERROR_WITH(jsonfield::optionalString(kDoc, "rows", "doc"), "doc.rows must be a string");
  EXPECT_ERROR_WITH(jsonfield::optionalNumber(json::array(), "rows", "doc"), "doc must be a JSON object");
  EXPECT_TRUE(jsonfield::present(kDoc, "rows"));
  EXPECT_FALSE(jsonfield::present(kDoc, "nothing"));
  EXPECT_FALSE(jsonfield::present(json(3), "rows"));
}

TEST(JsonFieldsTest, GivenTextNestedTooDeepOrNotJsonWhenParsedThenRefusedWithWhatItIs) {
  EXPECT_EQ(jsonfield::parse(R"({"a":[1,{"b":"[[[["}]})", "reply", 3).at("a").size(), 2u);
  EXPECT_ERROR_WITH(jsonfield::parse(std::string(100000, '[') + std::string(100000, ']'), "reply", 16),
                    "reply: JSON nested deeper than 16");
  EXPECT_ERROR_WITH(jsonfield::parse("[[[]]]", "reply", 2), "nested deeper than 2");
  EXPECT_ERROR_WITH(jsonfield::parse("{not json\nat all", "reply", 16), "reply: it is not JSON (");
  EXPECT_ERROR_WITH(jsonfield::parse("{not json\nat all", "reply", 16), "it starts with \"{not json at all\"");
}

}  // namespace
}  // namespace hotkernel
