#pragma once
// NVTX ranges around hotkernel's kernel launches, in the "hotkernel" domain.
//
// Note [NVTX ranges around plan launches]
// Each launch of a plan (CudaKernelLauncher::launch and launchArgs: a served
// op's plan, a fused chain's plan, and the tuner's timed runs of a plan) runs
// inside an NVTX push/pop range named by the plan's description (family,
// parameter point and variant, e.g. "softmax[threads=256 vec=8 items=4
// (register-resident)] for dtype=bf16;rows=4096;cols=32000"). Nsight Systems
// then shows which hotkernel kernel ran with which configuration, on the CPU
// thread and projected onto the kernel's GPU row. The name is registered
// once, when the launcher loads (nvtxDomainRegisterStringA); a launch does no
// string work: a push with the prepared attributes, the launch, a pop. The
// harness's launches at other geometries (launchWith, launchStatus) carry no
// range: their kernels still show under their hk_* names.
//
// NVTX3 is header-only (the CUDA toolkit's nvtx3/nvToolsExt.h). Its first
// call looks for a tool: NVTX_INJECTION64_PATH (what nsys sets), or a tool
// linked statically into the program (InitializeInjectionNvtx2_fnptr); that
// variable is read by NVTX itself, not by Config. With no tool, every later
// call is a load and a branch on a null function pointer. HOTKERNEL_NVTX=0
// turns ranges off for launchers loaded from then on: no domain is created,
// no name registered, and a launch tests one pointer. The domain is created
// once and never destroyed (a launch on another thread may still use it).

#include <memory>
#include <string>

namespace hotkernel {

// Whether launchers loaded from now on put ranges around their launches:
// HOTKERNEL_NVTX's value until setNvtxRanges is called. Thread-safe.
bool nvtxRangesEnabled();
// Overrides HOTKERNEL_NVTX for launchers loaded from now on (tests and
// benchmarks compare both settings in one process); launchers already loaded
// keep theirs.
void setNvtxRanges(bool enabled);

// A range name registered once in the "hotkernel" domain, with the event
// attributes a push needs prepared. Immutable once made: pushes and pops from
// any thread read it without a lock.
class NvtxRangeName {
 public:
  NvtxRangeName();  // names no range: push and pop do nothing
  ~NvtxRangeName();
  NvtxRangeName(NvtxRangeName&&) noexcept;
  NvtxRangeName& operator=(NvtxRangeName&&) noexcept;

  // `name` registered in the domain when nvtxRangesEnabled(), else no range.
  static NvtxRangeName registered(const std::string& name);

  bool active() const { return impl_ != nullptr; }
  // Opens / closes a range on the calling thread (NVTX's per-thread stack).
  void push() const noexcept;
  void pop() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<const Impl> impl_;
};

// One range for a scope: pushed at construction, popped at destruction; nothing
// when the name is not active.
class NvtxScope {
 public:
  explicit NvtxScope(const NvtxRangeName& name) noexcept : name_(name.active() ? &name : nullptr) {
    if (name_) name_->push();
  }
  ~NvtxScope() {
    if (name_) name_->pop();
  }
  NvtxScope(const NvtxScope&) = delete;
  NvtxScope& operator=(const NvtxScope&) = delete;

 private:
  const NvtxRangeName* name_;
};

}  // namespace hotkernel
