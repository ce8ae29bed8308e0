// The fusion engine's table of a chain's values (interpose/fusion/CallCapture.h):
// what a pending chain holds of the caller's tensors, and what counts as
// referenced elsewhere (Note [A pending chain holds no caller's TensorImpl]).
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "CallCapture.h"

namespace hotkernel::fusion {
namespace {

// A deferred call's outputs are allocated from their metadata's dtype name: every dtype the table spells reads
// back, cuDNN's uint8 batch norm reserve among them (which once made every such call refuse to defer).
TEST(ValueTableTest, GivenTensorsOfEachDtypeWhenTheirMetadataIsReadBackThenTheNameGivesTheirType) {
  for (const at::ScalarType type : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kLong, at::kInt,
                                    at::kShort, at::kChar, at::kByte, at::kBool}) {
    const chain::TensorMeta m = metaOf(at::empty({0}, at::TensorOptions().dtype(type)));
    const std::optional<c10::ScalarType> back = scalarTypeOf(m.scalarType);
    ASSERT_TRUE(back.has_value()) << m.scalarType;
    EXPECT_EQ(*back, type) << m.scalarType;
  }
  EXPECT_FALSE(scalarTypeOf("complex64").has_value());
  EXPECT_FALSE(scalarTypeOf("").has_value());
}

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

// Note [Recycled metadata nodes]: values added after a clear or a truncate reuse the forgotten values' nodes; each
// has its own metadata, whatever rank and dtype the node held before.
TEST(ValueTableTest, GivenForgottenValuesWhenOthersAreAddedThenEachHasItsOwnMetadata) {
  for (bool strong : {true, false}) {
    ValueTable table(strong);
    const at::Tensor a = at::randn({2, 3, 4}), b = at::randn({5, 6}).t(), c = at::randn({7}).to(at::kBFloat16);
    table.add(a);
    table.add(b);
    table.clear();
    EXPECT_EQ(table.size(), 0u);
    EXPECT_TRUE(table.metas().empty());
    const int64_t ic = table.add(c);
    const int64_t ia = table.add(a);
    ASSERT_EQ(table.metas().size(), 2u);
    EXPECT_EQ(table.metas().at(ic).sizes, std::vector<int64_t>{7});
    EXPECT_EQ(table.metas().at(ic).strides, std::vector<int64_t>{1});
    EXPECT_EQ(table.metas().at(ic).scalarType, "bfloat16");
    EXPECT_EQ(table.metas().at(ia).sizes, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(table.metas().at(ia).scalarType, "float32");
    table.truncate(1);  // forgets `a` again
    const int64_t ib = table.add(b);
    EXPECT_EQ(ib, 1);
    EXPECT_EQ(table.metas().at(ib).sizes, (std::vector<int64_t>{6, 5}));
    EXPECT_EQ(table.metas().at(ib).strides, (std::vector<int64_t>{1, 6}));
    EXPECT_TRUE(table.unchangedSinceAdded(ib, b));
  }
}


// Note [In-place steps in the table]: an in-place result is the TensorImpl it wrote, a new value on the storage
// (and, strong, the TensorImpl as taken) of the one it overwrote; the overwritten value is found and referenced by
// no one; forgetting the result makes the overwritten value the tensor's again.
TEST(ValueTableTest, GivenAnInPlaceResultWhenAddedThenTheTensorIsTheNewValueAndTheOverwrittenOneIsReferencedByNoOne) {
  for (bool strong : {true, false}) {
    ValueTable table(strong);
    at::Tensor x = at::randn({4, 8});
    const int64_t v1 = table.add(x, /*produced=*/true);
    const int64_t v2 = table.addInPlace(x, v1);
    ASSERT_EQ(v2, v1 + 1) << strong;
    EXPECT_EQ(table.find(x), v2);
    EXPECT_TRUE(table.referencedElsewhere(v2));
    EXPECT_FALSE(table.referencedElsewhere(v1));
    EXPECT_EQ(table.metas().at(v2).sizes, table.metas().at(v1).sizes);
    EXPECT_FALSE(table.aliasesAValue(x));
    EXPECT_TRUE(table.aliasesAValue(x.select(0, 1)));
    table.truncate(static_cast<size_t>(v2));
    EXPECT_EQ(table.find(x), v1) << strong;
    EXPECT_TRUE(table.referencedElsewhere(v1));
    const int64_t again = table.addInPlace(x, v1);
    ASSERT_EQ(again, v2);
    if (strong) {
      EXPECT_TRUE(table.taken(v2).is_same(table.taken(v1)));  // one TensorImpl: the storage is held once
      x.reset();
      EXPECT_FALSE(table.referencedElsewhere(v2));  // the table's own references are not someone else's
    }
  }
}

TEST(ValueTableTest, GivenATensorThatIsNotTheValueOrAnInputWhenAddedInPlaceThenTheTableRefusesAndIsUnchanged) {
  ValueTable table(/*strong=*/true);
  at::Tensor input = at::randn({4, 8}), made = at::randn({4, 8}), other = at::randn({4, 8});
  const int64_t in = table.add(input);
  const int64_t v = table.add(made, /*produced=*/true);
  EXPECT_EQ(table.addInPlace(input, in), -1);  // a chain input: no call of the chain returned it
  EXPECT_EQ(table.addInPlace(other, v), -1);   // not the value's TensorImpl
  EXPECT_EQ(table.addInPlace(made, 7), -1);    // no such value
  made.unsqueeze_(0);                          // reshaped in place since the table took it
  EXPECT_EQ(table.addInPlace(made, v), -1);
  EXPECT_EQ(table.size(), 2u);
  const int64_t again = table.addInPlace(made.squeeze_(0), v);
  EXPECT_EQ(again, 2);
  EXPECT_EQ(table.addInPlace(made, v), -1);  // overwritten already: the tensor is value 2 now
}

}  // namespace
}  // namespace hotkernel::fusion
