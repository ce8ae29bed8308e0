// TextTable: the CLI's column layout.

#include <gtest/gtest.h>

#include "TextTable.h"

namespace hotkernel::cli {
namespace {

TEST(TextTableTest, GivenRowsWhenRenderedThenColumnsAlignedWithoutTrailingSpaces) {
  TextTable t({"A", "LONGER", "C"});
  t.addRow({"xxxx", "y", ""});
  t.addRow({"z"});
  EXPECT_EQ(t.render(),
            "A     LONGER  C\n"
            "xxxx  y\n"
            "z\n");
  EXPECT_EQ(t.rows(), 2u);
}

}  // namespace
}  // namespace hotkernel::cli
