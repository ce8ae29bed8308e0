// What it takes to run one softmax point on one variant: the guards (variant,
// point, pointers), the template and its defines, the launch geometry, and
// the bytes a call moves.

#include "hotkernel/kernels/SoftmaxFamily.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "FamilyMath.h"
#include "SoftmaxSpace.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {

using detail::ceilDiv;
using detail::isSoftmaxPoint;

bool SoftmaxFamily::guardVariant(const SoftmaxVariant& v) {
  bool knownDType = false;
  for (DType d : kAllDTypes) knownDType = knownDType || d == v.dtype;
  if (!knownDType || v.rows < 1 || v.cols < 1 || v.cols > kMaxCols) return false;
  // rows * cols elements must be addressable in bytes without overflow.
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize(v.dtype));
  return v.rows <= maxElements / v.cols;
}

bool SoftmaxFamily::guardParams(const SoftmaxVariant& v, const SoftmaxParams& p) {
  if (!guardVariant(v) || !isSoftmaxPoint(v.dtype, p)) return false;
  if (p.vec > 1 && v.cols % p.vec != 0) return false;
  if (p.items > 0 && v.cols > static_cast<int64_t>(p.cluster) * p.rowThreads() * p.vec * p.items) return false;
  return true;
}

size_t SoftmaxFamily::requiredAlignment(DType dtype, const SoftmaxParams& p) {
  return static_cast<size_t>(p.vec) * elementSize(dtype);
}

bool SoftmaxFamily::guardPointers(const void* in, const void* out, DType dtype, const SoftmaxParams& p) {
  if (in == nullptr || out == nullptr || p.vec < 1) return false;
  const uintptr_t align = requiredAlignment(dtype, p);
  return reinterpret_cast<uintptr_t>(in) % align == 0 && reinterpret_cast<uintptr_t>(out) % align == 0;
}

std::string SoftmaxFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> SoftmaxFamily::compileOptions(DType dtype, const SoftmaxParams& p, SoftmaxOp op) {
  HOTKERNEL_CHECK(isSoftmaxPoint(dtype, p), "not a softmax parameter point for ", dtypeName(dtype), ": ", p.describe());
  std::vector<std::string> options = {
      "-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_THREADS=" + std::to_string(p.threads),
      "-DHK_ROWS=" + std::to_string(p.rowsPerCta), "-DHK_VEC=" + std::to_string(p.vec),
      "-DHK_ITEMS=" + std::to_string(p.items)};
  if (p.cluster != 1) options.push_back("-DHK_CLUSTER=" + std::to_string(p.cluster));
  if (p.smem) options.push_back("-DHK_SMEM=1");
  if (p.clusterRows > 1) options.push_back("-DHK_PIPE=1");
  if (op == SoftmaxOp::LogSoftmax) options.push_back("-DHK_LOG=1");
  return options;
}

LaunchGeometry SoftmaxFamily::launchGeometry(const SoftmaxVariant& v, const SoftmaxParams& p) {
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();  // cuLaunchKernel's limit for gridDim.x
  LaunchGeometry g;
  const int64_t cluster = std::max(p.cluster, 1);
  const int64_t ctas = p.clusterRows > 1  ? ceilDiv(v.rows, p.clusterRows) * cluster
                       : p.rowsPerCta > 0 ? ceilDiv(v.rows, p.rowsPerCta) * cluster
                                          : v.rows * cluster;
  // A whole number of clusters (the kernel's clusters are `cluster` consecutive CTAs).
  g.gridX = static_cast<unsigned>(std::clamp<int64_t>(ctas, cluster, kMaxGridX / cluster * cluster));
  g.blockX = static_cast<unsigned>(p.threads);
  // One stage, pipelined or not (Note [Pipelined slices]).
  g.sharedBytes = p.smem ? static_cast<unsigned>(p.threads * p.items * p.vec * static_cast<int>(elementSize(v.dtype)))
                         : 0;
  return g;
}

double SoftmaxFamily::bytesMoved(const SoftmaxVariant& v) {
  return 2.0 * static_cast<double>(v.rows) * static_cast<double>(v.cols) * static_cast<double>(elementSize(v.dtype));
}

}  // namespace hotkernel::kernels
