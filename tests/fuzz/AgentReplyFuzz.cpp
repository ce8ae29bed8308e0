// fuzz_agent_reply: AgentReply::parse (optimizer/agent/AgentReply.cpp), the
// validation of an external agent's stdout (rules R1-R8, tools/agent/PROTOCOL.md).
#include "FuzzSupport.h"
#include "hotkernel/optimizer/AgentTask.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  AgentReply reply;
  if (!fuzz::accepts([&] { reply = AgentReply::parse(fuzz::text(data, size)); })) return 0;
  const AgentReply back = AgentReply::parse(reply.toJson().dump());
  HK_FUZZ_ASSERT(back.toJson() == reply.toJson());
  HK_FUZZ_ASSERT(back.source == reply.source && back.kernelName == reply.kernelName);
  HK_FUZZ_ASSERT(isCIdentifier(reply.kernelName));
  HK_FUZZ_ASSERT(reply.launch.block >= kAgentMinBlock && reply.launch.block <= kAgentMaxBlock);
  HK_FUZZ_ASSERT(reply.launch.geometry(1).gridX == 1u);
  return 0;
}
