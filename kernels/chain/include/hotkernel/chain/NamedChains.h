#pragma once
// The chains HF models run in eager mode, built as the dispatcher sees them:
// the chains the tests, the harness and the benchmark name.

#include "hotkernel/chain/ChainIR.h"

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

}  // namespace hotkernel::chain
