#include "hotkernel/optimizer/ChainLayoutValues.h"

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

using chain::ShapeClass;

size_t chainFirstOutputArg(const chain::ChainIR& ir) {
  size_t arg = 0;
  for (int i : ir.inputs()) arg += ir.node(i).shape != ShapeClass::Scalar;
  return arg;
}

int64_t chainArgumentElements(const chain::ChainIR& ir, const chain::ChainLayout& layout, size_t arg, int64_t rows,
                              int64_t cols) {
  const std::vector<int> args = chain::chainTensorArgs(ir);
  HOTKERNEL_CHECK(arg < args.size(), "tensor argument ", arg, " of ", args.size());
  const chain::Node& n = ir.node(args[arg]);
  switch (n.shape) {
    case ShapeClass::Full:
      return chain::layoutSpan(ir, layout, arg, rows, cols);
    case ShapeClass::Column:
      return chain::extentOf(n, cols);
    case ShapeClass::Row:
    case ShapeClass::RowFlat:
      return rows;
    case ShapeClass::Scalar:
      break;
  }
  HOTKERNEL_CHECK(false, "tensor argument ", arg, " is a Scalar");
  return 0;
}

int64_t chainColumnSplit(const chain::ChainLayout& layout) {
  int64_t split = 0;
  for (int64_t r : layout.colRepeats) {
    if (r > 1 && (split == 0 || r < split)) split = r;
  }
  for (int64_t r : layout.colRepeats) {
    HOTKERNEL_CHECK(r == 1 || r % split == 0, "column repeats ", r, " and ", split, " do not nest");
  }
  return split;
}

at::Tensor chainArgumentView(const chain::ChainIR& ir, const chain::ChainLayout& layout, size_t arg,
                             const at::Tensor& memory, int64_t rows, int64_t cols) {
  const int64_t elements = chainArgumentElements(ir, layout, arg, rows, cols);
  HOTKERNEL_CHECK(memory.dim() == 1 && memory.numel() >= elements, "tensor argument ", arg, " needs a 1-d buffer of ",
                  elements, " elements, got ", memory.sizes());
  const chain::Node& n = ir.node(chain::chainTensorArgs(ir)[arg]);
  std::vector<int64_t> sizes = chain::layoutRowDims(layout, rows);
  const int64_t split = chainColumnSplit(layout);  // Note [Chain values in a group view]
  switch (n.shape) {
    case ShapeClass::Full: {
      std::vector<int64_t> strides = chain::layoutStrides(ir, layout, arg, rows, cols);
      const int64_t extent = chain::extentOf(n, cols), colStride = chain::layoutColStride(layout, arg);
      if (split == 0) {
        sizes.push_back(extent);
        strides.push_back(colStride);  // Note [Transposed layouts]
        return memory.as_strided(sizes, strides);
      }
      const int64_t repeat = chain::layoutColRepeat(layout, arg);
      std::vector<int64_t> splitSizes = sizes;
      splitSizes.insert(splitSizes.end(), {extent / split, split});
      if (repeat == 1 || repeat == split || repeat == extent) {
        strides.push_back(repeat == 1 ? split * colStride : repeat == split ? colStride : 0);
        strides.push_back(repeat == 1 ? colStride : 0);
        return memory.as_strided(splitSizes, strides);
      }
      sizes.insert(sizes.end(), {extent / repeat, repeat});
      strides.insert(strides.end(), {colStride, 0});
      return memory.as_strided(sizes, strides).reshape(splitSizes);
    }
    case ShapeClass::Column:
      return split == 0 ? memory.narrow(0, 0, elements) : memory.narrow(0, 0, elements).view({elements / split, split});
    case ShapeClass::Row:
      sizes.insert(sizes.end(), split == 0 ? 1 : 2, 1);
      return memory.narrow(0, 0, elements).view(sizes);
    case ShapeClass::RowFlat:
      return memory.narrow(0, 0, elements).view(sizes);
    case ShapeClass::Scalar:
      break;
  }
  return {};
}

std::vector<ChainReferenceInput> chainInputViews(const chain::ChainIR& ir, const chain::ChainLayout& layout,
                                                 const std::vector<ChainReferenceInput>& memory, int64_t rows,
                                                 int64_t cols) {
  const std::vector<int> inputs = ir.inputs();
  HOTKERNEL_CHECK(memory.size() == inputs.size(), "the chain takes ", inputs.size(), " inputs, got ", memory.size());
  std::vector<ChainReferenceInput> views = memory;
  size_t arg = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (ir.node(inputs[k]).shape == ShapeClass::Scalar) continue;
    views[k].tensor = chainArgumentView(ir, layout, arg++, memory[k].tensor, rows, cols);
  }
  return views;
}

std::vector<at::Tensor> chainAtenValues(const chain::ChainIR& ir, const chain::ChainLayout& layout,
                                        const std::vector<ChainReferenceInput>& memory, int64_t rows, int64_t cols) {
  std::vector<at::Tensor> ref =
      runChainWithAten(ir, chainInputViews(ir, layout, memory, rows, cols), rows, cols, chainColumnSplit(layout));
  for (size_t o = 0; o < ref.size(); ++o) ref[o] = chainValueOf(ir.node(ir.outputs()[o]), ref[o], rows, cols);
  return ref;
}

at::Tensor chainValueOf(const chain::Node& n, const at::Tensor& value, int64_t rows, int64_t cols) {
  return value.reshape(chainValueSizes(n.shape, rows, chain::extentOf(n, cols)));
}

}  // namespace hotkernel
