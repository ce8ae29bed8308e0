#include "hotkernel/runtime/AttentionBackend.h"

namespace hotkernel {

const char* attentionBackendName(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::Flash:
      return "flash";
    case AttentionBackend::Efficient:
      return "efficient";
    case AttentionBackend::Cudnn:
      return "cudnn";
    case AttentionBackend::Math:
      return "math";
    case AttentionBackend::FlashCpu:
      return "flash_cpu";
  }
  return "unknown";
}

std::optional<AttentionBackend> parseAttentionBackend(const std::string& name) {
  for (AttentionBackend b : kAllAttentionBackends) {
    if (name == attentionBackendName(b)) return b;
  }
  return std::nullopt;
}

bool attentionBackendRunsOn(AttentionBackend backend, bool cuda) {
  switch (backend) {
    case AttentionBackend::Math:
      return true;
    case AttentionBackend::FlashCpu:
      return !cuda;
    default:
      return cuda;
  }
}

}  // namespace hotkernel
