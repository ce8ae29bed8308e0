#pragma once
// A fused chain kernel ready to launch: made from a cache entry's params and
// cubin (or a candidate's, in the harness), launched by the deferral engine
// in place of the chain's ATen ops.
//
// Note [A chain plan from a cache entry]
// makeChainPlan reads the entry's params for the requested variant
// (readChainEntry: the stored chain must be the requested one, the kernel
// parameters must serve its rows and cols, the generated source must be this
// build's), then loads the cubin into the device's primary context (CUDA
// modules are never unloaded: Note [Modules are never unloaded]) with the
// geometry of the variant. A plan serves exactly its variant. launchChainPlan
// never throws and returns false, launching nothing, when a call does not fit
// the plan: a wrong count of inputs or outputs, a null pointer, a pointer
// not aligned for the kernel's vector accesses (chainKernelLayout), an output
// overlapping an input or another output, or a failed launch; the caller then
// runs the chain unfused. The harness checks these refusals on every
// candidate (chainLaunchRefusal, the edge-case stage).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainVariant.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel::chain {

struct ChainPlan {
  ChainVariant variant;
  ChainKernelParams params;
  std::vector<ChainArg> layout;  // hk_chain's parameters (chainKernelLayout)
  // Bytes each parameter of `layout` spans in the variant's layout (0 but for tensors): chainSpanBytes, made
  // once by makeChainPlan for the launch guard's overlap checks. A plan built without it gets them computed at
  // each launch.
  std::vector<uint64_t> spanBytes;
  std::shared_ptr<const CudaKernelLauncher> launcher;
  std::string description;       // "chain[t256 v8 r1 i0] for chain=...;rows=...;cols=...;dev=N"
};

// The plan of a cache entry's params and cubin for `v` on v.device (Note [A
// chain plan from a cache entry]). Error for a refused entry (the reason),
// a keep_aten entry, or a cubin that does not load.
ChainPlan makeChainPlan(const ChainVariant& v, const std::string& paramsText, const std::string& cubin);

// The bytes each parameter of `layout` (chainKernelLayout of v.ir) spans in v's layout, rows and cols: a tensor
// input's or output's elements (layoutSpan) times its element size, 0 for the others (Scalar inputs, rows, cols).
std::vector<uint64_t> chainSpanBytes(const ChainVariant& v, const std::vector<ChainArg>& layout);

// "" when a call with these inputs (one per chain input: a tensor's pointer
// or a Scalar input's value) and outputs fits `plan`, else why not.
std::string chainLaunchRefusal(const ChainPlan& plan, const std::vector<ChainInputValue>& inputs,
                               const std::vector<void*>& outputs);

// Launches the plan's kernel on `stream` (a CUstream); false when refused or
// when the launch fails (nothing launched; run the chain unfused), with why
// in `refusal` when given ("" after a launch).
bool launchChainPlan(const ChainPlan& plan, const std::vector<ChainInputValue>& inputs,
                     const std::vector<void*>& outputs, void* stream, std::string* refusal = nullptr) noexcept;

}  // namespace hotkernel::chain
