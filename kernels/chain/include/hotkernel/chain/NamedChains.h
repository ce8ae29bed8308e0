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

}  // namespace hotkernel::chain
