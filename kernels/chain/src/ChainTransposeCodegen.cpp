// The tiled kernel of a transposed copy (Note [Transposed copies] in ChainCodegen.h).

#include <string>

#include "ChainEmitter.h"
#include "CodegenDetail.h"

namespace hotkernel::chain::detail {

void Emitter::transposedBody() {
  // chainVariantProblem: a lone cast (input node 0, output node 1), the innermost row dim at input stride 1, a
  // tile of 32 or 64 a side, between HK_ROWS / HK_VEC and HK_ROWS^2 / HK_VEC threads, and HK_VEC dividing the
  // innermost row dim, every stride and cols: each thread holds HK_PER vectors of HK_VEC elements of the tile.
  const std::string inner = std::to_string(layout_.rowDims.back()) + "LL";
  const std::string inStride = std::to_string(layoutColStride(layout_, 0)) + "LL";
  const std::string outStride = std::to_string(layout_.strides[1].back()) + "LL";
  const char* in = accessTag(nodes_[0].dtype);
  const char* out = accessTag(nodes_[1].dtype);
  os_ << "  constexpr int HK_LANES = HK_ROWS / HK_VEC;  // threads along a tile's side, a vector each\n"
      << "  constexpr int HK_STEP = HK_THREADS / HK_LANES;  // the tile's lines a CTA covers at once\n"
      << "  constexpr int HK_PER = HK_ROWS / HK_STEP;\n"
      << "  __shared__ float hk_tile[HK_ROWS][HK_ROWS + 1];\n"
      << "  const long long hk_inner = " << inner << ";\n"
      << "  const long long hk_tiles_r = (hk_inner + HK_ROWS - 1) / HK_ROWS;\n"
      << "  const long long hk_tiles_c = (cols + HK_ROWS - 1) / HK_ROWS;\n"
      << "  const long long hk_tiles = rows / hk_inner * hk_tiles_r * hk_tiles_c;\n"
      // A thread's place in the tile: the first element of its vector along a line (rows when loading, columns
      // when storing), and its first line; its other lines are HK_STEP further each.
      << "  const int hk_lane = threadIdx.x % HK_LANES * HK_VEC, hk_first = threadIdx.x / HK_LANES;\n"
      << "  for (long long hk_b = blockIdx.x; hk_b < hk_tiles; hk_b += gridDim.x) {\n"
      << "    const long long hk_br = hk_b / hk_tiles_c;\n"
      << "    const long long hk_c0 = (hk_b - hk_br * hk_tiles_c) * HK_ROWS;\n"
      << "    const long long hk_t0 = (hk_br % hk_tiles_r) * HK_ROWS;\n"
      << "    const long long hk_row0 = hk_br / hk_tiles_r * hk_inner;\n";
  rowOffsets("hk_row0", "    ");
  // Every load first (all in flight at once), then the tile; read along the rows (the input's stride 1).
  os_ << "    const bool hk_t_live = hk_t0 + hk_lane < hk_inner;\n"
      << "    const " << storageType(nodes_[0].dtype) << "* hk_src = in0 + hk_o0 + hk_t0 + hk_lane;\n"
      << "    float hk_v[HK_PER][HK_VEC];\n"
      << "#pragma unroll\n    for (int hk_i = 0; hk_i < HK_PER; ++hk_i) {\n"
      << "      const long long hk_c = hk_c0 + hk_first + hk_i * HK_STEP;\n"
      << "      if (hk_t_live && hk_c < cols) {\n"
      << "        hk_load_" << in << "(hk_src + hk_c * " << inStride << ", hk_v[hk_i]);\n"
      << "      } else {\n"
      << "#pragma unroll\n        for (int j = 0; j < HK_VEC; ++j) hk_v[hk_i][j] = 0.0f;  // never stored\n"
      << "      }\n    }\n"
      << "#pragma unroll\n    for (int hk_i = 0; hk_i < HK_PER; ++hk_i) {\n"
      << "#pragma unroll\n      for (int j = 0; j < HK_VEC; ++j) hk_tile[hk_first + hk_i * HK_STEP][hk_lane + j] = hk_v[hk_i][j];\n"
      << "    }\n    __syncthreads();\n"
      // Write along the columns (the output's stride 1).
      << "    const bool hk_c_live = hk_c0 + hk_lane < cols;\n"
      << "    " << storageType(nodes_[1].dtype) << "* hk_dst = out0 + hk_o1 + hk_c0 + hk_lane;\n"
      << "#pragma unroll\n    for (int hk_i = 0; hk_i < HK_PER; ++hk_i) {\n"
      << "      const int hk_dt = hk_first + hk_i * HK_STEP;\n"
      << "      if (hk_c_live && hk_t0 + hk_dt < hk_inner) {\n"
      << "        float hk_o[HK_VEC];\n"
      << "#pragma unroll\n        for (int j = 0; j < HK_VEC; ++j) hk_o[j] = hk_tile[hk_lane + j][hk_dt];\n"
      << "        hk_store_" << out << "(hk_dst + (hk_t0 + hk_dt) * " << outStride << ", hk_o);\n"
      << "      }\n    }\n    __syncthreads();\n  }\n";
}

}  // namespace hotkernel::chain::detail
