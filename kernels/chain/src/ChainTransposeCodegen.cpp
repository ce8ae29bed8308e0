// The tiled kernel of a transposed copy (Note [Transposed copies] in ChainCodegen.h).

#include <string>

#include "ChainEmitter.h"
#include "CodegenDetail.h"

namespace hotkernel::chain::detail {

void Emitter::transposedBody() {
  // chainVariantProblem: a lone cast (input node 0, output node 1), the innermost row dim at input stride 1.
  const std::string inner = std::to_string(layout_.rowDims.back()) + "LL";
  const std::string inStride = std::to_string(layoutColStride(layout_, 0)) + "LL";
  const std::string outStride = std::to_string(layout_.strides[1].back()) + "LL";
  const char* in = accessTag(nodes_[0].dtype);
  const char* out = accessTag(nodes_[1].dtype);
  os_ << "  __shared__ float hk_tile[HK_ROWS][HK_ROWS + 1];\n"
      << "  const long long hk_inner = " << inner << ";\n"
      << "  const long long hk_tiles_r = (hk_inner + HK_ROWS - 1) / HK_ROWS;\n"
      << "  const long long hk_tiles_c = (cols + HK_ROWS - 1) / HK_ROWS;\n"
      << "  const long long hk_tiles = rows / hk_inner * hk_tiles_r * hk_tiles_c;\n"
      << "  for (long long hk_b = blockIdx.x; hk_b < hk_tiles; hk_b += gridDim.x) {\n"
      << "    const long long hk_br = hk_b / hk_tiles_c;\n"
      << "    const long long hk_c0 = (hk_b - hk_br * hk_tiles_c) * HK_ROWS;\n"
      << "    const long long hk_t0 = (hk_br % hk_tiles_r) * HK_ROWS;\n"
      << "    const long long hk_row0 = hk_br / hk_tiles_r * hk_inner;\n";
  rowOffsets("hk_row0", "    ");
  // Read along the rows (the input's stride 1), write along the columns (the output's).
  os_ << "    for (int hk_k = threadIdx.x; hk_k < HK_ROWS * HK_ROWS; hk_k += HK_THREADS) {\n"
      << "      const int hk_dt = hk_k % HK_ROWS, hk_dc = hk_k / HK_ROWS;\n"
      << "      if (hk_t0 + hk_dt < hk_inner && hk_c0 + hk_dc < cols) {\n"
      << "        hk_tile[hk_dc][hk_dt] = hk_ld_" << in << "(in0 + hk_o0 + (hk_t0 + hk_dt) + (hk_c0 + hk_dc) * "
      << inStride << ");\n"
      << "      }\n    }\n    __syncthreads();\n"
      << "    for (int hk_k = threadIdx.x; hk_k < HK_ROWS * HK_ROWS; hk_k += HK_THREADS) {\n"
      << "      const int hk_dc = hk_k % HK_ROWS, hk_dt = hk_k / HK_ROWS;\n"
      << "      if (hk_t0 + hk_dt < hk_inner && hk_c0 + hk_dc < cols) {\n"
      << "        hk_st_" << out << "(out0 + hk_o1 + (hk_t0 + hk_dt) * " << outStride
      << " + (hk_c0 + hk_dc), hk_tile[hk_dc][hk_dt]);\n"
      << "      }\n    }\n    __syncthreads();\n  }\n";
}

}  // namespace hotkernel::chain::detail
