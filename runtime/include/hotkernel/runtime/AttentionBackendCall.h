#pragma once
// One call of an ATen attention backend (AttentionBackend.h) as
// aten::scaled_dot_product_attention's composite makes it for a call without
// a mask or dropout: the attention override and the attention tuner run
// backends through these functions only.

#include <ATen/core/Tensor.h>

#include <optional>

#include "hotkernel/runtime/AttentionBackend.h"

namespace hotkernel {

// `backend`'s output for query [B, Hq, L, E], key [B, Hkv, S, E] and value
// [B, Hkv, S, Ev] (is_causal, scale and enable_gqa as the call gives them; no
// mask, no dropout, no log-sum-exp). Throws what the backend throws: a backend
// refuses what it does not take (dtypes, head dims, grouped heads, strides).
at::Tensor runAttentionBackend(AttentionBackend backend, const at::Tensor& query, const at::Tensor& key,
                               const at::Tensor& value, bool isCausal, std::optional<double> scale, bool enableGqa);

// Whether the process's switches let PyTorch itself use `backend` now
// (torch.backends.cuda.enable_flash_sdp and its siblings, which the
// torch.nn.attention.sdpa_kernel context sets), and its priority order is the
// one it had at the first call of rememberAttentionDefaults (the override's
// install, inside `import torch`): a process that names its backends or
// their order keeps PyTorch's own choice (Note [The user's backend switches]
// in interpose/serving/SdpaOverride.cpp).
bool attentionBackendAllowed(AttentionBackend backend);
void rememberAttentionDefaults();

}  // namespace hotkernel
