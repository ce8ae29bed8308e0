// The row offsets of a chain kernel's tensor arguments as source text
// (Note [Chain layouts in the source] in ChainCodegen.h).

#include <sstream>
#include <string>

#include "CodegenDetail.h"

namespace hotkernel::chain::detail {

std::string rowOffsetStatements(const ChainIR& ir, const ChainLayout& layout, const std::string& row,
                                const std::string& indent) {
  std::ostringstream os;
  const std::vector<int> args = chainTensorArgs(ir);
  const std::vector<int64_t> dims = layoutRowDims(layout, 0);
  int64_t rows = 1;
  for (int64_t d : dims) rows *= d;
  const bool narrow = !layout.contiguous() && rows <= int64_t{0x7fffffff};
  if (!layout.contiguous() && dims.size() > 1) {
    const char* type = narrow ? "unsigned" : "unsigned long long";
    os << indent << type << " hk_r = static_cast<" << type << ">(" << row << ");\n";
    for (size_t d = dims.size(); d-- > 1;) {
      os << indent << "const long long hk_i" << d << " = hk_r % " << dims[d] << "u;\n";
      os << indent << "hk_r /= " << dims[d] << "u;\n";
    }
    os << indent << "const long long hk_i0 = hk_r;\n";
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
