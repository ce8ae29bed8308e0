// fuzz_command_line: splitCommandLine (optimizer/agent/Subprocess.cpp), how
// HOTKERNEL_AGENT_CMD becomes the argv of the agent's process.
#include "FuzzSupport.h"
#include "hotkernel/optimizer/Subprocess.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line = fuzz::text(data, size);
  std::vector<std::string> words;
  if (!fuzz::accepts([&] { words = splitCommandLine(line); })) return 0;
  // Every word, single-quoted (a ' inside as '\''), splits back into itself.
  std::string quoted;
  for (const std::string& w : words) {
    quoted += quoted.empty() ? "'" : " '";
    for (char c : w) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
  }
  HK_FUZZ_ASSERT(splitCommandLine(quoted) == words);
  size_t bytes = 0;
  for (const std::string& w : words) bytes += w.size();
  HK_FUZZ_ASSERT(bytes <= line.size());
  return 0;
}
