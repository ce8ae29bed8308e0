#pragma once
// One point of a middle-dim kernel's parameter space: the reductions' and
// softmax's over a dimension that is not the last, seen as [outer, dim,
// inner] (kernels/reduce/reduce_dim.cu, kernels/softmax/softmax_dim.cu).
// The fields become the templates' HK_TX, HK_TY, HK_VEC and HK_UNROLL.
// ReduceDimParams and SoftmaxDimParams are this type; each family keeps its
// own whitelist (shared memory bound) and guards.

#include <string>

#include <nlohmann/json.hpp>

namespace hotkernel::kernels {

// HK_UNROLL's values: rows a thread loads before it uses them (Note [Rows in flight] in reduce_dim.cu).
constexpr int kMiddleDimUnrolls[] = {1, 2, 4, 8};

struct MiddleDimParams {
  int tx = 32;     // threads along inner: 32, 64 or 128
  int ty = 8;      // threads along the reduced / softmax dim: a power of two <= 32, tx * ty <= 1024
  int vec = 1;     // consecutive inner elements a thread reads at once, within 16 bytes
  int unroll = 1;  // one of kMiddleDimUnrolls

  int threads() const { return tx * ty; }
  bool operator==(const MiddleDimParams& o) const {
    return tx == o.tx && ty == o.ty && vec == o.vec && unroll == o.unroll;
  }
  bool operator!=(const MiddleDimParams& o) const { return !(*this == o); }

  nlohmann::json toJson() const;  // {"tx":32,"ty":8,"vec":4,"unroll":4}
  // Throws Error unless `j` is an object with integer tx, ty and vec, and an
  // integer unroll where present (1 where absent: plans written before it
  // loaded one row at a time). Does not check validity: the guards do.
  static MiddleDimParams fromJson(const nlohmann::json& j);
  std::string describe() const;  // "tx=32 ty=8 vec=4 unroll=4"
};

}  // namespace hotkernel::kernels
