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

}  // namespace hotkernel
