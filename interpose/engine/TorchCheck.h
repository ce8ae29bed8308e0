#pragma once
// Whether this process's torch is the one libhotkernel.so was built for (Note
// [The process's torch] in runtime/TorchVersion.h).

#include <string>

namespace hotkernel {

// "" when it is, or when the process's version cannot be read (reported once
// in the log, then trusted); else one line saying what differs.
std::string processTorchMismatch();

}  // namespace hotkernel
