// fuzz_sandbox_request: SandboxCompileRequest::fromJsonText
// (optimizer/agent/SandboxCompile.cpp), the request the compile helper reads
// from its parent (Note [Sandbox compile wire format]).
#include "FuzzSupport.h"
#include "hotkernel/optimizer/SandboxCompile.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SandboxCompileRequest request;
  if (!fuzz::accepts([&] { request = SandboxCompileRequest::fromJsonText(fuzz::text(data, size)); })) return 0;
  const std::string text = request.toJsonText();
  const SandboxCompileRequest back = SandboxCompileRequest::fromJsonText(text);
  HK_FUZZ_ASSERT(back.toJsonText() == text);
  HK_FUZZ_ASSERT(back.source == request.source && back.options == request.options);
  return 0;
}
