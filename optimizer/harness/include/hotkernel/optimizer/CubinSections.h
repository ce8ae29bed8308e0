#pragma once
// What a cubin (an ELF image from NVRTC) keeps in writable global memory — no
// torch, no CUDA.
//
// Note [Agent kernels hold no state]
// A `__device__` variable lives in the module's global data for as long as the
// module is loaded: a kernel can count its launches there, or keep results of
// earlier calls, and so behave differently once the harness has looked away
// (Note [Timed outputs are checked] in Harness.h). The family templates hold
// no such data. An agent's kernel that does is refused before it is run. The
// rule is the ELF one: a non-empty section that is both writable (SHF_WRITE)
// and allocated (SHF_ALLOC) is module-lifetime storage (`.nv.global`,
// `.nv.global.init`, `.data`, `.bss`, `__managed__` data alike), except the
// memory of one CTA or one thread: NOBITS sections named `.nv.shared.*` or
// `.nv.local.*`, gone with the CTA and never initialized (a PROGBITS one would
// carry initial data, which no such memory has, and is refused). A non-empty
// section named like global data is refused whatever its flags say, since
// the driver's loader may go by the name. Read-only sections (`.text.*`, the
// constant banks `.nv.constant*`, `.nv.info*`) do not count.

#include <string>
#include <vector>

namespace hotkernel {

struct CubinSection {
  std::string name;
  unsigned long long size = 0;
  bool writable = false;   // SHF_WRITE
  bool allocated = false;  // SHF_ALLOC: occupies memory when the module is loaded
  bool nobits = false;     // SHT_NOBITS: no bytes in the image (zero-filled storage)
};

// Every section of a 64-bit little-endian ELF image with its size and flags.
// Throws Error when `image` is not one (truncated, wrong class or bounds).
std::vector<CubinSection> cubinSections(const std::string& image);

// Whether `section` holds writable global data (Note [Agent kernels hold no state]).
bool holdsWritableGlobalData(const CubinSection& section);

// The non-empty sections of `image` that hold writable global data (Note
// [Agent kernels hold no state]), as "name (N bytes)"; empty when none.
// Throws Error when `image` is not a 64-bit ELF image.
std::vector<std::string> writableGlobalData(const std::string& image);

}  // namespace hotkernel
