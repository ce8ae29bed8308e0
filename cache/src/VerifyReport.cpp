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
    case VerifyStatus::Unsigned:
      return "unsigned";
    case VerifyStatus::BadSignature:
      return "bad-signature";
  }
  return "unknown";
}

}  // namespace hotkernel::cache
