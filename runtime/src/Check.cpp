#include "hotkernel/runtime/Check.h"

namespace hotkernel::detail {

void throwError(const char* file, int line, const std::string& msg, bool internal) {
  const char* base = file;
  for (const char* p = file; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  throw Error(msg + " (" + base + ":" + std::to_string(line) + ")", internal);
}

}  // namespace hotkernel::detail
