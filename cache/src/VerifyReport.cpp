#include "hotkernel/cache/VerifyReport.h"

namespace hotkernel::cache {

const char* toString(VerifyStatus status) {
  switch (status) {
    case VerifyStatus::Ok:
      return "ok";
    case VerifyStatus::HashMismatch:
      return "hash-mismatch";
    case VerifyStatus::Malformed:
      return "malformed";
    case VerifyStatus::Lost:
      return "lost";
  }
  return "unknown";
}

}  // namespace hotkernel::cache
