#pragma once
// The ops the fusion engine takes over: the chain builder's vocabulary
// (Note [Building a chain from calls]) with, for each, the overload that
// replays it into a given output.
//
// Note [Replaying a deferred call]
// A deferred call has already returned its output tensors, so running it
// unfused later must write into them: each op's out= overload (its
// functional arguments, then `out`), called below autograd on the chain's
// backend key, computes what the functional op computes (the same
// TensorIterator kernel into an output of the same sizes, strides and
// dtype). `_to_copy` has no such overload (its out= form drops dtype,
// layout and device), and it is `empty` + `copy_` in ATen: it replays as
// `out.copy_(self)`. `cat` replays through `cat.out` with its tensor list
// rebuilt from the values as the chain took them (Note [Values as a chain
// took them]); its output is contiguous, as `cat` allocates it, so `out`
// is never resized. `native_layer_norm`, `native_group_norm`,
// `native_batch_norm` and `cudnn_batch_norm` replay through their out=
// overloads (generated: the functional op, then a copy into each out,
// shaped as the functional op returns them): every result of a deferred call
// is passed, in order (an eval batch norm's unused ones too, cuDNN's reserve
// among them: Note [cuDNN's batch norm in a chain]). An in-place op
// (Note [In-place steps]) writes its first argument, the value as the chain
// took it, whose storage its result shares: it replays as itself.

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>

#include <optional>
#include <string>
#include <vector>

namespace hotkernel::fusion {

struct DeferrableOp {
  const char* name;         // "aten::mul"
  const char* overload;     // "Tensor"; "" for none
  const char* outOverload;  // "out"; nullptr: replayed as copy_, or an in-place op as itself (Note [Replaying a deferred call])
};

// Every op the engine may defer, in a fixed order (an op's index is its id).
const std::vector<DeferrableOp>& deferrableOps();

// "aten::mul.Tensor".
std::string qualifiedName(const DeferrableOp& op);

// The resolved handles of one deferrable op (empty when the op or its replay
// overload is not in this torch).
struct ResolvedOp {
  size_t index = 0;
  std::string qualified;
  std::optional<c10::OperatorHandle> op;
  std::optional<c10::OperatorHandle> out;  // nullopt for copy_ and in-place replays
  bool inPlace = false;                    // writes its first argument: replayed as itself (Note [In-place steps])
  size_t functionalArgs = 0;               // arguments of the functional schema
  bool passing = false;                    // an op a pending chain lets pass (Note [Ops a chain lets pass])
  bool flushing = false;                   // an op that flushes first (Note [Ops that flush first])
};

// Resolves every op of the table; an op whose out= overload is missing or
// takes other arguments than the functional ones plus `out` is left out
// (and said once at debug level).
// `evalBatchNorm`: native_batch_norm and cudnn_batch_norm too
// (FusionOptions::evalBatchNorm).
//
// Note [cuDNN's batch norm in a chain]
// ATen runs an eval batch norm as cuDNN's cudnn_batch_norm where cuDNN takes
// it (a CUDA float32 input, or float16 with float32 parameters). It is
// deferred like native_batch_norm: the builder and the chain reference take
// its calls, and it replays through cudnn_batch_norm.out. Its fourth result,
// cuDNN's reserve space, is a uint8 tensor (the value table's dtype name
// "Byte", which PendingChain::take allocates it from through scalarTypeOf);
// the chain never reads it (a call reading it is refused, as one reading an
// eval batch norm's other unused results: Note [Eval BatchNorm in a chain]).
// In float32 the chain's fused arithmetic, (x - mean) * invstd * w + b, is
// not cuDNN's: its results are within the float32 batch norm bound of Note
// [Chain harness tolerance] (2^-17), not bitwise. Without `evalBatchNorm` it
// is a flushing op (Note [Ops that flush first]).
// `inPlace`: the in-place ops too (FusionOptions::inPlace).
std::vector<ResolvedOp> resolveDeferrableOps(bool evalBatchNorm = false, bool inPlace = false);

// Note [Ops a chain lets pass]
// A matrix product between two steps of a chain (LlamaMLP's up projection
// between `silu(gate)` and the product with it) would flush the chain at its
// first cuBLAS launch, and no chain spanning it would ever be learned; so
// would a residual block's shortcut convolution between the block's last
// batch norm and the residual add (a ResNet's downsampling blocks: bn3, the
// shortcut's conv and batch norm, `+=`, ReLU). The engine takes over the
// functional GEMMs (mm, addmm, bmm, baddbmm) and, when asked (below), the
// backends' convolution kernels (cuDNN's, CUDA's depthwise one, ATen's own
// 2-d one, oneDNN's) too: one whose tensor
// arguments share no storage with a value of the pending chain or of the
// learning window runs its original at once, its commands the engine's own,
// and the chain stays pending (the window open). Such an op reads only its
// arguments and writes only the fresh tensor it returns (its workspace comes
// from the caching allocator, which cannot hand out a pending value's
// storage: the chain holds it), so neither the chain's values nor the
// product depend on which runs first: a fused launch or an unfused replay
// after it computes what eager computed. One that reads a value flushes the
// chain (closes the window) first, at the dispatcher, like any other call;
// a cuDNN op never flushes from inside its library's runtime (Note [Ops that
// flush first]).
//
// The ops the engine lets pass: functional overloads with a backend kernel
// only (an out= or in-place form writes a tensor the caller chose; a
// composite's parts reach the backend kernels); the convolutions only with
// `convolutions` (FusionOptions::passConvolutions, which a serving process
// sets by default: HOTKERNEL_FUSION_PASS_CONVOLUTIONS; without it the cuDNN
// ones flush first).
std::vector<ResolvedOp> resolvePassingOps(bool convolutions = false);

// Note [Ops that flush first]
// An op whose kernels run in a library that carries its own static CUDA
// runtime (cuDNN, cuBLAS, cuBLASLt, cuSPARSELt, cuFFT) issues its first
// command from inside one of that runtime's calls: the runtime reaches the
// driver through the entry points the shim wraps, and the shim's hook then
// launches the pending chain inside that runtime call. CUDA runs it in
// order, but the nested launch is reported as part of the runtime call
// (one correlation id, two launches), and a torch.profiler session then
// fails to build its results (an internal assert on a flow started twice;
// the whole profile is lost). The engine takes these ops over to flush before their original at
// the dispatcher: the same point of the program (no Python code runs
// between the call and its first command), outside any runtime call. The
// learning window ends there too, as at a foreign command. The shim's hook
// stays the net for what reaches CUDA without such an op (a Triton kernel,
// an extension, NCCL).
//
// The ops: functional overloads with a backend kernel of their own (never a
// CompositeImplicitAutograd one, whose autograd a backend kernel would hide).
const std::vector<const char*>& flushingOpNames();

// The resolved flushing ops (indexed after the passing ops).
std::vector<ResolvedOp> resolveFlushingOps();

// Every op an engine takes over: the deferrable ops (as resolveDeferrableOps),
// then the passing and the flushing ones, each op once: an op in two lists
// (a cuDNN convolution let pass, cuDNN's batch norm with `evalBatchNorm`)
// has the first one's role; a second entry would take its calls over as the
// other role (the engine's op index keeps the last).
std::vector<ResolvedOp> resolveEngineOps(bool evalBatchNorm, bool inPlace, bool passConvolutions = false);

}  // namespace hotkernel::fusion
