// hotkernel-sandbox-run: runs an untrusted kernel once in its own process and
// CUDA context (see optimizer/agent/include/hotkernel/optimizer/SandboxRun.h).
#include "hotkernel/optimizer/SandboxRun.h"

int main() { return hotkernel::sandboxRunHelperMain(); }
