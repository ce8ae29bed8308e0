#pragma once
// The argument list of one kernel launch, for any kernel ABI.
//
// Note [Kernel argument lists]
// The softmax family's ABI is (in, out, rows, cols) (RowKernelArgs); the norm
// families add column arrays, statistics outputs and eps. KernelArgs holds up
// to kMaxArgs values by value (pointers, 64-bit integers, floats), in the
// order of the kernel's parameters, and gives cuLaunchKernel the array of
// pointers to them it wants. No allocation: the trampolines build one per
// call. A float is stored in the first 4 bytes of its slot, which is what
// cuLaunchKernel reads for a 4-byte parameter. Tests read the values back
// (pointerAt, int64At, floatAt) to play a kernel on the host.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hotkernel {

class KernelArgs {
 public:
  static constexpr size_t kMaxArgs = 20;
  enum class Kind : uint8_t { Pointer, Int64, Float32 };

  KernelArgs() = default;

  // Appenders return *this; one past kMaxArgs marks the list invalid (valid() == false).
  KernelArgs& pointer(const void* p) { return put(Kind::Pointer, &p, sizeof p); }
  KernelArgs& int64(int64_t v) {
    const long long ll = v;
    return put(Kind::Int64, &ll, sizeof ll);
  }
  KernelArgs& float32(float v) { return put(Kind::Float32, &v, sizeof v); }

  bool valid() const { return !overflow_; }
  size_t size() const { return size_; }
  Kind kindAt(size_t i) const { return kinds_[i]; }

  const void* pointerAt(size_t i) const {
    const void* p;
    std::memcpy(&p, &slots_[i], sizeof p);
    return p;
  }
  int64_t int64At(size_t i) const {
    long long v;
    std::memcpy(&v, &slots_[i], sizeof v);
    return v;
  }
  float float32At(size_t i) const {
    float v;
    std::memcpy(&v, &slots_[i], sizeof v);
    return v;
  }

  // Fills `params` (kMaxArgs entries) with a pointer to each argument, as
  // cuLaunchKernel's kernelParams. The pointers refer into this object.
  void fillParams(void** params) const {
    for (size_t i = 0; i < size_; ++i) params[i] = const_cast<uint64_t*>(&slots_[i]);
  }

 private:
  KernelArgs& put(Kind kind, const void* value, size_t bytes) {
    if (size_ == kMaxArgs) {
      overflow_ = true;
      return *this;
    }
    slots_[size_] = 0;
    std::memcpy(&slots_[size_], value, bytes);
    kinds_[size_] = kind;
    ++size_;
    return *this;
  }

  std::array<uint64_t, kMaxArgs> slots_{};
  std::array<Kind, kMaxArgs> kinds_{};
  size_t size_ = 0;
  bool overflow_ = false;
};

}  // namespace hotkernel
