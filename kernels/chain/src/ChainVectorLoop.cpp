// The elementwise kernels' loop over their vectors (ChainEmitter.h): one
// vector a thread a step, or several with their loads first (Note [Unrolled
// elementwise chains]).

#include <functional>
#include <sstream>
#include <string>

#include "ChainEmitter.h"

namespace hotkernel::chain::detail {

// Note [Unrolled elementwise chains]
// An elementwise kernel at items 0 takes one vector a thread per step of its
// grid-stride loop: each thread has one vector's loads in flight, and a small
// launch is a couple of waves of short-lived threads. At items k > 0 a
// thread takes k vectors a step, HK_THREADS vectors apart (each load still
// coalesced over the warp), and the grid is k times smaller. Where the
// thread's k vectors all exist, the step loads all k vectors' inputs into
// arrays first (one unrolled loop of loads, no branch: the compiler keeps a
// slow-path branch of a division or a libm call between one vector's loads
// and the next vector's otherwise), then computes and stores each; the
// pointers are __restrict__ (a chain's outputs are fresh tensors that no
// input aliases, and inputs are only read; a plan's launch guard refuses an
// output over an input, chainLaunchRefusal). The last, partial step runs the
// one-vector body for each vector that exists. A body whose loads depend on
// the vector's Cat segment (an unfolded chain with a Cat) has no such split:
// checkChainKernel refuses items there. Items 0 writes the kernel as before
// (same source, so cached entries stay valid); the tuner times the unrolled
// points beside the others and the variant's own timing decides (Note [Chain
// tuning]).
std::string Emitter::captured(const std::function<void()>& write) {
  std::ostringstream text;
  os_.swap(text);
  write();
  os_.swap(text);
  return text.str();
}

void Emitter::positionEnd() {
  if (!gather_) return;
  position_ = os_.str();
  os_.str("");
}

void Emitter::emitVectorLoad(const std::string& indent, const std::string& name, const std::string& call) {
  if (gather_) {
    loads_.push_back({false, name, call});
    return;
  }
  os_ << indent << "float " << name << "[HK_VEC];\n" << indent << call << ", " << name << ");\n";
}

void Emitter::emitScalarLoad(const std::string& indent, const std::string& name, const std::string& call) {
  if (gather_) {
    loads_.push_back({true, name, call});
    return;
  }
  os_ << indent << "const float " << name << " = " << call << ";\n";
}

void Emitter::vectorLoop(const std::function<void()>& perVector) {
  const std::string one = captured(perVector);
  if (!unrolled()) {
    os_ << "  for (long long hk_v = static_cast<long long>(blockIdx.x) * HK_THREADS + threadIdx.x; hk_v < hk_nvec;\n"
           "       hk_v += static_cast<long long>(gridDim.x) * HK_THREADS) {\n"
        << one << "  }\n";
    return;
  }
  // The full step: the position and loads of every vector, then the position and the rest of every vector.
  gather_ = true;
  item_ = "[hk_u]";
  loads_.clear();
  position_.clear();
  const std::string rest = captured(perVector);
  gather_ = false;
  item_.clear();
  const char* head = "#pragma unroll\n      for (int hk_u = 0; hk_u < HK_ITEMS; ++hk_u) {\n"
                     "        const long long hk_v = hk_t + hk_u * HK_THREADS;\n";
  os_ << "  for (long long hk_t = static_cast<long long>(blockIdx.x) * (HK_THREADS * HK_ITEMS) + threadIdx.x;\n"
         "       hk_t < hk_nvec; hk_t += static_cast<long long>(gridDim.x) * (HK_THREADS * HK_ITEMS)) {\n"
         "    if (hk_t + (HK_ITEMS - 1) * HK_THREADS < hk_nvec) {\n";
  for (const VectorLoad& l : loads_) {
    os_ << "      float " << l.name << (l.scalar ? "[HK_ITEMS];\n" : "[HK_ITEMS][HK_VEC];\n");
  }
  os_ << head << position_;
  for (const VectorLoad& l : loads_) {
    if (l.scalar) {
      os_ << "        " << l.name << "[hk_u] = " << l.call << ";\n";
    } else {
      os_ << "        " << l.call << ", " << l.name << "[hk_u]);\n";
    }
  }
  os_ << "      }\n" << head << position_ << rest << "      }\n"
      << "    } else {\n"
         "#pragma unroll 1\n"
         "      for (int hk_u = 0; hk_u < HK_ITEMS && hk_t + hk_u * HK_THREADS < hk_nvec; ++hk_u) {\n"
         "        const long long hk_v = hk_t + hk_u * HK_THREADS;\n"
      << one << "      }\n    }\n  }\n";
}

}  // namespace hotkernel::chain::detail
