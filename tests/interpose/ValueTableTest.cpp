// The fusion engine's table of a chain's values (interpose/fusion/CallCapture.h):
// what a pending chain holds of the caller's tensors, and what counts as
// referenced elsewhere (Note [A pending chain holds no caller's TensorImpl]).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "CallCapture.h"

namespace hotkernel::fusion {
namespace {

TEST(ValueTableTest, GivenAStrongTableWhenATensorIsAddedThenTheCallersTensorImplGainsNoReference) {
  ValueTable table(/*strong=*/true);
  at::Tensor t = at::randn({4, 8});
  const auto before = t.use_count();
  const int64_t id = table.add(t, /*produced=*/true);
  // A wrapper that lives as long as other C++ references do (PyTorch's
  // PyObject preservation) must not be kept alive by the table.
  EXPECT_EQ(t.use_count(), before);
  EXPECT_EQ(table.find(t), id);
  EXPECT_TRUE(table.referencedElsewhere(id));  // the caller still holds it
}

TEST(ValueTableTest, GivenAStrongTableWhenTheCallerDropsItsTensorThenTheStorageLivesAndNothingElseRefersToIt) {
  ValueTable table(/*strong=*/true);
  at::Tensor t = at::arange(32, at::kFloat).view({4, 8});
  const int64_t id = table.add(t, /*produced=*/true);
  const void* data = t.const_data_ptr();
  t.reset();
  EXPECT_FALSE(table.referencedElsewhere(id));
  // The chain's own TensorImpl still holds the storage and the values.
  const at::Tensor& taken = table.taken(id);
  EXPECT_EQ(taken.const_data_ptr(), data);
  EXPECT_EQ(taken.sizes(), at::IntArrayRef({4, 8}));
  EXPECT_EQ(taken.select(0, 3).select(0, 7).item<float>(), 31.0f);
}

TEST(ValueTableTest, GivenAStrongTableWhenOnlyAViewOfADroppedTensorIsHeldThenTheValueIsReferencedElsewhere) {
  ValueTable table(/*strong=*/true);
  at::Tensor t = at::randn({4, 8});
  const int64_t id = table.add(t, /*produced=*/true);
  at::Tensor row = t.select(0, 1);  // another TensorImpl over the same storage
  t.reset();
  EXPECT_TRUE(table.referencedElsewhere(id));
  row.reset();
  EXPECT_FALSE(table.referencedElsewhere(id));
}

TEST(ValueTableTest, GivenAWeakTableWhenTheCallerDropsItsTensorThenItIsNotReferencedAndNotFound) {
  ValueTable table(/*strong=*/false);
  at::Tensor t = at::randn({4, 8});
  at::Tensor same = t;
  const int64_t id = table.add(t);
  EXPECT_TRUE(table.referencedElsewhere(id));
  t.reset();
  EXPECT_TRUE(table.referencedElsewhere(id));  // `same` holds the TensorImpl
  EXPECT_EQ(table.find(same), id);
  same.reset();
  EXPECT_FALSE(table.referencedElsewhere(id));
}

}  // namespace
}  // namespace hotkernel::fusion
