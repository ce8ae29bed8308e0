// The cache identity of a chain variant (ChainVariant.h).

#include "hotkernel/chain/ChainVariant.h"

#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {

std::string chainVariantString(const ChainVariant& v) {
  HOTKERNEL_CHECK(v.rows >= 1 && v.cols >= 1, "a chain variant needs rows and cols >= 1, got [", v.rows, ", ",
                  v.cols, "]");
  HOTKERNEL_CHECK(normalizeLayout(v.ir, v.rows, v.cols, v.layout) == v.layout, "a chain variant's layout is ",
                  "normalized (normalizeLayout), got ", layoutText(v.layout));
  const std::string layout = v.layout.contiguous() ? "" : ";layout=" + layoutText(v.layout);
  return "chain=" + chainKey(v.ir).sha256 + ";rows=" + std::to_string(v.rows) + ";cols=" + std::to_string(v.cols) +
         layout + ";dev=" + std::to_string(v.device);
}

}  // namespace hotkernel::chain
