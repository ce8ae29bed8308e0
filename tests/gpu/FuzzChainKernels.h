#pragma once
// The fusion fuzz suite's kernels on a GPU (Note [The fuzz suite on a GPU]):
// for each hot chain of a pool, a real fused kernel as the engine serves it
// (its variant's plan behind makePlanKernel), logged for the checker.
//
// Note [Fuzz kernels on a GPU]
// A chain's kernel is a point of its parameter space drawn from the chain's
// key (so pools cover the space, not only its first seed), compiled with
// NVRTC (the pool's chains in parallel). A contiguous variant's point must
// pass the chain harness, as the tuner's must before it is published; up to
// three points are drawn, and a chain none of them serves runs unfused. A
// variant with a layout has its point published as drawn, without the
// harness, with ATen's rounding when the chain has a 16-bit value (what an
// entry for it would need to pass), so the fuzz checks the strided code
// paths against eager directly. The
// checker's bound for a kernel's outputs is the harness's (Note [Chain
// harness tolerance]).

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "EngineFusion.h"
#include "FusionFuzz.h"
#include "FusionFuzzHarness.h"
#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/interpose/FusionBypass.h"
#include "hotkernel/optimizer/ChainHarness.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::fusion::fuzz::gpu {

struct FuzzKernelCounts {
  uint64_t compiled = 0, harnessed = 0, harnessFailed = 0, unharnessed = 0, noPoint = 0, compileFailed = 0;
};


// The kernel maker of FuzzOptions::makeKernels on device 0; `counts` (kept by the caller) says what it did.
inline std::function<std::vector<std::shared_ptr<FusedChainKernel>>(const std::vector<HotChain>&, LaunchLog&)>
chainKernelMaker(FuzzKernelCounts& counts) {
  return [&counts](const std::vector<HotChain>& hot, LaunchLog& log) {
    struct Candidate {
      chain::ChainVariant v;
      std::vector<chain::ChainKernelParams> points;  // drawn, in the order they are tried
      std::vector<std::future<std::string>> cubins;
    };
    const std::string arch = queryDevice(0).nvrtcArch();
    std::vector<Candidate> cands(hot.size());
    for (size_t k = 0; k < hot.size(); ++k) {
      Candidate& c = cands[k];
      try {
        c.v = engine::chainVariantOf(hot[k]);
        std::vector<chain::ChainKernelParams> space = fuzzKernelPoints(hot[k], c.v);
        const bool strided = !c.v.layout.contiguous();
        space.resize(std::min<size_t>(space.size(), strided ? 1 : 3));
        c.points = space;
      } catch (const std::exception&) {
        c.points.clear();
      }
      for (const chain::ChainKernelParams& p : c.points) {
        const chain::ChainIR ir = c.v.ir;
        const chain::ChainLayout layout = c.v.layout;
        c.cubins.push_back(std::async(std::launch::async, [ir, layout, p, arch] {
          try {
            return compileToCubin(chain::generateChainSource(ir, p, layout), "fuzz_chain.cu", arch,
                                  chain::chainCompileOptions())
                .cubin;
          } catch (const std::exception&) {
            return std::string();
          }
        }));
      }
    }
    std::vector<std::shared_ptr<FusedChainKernel>> out(hot.size());
    c10::cuda::CUDAStreamGuard streamGuard(at::cuda::getDefaultCUDAStream(0));
    for (size_t k = 0; k < hot.size(); ++k) {
      Candidate& c = cands[k];
      if (c.points.empty()) ++counts.noPoint;
      for (size_t i = 0; i < c.points.size(); ++i) {
        const std::string cubin = c.cubins[i].get();
        if (cubin.empty()) {
          ++counts.compileFailed;
          continue;
        }
        ++counts.compiled;
        if (out[k]) continue;  // the futures are drained either way
        try {
          chain::ChainPlan plan = chain::makeChainPlan(c.v, chain::chainEntryParams(c.v, c.points[i]).dump(), cubin);
          if (c.v.layout.contiguous()) {
            HarnessOptions ho;
            ho.seed = std::hash<std::string>()(hot[k].key) | 1;
            if (!runChainHarness(plan, ho).passed) {
              ++counts.harnessFailed;
              continue;
            }
            ++counts.harnessed;
          } else {
            ++counts.unharnessed;
          }
          out[k] = loggedKernel(engine::makePlanKernel(std::move(plan)), log, chainTolerance(c.v.ir));
        } catch (const std::exception&) {
          ++counts.compileFailed;
        }
      }
    }
    at::cuda::getDefaultCUDAStream(0).synchronize();
    return out;
  };
}

// Note [Stale memory in the GPU fuzz]
// Fresh device memory reads as zeros, and the caching allocator hands a block
// back with whatever its last tensor left there: a kernel (fused, replayed or
// ATen's) that reads memory nothing wrote sees zeros early in a run and old
// values, often the engine's NaN poison, only later. This fills `mib` MiB of
// the allocator's cached blocks with 0xff bytes (NaN in fp32, fp16 and bf16),
// in small-pool blocks (<= 1 MiB, where the programs' values live) and a
// quarter in large-pool ones, then frees them to the cache: every later
// allocation starts as NaN until something writes it.
inline void poisonCachingAllocator(int64_t mib) {
  FusionBypass bypass;  // not the programs' ops
  const at::TensorOptions bytes = at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0);
  std::vector<at::Tensor> blocks;
  const int64_t smallMiB = mib - mib / 4;
  for (int64_t i = 0; i < smallMiB * 2; ++i) blocks.push_back(at::empty({int64_t{512} << 10}, bytes).fill_(255));
  for (int64_t i = 0; i < mib / 4 / 8; ++i) blocks.push_back(at::empty({int64_t{8} << 20}, bytes).fill_(255));
  at::cuda::getDefaultCUDAStream(0).synchronize();
}

inline void addKernelCounts(FuzzReport& report, const FuzzKernelCounts& c) {
  report.counts["kernelsCompiled"] += c.compiled;
  report.counts["kernelsHarnessed"] += c.harnessed;
  report.counts["kernelsFailedHarness"] += c.harnessFailed;
  report.counts["kernelsUnharnessedLayout"] += c.unharnessed;
  report.counts["chainsWithoutPoint"] += c.noPoint;
  report.counts["kernelsNotBuilt"] += c.compileFailed;
}

}  // namespace hotkernel::fusion::fuzz::gpu
