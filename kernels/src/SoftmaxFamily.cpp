// The softmax family's names, its parameter points as JSON and text, and its
// tolerances against ATen. The parameter space is SoftmaxSpace.cpp; the
// guards, compile options and launch geometry SoftmaxLaunch.cpp.

#include "hotkernel/kernels/SoftmaxFamily.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {

const char* softmaxOpName(SoftmaxOp op) {
  return op == SoftmaxOp::LogSoftmax ? "aten::_log_softmax" : "aten::_softmax";
}

const char* softmaxFamilyName(SoftmaxOp op) {
  return op == SoftmaxOp::LogSoftmax ? "log_softmax_lastdim" : SoftmaxFamily::kName;
}

nlohmann::json SoftmaxParams::toJson() const {
  nlohmann::json j = {{"threads", threads}, {"vec", vec}, {"items", items}, {"rowsPerCta", rowsPerCta}};
  if (cluster != 1) j["cluster"] = cluster;
  if (smem) j["smem"] = true;
  if (clusterRows != 1) j["clusterRows"] = clusterRows;
  return j;
}

SoftmaxParams SoftmaxParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "softmax params must be a JSON object: ", j.dump());
  SoftmaxParams p;
  for (const char* key : {"threads", "vec", "items"}) {
    HOTKERNEL_CHECK(j.contains(key) && j.at(key).is_number_integer(), "softmax params need an integer '", key,
                    "': ", j.dump());
  }
  p.threads = j.at("threads").get<int>();
  p.vec = j.at("vec").get<int>();
  p.items = j.at("items").get<int>();
  if (j.contains("rowsPerCta")) {
    HOTKERNEL_CHECK(j.at("rowsPerCta").is_number_integer(), "softmax params need an integer 'rowsPerCta': ",
                    j.dump());
    p.rowsPerCta = j.at("rowsPerCta").get<int>();
  }
  if (j.contains("cluster")) {
    HOTKERNEL_CHECK(j.at("cluster").is_number_integer(), "softmax params need an integer 'cluster': ", j.dump());
    p.cluster = j.at("cluster").get<int>();
  }
  if (j.contains("smem")) {
    HOTKERNEL_CHECK(j.at("smem").is_boolean(), "softmax params need a boolean 'smem': ", j.dump());
    p.smem = j.at("smem").get<bool>();
  }
  if (j.contains("clusterRows")) {
    HOTKERNEL_CHECK(j.at("clusterRows").is_number_integer(), "softmax params need an integer 'clusterRows': ",
                    j.dump());
    p.clusterRows = j.at("clusterRows").get<int>();
  }
  return p;
}

std::string SoftmaxParams::describe() const {
  return "threads=" + std::to_string(threads) + " vec=" + std::to_string(vec) + " items=" + std::to_string(items) +
         (rowsPerCta != 1 ? " rowsPerCta=" + std::to_string(rowsPerCta) : std::string()) +
         (cluster != 1 ? " cluster=" + std::to_string(cluster) : std::string()) +
         (clusterRows != 1 ? " clusterRows=" + std::to_string(clusterRows) : std::string()) +
         (smem ? " (shared-memory-resident)" : items > 0 ? " (register-resident)" : " (streaming)");
}

SoftmaxFamily::Bound SoftmaxFamily::logSoftmaxTolerance(DType dtype) {
  // Note [Log-softmax tolerance]
  switch (dtype) {
    case DType::Float32:
      return {4e-6, 1.0 / 4194304.0};
    case DType::Float16:
      return {4e-6, 1.0 / 1024.0};
    case DType::BFloat16:
      return {4e-6, 1.0 / 128.0};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

namespace {

// The relative difference of two float32 sums of a row's exponentials in
// different orders (Note [Rms norm tolerance]'s s(cols), the same chains).
double sumNoise(int64_t cols) {
  return 4e-6 * std::max(1.0, std::sqrt(static_cast<double>(std::max<int64_t>(cols, 1)) / 16384.0));
}

}  // namespace

// Note [Softmax bound]
// The issue with an absolute bound alone: outputs are probabilities, most of
// them far below 2^-8 on long rows, so a bfloat16 bound of 2^-8 let a kernel
// off by 1% on every element, or one writing 0 for every probability below
// 2^-8, pass. The bound is relative, with an absolute floor for what rounds
// absolutely:
//  - 16-bit types: both sides compute in float32 and round once. The float32
//    values differ by the sum's order (s(cols) relative, Note [Softmax
//    tolerance]) and, for the family, by ex2.approx and one fma (Note [Lean
//    softmax]: below 2^-21 relative where the result is above 2^-126), far
//    below one 16-bit step, so the rounded outputs are equal or one step
//    apart: at most 1 ulp, which is at most 2^-7 (bfloat16) or 2^-10
//    (float16) of |ref|. Absolute floor: float16's subnormal step 2^-24 (a
//    result below 2^-14 rounds absolutely); bfloat16 2^-126, where the
//    family's ex2.approx.ftz flushes to 0 what ATen keeps as a subnormal.
//  - float32: the terms are ATen's bit for bit (the same expf), the sum's
//    order differs (s(cols) relative each way: 2 s) and 1/sum times the term
//    against ATen's division adds at most 2 roundings (2^-22). Absolute
//    floor 2^-126: results in the subnormal range round absolutely.
// A 1% error fails every dtype (2^-7 is 0.78%); a zero where the reference
// is above the floor fails.
SoftmaxFamily::Bound SoftmaxFamily::softmaxBound(DType dtype, int64_t cols) {
  switch (dtype) {
    case DType::Float32:
      return {std::ldexp(1.0, -126), 2.0 * sumNoise(cols) + std::ldexp(1.0, -22)};
    case DType::Float16:
      return {std::ldexp(1.0, -24), std::ldexp(1.0, -10)};
    case DType::BFloat16:
      return {std::ldexp(1.0, -126), std::ldexp(1.0, -7)};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

// Note [Softmax row sums]
// Against exact probabilities p (float64, sum 1), a correct kernel's output
// o_c = round(p_c (1 + e_c)) with |e_c| the float32 error: the sum's order
// (s(cols); 2 s for margin), the exponential and the scaling (a few float32
// roundings; for 16-bit outputs ex2.approx's argument error is |log2 p_c|
// 2^-24 relative, which summed with weights p_c is at most the row's
// entropy in bits (<= 30) times 2^-24: 2^-19 covers both). Rounding to the
// output type moves each o_c by at most half a step: 2^-(m+1) of it for a
// normal result (m = 7 bfloat16, 10 float16, 23 float32), at most `perSmall`
// below `smallBelow` (float16: half its subnormal step 2^-25 below 2^-14;
// bfloat16: 2^-126 below 2^-126, the family's flush to zero; float32: 2^-150
// below 2^-126). Summed over the row: |sum o - 1| <= relative + (count of
// small p) perSmall. Half a step, not the elementwise bound's full step: a
// kernel biased by up to one step on every element passes elementwise and
// fails here.
SoftmaxFamily::RowSumBound SoftmaxFamily::rowSumBound(DType dtype, int64_t cols) {
  const double arithmetic = 2.0 * sumNoise(cols) + std::ldexp(1.0, -19);
  switch (dtype) {
    case DType::Float32:
      return {arithmetic + std::ldexp(1.0, -24), std::ldexp(1.0, -126), std::ldexp(1.0, -150)};
    case DType::Float16:
      return {arithmetic + std::ldexp(1.0, -11), std::ldexp(1.0, -14), std::ldexp(1.0, -25)};
    case DType::BFloat16:
      return {arithmetic + std::ldexp(1.0, -8), std::ldexp(1.0, -126), std::ldexp(1.0, -126)};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

// Note [Log-softmax logsumexp]
// For exact l_c = log p_c, logsumexp(l) = 0. A correct kernel's o_c = l_c +
// d_c with |d_c| <= a + r |l_c|: a the float32 error of log(sum) (s(cols)
// from the sum's order plus logf's ulp; doubled), r the rounding to the
// output type (half a step: 2^-8, 2^-11, 2^-24, plus 2^-23 for the float32
// subtraction). logsumexp(o) = log sum p_c e^(d_c) ~ sum p_c d_c, so
// |logsumexp(o)| <= a + r H with H = sum p_c |l_c| the row's entropy in nats
// (<= log cols); twice that bounds the second-order terms (e^d - 1 - d) for
// the elements with |d| < 1, and those with larger d have p_c < e^-(1/r).
SoftmaxFamily::Bound SoftmaxFamily::logSumExpBound(DType dtype, int64_t cols) {
  const double a = 2.0 * (sumNoise(cols) + std::ldexp(1.0, -21));
  switch (dtype) {
    case DType::Float32:
      return {2.0 * a, 2.0 * (std::ldexp(1.0, -24) + std::ldexp(1.0, -23))};
    case DType::Float16:
      return {2.0 * a, 2.0 * (std::ldexp(1.0, -11) + std::ldexp(1.0, -23))};
    case DType::BFloat16:
      return {2.0 * a, 2.0 * (std::ldexp(1.0, -8) + std::ldexp(1.0, -23))};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

double SoftmaxFamily::tolerance(DType dtype, int64_t /*cols*/) {
  switch (dtype) {
    case DType::Float32:
      return 2e-6;  // Note [Softmax tolerance]
    case DType::Float16:
      return 1.0 / 2048.0;
    case DType::BFloat16:
      return 1.0 / 256.0;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

}  // namespace hotkernel::kernels
