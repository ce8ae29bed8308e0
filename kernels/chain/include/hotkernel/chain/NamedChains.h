#pragma once
// The chains HF models run in eager mode, built as the dispatcher sees them:
// the chains the tests, the harness and the benchmark name.

#include <cstdint>
#include <vector>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain {

// LlamaRMSNorm.forward: x.to(f32); v = x.pow(2).mean(-1, keepdim=True);
// x * rsqrt(v + eps); weight * x.to(dtype). Inputs (x Full, weight Column),
// one output (dtype); without weight the cast is the output.
ChainIR rmsNormChain(DType dtype, double eps, bool weight = true);

// LlamaMLP's activation: silu(gate) * up. Inputs (gate, up), both Full.
ChainIR swigluChain(DType dtype);

// GPT-2's NewGELUActivation as its eight ops:
// 0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3.0)))).
ChainIR newGeluChain(DType dtype);

// A residual add and the cast of the sum (the next norm's x.to(f32)):
// s = residual + h (dtype), outputs (s, s.to(to)).
ChainIR residualAddCastChain(DType dtype, DType to);

// HF's apply_rotary_pos_emb for one of q or k (`x` below), as the
// dispatcher delivers it (bf16 / fp16, x of [batch, heads, seq, headDim]
// viewed from the projection's [batch, seq, heads * headDim] by transpose(1,
// 2); cos and sin of [batch, 1, seq, headDim] by unsqueeze(1)):
//   mul(x, cos); neg(x2); cat([neg, x1], -1); mul(cat, sin); add(x*cos, cat*sin)
// where x1 = x[..., :headDim/2] and x2 = x[..., headDim/2:] are views (no
// call): they reach the chain as inputs of their own. Inputs in order of
// first use: (x, cos, x2, x1, sin); the output is x*cos + rotate_half(x)*sin.
// A width-fixed chain of width headDim (Note [Chain column extents]).
ChainIR rotaryChain(DType dtype, int64_t headDim);

struct RotaryShape {
  int64_t batch = 1;
  int64_t heads = 32;
  int64_t seq = 4096;
  int64_t headDim = 128;
};

// The recorded calls and every value's metadata, as the dispatcher
// delivers them (value ids: x 1, cos 2, sin 3, x1 4, x2 5; results from 6;
// the output is 10), with the result strides ATen allocates.
struct RecordedChain {
  std::vector<RecordedCall> calls;
  TensorMetas metas;
};
RecordedChain rotaryRecording(DType dtype, const RotaryShape& shape);

// The rotary chain's variant extents and its normalized layout (Note [Chain layouts]).
int64_t rotaryRows(const RotaryShape& shape);
ChainLayout rotaryLayout(const RotaryShape& shape);

// softmax (or log_softmax) over the last dim of x as aten::_softmax computes
// it (Note [Softmax in a chain]): x's dtype in and out. Input x, Full.
ChainIR softmaxChain(DType dtype, bool log = false);

// GPT-2's and BERT's `layer_norm(x + residual)` over the last dim, the sum
// kept (GPT-2 adds it again after the MLP), as the chain builder lowers
// aten::native_layer_norm (Note [LayerNorm in a chain]):
//   add(x, residual); native_layer_norm(sum, [C], weight?, bias?, eps)
// Inputs (x, residual) Full, then weight and bias Column, all of `dtype`;
// outputs (sum, out) of `dtype` (the mean and rstd dropped).
ChainIR residualLayerNormChain(DType dtype, double eps, bool weight = true, bool bias = true);

// The attention scores of HF's eager attention (GPT-2, BERT, ViT):
// softmax(scores * scale + mask, dim=-1), scores [batch, heads, queries,
// keys] (the q @ k^T bmm's result), mask [batch, 1, queries, keys] (HF's
// 4-d additive mask, broadcast over the heads), both of `dtype`:
//   mul(scores, scale); add(scaled, mask); _softmax(sum, -1, False)
// Inputs (scores, mask), both Full; one output of `dtype`.
ChainIR attentionSoftmaxChain(DType dtype, double scale);

struct AttentionShape {
  int64_t batch = 16;
  int64_t heads = 12;
  int64_t queries = 512;
  int64_t keys = 512;
};

// Its recorded calls (value ids: scores 1, mask 2; results 3, 4, 5) and its
// variant's rows and normalized layout (the mask's head stride is 0).
RecordedChain attentionSoftmaxRecording(DType dtype, const AttentionShape& shape, double scale);
int64_t attentionRows(const AttentionShape& shape);
ChainLayout attentionSoftmaxLayout(const AttentionShape& shape);

// A contiguous copy of a value (aten::clone: Note [Relayout copies]): input
// x, Full; its output x's dtype.
ChainIR relayoutCopyChain(DType dtype);

// The layout of matmul's reshape of one head view of a fused QKV projection:
// the projection [batch, seq, parts * heads * headDim] (parts 3 for GPT-2's
// c_attn) narrowed to one part, viewed [batch, seq, heads, headDim] and
// transposed to [batch, heads, seq, headDim], copied contiguous. Rows batch *
// heads * seq, cols headDim.
ChainLayout headViewCopyLayout(const RotaryShape& shape, int64_t parts);

// The transposed layout (Note [Transposed layouts]) of matmul's reshape of
// k^T in HF's eager attention: the head view above transposed to [batch,
// heads, headDim, seq] (strides seq * parts * heads * headDim, headDim, 1,
// parts * heads * headDim), copied contiguous. Rows batch * heads *
// headDim, cols seq.
ChainLayout headTransposeCopyLayout(const RotaryShape& shape, int64_t parts);

// An nn.GroupNorm and its activation as diffusers' ResnetBlock2D (SiLU) and
// HF's BiT (ReLU) run them, as the chain builder lowers
// aten::native_group_norm over its group view (Note [The group view]):
//   native_group_norm(x, weight, bias, N, C, HxW, G, eps); act(out)
// `act` Silu or Relu (a unary op whose IR name is ATen's). Inputs (x Full, then
// weight and bias Full of column repeat HxW), all of `dtype`; one output,
// act(out), of `dtype` (the norm's result, mean and rstd dropped).
ChainIR groupNormActChain(DType dtype, double eps, OpKind act);

struct GroupNormShape {
  int64_t batch = 2;
  int64_t channels = 320;
  int64_t hw = 4096;  // 64 x 64
  int64_t groups = 32;
};

// Its recorded calls (value ids: x 1, weight 2, bias 3; the norm's results
// 4, 5, 6; the activation's 7), x as [batch, channels, hw] (a 3-d input:
// HxW is the product of the spatial dims, one or several), and the
// variant's extents and normalized layout: rows batch * groups, cols
// channels / groups * hw.
RecordedChain groupNormActRecording(DType dtype, const GroupNormShape& shape, double eps, OpKind act);
int64_t groupNormRows(const GroupNormShape& shape);
int64_t groupNormCols(const GroupNormShape& shape);
ChainLayout groupNormActLayout(const GroupNormShape& shape);

// An eval nn.BatchNorm2d and its activation as HF's ResNet (ReLU) and
// EfficientNet (SiLU) run them, as the builder lowers
// aten::native_batch_norm(x, weight, bias, running_mean, running_var,
// training=False, momentum, eps) over the view of one channel a row (Note
// [Eval BatchNorm in a chain]): act(out). Inputs (x, then weight, bias,
// running mean and running variance, Full of column repeat HxW), all of
// `dtype`; one output.
ChainIR batchNormActChain(DType dtype, double eps, OpKind act);

// Its recorded calls (value ids: x 1, weight 2, bias 3, running mean 4,
// running variance 5; the norm's results 6, 7, 8 (7 and 8 empty, cuDNN's
// 9 too); the activation's 10), x as [batch, channels, hw], through
// cudnn_batch_norm (four results) or native_batch_norm; and its variant's
// normalized layout: rows batch * channels, cols hw.
RecordedChain batchNormActRecording(DType dtype, const GroupNormShape& shape, double eps, OpKind act, bool cudnn);
ChainLayout batchNormActLayout(const GroupNormShape& shape);

}  // namespace hotkernel::chain
