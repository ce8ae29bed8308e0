#pragma once
// The batch_norm family: aten::native_batch_norm(input, weight, bias,
// running_mean, running_var, training, momentum, eps) -> (out, save_mean,
// save_invstd) on CUDA for the one call shape that is a row normalization:
// a training-mode batch norm of a single sample with no affine and no
// running statistics (Note [Batch norm of one sample]).
//
// Note [Batch norm of one sample]
// Weight standardization (HF's WeightStandardizedConv2d in BiT and the
// hybrid ViT / DPT backbones built on it, timm's StdConv2d) normalizes every
// convolution weight at each forward as
//   F.batch_norm(w.reshape(1, C_out, -1), None, None, training=True, momentum=0, eps)
// With N = 1 the statistics of channel c are those of its K contiguous
// elements: the batch norm of [1, C, K] is layer_norm's row normalization of
// [C, K] without weight and bias (mean, biased variance, out = (x - mean) *
// invstd), and ATen returns save_mean and save_invstd as float32 [C] for
// float32, float16 and bfloat16 inputs, what hk_layer_norm writes. So the
// family is layer_norm's kernel (layer_norm.cu, its parameters and space)
// under a family name of its own: its keys are layer_norm keys without
// options (rows = C, cols = K), and the tuner validates and times it against
// ATen's native_batch_norm itself (optimizer/search/BatchNormTuner.cpp), not
// against native_layer_norm. Any other batch norm (N > 1, eval mode, running
// statistics to update, an affine) runs ATen: the served-op trampoline's
// guard (interpose/serving/BatchNormOverride.h).

#include "hotkernel/kernels/LayerNormFamily.h"

namespace hotkernel::kernels {

inline constexpr const char* kBatchNormName = "batch_norm";

// The descriptor of batch_norm (Note [Family descriptors]): layer_norm's
// kernel, keys without options.
const FamilyDescriptor& batchNormDescriptor();

}  // namespace hotkernel::kernels
