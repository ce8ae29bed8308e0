#pragma once
// What ChainCodegen's parts share (internal).

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"

namespace hotkernel::chain::detail {

// The device functions every chain kernel uses, after its HK_* defines
// (Note [Self-contained chain sources]); with `ptxStores` the vector stores
// in PTX (Note [One store a vector]).
std::string chainDeviceLibrary(bool ptxStores);

// The storage type and access suffix of a dtype: "float" / "unsigned short", "f32" / "f16" / "bf16".
const char* storageType(DType dtype);
const char* accessTag(DType dtype);

// An exact float literal: "__uint_as_float(0x3f000000u) /* 0.5 */".
std::string floatLiteral(float value);

// The float32 expression of computed node `i` (not a leaf, reduction or
// cat), its operands named by `ref` (Note [Chain op arithmetic]), in a kernel
// that rounds as ATen or not (Note [Division by a row value]).
std::string opExpression(const std::vector<Node>& nodes, int i, const std::function<std::string(int)>& ref,
                         bool atenRounding);

// The part of Cat node `o` that holds its local column `c`, and the part's offset.
// `value`, node n's result, rounded to n's dtype as ATen stores it: unchanged
// for float32, a Cast (which rounds already), a leaf or a Cat (their operands'
// values) (Note [ATen rounding in a fused kernel]).
std::string roundedAsAten(const Node& n, const std::string& value);
bool roundsAsAten(const Node& n);

// A row reduction's result from its thread's partial `partial` and the
// CTA's shared buffer `buf` (Amax, Sum, Mean).
// With `clusterPart` (a __shared__ float of the reduction: Note [Rows split over a cluster]) the CTA's total is
// combined with the cluster's peers' in rank order.
std::string rowReduction(const Node& n, const std::string& partial, const std::string& buf,
                         const std::string& clusterPart = "");
// The device functions of a cluster's row kernel (rank, barrier, peers' shared memory, the cluster's sum and
// max), emitted after the device library for a kernel with HK_CLUSTER only.
std::string chainClusterLibrary();

std::pair<int, int64_t> catPart(const std::vector<Node>& nodes, int o, int64_t c);

// "" when `p` is a point of a transposed copy's kernel for `ir` (a lone cast: Note [Transposed copies]); else why not.
std::string transposedPointProblem(const ChainIR& ir, const ChainKernelParams& p);

// Statements declaring `const long long hk_o<k>`, the offset of `row` in
// every Full tensor argument k, under `layout` (Note [Chain layouts in the source]).
std::string rowOffsetStatements(const ChainIR& ir, const ChainLayout& layout, const std::string& row,
                                const std::string& indent);

}  // namespace hotkernel::chain::detail
