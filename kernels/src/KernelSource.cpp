#include "hotkernel/kernels/KernelSource.h"

#include <cstddef>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

// Defined by the files that kernels/CMakeLists.txt generates with
// hotkernel_embed_kernel_source(<name> ...).
#define HOTKERNEL_DECLARE_EMBEDDED(name)              \
  namespace hotkernel::kernels::detail {              \
  extern const unsigned char kEmbedded_##name[];      \
  extern const size_t kEmbeddedSize_##name;           \
  extern const char kEmbeddedPath_##name[];           \
  }

HOTKERNEL_DECLARE_EMBEDDED(softmax_lastdim)
HOTKERNEL_DECLARE_EMBEDDED(softmax_dim)
HOTKERNEL_DECLARE_EMBEDDED(rms_norm)
HOTKERNEL_DECLARE_EMBEDDED(layer_norm)
HOTKERNEL_DECLARE_EMBEDDED(cross_entropy)
HOTKERNEL_DECLARE_EMBEDDED(reduce_lastdim)
HOTKERNEL_DECLARE_EMBEDDED(reduce_dim)
HOTKERNEL_DECLARE_EMBEDDED(pad_rows)
HOTKERNEL_DECLARE_EMBEDDED(hk_prelude)

#define HOTKERNEL_EMBEDDED(name)                                                                       \
  KernelSource {                                                                                       \
    #name, detail::kEmbeddedPath_##name,                                                               \
        std::string_view(reinterpret_cast<const char*>(detail::kEmbedded_##name), detail::kEmbeddedSize_##name) \
  }

namespace hotkernel::kernels {

std::string KernelSource::sha256() const { return sha256Hex(text.data(), text.size()); }

const std::vector<KernelSource>& allKernelSources() {
  static const std::vector<KernelSource> sources = {
      HOTKERNEL_EMBEDDED(softmax_lastdim),
      HOTKERNEL_EMBEDDED(softmax_dim),
      HOTKERNEL_EMBEDDED(rms_norm),
      HOTKERNEL_EMBEDDED(layer_norm),
      HOTKERNEL_EMBEDDED(cross_entropy),
      HOTKERNEL_EMBEDDED(reduce_lastdim),
      HOTKERNEL_EMBEDDED(reduce_dim),
      HOTKERNEL_EMBEDDED(pad_rows),
      HOTKERNEL_EMBEDDED(hk_prelude),
  };
  return sources;
}

const KernelSource& kernelSource(std::string_view name) {
  for (const KernelSource& s : allKernelSources()) {
    if (s.name == name) return s;
  }
  HOTKERNEL_THROW("no embedded kernel source named '", name, "'");
}

std::string expandPrelude(std::string_view text) {
  static constexpr std::string_view kInclude = "#include \"hk_prelude.cuh\"\n";
  const size_t at = text.find(kInclude);
  if (at == std::string_view::npos) return std::string(text);
  HOTKERNEL_CHECK(text.find(kInclude, at + kInclude.size()) == std::string_view::npos,
                  "a kernel template includes hk_prelude.cuh twice");
  std::string out;
  out.reserve(text.size() + kernelSource("hk_prelude").text.size());
  out.append(text.substr(0, at));
  out.append(kernelSource("hk_prelude").text);
  out.append(text.substr(at + kInclude.size()));
  return out;
}

}  // namespace hotkernel::kernels
