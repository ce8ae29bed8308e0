#pragma once
// The HOTKERNEL_* variables set in this environment and what each resolves
// to, read by the code that reads them in a serving process (Config, the
// logger, the NVRTC loader, the agent and sandbox lookups): the table in
// runtime/include/hotkernel/runtime/Config.h lists them. A malformed value is
// warned about on stderr by that code, as in a serving process, and the value
// used is shown.

#include <string>
#include <vector>

namespace hotkernel::cli {

struct VariableReport {
  std::string name;      // "HOTKERNEL_HOT_CALLS"
  std::string value;     // as set
  std::string resolved;  // what hotkernel uses, in words ("50", "off: the shim loads nothing")
  bool known = true;     // false: not a variable hotkernel reads (a typo?)
};

// Every HOTKERNEL_* variable of the environment, sorted by name.
std::vector<VariableReport> hotkernelVariables();

}  // namespace hotkernel::cli
