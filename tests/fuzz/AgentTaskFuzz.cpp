// fuzz_agent_task: AgentTask::fromJson (optimizer/agent/AgentTask.cpp), the task
// document the optimizer sends an agent, with its feedback and best kernel.
#include <nlohmann/json.hpp>

#include "FuzzSupport.h"
#include "hotkernel/optimizer/AgentTask.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(fuzz::text(data, size), nullptr, /*allow_exceptions=*/false);
  AgentTask task;
  if (!fuzz::accepts([&] { task = AgentTask::fromJson(j); })) return 0;
  const std::string text = task.serialize();
  const AgentTask back = AgentTask::fromJson(nlohmann::json::parse(text));
  HK_FUZZ_ASSERT(back.serialize() == text);
  return 0;
}
