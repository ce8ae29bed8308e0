#pragma once
// The options word of a VariantKey as the families use it, and the cache's
// variant string.
//
// Note [Variant options]
// A VariantKey's options word holds what, besides dtype and shape, picks a
// kernel: whether a norm call passes a weight (bit 0) and a bias (bit 1), and
// cross_entropy_loss's reduction (at::Reduction + 1 in bits 2-3; 0 there: no
// reduction field), and attention's input layouts (a 2-bit class each for
// query, key and value in bits 4-9: Note [Attention layouts] in
// SdpaFamily.h), is_causal (bit 10) and grouped key/value heads (bit 11).
// Each family says which fields its keys may carry
// (FamilyDescriptor::optionFields). The variant string spells the fields that
// are set (";weight=1", ";bias=1", ";reduction=mean"), so a key and its string
// convert both ways without knowing the op, and a cache row written by one
// version reads the same in the next.

#include <cstdint>
#include <optional>
#include <string>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel::kernels {

namespace variant_options {
constexpr int32_t kWeight = 1;
constexpr int32_t kBias = 2;
constexpr int32_t kReductionShift = 2;
constexpr int32_t kReductionMask = 3 << kReductionShift;
constexpr int32_t kLayoutShift = 4;  // query's class at 4-5, key's at 6-7, value's at 8-9
constexpr int32_t kLayoutMask = 0x3F << kLayoutShift;
constexpr int32_t kCausal = 1 << 10;
constexpr int32_t kGqa = 1 << 11;
}  // namespace variant_options

// The option bits of attention's three layout classes (each 0-3).
constexpr int32_t layoutOptions(int32_t query, int32_t key, int32_t value) {
  return ((query & 3) | (key & 3) << 2 | (value & 3) << 4) << variant_options::kLayoutShift;
}
// The layout class of input `i` (0 query, 1 key, 2 value) a key holds.
inline int32_t layoutOf(const VariantKey& key, int i) {
  return (key.options >> (variant_options::kLayoutShift + 2 * i)) & 3;
}

// The option bits of a call's optional per-column inputs.
constexpr int32_t weightBiasOptions(bool weight, bool bias) {
  return (weight ? variant_options::kWeight : 0) | (bias ? variant_options::kBias : 0);
}
// The option bits of cross_entropy_loss's reduction (0 none, 1 mean, 2 sum: at::Reduction).
constexpr int32_t reductionOptions(int32_t reduction) {
  return (reduction + 1) << variant_options::kReductionShift;
}

inline bool hasWeight(const VariantKey& key) { return (key.options & variant_options::kWeight) != 0; }
inline bool hasBias(const VariantKey& key) { return (key.options & variant_options::kBias) != 0; }
// The reduction the key holds (0 none, 1 mean, 2 sum), or -1: no reduction field.
inline int32_t reductionOf(const VariantKey& key) {
  return ((key.options & variant_options::kReductionMask) >> variant_options::kReductionShift) - 1;
}

// The elements of one row of the [rows, ...] input a key stands for: cols,
// times inner for a key with an inner extent (a middle-dim reduction's
// [outer, reduced * inner] rows). Precondition: the product fits int64 (a
// family's servesKey holds).
inline int64_t rowLength(const VariantKey& key) { return key.inner != 0 ? key.cols * key.inner : key.cols; }

// The cache's variant string: "dtype=bfloat16;rows=4096;cols=32000" (no
// device: the fingerprint names the GPU model), then ";inner=N" when the key
// has a third extent (key.inner != 0: a middle-dim reduction), ";more=a,b,c,d"
// when it has more (key.hasMore()), then ";weight=1", ";bias=1",
// ";reduction=none|mean|sum", ";layouts=QKV" (three digits), ";causal=1" and
// ";gqa=1" for the option fields that are set. A two-extent key's string is what it was before keys had an
// inner extent, so cache rows written then read the same.
std::string variantString(const VariantKey& key);

// The inverse of variantString for `device`; nullopt for a malformed string
// (a part without '=', an unknown dtype, a number with other characters,
// rows or cols missing or < 1, an inner extent < 2, `more` not four numbers
// >= 1, an option value out of its range). Unknown fields are ignored.
std::optional<VariantKey> parseVariantString(const std::string& variant, int device);

}  // namespace hotkernel::kernels
