#include "hotkernel/kernels/DType.h"

#include <gtest/gtest.h>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

TEST(DTypeTest, GivenEachDTypeWhenNamedAndParsedBackThenRoundTrips) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(parseDType(dtypeName(d)), d);
    EXPECT_EQ(parseDType(std::string("torch.") + dtypeName(d)), d);
    EXPECT_EQ(dtypeFromCode(static_cast<int32_t>(d)), d);
  }
}

TEST(DTypeTest, GivenTheEnumWhenReadAsCodesThenTheyAreTheStableTemplateCodes) {
  EXPECT_EQ(static_cast<int>(DType::Float32), 0);
  EXPECT_EQ(static_cast<int>(DType::Float16), 1);
  EXPECT_EQ(static_cast<int>(DType::BFloat16), 2);
}

TEST(DTypeTest, GivenEachDTypeWhenAskedItsSizeThenBytesPerElement) {
  EXPECT_EQ(elementSize(DType::Float32), 4u);
  EXPECT_EQ(elementSize(DType::Float16), 2u);
  EXPECT_EQ(elementSize(DType::BFloat16), 2u);
}

TEST(DTypeTest, GivenAliasesWhenParsedThenTheirDType) {
  EXPECT_EQ(parseDType("float"), DType::Float32);
  EXPECT_EQ(parseDType("fp32"), DType::Float32);
  EXPECT_EQ(parseDType("half"), DType::Float16);
  EXPECT_EQ(parseDType("fp16"), DType::Float16);
  EXPECT_EQ(parseDType("bf16"), DType::BFloat16);
  EXPECT_EQ(parseDType("torch.half"), DType::Float16);
}

TEST(DTypeTest, GivenUnknownNamesOrCodesWhenParsedThenThrows) {
  EXPECT_THROW(parseDType("float64"), Error);
  EXPECT_THROW(parseDType(""), Error);
  EXPECT_THROW(parseDType("Float32"), Error);
  EXPECT_THROW(dtypeFromCode(3), Error);
  EXPECT_THROW(dtypeFromCode(-1), Error);
}

}  // namespace
}  // namespace hotkernel::kernels
