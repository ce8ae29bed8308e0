// fuzz_sandbox_frame: decodeSandboxFrame (optimizer/agent/SandboxCompile.cpp), the
// binary frame the sandbox compile helper writes to its parent
// (Note [Sandbox compile wire format]).
#include "FuzzSupport.h"
#include "hotkernel/optimizer/SandboxCompile.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes = fuzz::text(data, size);
  SandboxFrame frame;
  if (!fuzz::accepts([&] { frame = decodeSandboxFrame(bytes); })) return 0;
  // Exactly one well-formed frame: it is what the encoder writes for its value.
  HK_FUZZ_ASSERT(encodeSandboxFrame(frame) == bytes);
  return 0;
}
