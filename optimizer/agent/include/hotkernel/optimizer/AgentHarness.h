#pragma once
// The harness of an agent kernel (torch): the candidate the five stages run,
// wherever they run: in the sandbox process first, then in the optimizer's.
//
// Note [The harness stages in the sandbox process]
// The harness launches a candidate hundreds of times on inputs built to break
// it (special values, misaligned pointers, one row to all rows, pre-filled and
// guarded outputs). For an agent kernel those launches first happen in
// hotkernel-sandbox-run, a child with its own CUDA context, after its first
// run: a fault, a hang or an out-of-bounds write that only some stage provokes
// then breaks the child, not the serving process. The child runs the same
// runHarness against its own ATen, so the helper links torch when hotkernel is
// built with it (the harness needs ATen as the reference, and a second,
// torch-free harness would drift from the real one); the first run before it
// stays on the driver API. Only when the child reports all five stages passed
// does the in-process harness run them again, whose verdict (on this
// process's torch and inputs) is the one that counts: the child's is a
// quarantine, not a measurement. The child's GPU work is not paused by the
// serving process's yield points (Note [Bounded units of background GPU
// work]); the parent starts it only at a yield point and it is bounded by
// the parent's timeout.

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/SandboxRun.h"

namespace hotkernel {

// The harness candidate of an agent kernel for a variant of `maxRows` x `cols`:
// the agent ABI's promises (tools/agent/PROTOCOL.md): the variant's cols, 1 to
// maxRows rows, 16-byte aligned and non-overlapping buffers.
HarnessCandidate agentHarnessCandidate(const std::string& cubin, const std::string& kernelName,
                                       const AgentLaunch& launch, int64_t maxRows, int64_t cols,
                                       const std::string& description);

// The family dtype of a sandbox request's elements (elementSize 4: float32; 2: float16 when half, else bfloat16).
kernels::DType sandboxRequestDType(const SandboxRunRequest& request);

// The helper's side (a SandboxStagesRunner): the five stages of softmax over
// the last dim for `request` (its harness set), on request.device, in this
// process. Never throws: a broken environment is a failed smoke stage.
std::vector<SandboxStage> runSandboxStages(const SandboxRunRequest& request);

}  // namespace hotkernel
