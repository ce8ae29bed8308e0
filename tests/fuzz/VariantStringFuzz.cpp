// fuzz_variant_string: parseVariantString (kernels/src/VariantOptions.cpp), the
// variant column of a cache row ("dtype=bf16;rows=4096;cols=32000;weight=1",
// "dtype=float32;rows=64;cols=4096;inner=1024",
// "dtype=bfloat16;rows=1;cols=4096;inner=4096;more=32,8,128,128;layouts=111;causal=1;gqa=1").
#include "FuzzSupport.h"
#include "hotkernel/kernels/VariantOptions.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<VariantKey> key = kernels::parseVariantString(fuzz::text(data, size), 5);
  if (!key) return 0;
  HK_FUZZ_ASSERT(key->rows >= 1 && key->cols >= 1 && key->device == 5 && (key->inner == 0 || key->inner >= 2));
  const std::string canonical = kernels::variantString(*key);
  const std::optional<VariantKey> back = kernels::parseVariantString(canonical, 5);
  HK_FUZZ_ASSERT(back.has_value());
  HK_FUZZ_ASSERT(kernels::variantString(*back) == canonical);
  HK_FUZZ_ASSERT(back->dtype == key->dtype && back->rows == key->rows && back->cols == key->cols &&
                 back->options == key->options && back->inner == key->inner);
  HK_FUZZ_ASSERT(*back == *key);  // the further extents (attention's "more=") included
  for (int64_t m : key->more) HK_FUZZ_ASSERT(!key->hasMore() || m >= 1);
  return 0;
}
