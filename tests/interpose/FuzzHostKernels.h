#pragma once
// The fusion fuzz suite's kernels on the CPU from the generator: for each hot
// chain of a pool, the chain's generated CUDA kernel compiled for the host and
// run there (Note [Chain kernels on the host] in tests/ChainHostKernels.h),
// behind the plan's launch guard, logged for the checker.
//
// Note [Generated kernels in the CPU fuzz]
// The CPU suite's own kernels (the interpreter's, and exact ones) check the
// engine; the GPU suite checks the generator's kernels, but only on a GPU.
// With these, the CPU suite runs the generated code itself inside the
// programs: the variant's layout as the engine derives it from the real
// views, a point drawn from the variant's parameter space as on a GPU (Note
// [Fuzz kernels on a GPU]: folded and kept-value kernels are in the draw),
// the plan's refusals (alignment, overlaps) on the programs' pointers, and
// the launch's argument list (chainKernelArgs) as a plan's launcher gets it.
// A pool's kernels compile in one translation unit. The checker's bound is
// the harness's (chainTolerance), as for device kernels, but for the host's
// transcendental functions (Note [Host kernels' bound]).
//
// Note [Host kernels' bound]
// The harness's bound holds where a kernel's transcendental functions are
// eager's: on a GPU both call CUDA's. On the host a kernel calls the C
// library's (erff, expf, tanhf, ...) where eager's CPU kernels call their own
// vectorized ones, an ulp or two apart, and more where the chain cancels:
// GELU's 1 + erf(x / sqrt(2)) near x = -3.5 differs by 1e-6 of |v| + 1
// between the two, beyond a float32 elementwise chain's 2^-20, and a later
// division by a scalar of 1/4 makes it 4e-6. A chain that calls such a
// function is checked at the interpreter kernel's float32 bound, 1e-4 (Note
// [Interpreter modes tolerance]); one that calls none (exact arithmetic,
// sqrt) at the harness's.

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../ChainHostKernels.h"
#include "FusionFuzz.h"
#include "FusionFuzzHarness.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/optimizer/ChainHarness.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion::fuzz::host {

// Whether a node of `ir` calls a transcendental function of the device library (Note [Host kernels' bound]).
inline bool callsLibraryFunction(const chain::ChainIR& ir) {
  for (const chain::Node& n : ir.nodes()) {
    switch (n.op) {
      case chain::OpKind::Exp: case chain::OpKind::Log: case chain::OpKind::Tanh: case chain::OpKind::Sigmoid:
      case chain::OpKind::Silu: case chain::OpKind::GeluErf: case chain::OpKind::GeluTanh: case chain::OpKind::Sin:
      case chain::OpKind::Cos: case chain::OpKind::Erf: case chain::OpKind::Log1p: case chain::OpKind::Expm1:
        return true;
      case chain::OpKind::PowScalar:  // powf unless a product, sqrt or reciprocal (Note [Chain op arithmetic])
        if (n.scalar != 2.0 && n.scalar != 3.0 && n.scalar != -2.0 && n.scalar != 0.5 && n.scalar != -0.5 &&
            n.scalar != -1.0) {
          return true;
        }
        break;
      default:
        break;
    }
  }
  return false;
}

inline double hostKernelTolerance(const chain::ChainIR& ir) {
  const double bound = chainTolerance(ir);
  return callsLibraryFunction(ir) ? std::max(bound, 1e-4) : bound;
}

struct HostKernelCounts {
  uint64_t built = 0, noPoint = 0, compileFailed = 0;
  uint64_t folded = 0;        // Note [Folded segments]
  uint64_t registerRows = 0;  // row kernels holding the row in registers (Note [Values kept across passes])
};

// One chain's host-compiled kernel behind the plan's launch guard.
class HostPlanKernel final : public FusedChainKernel {
 public:
  HostPlanKernel(std::shared_ptr<const chain::testutil::HostKernelBatch> batch, size_t index, chain::ChainPlan plan)
      : batch_(std::move(batch)), index_(index), plan_(std::move(plan)) {}

  bool launch(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
              c10::Stream) noexcept override {
    try {
      std::vector<chain::ChainInputValue> in;
      for (const at::Tensor& t : inputs) in.push_back({t.const_data_ptr(), 0.0f});
      std::vector<void*> out;
      for (const at::Tensor& t : outputs) out.push_back(t.mutable_data_ptr());
      if (!chain::chainLaunchRefusal(plan_, in, out).empty()) return false;
      batch_->runArgs(index_, chain::chainKernelArgs(plan_.variant.ir, in, out, plan_.variant.rows,
                                                     plan_.variant.cols));
      return true;
    } catch (...) {
      return false;
    }
  }
  std::string describe() const override { return plan_.description; }

 private:
  std::shared_ptr<const chain::testutil::HostKernelBatch> batch_;
  size_t index_;
  chain::ChainPlan plan_;  // variant, parameters and argument layout; no device launcher
};


// The kernel maker of FuzzOptions::makeKernels on the CPU (Note [Generated kernels in the CPU fuzz]).
inline std::function<std::vector<std::shared_ptr<FusedChainKernel>>(const std::vector<HotChain>&, LaunchLog&)>
hostKernelMaker(HostKernelCounts& counts) {
  return [&counts](const std::vector<HotChain>& hot, LaunchLog& log) {
    std::vector<std::shared_ptr<FusedChainKernel>> out(hot.size());
    std::vector<chain::testutil::HostKernel> kernels;
    std::vector<size_t> chainOf;
    for (size_t k = 0; k < hot.size(); ++k) {
      try {
        const chain::ChainVariant v{hot[k].build.chain, hot[k].build.rows, hot[k].build.cols, hot[k].device,
                                    hot[k].build.layout};
        const std::vector<chain::ChainKernelParams> points = fuzzKernelPoints(hot[k], v);
        if (points.empty()) {
          ++counts.noPoint;
          continue;
        }
        kernels.push_back({v.ir, points.front(), v.layout, v.rows, v.cols});
        chainOf.push_back(k);
      } catch (const std::exception&) {
        ++counts.noPoint;
      }
    }
    if (kernels.empty()) return out;
    std::shared_ptr<const chain::testutil::HostKernelBatch> batch;
    try {
      batch = std::make_shared<const chain::testutil::HostKernelBatch>(kernels);
    } catch (const std::exception& e) {
      counts.compileFailed += kernels.size();
      HOTKERNEL_LOG(Warn) << "fuzz: the pool's host kernels did not compile: " << e.what();
      return out;
    }
    for (size_t i = 0; i < kernels.size(); ++i) {
      const chain::testutil::HostKernel& h = kernels[i];
      chain::ChainPlan plan;
      plan.variant = chain::ChainVariant{h.ir, h.rows, h.cols, hot[chainOf[i]].device, h.layout};
      plan.params = h.params;
      plan.layout = chain::chainKernelLayout(h.ir, h.params);
      plan.spanBytes = chain::chainSpanBytes(plan.variant, plan.layout);  // as makeChainPlan makes them
      plan.description = "host chain[" + h.params.describe() + "] for " + hot[chainOf[i]].key.substr(0, 16);
      out[chainOf[i]] =
          loggedKernel(std::make_shared<HostPlanKernel>(batch, i, std::move(plan)), log, hostKernelTolerance(h.ir));
      ++counts.built;
      counts.folded += h.params.fold ? 1 : 0;
      counts.registerRows += h.ir.hasReductions() && h.params.items > 0 ? 1 : 0;
    }
    return out;
  };
}

inline void addHostKernelCounts(FuzzReport& report, const HostKernelCounts& c) {
  report.counts["hostKernelsBuilt"] += c.built;
  report.counts["chainsWithoutPoint"] += c.noPoint;
  report.counts["hostKernelsNotBuilt"] += c.compileFailed;
  report.counts["hostKernelsFolded"] += c.folded;
  report.counts["hostKernelsRegisterRows"] += c.registerRows;
}

}  // namespace hotkernel::fusion::fuzz::host
