// The row offsets of a chain kernel's tensor arguments as source text
// (Note [Chain layouts in the source] in ChainCodegen.h).

#include <algorithm>
#include <sstream>
#include <string>

#include "CodegenDetail.h"

namespace hotkernel::chain::detail {

// Note [Rows in memory order]
// A strided variant's rows are a product of row dims (Note [Chain layouts]);
// splitting the kernel's row index with the last dim fastest walks memory in
// logical order, which for a head view of a projection ([b, s, h, d]
// transposed to [b, h, s, d]) strides by a whole token between neighbouring
// rows: the CTAs in flight touch one row of d in every token's block. The
// kernel splits its row index with the dim of smallest stride fastest (in
// the first Full output, which follows its inputs' layout), so that
// neighbouring rows are neighbours in memory; every row is still computed
// once. Full arguments are addressed by the split dims; Row-shaped values
// ([rows] of a reduction) are laid out in logical order, so they are read and
// written at hk_lrow, the logical row rebuilt from the same dims.

std::vector<size_t> rowDimOrder(const ChainIR& ir, const ChainLayout& layout) {
  const std::vector<int64_t> dims = layoutRowDims(layout, 0);
  std::vector<size_t> order(dims.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  if (layout.contiguous() || dims.size() < 2) return order;
  const std::vector<int> args = chainTensorArgs(ir);
  const size_t inputs = args.size() - ir.outputs().size();
  std::vector<size_t> candidates;
  for (size_t k = inputs; k < args.size(); ++k) candidates.push_back(k);
  for (size_t k = 0; k < inputs; ++k) candidates.push_back(k);
  for (size_t k : candidates) {
    if (ir.node(args[k]).shape != ShapeClass::Full) continue;
    const std::vector<int64_t>& strides = layout.strides[k];
    bool broadcast = false;
    for (size_t d = 0; d < dims.size(); ++d) broadcast = broadcast || (strides[d] == 0 && dims[d] > 1);
    if (broadcast) continue;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
    return order;
  }
  return order;
}

bool rowsInMemoryOrder(const ChainIR& ir, const ChainLayout& layout) {
  const std::vector<size_t> order = rowDimOrder(ir, layout);
  for (size_t d = 0; d < order.size(); ++d) {
    if (order[d] != d) return true;
  }
  return false;
}

std::string rowOffsetStatements(const ChainIR& ir, const ChainLayout& layout, const std::string& row,
                                const std::string& indent) {
  std::ostringstream os;
  const std::vector<int> args = chainTensorArgs(ir);
  const std::vector<int64_t> dims = layoutRowDims(layout, 0);
  int64_t rows = 1;
  for (int64_t d : dims) rows *= d;
  const bool narrow = !layout.contiguous() && rows <= int64_t{0x7fffffff};
  if (!layout.contiguous() && dims.size() > 1) {
    const std::vector<size_t> order = rowDimOrder(ir, layout);
    const char* type = narrow ? "unsigned" : "unsigned long long";
    os << indent << type << " hk_r = static_cast<" << type << ">(" << row << ");\n";
    for (size_t i = order.size(); i-- > 1;) {
      os << indent << "const long long hk_i" << order[i] << " = hk_r % " << dims[order[i]] << "u;\n";
      os << indent << "hk_r /= " << dims[order[i]] << "u;\n";
    }
    os << indent << "const long long hk_i" << order[0] << " = hk_r;\n";
    if (rowsInMemoryOrder(ir, layout)) {
      std::string logical = "hk_i0";
      for (size_t d = 1; d < dims.size(); ++d) {
        logical = "(" + logical + ") * " + std::to_string(dims[d]) + "LL + hk_i" + std::to_string(d);
      }
      os << indent << "const long long hk_lrow = " << logical << ";\n" << indent << "(void)hk_lrow;\n";
    }
  } else if (!layout.contiguous()) {
    os << indent << "const long long hk_i0 = " << row << ";\n";
  }
  for (size_t k = 0; k < args.size(); ++k) {
    const Node& n = ir.node(args[k]);
    if (n.shape != ShapeClass::Full) continue;
    os << indent << "const long long hk_o" << k << " = ";
    if (layout.contiguous()) {
      os << row << " * " << (n.cols > 0 ? std::to_string(n.cols) + "LL" : "cols") << ";\n";
      continue;
    }
    std::string sum;
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t stride = layout.strides[k][d];
      if (stride == 0) continue;
      sum += (sum.empty() ? "" : " + ") + std::string("hk_i") + std::to_string(d) + " * " + std::to_string(stride) + "LL";
    }
    os << (sum.empty() ? "0LL" : sum) << ";\n";
  }
  return os.str();
}

}  // namespace hotkernel::chain::detail
