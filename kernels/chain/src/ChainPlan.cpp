// A fused chain kernel made from a cache entry, and its guarded launch (ChainPlan.h).

#include "hotkernel/chain/ChainPlan.h"

#include <cstdint>

#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

// Bytes a tensor argument spans in the variant's layout (tensor argument
// `tensorArg` of chainTensorArgs: Note [Chain layouts]).
uint64_t bytesOf(const ChainVariant& v, const ChainArg& arg, size_t tensorArg) {
  const int64_t elements = layoutSpan(v.ir, v.layout, tensorArg, v.rows, v.cols);
  return static_cast<uint64_t>(elements) * kernels::elementSize(arg.dtype);
}

bool overlaps(const void* a, uint64_t aBytes, const void* b, uint64_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

}  // namespace

ChainPlan makeChainPlan(const ChainVariant& v, const std::string& paramsText, const std::string& cubin) {
  const std::optional<ChainKernelParams> p = readChainEntry(paramsText, v);
  HOTKERNEL_CHECK(p.has_value(), "a keep_aten chain entry has no kernel to load");
  ChainPlan plan;
  plan.variant = v;
  plan.params = *p;
  plan.layout = chainKernelLayout(v.ir, *p);
  plan.description = std::string(kChainFamily) + "[" + p->describe() + "] for " + chainVariantString(v);
  const LaunchGeometry g = chainLaunchGeometry(v.ir, *p, v.rows, v.cols, v.layout);
  plan.launcher = CudaKernelLauncher::load(v.device, cubin, kChainKernelName,
                                           ::hotkernel::LaunchGeometry{g.gridX, g.blockX, g.sharedBytes}, 16,
                                           plan.description);
  return plan;
}

std::string chainLaunchRefusal(const ChainPlan& plan, const std::vector<ChainInputValue>& inputs,
                               const std::vector<void*>& outputs) {
  size_t in = 0, out = 0;
  for (const ChainArg& a : plan.layout) {
    if (a.kind == ChainArg::Kind::Input) {
      if (in >= inputs.size()) return "too few inputs";
      const void* p = inputs[in++].pointer;
      if (p == nullptr) return "input " + std::to_string(in - 1) + " is null";
      if (reinterpret_cast<uintptr_t>(p) % a.alignmentBytes != 0) {
        return "input " + std::to_string(in - 1) + " is not aligned to " + std::to_string(a.alignmentBytes) +
               " bytes";
      }
    } else if (a.kind == ChainArg::Kind::ScalarInput) {
      if (in >= inputs.size()) return "too few inputs";
      ++in;
    } else if (a.kind == ChainArg::Kind::Output) {
      if (out >= outputs.size()) return "too few outputs";
      const void* p = outputs[out++];
      if (p == nullptr) return "output " + std::to_string(out - 1) + " is null";
      if (reinterpret_cast<uintptr_t>(p) % a.alignmentBytes != 0) {
        return "output " + std::to_string(out - 1) + " is not aligned to " + std::to_string(a.alignmentBytes) +
               " bytes";
      }
    }
  }
  if (in != inputs.size() || out != outputs.size()) {
    return "the chain takes " + std::to_string(in) + " inputs and " + std::to_string(out) + " outputs, got " +
           std::to_string(inputs.size()) + " and " + std::to_string(outputs.size());
  }
  // Every output's span against every input's and every other output's.
  const size_t tensorInputs = chainTensorArgs(plan.variant.ir).size() - outputs.size();
  size_t o = 0;
  for (const ChainArg& a : plan.layout) {
    if (a.kind != ChainArg::Kind::Output) continue;
    const void* p = outputs[o];
    const uint64_t bytes = bytesOf(plan.variant, a, tensorInputs + o);
    size_t i = 0, q = 0, t = 0;
    for (const ChainArg& b : plan.layout) {
      if (b.kind == ChainArg::Kind::Input) {
        if (overlaps(p, bytes, inputs[i].pointer, bytesOf(plan.variant, b, t))) {
          return "output " + std::to_string(o) + " overlaps input " + std::to_string(i);
        }
      } else if (b.kind == ChainArg::Kind::Output && q != o &&
                 overlaps(p, bytes, outputs[q], bytesOf(plan.variant, b, tensorInputs + q))) {
        return "output " + std::to_string(o) + " overlaps output " + std::to_string(q);
      }
      if (b.kind == ChainArg::Kind::Input || b.kind == ChainArg::Kind::ScalarInput) ++i;
      if (b.kind == ChainArg::Kind::Input) ++t;
      if (b.kind == ChainArg::Kind::Output) ++q;
    }
    ++o;
  }
  return "";
}

bool launchChainPlan(const ChainPlan& plan, const std::vector<ChainInputValue>& inputs,
                     const std::vector<void*>& outputs, void* stream, std::string* refusal) noexcept {
  try {
    std::string why = plan.launcher ? chainLaunchRefusal(plan, inputs, outputs) : "the plan has no kernel loaded";
    if (why.empty() &&
        !plan.launcher->launchArgs(
            chainKernelArgs(plan.variant.ir, inputs, outputs, plan.variant.rows, plan.variant.cols), stream)) {
      why = "the launch failed";
    }
    if (refusal != nullptr) *refusal = why;
    return why.empty();
  } catch (const std::exception& e) {  // nothing leaves a launch (Note [A chain plan from a cache entry])
    if (refusal != nullptr) *refusal = e.what();
  } catch (...) {
    if (refusal != nullptr) *refusal = "an unknown error";
  }
  return false;
}

}  // namespace hotkernel::chain
