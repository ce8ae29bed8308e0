#pragma once
// The IR of ATen's composite row ops as a chain computes them (internal to
// the chain library): the chain builder lowers a recorded call through these,
// and the named chains build the same nodes, so a recorded chain and its named
// one have one key.

#include <optional>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain::detail {

// Note [Softmax in a chain]
// aten::_softmax(x, dim, half_to_float) and aten::_log_softmax over the
// last dim become the nodes of ATen's CUDA kernels, all in float32 (their
// accscalar for 16-bit inputs, float32's own for float32): m = amax(x),
// d = x - m, e = exp(d), s = sum(e), then e / s (softmax) or d - log(s)
// (log_softmax), cast to the result's dtype (the input's, float32 with
// half_to_float). The row is reduced twice (a sum reads the max: a row
// kernel's second pass) and the result is rounded once, as ATen rounds
// it. ATen's kernels take any strides and allocate a contiguous result.
// Returns the result's node.
int addSoftmax(ChainIR& ir, int x, DType out, bool log);

// Note [LayerNorm in a chain]
// aten::native_layer_norm(x, [C], weight?, bias?, eps) over the last dim
// of a contiguous x becomes, in float32 (ATen's accumulation for 16-bit
// inputs, float32's own): mean = mean(x), d = x - mean, var = mean(d * d),
// rstd = rsqrt(var + eps), y = d * rstd (* weight) (+ bias), cast to x's
// dtype; its three results are y, mean and rstd (keepdim rows, float32 as
// ATen's CUDA kernel returns them). ATen's kernel accumulates the variance
// by Welford's method in one pass; the chain's two-pass variance differs
// from it by float32 rounding, so a fused norm stays within the chain's
// tolerance of eager, not bitwise. The mean and rstd are written only where
// referenced (a caller that keeps them: autograd, which never defers, or an
// explicit call).
struct LayerNormNodes {
  int out = -1;   // in `out`'s dtype
  int mean = -1;  // float32
  int rstd = -1;  // float32
};
// `weight`, `bias`: their nodes (any dtype, Column), or -1 for none.
LayerNormNodes addLayerNorm(ChainIR& ir, int x, int weight, int bias, double eps, DType out);

// Note [GroupNorm in a chain]
// aten::native_group_norm(x, weight?, bias?, N, C, HxW, G, eps) of a
// contiguous x [N, C, *] normalizes each group of C / G channels over its
// (C / G) * HxW elements: over the chain's group view (Note [The group view]
// in ChainBuilder.h) a group is a row, and the nodes are those of ATen's
// CUDA kernel, in float32: mean = mean(x), d = x - mean, var = mean(d * d),
// rstd = rsqrt(var + eps) with eps rounded to x's dtype first (ATen's
// static_cast<T>(eps)); mean and rstd rounded to x's dtype (ATen stores
// them so, and its affine reads them back); then with a weight or a bias
// ATen's fused parameters a = rstd * weight, b = bias - a * mean and
// y = a * x + b, without either y = (x - mean) * rstd; y cast to x's dtype.
// `weight` and `bias` are per-channel values (Full inputs of column repeat
// HxW: Note [Repeated columns]). ATen's moments are Welford's and its
// a * x + b a fused multiply-add: the fused norm is within the chain's
// tolerance of eager, not bitwise (as for LayerNorm). The mean and rstd
// results are rows (one a group, [N, G] in memory) in x's dtype.
struct GroupNormNodes {
  int out = -1;   // in `out`'s dtype
  int mean = -1;  // in x's dtype
  int rstd = -1;  // in x's dtype
};
// `weight`, `bias`: their nodes (x's dtype, Full repeated), or -1 for none.
GroupNormNodes addGroupNorm(ChainIR& ir, int x, int weight, int bias, double eps);

// Note [Eval BatchNorm in a chain]
// aten::native_batch_norm and aten::cudnn_batch_norm with training false
// (nn.BatchNorm2d in eval mode: HF's ResNet, EfficientNet) normalize each
// channel with its running statistics, no reduction: over the view of one
// channel a row (Note [The group view] with G = C) every statistic is a
// per-channel value, and the nodes are ATen's CUDA kernel's, in float32:
// y = (x - running_mean) * invstd * weight + bias, invstd = rsqrt(running_var
// + eps) (ATen computes 1 / sqrt: a rounding apart, within the chain's
// tolerance), weight and bias optional; y cast to x's dtype. The per-channel
// values may be of any float dtype (cuDNN's 16-bit inputs take float32
// parameters). Its other results (save_mean, save_invstd, cuDNN's reserve:
// empty on the CPU, save_mean and save_invstd [C] on CUDA) are unused in eval:
// no chain value, so a chain whose caller keeps one is refused (a live output
// no node computes) and replays, and a call of the chain reading one is
// refused. Returns y's node.
int addBatchNormEval(ChainIR& ir, int x, int weight, int bias, int mean, int var, double eps);

// Note [Clamp in a chain]
// clamp(x, min, max) is minimum(maximum(x, min), max), clamp_min the
// maximum alone, clamp_max the minimum alone: ATen's kernel returns a NaN x
// as it is and otherwise min(max(x, lower), upper), which maximum and
// minimum compute (NaN-propagating; a chain's constants are finite, so the
// builder refuses a NaN or infinite bound), a lower bound above the upper
// giving the upper as ATen does. hardtanh(x, min_val, max_val) (F.relu6's
// too) is ATen's clamp of its bounds. ATen converts the bounds to the tensor's
// dtype before it compares (Scalar::to<scalar_t>), so the constants are the
// bounds rounded to x's dtype: every value the chain computes is then x's
// own or a bound's, and the fused kernel computes eager's bits (fmaxf /
// fminf after the NaN checks, as ATen's CUDA functor). Bounds given as
// tensors (clamp.Tensor) are another overload, not a chain op. Returns the
// result's node; at least one bound is given.
int addClamp(ChainIR& ir, int x, std::optional<double> lower, std::optional<double> upper);

}  // namespace hotkernel::chain::detail
