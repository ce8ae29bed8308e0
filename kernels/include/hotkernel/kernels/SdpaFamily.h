#pragma once
// The attention family (sdpa_backend): aten::scaled_dot_product_attention
// served by the one of ATen's own backends (flash, memory-efficient, cuDNN,
// math) measured fastest for the variant, instead of the one PyTorch's
// heuristic picks (Note [Choosing an attention backend] in src/SdpaFamily.cpp).
// No kernel of hotkernel's: a plan holds the backend's name (SdpaChoice), the
// cache entry is an `aten_backend` decision without a cubin. The op override
// (interpose/serving/SdpaOverride) routes calls; the tuner
// (optimizer/search/SdpaTuner) checks and times the backends.
//
// A key: rows = batch B, cols = queries L, inner = keys S, more = {query heads
// Hq, key/value heads Hkv, head dim E, value head dim Ev}; options: the three
// layout classes (Note [Attention layouts]), is_causal, and gqa (Hkv < Hq).
//
// Note [Attention layouts]
// A query, key or value [B, H, N, D] is served in three stride patterns (any
// stride of a dimension of size 1 matches; the last dimension's stride is 1):
//   0: contiguous [B, H, N, D]: strides (H*N*D, N*D, D, 1);
//   1: the head view of a contiguous [B, N, H, D] (HF's view(...).transpose(1, 2)):
//      strides (N*H*D, D, H*D, 1);
//   2: the head view of one third of a fused [B, N, 3*H*D] projection split in
//      three (GPT-2's c_attn): strides (3*N*H*D, D, 3*H*D, 1).
// A backend's speed depends on the layout, so the class is part of the key and
// the tuner times the backends on inputs of the call's layouts.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/AttentionBackend.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel::kernels {

struct FamilyDescriptor;

// What the guard sees of a call (the override fills it from the tensors).
struct SdpaCall {
  bool dtypeServed = false;  // query's dtype is float32, float16 or bfloat16 (then `dtype`)
  DType dtype = DType::Float16;
  bool sameDtypes = false;   // key and value have query's dtype
  bool sameDevice = false;   // key and value are on query's device
  bool dense = false;        // no nested or sparse tensor among them
  std::vector<int64_t> querySizes, queryStrides, keySizes, keyStrides, valueSizes, valueStrides;
  bool hasMask = false;
  double dropoutP = 0;
  bool isCausal = false;
  bool enableGqa = false;
};

// One variant: query [batch, heads, queries, headDim], key [batch, kvHeads,
// keys, headDim], value [batch, kvHeads, keys, valueDim].
struct SdpaVariant {
  DType dtype = DType::Float16;
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t queries = 0;
  int64_t keys = 0;
  int64_t headDim = 0;
  int64_t valueDim = 0;
  int32_t layouts[3] = {0, 0, 0};  // query, key, value (Note [Attention layouts])
  bool causal = false;
  bool operator==(const SdpaVariant& o) const;
  bool gqa() const { return kvHeads != heads; }
};

// The strides of a [b, h, n, d] tensor in layout class `layout` (0, 1 or 2).
std::vector<int64_t> sdpaLayoutStrides(int32_t layout, int64_t b, int64_t h, int64_t n, int64_t d);
// The class of a 4-d tensor's sizes and strides: 0, 1 or 2 (the first that
// matches), or -1 for another pattern.
int32_t sdpaLayoutOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

// The variant a plan-table key stands for, and back.
SdpaVariant sdpaVariantOf(const VariantKey& key);
VariantKey sdpaKeyOf(const SdpaVariant& v, int device);
// The descriptor of sdpa_backend (Note [Family descriptors]).
const FamilyDescriptor& sdpaDescriptor();

// A validated choice: the cache entry's params,
// {"format": "hotkernel-attention-choice", "version": 1, "backend": "cudnn"}.
struct SdpaParams {
  AttentionBackend backend = AttentionBackend::Math;
  nlohmann::json toJson() const;
  // Throws Error on another format or version, a missing field or an unknown backend.
  static SdpaParams fromJson(const nlohmann::json& j);
};

// A plan's launcher: the backend to call. It launches no kernel of its own
// (launch and launchArgs return false); the override reads backend().
class SdpaChoice : public KernelLauncher {
 public:
  explicit SdpaChoice(AttentionBackend backend) : backend_(backend) {}
  AttentionBackend backend() const { return backend_; }
  bool launch(const RowKernelArgs&, void*) const noexcept override { return false; }
  size_t alignment() const override { return kAlignment; }
  std::string describe() const override;
  // The data alignment a served call's query, key and value have (the
  // tuner's inputs have it; a call without it runs PyTorch's choice).
  static constexpr size_t kAlignment = 16;

 private:
  AttentionBackend backend_;
};

class SdpaFamily {
 public:
  static constexpr const char* kName = "sdpa_backend";
  static constexpr const char* kOp = "aten::scaled_dot_product_attention";
  // Bounds of what the family takes: any extent, and every tensor's elements.
  static constexpr int64_t kMaxExtent = int64_t{1} << 31;
  static constexpr int64_t kMaxHeadDim = 1024;
  static constexpr int64_t kMaxElements = int64_t{1} << 36;

  // The variant of a call the family serves, or false: float32, float16 or
  // bfloat16 q, k, v of one dtype on one device, dense, 4-d, each in a layout
  // of Note [Attention layouts]; no mask (attn_mask None), dropout_p == 0;
  // batch and key/value extents that agree; heads a multiple of kvHeads, and
  // enable_gqa when they differ; keys >= 2 (a cache key's inner extent);
  // every extent >= 1 and within the bounds.
  static bool guardCall(const SdpaCall& call, SdpaVariant* out);
  // The same bounds on a variant (what a key may hold).
  static bool guardVariant(const SdpaVariant& v);
  // The backends worth trying on a device (CUDA: flash, efficient, cuDNN,
  // math; CPU: flash_cpu, math); each refuses what it does not take.
  static std::vector<AttentionBackend> candidates(bool cuda);
  // The bytes one call must move: q, k and v read once, the output written once.
  static double bytesMoved(const SdpaVariant& v);
};

}  // namespace hotkernel::kernels
