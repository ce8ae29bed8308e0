#pragma once
// The engine's side of a hot chain (EngineFusion.cpp; Note [Fused chains in
// a serving process]): its variant, whether the engine tunes it, and a plan
// as the fusion engine launches it.

#include <string>

#include <memory>

#include <c10/core/Stream.h>

#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/chain/ChainVariant.h"
#include "hotkernel/interpose/ChainCatalog.h"

namespace hotkernel::engine {

// The chain variant of `hot`: its chain, extents, device and layout (the
// build's, normalized: Note [Chain layouts]). A plan without the layout
// would read strided memory as contiguous.
chain::ChainVariant chainVariantOf(const fusion::HotChain& hot);

// `plan` behind the fusion engine's launch interface, as the engine
// publishes it: each input's own data pointer (a view's, not its
// storage's), each output's, on torch's stream of the chain; a call the
// plan refuses (launchChainPlan) is not launched and the chain replays.
std::shared_ptr<fusion::FusedChainKernel> makePlanKernel(chain::ChainPlan plan);
// Whether a CUDA stream has no work queued (cudaStreamQuery; an error: false), the serving process's
// stream probe under HOTKERNEL_FUSION_START=busy (Note [Idle streams] in FusionEngine.h).
bool cudaStreamIdle(const c10::Stream& stream);

}  // namespace hotkernel::engine
