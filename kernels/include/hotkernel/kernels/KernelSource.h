#pragma once
// The CUDA C++ templates of the kernel families, embedded into the library at
// build time (kernels/cmake/EmbedSource.cmake), so a process compiles exactly
// the source it was built with and never reads kernel files at run time.

#include <string>
#include <string_view>
#include <vector>

namespace hotkernel::kernels {

struct KernelSource {
  std::string_view name;  // "softmax_lastdim"
  std::string_view path;  // "kernels/softmax/softmax_lastdim.cu", relative to the repository
  std::string_view text;  // the whole file; lives as long as the process

  // Lowercase hex SHA-256 of `text`: the source's part of a cache key.
  std::string sha256() const;
};

// The embedded source called `name`. Throws Error for an unknown name.
const KernelSource& kernelSource(std::string_view name);

// Every embedded source, in a fixed order.
const std::vector<KernelSource>& allKernelSources();

// `text` with its line `#include "hk_prelude.cuh"` replaced by the embedded
// prelude (kernels/common/hk_prelude.cuh: what the family templates share),
// so that the result is one self-contained source for NVRTC or an agent.
// Text without that line comes back unchanged; a second such line is an Error.
std::string expandPrelude(std::string_view text);

}  // namespace hotkernel::kernels
