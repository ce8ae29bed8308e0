// A fused chain kernel made from a cache entry, and its guarded launch (ChainPlan.h).

#include "hotkernel/chain/ChainPlan.h"

#include <cstdint>

#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

bool overlaps(const void* a, uint64_t aBytes, const void* b, uint64_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

}  // namespace

std::vector<uint64_t> chainSpanBytes(const ChainVariant& v, const std::vector<ChainArg>& layout) {
  size_t outputs = 0;
  for (const ChainArg& a : layout) outputs += a.kind == ChainArg::Kind::Output ? 1 : 0;
  const size_t tensorInputs = chainTensorArgs(v.ir).size() - outputs;  // Note [Chain layouts]: inputs, then outputs
  std::vector<uint64_t> spans;
  spans.reserve(layout.size());
  size_t t = 0, o = 0;
  for (const ChainArg& a : layout) {
    if (a.kind != ChainArg::Kind::Input && a.kind != ChainArg::Kind::Output) {  // a Scalar input, rows, cols
      spans.push_back(0);
      continue;
    }
    const size_t tensorArg = a.kind == ChainArg::Kind::Input ? t++ : tensorInputs + o++;
    const int64_t elements = layoutSpan(v.ir, v.layout, tensorArg, v.rows, v.cols);
    spans.push_back(static_cast<uint64_t>(elements) * kernels::elementSize(a.dtype));
  }
  return spans;
}

ChainPlan makeChainPlan(const ChainVariant& v, const std::string& paramsText, const std::string& cubin) {
  const std::optional<ChainKernelParams> p = readChainEntry(paramsText, v);
  HOTKERNEL_CHECK(p.has_value(), "a keep_aten chain entry has no kernel to load");
  ChainPlan plan;
  plan.variant = v;
  plan.params = *p;
  plan.layout = chainKernelLayout(v.ir, *p, v.layout);
  plan.spanBytes = chainSpanBytes(v, plan.layout);
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
  std::vector<uint64_t> computed;
  if (plan.spanBytes.size() != plan.layout.size()) computed = chainSpanBytes(plan.variant, plan.layout);
  const std::vector<uint64_t>& spans = computed.empty() ? plan.spanBytes : computed;
  size_t o = 0;
  for (size_t k = 0; k < plan.layout.size(); ++k) {
    if (plan.layout[k].kind != ChainArg::Kind::Output) continue;
    const void* p = outputs[o];
    size_t i = 0, q = 0;
    for (size_t m = 0; m < plan.layout.size(); ++m) {
      const ChainArg& b = plan.layout[m];
      if (b.kind == ChainArg::Kind::Input) {
        if (overlaps(p, spans[k], inputs[i].pointer, spans[m])) {
          return "output " + std::to_string(o) + " overlaps input " + std::to_string(i);
        }
      } else if (b.kind == ChainArg::Kind::Output && q != o && overlaps(p, spans[k], outputs[q], spans[m])) {
        return "output " + std::to_string(o) + " overlaps output " + std::to_string(q);
      }
      if (b.kind == ChainArg::Kind::Input || b.kind == ChainArg::Kind::ScalarInput) ++i;
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
