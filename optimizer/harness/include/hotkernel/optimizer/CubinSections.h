#pragma once
// What a cubin (an ELF image from NVRTC) keeps in writable global memory — no
// torch, no CUDA.
//
// Note [Agent kernels hold no state]
// A `__device__` variable lives in the module's global data for as long as the
// module is loaded: a kernel can count its launches there, or keep results of
// earlier calls, and so behave differently once the harness has looked away
// (Note [Timed outputs are checked] in Harness.h). The family templates hold
// no such data. An agent's kernel that does (a non-empty `.nv.global`,
// `.nv.global.init`, `.data` or `.bss` section) is refused before it is run.
// Shared memory (`.nv.shared.*`, per CTA, gone with the CTA), local memory and
// the constant banks do not count.

#include <string>
#include <vector>

namespace hotkernel {

struct CubinSection {
  std::string name;
  unsigned long long size = 0;
  bool writable = false;  // SHF_WRITE
};

// Every section of a 64-bit little-endian ELF image with its size and flags.
// Throws Error when `image` is not one (truncated, wrong class or bounds).
std::vector<CubinSection> cubinSections(const std::string& image);

// The non-empty sections of `image` that hold writable global data (Note
// [Agent kernels hold no state]), as "name (N bytes)"; empty when none.
// Throws Error when `image` is not a 64-bit ELF image.
std::vector<std::string> writableGlobalData(const std::string& image);

}  // namespace hotkernel
