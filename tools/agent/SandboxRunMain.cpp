// hotkernel-sandbox-run: runs an untrusted kernel once in its own process and
// CUDA context, then, when asked and built with torch, the harness's five
// stages there (see optimizer/agent/include/hotkernel/optimizer/SandboxRun.h
// and Note [The harness stages in the sandbox process] in AgentHarness.h).
#include "hotkernel/optimizer/SandboxRun.h"

#if HOTKERNEL_SANDBOX_STAGES
#include "hotkernel/optimizer/AgentHarness.h"
#endif

int main() {
#if HOTKERNEL_SANDBOX_STAGES
  return hotkernel::sandboxRunHelperMain(&hotkernel::runSandboxStages);
#else
  return hotkernel::sandboxRunHelperMain();
#endif
}
