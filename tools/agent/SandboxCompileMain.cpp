// hotkernel-sandbox-compile: compiles one CUDA source with NVRTC in its own
// process, for a parent that must survive whatever the compiler does.
// Protocol and limits: optimizer/agent/include/hotkernel/optimizer/SandboxCompile.h
// (Note [The sandbox compile helper], Note [Sandbox compile wire format]).

#include "hotkernel/optimizer/SandboxCompile.h"

int main(int argc, char** argv) { return hotkernel::sandboxCompileHelperMain(argc, argv); }
