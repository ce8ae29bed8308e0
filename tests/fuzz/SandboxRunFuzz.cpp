// fuzz_sandbox_run: the sandbox run helper's wire format
// (optimizer/agent/SandboxRun.cpp): the request line the helper reads
// (parseSandboxRunHeader) and the reply line its parent reads
// (parseSandboxRunReply). The input's first byte picks which: odd, the reply
// (2: the helper exited 0; 4: the five harness stages were asked for); even,
// the request (version 1 or 2, Note [Sandbox run wire format]).
#include "FuzzSupport.h"
#include "hotkernel/optimizer/SandboxRun.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text = fuzz::text(data + 1, size - 1);
  if (data[0] & 1) {
    // The parent: never throws, whatever the helper wrote.
    const bool expectStages = (data[0] & 4) != 0;
    const SandboxRunResult r =
        parseSandboxRunReply(text, /*helperSucceeded=*/(data[0] & 2) != 0, "exit 0", expectStages);
    HK_FUZZ_ASSERT(r.ok || !r.error.empty());
    // Stages asked for: ok only with the five, in order, each passed.
    if (expectStages && r.ok) {
      HK_FUZZ_ASSERT(r.stages.size() == sandboxStageNames().size());
      for (size_t i = 0; i < r.stages.size(); ++i) {
        HK_FUZZ_ASSERT(r.stages[i].passed && r.stages[i].stage == sandboxStageNames()[i]);
      }
    }
    HK_FUZZ_ASSERT(!r.failedInStage() || (!r.ok && !r.stages.back().passed));
    return 0;
  }
  SandboxRunHeader h;
  if (!fuzz::accepts([&] { h = parseSandboxRunHeader(text); })) return 0;
  const SandboxRunRequest& r = h.request;
  HK_FUZZ_ASSERT(r.rows >= 1 && r.cols >= 1 && (r.elementSize == 2 || r.elementSize == 4));
  HK_FUZZ_ASSERT(h.cubinBytes <= kSandboxRunMaxCubinBytes);
  HK_FUZZ_ASSERT(sandboxRunInputBytes(r) / static_cast<size_t>(r.elementSize) / static_cast<size_t>(r.cols) ==
                 static_cast<size_t>(r.rows));
  // What the parent writes for the request, the helper reads back to the same request.
  SandboxRunRequest withCubin = r;
  withCubin.cubin.assign(h.cubinBytes, '\0');
  const SandboxRunHeader back = parseSandboxRunHeader(sandboxRunHeaderLine(withCubin));
  HK_FUZZ_ASSERT(sandboxRunHeaderLine(back.request) == sandboxRunHeaderLine(r) && back.cubinBytes == h.cubinBytes);
  HK_FUZZ_ASSERT(back.request.harness.has_value() == r.harness.has_value());
  if (r.harness) {
    HK_FUZZ_ASSERT(back.request.harness->launch == r.harness->launch && back.request.harness->seed == r.harness->seed);
  }
  return 0;
}
