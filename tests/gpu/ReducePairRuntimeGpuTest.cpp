// aten::max.dim and aten::min.dim (values and indices) end to end in one
// process, as the runtime serves them (Note [Value and index pairs] in
// kernels/src/ReduceFamily.cpp):
//  - every op in float32, float16 and bfloat16, over the last dim and over a
//    middle dim, keepdim both ways: the family's first point compiled, passed
//    through the five-stage harness (values compared bit for bit, indices
//    exactly), published as the op's plan, then torch.max / torch.min through
//    the dispatcher hit the trampoline and match ATen's CUDA kernel bit for
//    bit, with NaNs of distinct payloads (the first one's index; its payload
//    in float32 and float16, in bfloat16 as ATen's lanes pass it on), ties
//    (the first index) and a column of zeros whose first is -0 (max.dim's
//    value is that -0, where amax would give +0);
//  - the harness itself refuses a values output that differs from ATen's only
//    in a zero's sign, and indices that differ in one place;
//  - refused calls (a transposed input, float64, the out= overload) run ATen;
//  - one hot middle-dim max.dim through Engine::optimizeVariant (tuner,
//    harness, decision cached under the op's family, plan published), then served.
//
// Own binary: the plans it publishes, the trampolines it installs and the
// runtime's cache directory (HOTKERNEL_CACHE_DIR, read once per process) must
// not leak into other GPU tests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/max_cuda_dispatch.h>
#include <ATen/ops/min_cuda_dispatch.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "RuntimeGpuTestSupport.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/ReduceDimTuner.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using gputest::budgetOf;
using gputest::planOf;

using kernels::DType;
using kernels::ReduceDimFamily;
using kernels::ReduceDimParams;
using kernels::ReduceDimVariant;
using kernels::ReduceFamily;
using kernels::ReduceOp;
using kernels::ReduceParams;
using kernels::ReduceVariant;

using Pair = std::tuple<at::Tensor, at::Tensor>;

const std::string& cacheDir() { return gputest::runtimeCacheDir("hk-reduce-pair-runtime"); }

// torch.max / torch.min (dim, keepdim) through the dispatcher (the trampoline on CUDA).
Pair callOp(ReduceOp op, const at::Tensor& x, int64_t dim, bool keepdim) {
  at::InferenceMode inference;
  return op == ReduceOp::Max ? at::max(x, dim, keepdim) : at::min(x, dim, keepdim);
}

// ATen's CUDA kernel, below the dispatcher (never the trampoline).
Pair atenOp(ReduceOp op, const at::Tensor& x, int64_t dim, bool keepdim) {
  return op == ReduceOp::Max ? at::cuda::max(x, dim, keepdim) : at::cuda::min(x, dim, keepdim);
}

// Compiles `options` of `program` once per process.
const std::string& cubinOf(const std::string& source, const char* program, const std::vector<std::string>& options) {
  static std::map<std::string, std::string> cubins;
  std::string id = program;
  for (const std::string& o : options) id += " " + o;
  auto it = cubins.find(id);
  if (it == cubins.end()) {
    it = cubins.emplace(id, compileToCubin(source, program, queryDevice(0).nvrtcArch(), options).cubin).first;
  }
  return it->second;
}

// The bits of a float32 / float16 / bfloat16 tensor as integers.
at::Tensor bitsOf(const at::Tensor& t) {
  return t.contiguous().view(t.element_size() == 4 ? at::kInt : at::kShort).to(at::kLong);
}

// A NaN with a payload of its own in `dtype`: the bits, as the integer view stores them.
int64_t nanBits(DType dtype, int which) {
  switch (dtype) {
    case DType::Float32:
      return 0x7fc01230 + which;
    case DType::Float16:
      return 0x7e10 + which;
    case DType::BFloat16:
      return 0x7fc4 + which;
  }
  return 0;
}

::testing::AssertionResult sameBits(const Pair& got, const Pair& want) {
  const at::Tensor& gv = std::get<0>(got);
  const at::Tensor& wv = std::get<0>(want);
  if (gv.sizes() != wv.sizes() || std::get<1>(got).sizes() != std::get<1>(want).sizes()) {
    return ::testing::AssertionFailure() << "sizes " << gv.sizes() << " vs " << wv.sizes();
  }
  if (gv.scalar_type() != wv.scalar_type() || std::get<1>(got).scalar_type() != at::kLong) {
    return ::testing::AssertionFailure() << "dtypes differ";
  }
  if (!at::equal(std::get<1>(got), std::get<1>(want))) {
    return ::testing::AssertionFailure() << (std::get<1>(got) != std::get<1>(want)).sum().item<int64_t>()
                                         << " indices differ";
  }
  at::Tensor gotBits = bitsOf(gv).reshape({-1}), wantBits = bitsOf(wv).reshape({-1});
  if (gv.scalar_type() == at::kBFloat16) {  // two NaNs are equal whatever their payloads (Note [Bit-exact outputs])
    const at::Tensor bothNan = gv.reshape({-1}).isnan() & wv.reshape({-1}).isnan();
    gotBits = gotBits.masked_fill(bothNan, 0);
    wantBits = wantBits.masked_fill(bothNan, 0);
  }
  if (!at::equal(gotBits, wantBits)) {
    const at::Tensor differ = (gotBits != wantBits).nonzero();
    const int64_t first = differ[0][0].item<int64_t>();
    const int64_t mask = gv.element_size() == 4 ? 0xffffffffLL : 0xffffLL;  // the integer view is signed
    // One string: AssertionResult streams each operand into a fresh stream, so std::hex would not carry over.
    std::ostringstream os;
    os << differ.size(0) << " values differ in their bits; first at flat index " << first << ": hotkernel 0x"
       << std::hex << (gotBits[first].item<int64_t>() & mask) << ", ATen 0x" << (wantBits[first].item<int64_t>() & mask);
    return ::testing::AssertionFailure() << os.str();
  }
  return ::testing::AssertionSuccess();
}

// `x` ([.., reduced at `dim`, ..], contiguous) with the special values at the
// first kept position: NaNs of two payloads at reduced indices 3 and 5 (the
// first one's comes out), and at the last kept position a column of zeros
// whose first is -0 (the value is -0, its index 0). Needs reduced >= 7.
void plantSpecials(at::Tensor& x, int64_t dim, DType dtype) {
  const at::Tensor moved = x.movedim(dim, -1);  // a view: [kept..., reduced]
  at::Tensor first = moved, last = moved;
  for (int64_t k = 0; k + 1 < moved.dim(); ++k) {
    first = first.select(0, 0);
    last = last.select(0, last.size(0) - 1);
  }
  at::Tensor firstBits = first.view(x.element_size() == 4 ? at::kInt : at::kShort);
  firstBits.select(0, 3).fill_(nanBits(dtype, 1));
  firstBits.select(0, 5).fill_(nanBits(dtype, 2));
  last.fill_(0.0);
  last.select(0, 0).fill_(-0.0);
}

struct Layout {
  std::vector<int64_t> sizes;
  int64_t dim;  // the reduced one
};

// Last dim: rows of 7 (no vector), 1000, 4096; middle: inner small, odd (no vector), large.
const std::vector<Layout> kLayouts = {{{64, 4096}, -1}, {{3, 5, 1000}, 2}, {{37, 7}, 1},
                                      {{16, 7, 6}, 1},  {{8, 7, 3}, 1},    {{4, 4096, 2}, 1},
                                      {{3, 7, 4096}, 1}, {{5, 7, 1001}, -2}};

// The first point of the space for the call's variant, harness-validated and
// published as the op's plan. Empty when the call is not the family's.
std::string publishFirstPoint(ReduceOp op, DType dtype, const Layout& l) {
  kernels::ReduceCall call;
  call.op = op;
  call.dtype = dtype;
  call.sizes = l.sizes;
  call.strides.assign(l.sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(l.sizes.size()) - 2; i >= 0; --i) {
    call.strides[i] = call.strides[i + 1] * l.sizes[i + 1];
  }
  call.dims = std::vector<int64_t>{l.dim};
  const ServedOp& served = servedOp(kernels::reduceAtenOpName(op));
  ReduceVariant v;
  ReduceDimVariant m;
  if (ReduceFamily::guardCall(call, &v)) {
    const ReduceParams p = ReduceFamily::parameterSpace(v).front();
    const std::string& cubin = cubinOf(ReduceFamily::source(), "reduce_lastdim.cu",
                                       ReduceFamily::compileOptions(dtype, p, op));
    const HarnessReport r = runHarness(reduceSpec(op), reduceCandidate(v, p, cubin), dtype, v.rows, v.cols, 0);
    if (!r.passed) return "harness: " + p.describe() + ": " + (r.failure() ? r.failure()->detail : "");
    const VariantKey key{static_cast<int32_t>(dtype), 0, v.rows, v.cols};
    plansOf(served).publish(kernels::reduceDescriptor(op).makePlan(key, p.toJson(), cubin, 0));
    return "";
  }
  if (!ReduceDimFamily::guardCall(call, &m)) return "not the family's";
  const ReduceDimParams p = ReduceDimFamily::parameterSpace(m).front();
  const std::string& cubin =
      cubinOf(ReduceDimFamily::source(), "reduce_dim.cu", ReduceDimFamily::compileOptions(dtype, p, op));
  const HarnessReport r = runHarness(reduceDimSpec(op, m.inner), reduceDimCandidate(m, p, cubin), dtype, m.outer,
                                     m.reduced * m.inner, 0);
  if (!r.passed) return "harness: " + p.describe() + ": " + (r.failure() ? r.failure()->detail : "");
  plansOf(served).publish(
      kernels::reduceDescriptor(op).makePlan(kernels::reduceDimKeyOf(m, 0), p.toJson(), cubin, 0));
  return "";
}

TEST(ReducePairRuntimeGpuTest, GivenHarnessValidatedPlansWhenMaxAndMinRunInEveryDTypeAndLayoutThenAtensBitsAndIndices) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    installServedOp(servedOp(kernels::reduceAtenOpName(op)), c10::DispatchKey::CUDA, nullptr);
  }
  at::manual_seed(19);
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    const ServedOp& served = servedOp(kernels::reduceAtenOpName(op));
    for (DType dtype : kernels::kAllDTypes) {
      for (const Layout& l : kLayouts) {
        SCOPED_TRACE(std::string(kernels::reduceOpName(op)) + " " + kernels::dtypeName(dtype) + " " +
                     c10::str(at::IntArrayRef(l.sizes)) + " dim " + std::to_string(l.dim));
        const std::string failed = publishFirstPoint(op, dtype, l);
        ASSERT_TRUE(failed.empty()) << failed;
        const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
        // Few distinct values in 16 bits: many ties, the first index must win.
        at::Tensor x = at::randn(l.sizes, opts).mul_(3.0).to(scalarTypeOf(dtype));
        plantSpecials(x, l.dim, dtype);
        for (bool keepdim : {false, true}) {
          const uint64_t hits = hitsOf(served);
          const Pair got = callOp(op, x, l.dim, keepdim);
          EXPECT_EQ(hitsOf(served), hits + 1) << "keepdim " << keepdim;
          EXPECT_TRUE(sameBits(got, atenOp(op, x, l.dim, keepdim))) << "keepdim " << keepdim;
          EXPECT_TRUE(std::get<0>(got).is_contiguous() && std::get<1>(got).is_contiguous());
        }
        // The planted positions, read back: the first NaN's payload at index 3, -0 at index 0.
        const auto [values, indices] = callOp(op, x, l.dim, false);
        const at::Tensor flatValues = bitsOf(values).reshape({-1}), flatIndices = indices.reshape({-1});
        EXPECT_EQ(flatIndices[0].item<int64_t>(), 3);
        // bfloat16: the payload, or 0x7FFF where ATen's lanes shuffle it (Note [Value and index pairs]).
        if (dtype != DType::BFloat16) {
          EXPECT_EQ(flatValues[0].item<int64_t>(), nanBits(dtype, 1));
        } else {
          EXPECT_TRUE(std::isnan(values.reshape({-1})[0].item<float>()));
        }
        EXPECT_EQ(flatIndices[-1].item<int64_t>(), 0);
        EXPECT_EQ(flatValues[-1].item<int64_t>(), bitsOf(at::full({1}, -0.0, values.options()))[0].item<int64_t>());
      }
    }
  }
}

TEST(ReducePairRuntimeGpuTest, GivenOutputsThatDifferFromAtenOnlyInAZerosSignOrOneIndexWhenCheckedThenTheHarnessRefuses) {
  REQUIRE_CUDA_AND_NVRTC();
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  at::Tensor x = at::randn({4, 64}, opts);
  x.select(0, 1).fill_(0.0);
  x.select(0, 1).select(0, 0).fill_(-0.0);  // max.dim of row 1: -0 at index 0
  const RowOpSpec spec = reduceSpec(ReduceOp::Max);
  std::vector<at::Tensor> outs = atenReduceLastDimOutputs(x, ReduceOp::Max);
  outs[0] = outs[0].clone();
  outs[1] = outs[1].clone();
  EXPECT_EQ(checkOutputs(spec, DType::Float32, x, RowOpArgs{}, outs), "");
  ASSERT_EQ(bitsOf(outs[0])[1].item<int64_t>(), bitsOf(at::full({1}, -0.0, opts))[0].item<int64_t>());
  at::Tensor plusZero = outs[0].clone();
  plusZero.select(0, 1).fill_(0.0);  // numerically equal, another sign: what amax would return
  const std::string signWhy = checkOutputs(spec, DType::Float32, x, RowOpArgs{}, {plusZero, outs[1]});
  EXPECT_NE(signWhy.find("values: bits"), std::string::npos) << signWhy;
  at::Tensor otherIndex = outs[1].clone();
  otherIndex.select(0, 2).add_(1);
  const std::string indexWhy = checkOutputs(spec, DType::Float32, x, RowOpArgs{}, {outs[0], otherIndex});
  EXPECT_NE(indexWhy.find("indices:"), std::string::npos) << indexWhy;
}

TEST(ReducePairRuntimeGpuTest, GivenANanWithAnotherPayloadWhenCheckedThenFloat16RefusesAndBFloat16Accepts) {
  REQUIRE_CUDA_AND_NVRTC();
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  const RowOpSpec spec = reduceSpec(ReduceOp::Max);
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(kernels::dtypeName(dtype));
    at::Tensor x = at::randn({4, 64}, opts).to(scalarTypeOf(dtype));
    x.view(at::kShort).select(0, 2).select(0, 5).fill_(nanBits(dtype, 1));  // row 2's max: a NaN with a payload
    std::vector<at::Tensor> outs = atenReduceLastDimOutputs(x, ReduceOp::Max);
    at::Tensor other = outs[0].clone();
    other.view(at::kShort).select(0, 2).fill_(nanBits(dtype, 2));  // the same NaN position, another payload
    const std::string why = checkOutputs(spec, dtype, x, RowOpArgs{}, {other, outs[1].clone()});
    if (dtype == DType::Float16) {
      EXPECT_NE(why.find("values: bits"), std::string::npos) << why;
    } else {
      EXPECT_EQ(why, "") << "bfloat16 NaNs are equal whatever their payloads (Note [Bit-exact outputs])";
    }
  }
}

TEST(ReducePairRuntimeGpuTest, GivenCallsTheFamilyRefusesWhenCalledThenAtensResultsAndNoHit) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  const ReduceOp op = ReduceOp::Max;
  const ServedOp& served = servedOp(kernels::reduceAtenOpName(op));
  installServedOp(served, c10::DispatchKey::CUDA, nullptr);
  const Layout l{{64, 4096}, -1};
  const std::string failed = publishFirstPoint(op, DType::Float32, l);
  ASSERT_TRUE(failed.empty()) << failed;
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  const at::Tensor x = at::randn({64, 4096}, opts);
  const at::Tensor t = at::randn({4096, 64}, opts).t();  // [64, 4096], not contiguous
  const uint64_t hits = hitsOf(served), misses = missesOf(served);
  EXPECT_TRUE(sameBits(callOp(op, t, -1, false), atenOp(op, t.contiguous(), -1, false)));
  const Pair asDouble = callOp(op, x.to(at::kDouble), -1, false);
  EXPECT_EQ(std::get<0>(asDouble).scalar_type(), at::kDouble);
  at::Tensor values = at::empty({64}, opts), indices = at::empty({64}, opts.dtype(at::kLong));
  at::max_out(values, indices, x, -1);  // the out= overload: no trampoline
  EXPECT_TRUE(sameBits({values, indices}, atenOp(op, x, -1, false)));
  EXPECT_EQ(hitsOf(served), hits);
  EXPECT_EQ(missesOf(served), misses + 2);
  EXPECT_TRUE(sameBits(callOp(op, x, -1, false), atenOp(op, x, -1, false)));  // the planned call: served
  EXPECT_EQ(hitsOf(served), hits + 1);
}

TEST(ReducePairRuntimeGpuTest, GivenAHotFp32MiddleDimMaxWhenOptimizedThenItIsCachedUnderTheOpsFamilyAndServed) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  const ReduceOp op = ReduceOp::Max;
  const std::string name = kernels::reduceAtenOpName(op);
  installServedOp(servedOp(name), c10::DispatchKey::CUDA, nullptr);
  const ReduceDimVariant v{DType::Float32, 64, 512, 1024, op};
  const VariantKey key = kernels::reduceDimKeyOf(v, 0);
  const std::string variant = kernels::variantString(key);
  ASSERT_EQ(variant, "dtype=float32;rows=64;cols=512;inner=1024");
  const nlohmann::json summary =
      Engine::instance().optimizeVariant(name, key, [] { return true; }, budgetOf(name, key, 40.0));
  std::cout << name << " " << variant << ": " << summary.value("decision", "?") << " speed-up "
            << summary.value("speedup", 0.0) << std::endl;
  ASSERT_TRUE(summary["decision"] == "kernel" || summary["decision"] == "keep_aten") << summary.dump();
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, name, variant);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->family, kernels::reduceFamilyName(op));
  if (summary["decision"] == "kernel") {
    EXPECT_EQ(entry->kernelName, ReduceDimFamily::kKernelName);
    EXPECT_NO_THROW((void)ReduceDimParams::fromJson(nlohmann::json::parse(entry->params)));
    EXPECT_TRUE(!planOf(name, variant).is_null()) << Engine::instance().status()["plans"].dump();
  } else {
    std::cout << name << ": the tuner kept ATen; publishing the harness-validated first point" << std::endl;
    const std::string failed = publishFirstPoint(op, DType::Float32, Layout{{64, 512, 1024}, 1});
    ASSERT_TRUE(failed.empty()) << failed;
  }
  ASSERT_NE(plansOf(servedOp(name)).load()->find(key), nullptr);

  // [64, 512, 32, 32] over dim 1 is the same variant: served, ATen's bits and indices.
  at::Tensor x = at::randn({64, 512, 32, 32}, at::TensorOptions().device(at::kCUDA, 0));
  x.select(0, 2).select(1, 3).select(1, 4).fill_(std::numeric_limits<float>::quiet_NaN());
  const uint64_t hits = hitsOf(servedOp(name));
  const Pair got = callOp(op, x, 1, false);
  EXPECT_EQ(hitsOf(servedOp(name)), hits + 1);
  EXPECT_TRUE(sameBits(got, atenOp(op, x, 1, false)));
  EXPECT_TRUE(std::isnan(std::get<0>(got)[2][3][4].item<float>()));
}

}  // namespace
}  // namespace hotkernel
