#include "FusionFuzz.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <ostream>
#include <thread>

#include "FusionFuzzHarness.h"
#include "hotkernel/interpose/FusionBypass.h"

namespace hotkernel::fusion::fuzz {
namespace {

// Where the programs' values live (Note [The fuzz suite on a GPU]).
c10::Device dataDevice() {
  return fuzzDevice() == c10::DeviceType::CPU ? c10::Device(c10::DeviceType::CPU) : c10::Device(fuzzDevice(), 0);
}

// ---------------------------------------------------------------- choices

// Every random choice of a program (Note [Fusion fuzz programs]): drawn and
// recorded in the eager run, replayed in the engine run.
class Choices {
 public:
  void record(uint64_t seed) {
    rng_.seed(seed);
    taken_.clear();
    replaying_ = false;
  }
  void replay() {
    replaying_ = true;
    cursor_ = 0;
    diverged_ = false;
  }
  int pick(int n) {
    if (!replaying_) {
      const int v = n <= 1 ? 0 : static_cast<int>(rng_() % static_cast<uint64_t>(n));
      taken_.emplace_back(n, v);
      return v;
    }
    if (cursor_ >= taken_.size() || taken_[cursor_].first != n) {
      diverged_ = true;
      return 0;
    }
    return taken_[cursor_++].second;
  }
  bool chance(double p) { return pick(1000) < static_cast<int>(p * 1000); }
  // A choice that depends on eager's data: `eagerAnswer` when drawing, the recorded answer when replaying.
  bool decide(bool eagerAnswer) {
    if (!replaying_) {
      taken_.emplace_back(-1, eagerAnswer ? 1 : 0);
      return eagerAnswer;
    }
    if (cursor_ >= taken_.size() || taken_[cursor_].first != -1) {
      diverged_ = true;
      return false;
    }
    return taken_[cursor_++].second == 1;
  }
  bool diverged() const { return diverged_ || (replaying_ && cursor_ != taken_.size()); }

 private:
  std::mt19937_64 rng_;
  std::vector<std::pair<int, int>> taken_;
  size_t cursor_ = 0;
  bool replaying_ = false;
  bool diverged_ = false;
};

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// ---------------------------------------------------------------- templates

enum class Op : uint8_t {
  Neg, Tanh, Sigmoid, Silu, Relu, Abs, Gelu, GeluTanh, Exp, Rsqrt, Sqrt, Log, Reciprocal,  // unary
  MulS, AddS, SubS, DivS, RsubS, Pow2,                                                    // with a scalar
  AddT, SubT, MulT, DivT, RsubT,                                                          // binary
  Cast, SumRow, MeanRow, AmaxRow,
  SoftmaxRow, LogSoftmaxRow,  // aten::_softmax / _log_softmax over the last dim (Note [Softmax in a chain])
  Clone,       // a contiguous copy (of the strided first input: Note [Relayout copies])
  RotateHalf,  // HF's rotate_half: cat([-x2, x1], -1) of the halves x1, x2 (views) of a full value
  LayerNormRow,  // F.layer_norm over the last dim, weight `b` or none (Note [LayerNorm in a chain])
  Sin, Cos, Erf, Log1p, Expm1, Hardsigmoid, Hardswish,  // unary
  ClampS, ClampMinS, ClampMaxS,  // clamp(a, -|s|, |s|), clamp_min(a, s), clamp_max(a, s) (Note [Clamp in a chain])
  HardtanhS,                     // hardtanh(a, -|s|, |s|)
  LeakyReluS,                    // leaky_relu(a, |s| / 4)
  MaxT, MinT,                    // maximum, minimum
  GroupNormS,  // F.group_norm(a, groups s, weight b[0], bias b[1]) (b: [2, C], or none) (Note [GroupNorm in a chain])
  BatchNormEval,  // F.batch_norm(a, b[2], b[3], b[0], b[1], training=False) (b: [4, C] positive) (Note [Eval BatchNorm
                  // in a chain])
  Softplus, Mish,  // F.softplus with its defaults, F.mish (Note [Softplus and Mish in a chain])
};
enum class Shape : uint8_t { Full, Col, Row, Zero };

struct TInput {
  Shape shape = Shape::Full;
  at::ScalarType dtype = at::kFloat;
  bool positive = false;  // values in [0.5, 2]; else [-2, 2]
  bool strided = false;   // Full: a column window of a [rows, 2 * cols] buffer (rows apart by 2 * cols)
  bool transposed = false;  // Full: a [cols, rows] tensor transposed (columns apart by rows: Note [Transposed layouts])
  // Full, N-d: a contiguous tensor of sizes `drawn` with its dims permuted by `perm` (the value's dim d is the
  // drawn tensor's dim perm[d]; empty: none), as GPT-2's heads or an NHWC image's channels are.
  std::vector<int64_t> drawn, perm;
};

struct TStep {
  Op op = Op::Neg;
  int a = 0;
  int b = -1;
  double scalar = 0;
  at::ScalarType to = at::kFloat;
  bool inPlace = false;  // `a` written in place (relu_, add_: Note [In-place steps]); its result is `a` itself
};

struct Template {
  int64_t rows = 1, cols = 1;
  std::vector<TInput> inputs;
  std::vector<TStep> steps;
  std::vector<std::vector<bool>> keeps;  // per keep set: which steps' values the caller holds
};

std::vector<int64_t> sizesOf(Shape s, int64_t rows, int64_t cols) {
  switch (s) {
    case Shape::Full: return {rows, cols};
    case Shape::Col: return {cols};
    case Shape::Row: return {rows, 1};
    case Shape::Zero: return {};
  }
  return {};
}

// The sizes of an input's value (a permuted input's are its drawn sizes in the permuted order).
std::vector<int64_t> valueSizes(const TInput& in, int64_t rows, int64_t cols) {
  if (in.perm.empty()) return sizesOf(in.shape, rows, cols);
  std::vector<int64_t> sizes;
  for (int64_t d : in.perm) sizes.push_back(in.drawn[static_cast<size_t>(d)]);
  return sizes;
}

bool isScalarOp(Op op) { return op >= Op::MulS && op <= Op::RsubS; }

// An input's values from `u` of [0, 1): a fresh tensor, or for a strided input a window of a wider one (as
// rotary's x is of the projection: Note [Chain layouts]).
at::Tensor inputFrom(const TInput& in, int64_t cols, const at::Tensor& u) {
  at::Tensor t = (in.positive ? u * 1.5 + 0.5 : u * 4 - 2).to(in.dtype);
  if (in.transposed) return t.t();
  if (!in.perm.empty()) return t.permute(in.perm);
  return in.strided ? t.slice(-1, cols / 2, cols / 2 + cols) : t;
}

std::vector<int64_t> drawnSizes(const TInput& in, int64_t rows, int64_t cols) {
  if (in.transposed) return {cols, rows};
  if (!in.perm.empty()) return in.drawn;
  return in.strided ? std::vector<int64_t>{rows, 2 * cols} : sizesOf(in.shape, rows, cols);
}

// Whether `op` has an in-place form the fusion engine defers (Note [In-place steps]).
bool hasInPlaceForm(Op op) {
  switch (op) {
    case Op::Neg: case Op::Tanh: case Op::Sigmoid: case Op::Silu: case Op::Relu: case Op::Gelu: case Op::GeluTanh:
    case Op::Exp: case Op::Rsqrt: case Op::Sqrt: case Op::Reciprocal: case Op::Hardsigmoid: case Op::Hardswish:
    case Op::MulS: case Op::AddS: case Op::SubS: case Op::DivS: case Op::AddT: case Op::SubT: case Op::MulT:
    case Op::DivT: case Op::ClampS: case Op::ClampMinS: case Op::ClampMaxS: case Op::HardtanhS: case Op::LeakyReluS:
    case Op::Mish:
      return true;
    default:
      return false;
  }
}

// `s` written into `a` (hasInPlaceForm(s.op)): returns `a`.
at::Tensor applyInPlace(const TStep& s, at::Tensor a, const at::Tensor& b) {  // a handle: the tensor is the caller's
  switch (s.op) {
    case Op::Neg: return a.neg_();
    case Op::Tanh: return a.tanh_();
    case Op::Sigmoid: return a.sigmoid_();
    case Op::Silu: return at::silu_(a);
    case Op::Relu: return a.relu_();
    case Op::Gelu: return at::gelu_(a);
    case Op::GeluTanh: return at::gelu_(a, "tanh");
    case Op::Exp: return a.exp_();
    case Op::Rsqrt: return a.rsqrt_();
    case Op::Sqrt: return a.sqrt_();
    case Op::Reciprocal: return a.reciprocal_();
    case Op::Hardsigmoid: return at::hardsigmoid_(a);
    case Op::Hardswish: return at::hardswish_(a);
    case Op::MulS: return a.mul_(at::Scalar(s.scalar));
    case Op::AddS: return a.add_(at::Scalar(s.scalar));
    case Op::SubS: return a.sub_(at::Scalar(s.scalar));
    case Op::DivS: return a.div_(at::Scalar(s.scalar));
    case Op::AddT: return a.add_(b);
    case Op::SubT: return a.sub_(b);
    case Op::MulT: return a.mul_(b);
    case Op::DivT: return a.div_(b);
    case Op::ClampS: return a.clamp_(-std::abs(s.scalar), std::abs(s.scalar));
    case Op::ClampMinS: return a.clamp_min_(at::Scalar(s.scalar));
    case Op::ClampMaxS: return a.clamp_max_(at::Scalar(s.scalar));
    case Op::HardtanhS: return at::hardtanh_(a, -std::abs(s.scalar), std::abs(s.scalar));
    case Op::LeakyReluS: return at::leaky_relu_(a, std::abs(s.scalar) / 4);
    case Op::Mish: return at::mish_(a);
    default: throw std::logic_error("no in-place form");
  }
}

at::Tensor applyStep(const TStep& s, const at::Tensor& a, const at::Tensor& b) {
  if (s.inPlace) return applyInPlace(s, a, b);
  switch (s.op) {
    case Op::Neg: return at::neg(a);
    case Op::Tanh: return at::tanh(a);
    case Op::Sigmoid: return at::sigmoid(a);
    case Op::Silu: return at::silu(a);
    case Op::Relu: return at::relu(a);
    case Op::Abs: return at::abs(a);
    case Op::Gelu: return at::gelu(a);
    case Op::GeluTanh: return at::gelu(a, "tanh");
    case Op::Exp: return at::exp(a);
    case Op::Rsqrt: return at::rsqrt(a);
    case Op::Sqrt: return at::sqrt(a);
    case Op::Log: return at::log(a);
    case Op::Reciprocal: return at::reciprocal(a);
    case Op::MulS: return at::mul(a, at::Scalar(s.scalar));
    case Op::AddS: return at::add(a, at::Scalar(s.scalar));
    case Op::SubS: return at::sub(a, at::Scalar(s.scalar));
    case Op::DivS: return at::div(a, at::Scalar(s.scalar));
    case Op::RsubS: return at::rsub(a, at::Scalar(s.scalar));
    case Op::Pow2: return at::pow(a, at::Scalar(2.0));
    case Op::AddT: return at::add(a, b);
    case Op::SubT: return at::sub(a, b);
    case Op::MulT: return at::mul(a, b);
    case Op::DivT: return at::div(a, b);
    case Op::RsubT: return at::rsub(a, b);
    case Op::Cast: return a.to(s.to);
    case Op::SumRow: return at::sum(a, {-1}, true);
    case Op::MeanRow: return at::mean(a, {-1}, true);
    case Op::AmaxRow: return at::amax(a, {-1}, true);
    case Op::SoftmaxRow: return at::_softmax(a, -1, false);
    case Op::LogSoftmaxRow: return at::_log_softmax(a, -1, false);
    case Op::Clone: return at::clone(a, at::MemoryFormat::Contiguous);
    case Op::RotateHalf: {
      const int64_t half = a.size(-1) / 2;
      return at::cat({at::neg(a.slice(-1, half)), a.slice(-1, 0, half)}, -1);
    }
    case Op::LayerNormRow:
      return at::layer_norm(a, {a.size(-1)}, b.defined() ? std::optional<at::Tensor>(b) : std::nullopt, std::nullopt,
                            1e-5);
    case Op::Sin: return at::sin(a);
    case Op::Cos: return at::cos(a);
    case Op::Erf: return at::erf(a);
    case Op::Log1p: return at::log1p(a);
    case Op::Expm1: return at::expm1(a);
    case Op::Hardsigmoid: return at::hardsigmoid(a);
    case Op::Hardswish: return at::hardswish(a);
    case Op::ClampS: return at::clamp(a, -std::abs(s.scalar), std::abs(s.scalar));
    case Op::ClampMinS: return at::clamp_min(a, at::Scalar(s.scalar));
    case Op::ClampMaxS: return at::clamp_max(a, at::Scalar(s.scalar));
    case Op::HardtanhS: return at::hardtanh(a, -std::abs(s.scalar), std::abs(s.scalar));
    case Op::LeakyReluS: return at::leaky_relu(a, std::abs(s.scalar) / 4);
    case Op::MaxT: return at::maximum(a, b);
    case Op::MinT: return at::minimum(a, b);
    case Op::GroupNormS: {  // the weight and bias are rows of one [2, C] input (selects: views of an input)
      const auto row = [&](int64_t k) { return b.defined() ? std::optional<at::Tensor>(b.select(0, k)) : std::nullopt; };
      return at::group_norm(a, static_cast<int64_t>(s.scalar), row(0), row(1), 1e-5);
    }
    case Op::Softplus: return at::softplus(a);
    case Op::Mish: return at::mish(a);
    case Op::BatchNormEval:  // the weight, bias, running mean and variance are rows of one positive [4, C] input
      return at::batch_norm(a, b.select(0, 0), b.select(0, 1), b.select(0, 2), b.select(0, 3), false, 0.1, 1e-5, true);
  }
  return a;
}

// What the template generator knows of a value: enough to keep values
// bounded (|v| <= 8 between steps) and away from the ops' singularities.
struct GenValue {
  Shape shape;
  at::ScalarType dtype;
  double bound;
  bool nonneg;
  bool positive;  // >= 0.25
  bool overwritten = false;  // an in-place step wrote its tensor: no later step reads it under this number
};

at::ScalarType promote(const GenValue& a, const GenValue& b) {
  if (a.shape == Shape::Zero && b.shape != Shape::Zero) return b.dtype;  // a 0-dim tensor does not promote
  if (b.shape == Shape::Zero && a.shape != Shape::Zero) return a.dtype;
  return a.dtype == b.dtype ? a.dtype : at::kFloat;
}

Shape broadcast(Shape a, Shape b) {
  if (a == Shape::Full || b == Shape::Full) return Shape::Full;
  if ((a == Shape::Row && b == Shape::Col) || (a == Shape::Col && b == Shape::Row)) return Shape::Full;
  if (a == Shape::Zero) return b;
  return a;
}

class TemplateMaker {
 public:
  // The in-place draws and the newer unary ops have their own generator: a seed's templates are those it made
  // before them, some of their steps written in place or another unary op.
  explicit TemplateMaker(uint64_t seed) : rng_(seed), sideRng_(mix(seed, 0x1f)) {}

  Template make() {
    t_ = Template{};
    values_.clear();
    static const int64_t kCols[] = {4, 8, 16, 24, 32, 64};
    static const at::ScalarType kTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};
    t_.rows = 1 + pick(6);
    t_.cols = kCols[pick(6)];
    base_ = kTypes[pick(3)];
    addInput(Shape::Full, base_, false);
    t_.inputs[0].strided = pick(4) == 0;
    // A transposed first input: a chain over it is refused (it runs unfused) but for a lone copy.
    t_.inputs[0].transposed = !t_.inputs[0].strided && pick(16) == 0;
    if (pick(10) == 0) return permuted();
    if (pick(10) == 0) return grouped();
    // A lone contiguous copy of a strided or transposed value: a chain of one call (Note [Relayout copies],
    // Note [Transposed layouts]).
    if (pick(12) == 0) {
      t_.inputs[0].transposed = pick(2) == 0;
      t_.inputs[0].strided = !t_.inputs[0].transposed;
      push(TStep{Op::Clone, 0}, unary(0, values_[0].bound, values_[0].nonneg, values_[0].positive));
      t_.keeps = {{true}, {true}};
      return t_;
    }
    const int steps = 2 + pick(6);
    int cur = 0;
    while (static_cast<int>(t_.steps.size()) < steps) {
      int a = pick(4) == 0 ? pick(static_cast<int>(values_.size())) : cur;
      if (values_[static_cast<size_t>(a)].overwritten) a = cur;
      cur = maybeInPlace(addStep(a), 4);
      if (values_[static_cast<size_t>(cur)].bound > 8) cur = push(TStep{Op::Tanh, cur}, unary(cur, 1, false, false));
    }
    return withKeeps(3);
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  // The template with its two keep sets: the last step's value alone, and that with each earlier one in `oneIn`.
  Template withKeeps(int oneIn) {
    const size_t n = t_.steps.size();
    std::vector<bool> last(n, false), some(n, false);
    last[n - 1] = some[n - 1] = true;
    for (size_t k = 0; k + 1 < n; ++k) some[k] = pick(oneIn) == 0;
    t_.keeps = {last, some};
    return t_;
  }

  // Note [The group view]: a group norm of a contiguous [N, C, *spatial] value (one or two spatial dims, HxW >= 2;
  // G of 1, 2, 4 or 8 groups of 1 to 3 channels), with a weight and a bias in two thirds of them, or in a third of
  // the templates an eval batch norm (Note [Eval BatchNorm in a chain]: positive statistics), then one to
  // three steps as a UNet's or BiT's block takes it: an activation, an addend of x's sizes (a residual) or of
  // [N, C, 1, ...] (a time embedding), a step of any shape. On the CPU in float32 only: for a 16-bit x the CPU's
  // ATen group norm normalizes with its float32 statistics where CUDA's (and so the chain: Note [GroupNorm in a
  // chain]) uses them rounded to x's dtype, which a group of nearly equal values magnifies far past any
  // tolerance; the suite on a GPU draws every dtype against CUDA's kernel.
  Template grouped() {
    if (fuzzDevice() == c10::DeviceType::CPU) base_ = at::kFloat;
    static const int64_t kGroups[] = {1, 2, 4, 8};
    static const int64_t kSpatial[] = {2, 3, 4, 5, 8};
    const int64_t groups = kGroups[pick(4)], channels = groups * (1 + pick(3));
    TInput x{Shape::Full, base_, false};
    x.drawn = {1 + pick(3), channels};
    for (int d = 1 + pick(2); d > 0; --d) x.drawn.push_back(kSpatial[pick(5)]);
    for (size_t d = 0; d < x.drawn.size(); ++d) x.perm.push_back(static_cast<int64_t>(d));
    const std::vector<int64_t> sizes = x.drawn;
    t_.cols = sizes.back();
    t_.rows = 1;
    for (size_t d = 0; d + 1 < sizes.size(); ++d) t_.rows *= sizes[d];
    t_.inputs = {x};
    values_ = {GenValue{Shape::Full, base_, 2.0, false, false}};
    // An input of `drawn` sizes, contiguous (the identity permutation).
    auto nd = [&](std::vector<int64_t> drawn, bool positive) {
      const int k = addInput(Shape::Full, base_, positive);
      t_.inputs[static_cast<size_t>(k)].drawn = drawn;
      for (size_t d = 0; d < drawn.size(); ++d) t_.inputs[static_cast<size_t>(k)].perm.push_back(static_cast<int64_t>(d));
      return k;
    };
    double hw = 1;
    for (size_t d = 2; d < sizes.size(); ++d) hw *= static_cast<double>(sizes[d]);
    int cur = 0;
    if (pick(3) == 0) {  // Note [Eval BatchNorm in a chain]: |x - mean| <= 4, invstd <= 1.5, weight <= 2, bias <= 2
      const int stats = nd({4, channels}, true);
      cur = push(TStep{Op::BatchNormEval, 0, stats}, GenValue{Shape::Full, base_, 14.0, false, false});
    } else {
      const int affine = pick(3) != 0 ? nd({2, channels}, false) : -1;
      const double bound = std::sqrt(hw * static_cast<double>(channels / groups)) * (affine >= 0 ? 2.0 : 1.0) + 2.0;
      cur = push(TStep{Op::GroupNormS, 0, affine, static_cast<double>(groups)}, GenValue{Shape::Full, base_, bound, false, false});
    }
    for (int more = 1 + pick(3); more > 0; --more) {
      const double b = values_[static_cast<size_t>(cur)].bound;
      switch (pick(5)) {
        case 0: cur = push(TStep{Op::Silu, cur}, unary(cur, b, false, false)); break;
        case 1: cur = push(TStep{Op::Relu, cur}, unary(cur, b, true, false)); break;
        case 2: {  // a residual of x's sizes
          const int r = nd(sizes, false);
          ++cur;  // the new input is numbered before the steps' values
          cur = push(TStep{Op::AddT, cur, r}, unary(cur, b + 2, false, false));
          break;
        }
        case 3: {  // a time embedding: one value a sample and channel
          std::vector<int64_t> temb(sizes.size(), 1);
          temb[0] = sizes[0];
          temb[1] = sizes[1];
          const int e = nd(temb, false);
          ++cur;
          cur = push(TStep{Op::AddT, cur, e}, unary(cur, b + 2, false, false));
          break;
        }
        default: cur = anyShape(cur);
      }
      cur = maybeInPlace(cur, 2);  // torchvision's ReLU(inplace=True), a residual +=
      if (values_[static_cast<size_t>(cur)].bound > 8) cur = push(TStep{Op::Tanh, cur}, unary(cur, 1, false, false));
    }
    return withKeeps(2);
  }

  // A 3-d or 4-d value with its dims permuted: a copy or a cast of it first (a lone one is a transposed copy
  // where its last dim is not at stride 1, the row dims reordered by the builder so that the one at stride 1
  // comes last: Note [Transposed layouts]; a strided chain where it is), or a step of any shape, then up to two
  // more steps of any shape. Chains over a transposed value beyond a lone copy or cast run unfused.
  Template permuted() {
    static const int64_t kExtents[] = {1, 2, 3, 4, 5, 8, 16};
    TInput in{Shape::Full, base_, false};
    const int dims = 3 + pick(2);
    int64_t numel = 1;
    for (int d = 0; d < dims; ++d) {
      int64_t e = kExtents[pick(7)];
      while (numel * e > 4096) e /= 2;  // at most 4,096 elements
      in.drawn.push_back(std::max<int64_t>(e, 1));
      numel *= in.drawn.back();
    }
    for (int d = 0; d < dims; ++d) in.perm.push_back(d);
    for (int d = dims - 1; d > 0; --d) std::swap(in.perm[static_cast<size_t>(d)], in.perm[static_cast<size_t>(pick(d + 1))]);
    // Half of them keep the drawn last dim last (its columns at stride 1: a strided chain over the other dims in
    // a new order, not a transposed copy).
    if (pick(2) == 0) {
      std::swap(in.perm.back(), *std::find(in.perm.begin(), in.perm.end(), static_cast<int64_t>(dims - 1)));
    }
    const std::vector<int64_t> sizes = valueSizes(in, 0, 0);
    t_.cols = sizes.back();
    t_.rows = numel / t_.cols;
    t_.inputs = {in};  // in place of make()'s first input
    values_ = {GenValue{Shape::Full, base_, 2.0, false, false}};
    const int first = pick(4);
    int cur = first < 2 ? push(TStep{Op::Clone, 0}, unary(0, 2.0, false, false)) : first == 2 ? cast(0) : anyShape(0);
    for (int more = pick(3); more > 0; --more) cur = pick(3) == 0 ? cast(cur) : anyShape(cur);
    return withKeeps(2);
  }

  // A cast of `a` to another of the three dtypes.
  int cast(int a) {
    static const at::ScalarType kTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};
    const GenValue& va = values_[static_cast<size_t>(a)];
    at::ScalarType to = kTypes[pick(3)];
    if (to == va.dtype) to = va.dtype == at::kFloat ? base_ == at::kFloat ? at::kBFloat16 : base_ : at::kFloat;
    GenValue v = va;
    v.dtype = to;
    TStep s{Op::Cast, a};
    s.to = to;
    return push(s, v);
  }

  // A step of `a` alone that keeps its shape and its bound (any number of dims).
  int anyShape(int a) {
    const double b = values_[static_cast<size_t>(a)].bound;
    switch (pick(5)) {
      case 0: return push(TStep{Op::Neg, a}, unary(a, b, false, false));
      case 1: return push(TStep{Op::Tanh, a}, unary(a, 1, false, false));
      case 2: return push(TStep{Op::Sigmoid, a}, unary(a, 1, true, false));
      case 3: return push(TStep{Op::Abs, a}, unary(a, b, true, false));
      default: return push(TStep{Op::MulS, a, -1, 0.5}, unary(a, b * 0.5, false, false));
    }
  }

  int addInput(Shape shape, at::ScalarType dtype, bool positive) {
    t_.inputs.push_back(TInput{shape, dtype, positive});
    // Inputs come first in the template's numbering: shift the steps' operands past the new input (the
    // earlier inputs keep their numbers).
    const size_t at = t_.inputs.size() - 1;
    const int first = static_cast<int>(at);
    for (TStep& s : t_.steps) {
      if (s.a >= first) s.a += 1;
      if (s.b >= first) s.b += 1;
    }
    values_.insert(values_.begin() + static_cast<std::ptrdiff_t>(at),
                   GenValue{shape, dtype, 2.0, positive, positive});
    return static_cast<int>(at);
  }

  GenValue unary(int a, double bound, bool nonneg, bool positive) const {
    GenValue v = values_[static_cast<size_t>(a)];
    v.bound = bound;
    v.nonneg = nonneg;
    v.positive = positive;
    return v;
  }

  int push(TStep s, GenValue v) {
    t_.steps.push_back(s);
    values_.push_back(v);
    return static_cast<int>(values_.size()) - 1;
  }

  // Note [In-place steps]: in one of `oneIn` templates' steps, the last step (the one returning `cur`) writes its
  // first operand in place where it can (an earlier step's value, of the result's shape and dtype): the operand's
  // number then names the result's tensor, and no later step picks it.
  int maybeInPlace(int cur, int oneIn) {
    TStep& s = t_.steps.back();
    const bool drawn = sideRng_() % static_cast<uint64_t>(oneIn) == 0;
    if (cur != static_cast<int>(values_.size()) - 1 || !hasInPlaceForm(s.op) || !drawn) return cur;
    if (s.a < static_cast<int>(t_.inputs.size())) return cur;
    GenValue& operand = values_[static_cast<size_t>(s.a)];
    const GenValue& result = values_[static_cast<size_t>(cur)];
    if (operand.overwritten || operand.shape != result.shape || operand.dtype != result.dtype) return cur;
    s.inPlace = true;
    operand = result;
    operand.overwritten = true;
    return cur;
  }

  // A positive value made from `a` (|a| + 0.5) when it is not one.
  int positive(int a) {
    if (values_[static_cast<size_t>(a)].positive) return a;
    const GenValue& v = values_[static_cast<size_t>(a)];
    const int abs = v.nonneg ? a : push(TStep{Op::Abs, a}, unary(a, v.bound, true, false));
    return push(TStep{Op::AddS, abs, -1, 0.5}, unary(abs, v.bound + 0.5, true, true));
  }

  int addStep(int a) {
    // HF's rotate_half, mostly of the first input (rotary's x; of a step's value the chain ends at the view).
    if (pick(100) < 8) {
      const int x = pick(3) != 0 ? 0 : a;
      const GenValue& vx = values_[static_cast<size_t>(x)];
      if (vx.shape == Shape::Full) return push(TStep{Op::RotateHalf, x}, unary(x, vx.bound, false, false));
    }
    // GPT-2's and BERT's ln(x + residual): of the first input (uniform in [-2, 2], so rows far from constant:
    // a norm of a nearly constant row magnifies any rounding) or of its sum with a new full input; a weight in
    // half of them.
    if (pick(100) < 6 && values_[0].shape == Shape::Full) {
      int x = 0;
      if (pick(2) == 0) {
        const int r = addInput(Shape::Full, values_[0].dtype, false);
        x = push(TStep{Op::AddT, 0, r}, GenValue{Shape::Full, values_[0].dtype, values_[0].bound + 2, false, false});
      }
      int w = -1;
      if (pick(2) == 0) {
        w = addInput(Shape::Col, values_[static_cast<size_t>(x)].dtype, false);
        if (x >= w) ++x;
      }
      const double bound = std::sqrt(static_cast<double>(t_.cols)) * (w >= 0 ? 2.0 : 1.0);
      return push(TStep{Op::LayerNormRow, x, w},
                  GenValue{Shape::Full, values_[static_cast<size_t>(x)].dtype, bound, false, false});
    }
    // A contiguous copy, mostly of the first input (strided in a quarter of the templates).
    if (pick(100) < 5) {
      const int x = pick(3) != 0 ? 0 : a;
      const GenValue& vx = values_[static_cast<size_t>(x)];
      return push(TStep{Op::Clone, x}, unary(x, vx.bound, vx.nonneg, vx.positive));
    }
    const GenValue va = values_[static_cast<size_t>(a)];
    const int r = pick(100);
    if (r < 35) {
      static const Op kUnary[] = {Op::Neg,  Op::Tanh, Op::Sigmoid, Op::Silu, Op::Relu,  Op::Abs,   Op::Gelu,
                                  Op::GeluTanh, Op::Exp, Op::Rsqrt, Op::Sqrt, Op::Log, Op::Reciprocal, Op::Sin,
                                  Op::Cos,  Op::Erf,  Op::Log1p, Op::Expm1, Op::Hardsigmoid, Op::Hardswish,
                                  Op::ClampS, Op::ClampMinS, Op::ClampMaxS, Op::HardtanhS, Op::LeakyReluS};
      Op op = kUnary[pick(25)];
      // Softplus and mish replace one unary step in 13, drawn on the side generator (a seed's templates stay).
      if (sideRng_() % 13 == 0) op = sideRng_() % 2 == 0 ? Op::Softplus : Op::Mish;
      const double b = va.bound;
      static const double kBounds[] = {0.5, 1.0, -0.25, 2.5};
      const double c = kBounds[pick(4)];
      switch (op) {
        case Op::Sin: case Op::Cos: case Op::Erf: return push(TStep{op, a}, unary(a, 1, false, false));
        case Op::Hardsigmoid: return push(TStep{op, a}, unary(a, 1, true, false));
        case Op::Hardswish: return push(TStep{op, a}, unary(a, std::max(b, 0.375), false, false));
        case Op::Expm1: {
          const int x = b > 3 ? push(TStep{Op::Tanh, a}, unary(a, 1, false, false)) : a;
          return push(TStep{op, x}, unary(x, std::exp(values_[static_cast<size_t>(x)].bound), false, false));
        }
        case Op::Log1p: {
          const int p = positive(a);
          return push(TStep{op, p}, unary(p, std::log1p(values_[static_cast<size_t>(p)].bound), true, false));
        }
        case Op::LeakyReluS: return push(TStep{op, a, -1, c}, unary(a, b, false, false));
        case Op::Softplus: return push(TStep{op, a}, unary(a, std::max(b, 0.0) + 0.7, true, false));
        case Op::Mish: return push(TStep{op, a}, unary(a, std::max(b, 0.31), false, false));
        case Op::ClampS: case Op::HardtanhS:
          return push(TStep{op, a, -1, c}, unary(a, std::min(b, std::abs(c)), false, false));
        case Op::ClampMinS:
          return push(TStep{op, a, -1, c}, unary(a, std::max(b, std::abs(c)), va.nonneg || c >= 0, va.positive || c >= 0.25));
        case Op::ClampMaxS: return push(TStep{op, a, -1, c}, unary(a, std::max(b, std::abs(c)), false, false));
        case Op::Neg: return push(TStep{op, a}, unary(a, b, false, false));
        case Op::Tanh: return push(TStep{op, a}, unary(a, 1, false, false));
        case Op::Sigmoid: return push(TStep{op, a}, unary(a, 1, true, false));
        case Op::Silu: case Op::Gelu: case Op::GeluTanh: return push(TStep{op, a}, unary(a, b, false, false));
        case Op::Relu: case Op::Abs: return push(TStep{op, a}, unary(a, b, true, va.positive));
        case Op::Exp: {
          const int x = b > 3 ? push(TStep{Op::Tanh, a}, unary(a, 1, false, false)) : a;
          return push(TStep{op, x}, unary(x, std::exp(values_[static_cast<size_t>(x)].bound), true, false));
        }
        default: {
          const int p = positive(a);
          const double pb = values_[static_cast<size_t>(p)].bound;
          if (op == Op::Rsqrt) return push(TStep{op, p}, unary(p, 2, true, pb <= 16));
          if (op == Op::Sqrt) return push(TStep{op, p}, unary(p, std::sqrt(pb), true, true));
          if (op == Op::Log) return push(TStep{op, p}, unary(p, std::max(1.4, std::log(pb)), false, false));
          return push(TStep{op, p}, unary(p, 4, true, pb <= 4));
        }
      }
    }
    if (r < 55) {
      static const Op kScalar[] = {Op::MulS, Op::AddS, Op::SubS, Op::DivS, Op::RsubS, Op::Pow2};
      static const double kValues[] = {0.5, 2.0, -1.5, 0.25, 1.0, -0.75};
      const Op op = kScalar[pick(6)];
      const double c = kValues[pick(6)];
      const double b = va.bound;
      switch (op) {
        case Op::MulS: return push(TStep{op, a, -1, c}, unary(a, b * std::abs(c), va.nonneg && c > 0, va.positive && c >= 1));
        case Op::AddS: return push(TStep{op, a, -1, c}, unary(a, b + std::abs(c), va.nonneg && c >= 0, va.nonneg && c >= 0.25));
        case Op::SubS: return push(TStep{op, a, -1, c}, unary(a, b + std::abs(c), false, false));
        case Op::DivS: return push(TStep{op, a, -1, c}, unary(a, b / std::abs(c), va.nonneg && c > 0, false));
        case Op::RsubS: return push(TStep{op, a, -1, c}, unary(a, b + std::abs(c), false, false));
        default: return push(TStep{Op::Pow2, a}, unary(a, b * b, true, false));
      }
    }
    if (r < 80) {
      static const Op kBinary[] = {Op::AddT, Op::SubT, Op::MulT, Op::DivT, Op::RsubT, Op::MaxT, Op::MinT};
      const Op op = kBinary[pick(7)];
      int other = -1;
      if (pick(2) == 0 && values_.size() > 1) {
        const int o = pick(static_cast<int>(values_.size()));
        if (o != a && !values_[static_cast<size_t>(o)].overwritten) other = o;
      }
      if (other < 0) {
        static const Shape kShapes[] = {Shape::Full, Shape::Full, Shape::Col, Shape::Row, Shape::Zero};
        const Shape s = kShapes[pick(5)];
        other = addInput(s, pick(4) == 0 ? at::kFloat : base_, op == Op::DivT);
        if (a >= other) ++a;
      }
      if (op == Op::DivT) other = positive(other);
      const GenValue& vo = values_[static_cast<size_t>(other)];
      const GenValue& va2 = values_[static_cast<size_t>(a)];
      GenValue v{broadcast(va2.shape, vo.shape), promote(va2, vo), 0, false, false};
      switch (op) {
        case Op::MulT: v.bound = va2.bound * vo.bound; v.nonneg = va2.nonneg && vo.nonneg; break;
        case Op::DivT: v.bound = va2.bound * 4; v.nonneg = va2.nonneg; break;
        case Op::AddT: v.bound = va2.bound + vo.bound; v.nonneg = va2.nonneg && vo.nonneg;
          v.positive = v.nonneg && (va2.positive || vo.positive); break;
        case Op::MaxT: v.bound = std::max(va2.bound, vo.bound); v.nonneg = va2.nonneg || vo.nonneg;
          v.positive = va2.positive || vo.positive; break;
        case Op::MinT: v.bound = std::max(va2.bound, vo.bound); v.nonneg = va2.nonneg && vo.nonneg;
          v.positive = va2.positive && vo.positive; break;
        default: v.bound = va2.bound + vo.bound; break;
      }
      return push(TStep{op, a, other}, v);
    }
    if (r < 90) return cast(a);
    if (va.shape != Shape::Full) return push(TStep{Op::Neg, a}, unary(a, va.bound, false, false));
    static const Op kReduce[] = {Op::SumRow, Op::MeanRow, Op::AmaxRow, Op::SoftmaxRow, Op::LogSoftmaxRow};
    const Op op = kReduce[pick(5)];
    if (op == Op::SoftmaxRow) return push(TStep{op, a}, unary(a, 1, true, false));
    if (op == Op::LogSoftmaxRow) {
      return push(TStep{op, a}, unary(a, 2 * va.bound + std::log(static_cast<double>(t_.cols)) + 1, false, false));
    }
    GenValue v = va;
    v.shape = Shape::Row;
    if (op == Op::SumRow) {
      v.bound = va.bound * static_cast<double>(t_.cols);
      v.positive = va.positive;
    }
    return push(TStep{op, a}, v);
  }

  std::mt19937_64 rng_;
  std::mt19937_64 sideRng_;
  Template t_;
  std::vector<GenValue> values_;
  at::ScalarType base_ = at::kFloat;
};

// ---------------------------------------------------------------- threads

// A thread that runs one task at a time for the program.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> guard(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void start(std::function<void()> task) {
    std::lock_guard<std::mutex> guard(mu_);
    task_ = std::move(task);
    done_ = false;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  void run(std::function<void()> task) {
    start(std::move(task));
    wait();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || task_; });
      if (stop_) return;
      std::function<void()> task = std::move(task_);
      task_ = nullptr;
      lock.unlock();
      try {
        task();
      } catch (...) {
      }
      lock.lock();
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;
  bool done_ = true;
  bool stop_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------- a program run

struct Reg {
  at::Tensor t;
  const c10::StorageImpl* storage = nullptr;  // t's, kept once t is dropped
  int stream = 0;  // the stream it was created on
  int parent = -1, parent2 = -1;
  bool view = false;      // shares its parent's values
  bool modified = false;  // an in-place op wrote it after it was created
  std::vector<int> writtenFrom;  // the other operands of in-place steps that wrote it since (Note [In-place steps])
  bool inPlaceResult = false;    // an in-place step's result: the storage of the register it wrote
  uint64_t deferredEpoch = ~0ULL;
};

struct Item {
  double value;
  int reg;
};

struct RunResult {
  std::vector<Reg> regs;
  std::vector<Item> items;
  std::string error;  // an exception the program threw
};

class Program {
 public:
  Program(Choices& choices, const std::vector<Template>& pool, uint64_t seed, bool engineRun, LaunchLog& log,
          FuzzReport& report, Worker& worker)
      : ch_(choices), pool_(pool), seed_(seed), engine_(engineRun), log_(log), report_(report), worker_(worker) {}
  std::ostream* trace_ = nullptr;

  RunResult run() {
    RunResult out;
    setCurrentFuzzStream(0);
    try {
      body();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    try {
      command(CommandKind::Synchronize);
      synchronizeFuzzStreams();  // Note [The fuzz suite on a GPU]: the values are read on the host next
    } catch (const std::exception& e) {
      if (out.error.empty()) out.error = e.what();
    }
    setCurrentFuzzStream(0);
    out.regs = std::move(regs_);
    out.items = std::move(items_);
    return out;
  }

 private:
  void count(const std::string& name, uint64_t n = 1) { count(name.c_str(), n); }
  void count(const char* name, uint64_t n = 1) {
    if (!engine_) return;
    report_.counts[name] += n;
    if (trace_ != nullptr) {
      const FusionStats st = fuzzEngine().stats();
      *trace_ << "  " << name << " (values " << regs_.size() << ", stream " << currentFuzzStream() << "; flushes "
              << st.fusedFlushes << " fused " << st.unfusedFlushes << " unfused, " << st.deferredCalls
              << " deferred)\n";
    }
  }

  static bool onDevice() { return fuzzDevice() != c10::DeviceType::CPU; }

  uint64_t flushEpoch() const {
    const FusionStats s = fuzzEngine().stats();
    return s.fusedFlushes + s.unfusedFlushes + s.failedFlushes;
  }
  bool pending(int r) const { return engine_ && regs_[static_cast<size_t>(r)].deferredEpoch == flushEpoch(); }

  int addReg(at::Tensor t, int parent = -1, int parent2 = -1, bool view = false) {
    Reg reg;
    reg.t = std::move(t);
    reg.storage = reg.t.storage().unsafeGetStorageImpl();
    reg.stream = currentFuzzStream();
    reg.parent = parent;
    reg.parent2 = parent2;
    reg.view = view;
    regs_.push_back(std::move(reg));
    if (engine_ && trace_ != nullptr && regs_.back().t.defined()) {
      const Reg& b = regs_.back();
      *trace_ << "    new value " << regs_.size() - 1 << " of " << parent << ", " << parent2 << (view ? " (view)" : "")
              << ": " << b.t.sizes() << " " << b.t.strides() << " " << b.t.scalar_type() << " storage " << b.storage
              << " data " << b.t.data_ptr() << "\n";
    }
    return static_cast<int>(regs_.size()) - 1;
  }

  std::vector<int> alive() const {
    std::vector<int> out;
    for (size_t i = 0; i < regs_.size(); ++i) {
      if (regs_[i].t.defined()) out.push_back(static_cast<int>(i));
    }
    return out;
  }
  int anyAlive() {
    const std::vector<int> a = alive();
    return a.empty() ? -1 : a[static_cast<size_t>(ch_.pick(static_cast<int>(a.size())))];
  }

  static constexpr CommandKind kCommandKinds[] = {CommandKind::Launch, CommandKind::Copy, CommandKind::EventRecord,
                                                  CommandKind::StreamWait, CommandKind::Synchronize};

  void command(CommandKind kind) {
    switch (kind) {
      case CommandKind::Launch: count("commands.launch"); break;
      case CommandKind::Copy: count("commands.copy"); break;
      case CommandKind::EventRecord: count("commands.eventRecord"); break;
      case CommandKind::StreamWait: count("commands.streamWait"); break;
      case CommandKind::Synchronize: count("commands.synchronize"); break;
    }
    fuzzGate().command(kind);
  }

  int newInput(const TInput& in, int64_t rows, int64_t cols) {
    at::Tensor t;
    {
      FusionBypass bypass;  // the program's data, not its ops
      auto gen = at::make_generator<at::CPUGeneratorImpl>(mix(seed_, regs_.size()));
      t = inputFrom(in, cols, at::rand(drawnSizes(in, rows, cols), gen, at::kFloat).to(dataDevice()));
    }
    if (in.strided) count("stridedInputs");
    if (in.transposed) count("transposedInputs");
    if (!in.perm.empty()) count("permutedInputs");
    return addReg(std::move(t));
  }

  int step(const TStep& s, int a, int b) {
    const uint64_t before = engine_ ? fuzzEngine().stats().deferredCalls : 0;
    const bool ofPending = pending(a);
    at::Tensor out = applyStep(s, regs_[static_cast<size_t>(a)].t, b >= 0 ? regs_[static_cast<size_t>(b)].t : at::Tensor());
    const int r = addStepResult(s, std::move(out), a, b);
    count("steps");
    if (s.op == Op::RotateHalf) {
      count("rotateHalfSteps");
      if (ofPending) count("rotateHalfOfPending");  // its halves are views of an unwritten value
      if (engine_ && fuzzEngine().stats().deferredCalls >= before + 2) count("rotateHalfDeferred");
    }
    if (s.op == Op::LayerNormRow) {
      count("layerNormSteps");
      if (engine_ && fuzzEngine().stats().deferredCalls > before) count("layerNormDeferred");
    }
    if (s.op == Op::GroupNormS) {
      count("groupNormSteps");
      if (engine_ && fuzzEngine().stats().deferredCalls > before) count("groupNormDeferred");
    }
    if (s.op == Op::BatchNormEval) {
      count("batchNormSteps");
      if (engine_ && fuzzEngine().stats().deferredCalls > before) count("batchNormDeferred");
    }
    if (s.op >= Op::ClampS && s.op <= Op::HardtanhS && engine_ && fuzzEngine().stats().deferredCalls > before) {
      count(s.op == Op::HardtanhS ? "hardtanhDeferred" : "clampDeferred");
    }
    if (s.op == Op::LeakyReluS && engine_ && fuzzEngine().stats().deferredCalls > before) count("leakyReluDeferred");
    if ((s.op == Op::Hardswish || s.op == Op::Hardsigmoid) && engine_ && fuzzEngine().stats().deferredCalls > before) {
      count("hardActivationDeferred");
    }
    if ((s.op == Op::Softplus || s.op == Op::Mish) && engine_ && fuzzEngine().stats().deferredCalls > before) {
      count("softplusMishDeferred");
    }
    if ((s.op == Op::MaxT || s.op == Op::MinT) && engine_ && fuzzEngine().stats().deferredCalls > before) {
      count("maximumDeferred");
    }
    if (s.inPlace) {  // Note [In-place steps]
      count("inPlaceSteps");
      if (ofPending) count("inPlaceStepsOnPending");
      if (engine_ && fuzzEngine().stats().deferredCalls > before) count("inPlaceDeferred");
    }
    if (s.op == Op::Clone) {
      count("cloneSteps");
      if (engine_ && fuzzEngine().stats().deferredCalls > before) count("cloneDeferred");
    }
    if (engine_ && fuzzEngine().stats().deferredCalls > before) regs_[static_cast<size_t>(r)].deferredEpoch = flushEpoch();
    if (engine_ && trace_ != nullptr) {
      *trace_ << "    value " << r << " = op " << static_cast<int>(s.op) << "(" << a << ", " << b << ") "
              << regs_[static_cast<size_t>(r)].t.sizes() << (pending(r) ? " deferred" : "") << "\n";
    }
    return r;
  }

  void switchStream() {
    const int s = ch_.pick(3);
    count("streamSwitches");
    if (engine_ && fuzzGate().pending() > 0 && s != currentFuzzStream()) count("streamSwitchesWhilePending");
    if (onDevice() && s != currentFuzzStream()) {
      // Note [The fuzz suite on a GPU]: the new stream waits on the old one.
      command(CommandKind::EventRecord);
      command(CommandKind::StreamWait);
    }
    orderedSwitch(s);
  }

  void view(int r) {
    const at::Tensor& t = regs_[static_cast<size_t>(r)].t;
    count("views");
    if (pending(r)) count("viewsOfPending");
    at::Tensor v;
    switch (ch_.pick(5)) {
      case 0: v = t.is_contiguous() ? t.view({-1}) : t.unsqueeze(0); break;
      case 1: v = t.unsqueeze(0); break;
      case 2: v = t.dim() == 2 ? t.t() : t.unsqueeze(-1); break;
      case 3: v = t.dim() >= 1 ? t.narrow(-1, 0, std::max<int64_t>(1, t.size(-1) / 2)) : t.view({1}); break;
      default: v = t.dim() >= 1 && t.size(0) > 0 ? t.select(0, 0) : t.view({1}); break;
    }
    addReg(std::move(v), r, -1, true);
  }

  void metadataInPlace(int r) {
    at::Tensor& t = regs_[static_cast<size_t>(r)].t;
    count("metadataInPlace");
    if (pending(r)) count("metadataInPlaceOnPending");
    const int k = ch_.pick(4);
    if (engine_ && trace_ != nullptr) *trace_ << "    value " << r << " " << t.sizes() << " kind " << k << "\n";
    if (k == 0 && t.dim() == 2) {
      t.t_();
    } else if (k == 1 && t.dim() >= 1 && t.size(0) == 1) {
      t.squeeze_(0);
    } else if (k == 2 && t.is_contiguous() && t.numel() > 1) {
      t.as_strided_({t.numel() - 1}, {1}, t.storage_offset() + 1);  // another offset into the same storage
    } else {
      t.unsqueeze_(0);
    }
  }

  void markModified(int r) {
    const at::Tensor& t = regs_[static_cast<size_t>(r)].t;
    for (Reg& reg : regs_) {
      if (reg.t.defined() && reg.t.is_alias_of(t)) reg.modified = true;
    }
  }

  void inPlace(int r) {
    count("inPlace");
    if (pending(r)) count("inPlaceOnPending");
    command(CommandKind::Launch);  // the in-place op's kernel
    at::Tensor& t = regs_[static_cast<size_t>(r)].t;
    switch (ch_.pick(4)) {
      case 0: t.mul_(0.5); break;
      case 1: t.add_(1.0); break;
      case 2: t.neg_(); break;
      default: t.zero_(); break;
    }
    markModified(r);
  }

  void item(int r) {
    const at::Tensor& t = regs_[static_cast<size_t>(r)].t;
    count("items");
    if (pending(r)) count("itemsOfPending");
    if (t.numel() == 0) {
      command(CommandKind::Copy);
      command(CommandKind::Synchronize);
      return;
    }
    const int64_t at = ch_.pick(static_cast<int>(std::min<int64_t>(t.numel(), 1 << 20)));
    // As `.item()` runs on a device: the element's view first (reshape copies a strided value: a clone the
    // engine may defer, Note [Relayout copies]), then the copy to the host and its synchronize, then the read.
    const at::Tensor element = t.reshape({-1})[at];
    command(CommandKind::Copy);
    command(CommandKind::Synchronize);
    items_.push_back(Item{element.item<double>(), r});
  }

  // Note [Calls inside a foreign op]
  // cumsum and flip reach no trampoline of the engine, but their CUDA
  // kernels may call ops that do: cumsum's scan takes `self.contiguous()`,
  // a clone the engine defers when a strided copy is a published chain, and
  // the scan kernel then reads that copy's deferred output. In a serving
  // process the scan's launch reaches the shim's hook, which flushes the copy
  // first. The fake gate sees only the commands a program issues, and the
  // program's stand-in for the op's launch comes before the op: with the
  // fake gate, these two run their nested calls as their own (a bypass), as
  // the hook would make them; under the shim (Note [The fuzz suite under the
  // shim]) the real hook orders them, and that is what the shim run checks.
  static bool reachesNoTrampoline(int which) { return which == 1 || which == 2; }

  at::Tensor foreignOpAsLaunched(const at::Tensor& t, int which) {
    std::optional<FusionBypass> nested;
    if (reachesNoTrampoline(which) && !fuzzUnderShim()) nested.emplace();
    return foreignOp(t, which);
  }

  at::Tensor foreignOp(const at::Tensor& t, int which) {
    switch (which) {
      case 0: return t.clone();
      case 1: return t.dim() >= 1 ? at::cumsum(t, -1) : t.clone();
      case 2: return t.dim() >= 1 ? at::flip(t, {-1}) : t.clone();
      case 3: return t.dim() >= 1 ? at::softmax(t, -1) : t.clone();
      default: return t.dim() >= 1 ? at::cat({t, t}, 0) : t.clone();
    }
  }

  void foreign(int r) {
    count("foreignOps");
    if (pending(r)) count("foreignOpsOnPending");
    const int which = ch_.pick(5);
    if (engine_ && trace_ != nullptr) *trace_ << "    foreign op " << which << " of value " << r << "\n";
    command(CommandKind::Launch);
    addReg(foreignOpAsLaunched(regs_[static_cast<size_t>(r)].t, which), r);
  }

  // A GEMM or a convolution the engine lets pass (Note [Ops a chain lets pass]): of a held value (a pending one
  // is computed first) or of fresh tensors (what is pending stays pending). Contiguous values only: reshaping
  // another one copies it, an op that is neither deferred nor let pass. One in four is a 3 x 3 convolution of
  // the value seen as a one-channel image (ATen's CPU picks oneDNN's or its own kernel by the dtype, CUDA cuDNN's),
  // chosen from the seed and the register count, so that the program's other draws stay as they were.
  void matmul(int r) {
    const at::Tensor t = regs_[static_cast<size_t>(r)].t;
    if (!t.is_floating_point() || t.dim() < 1 || t.numel() == 0 || t.size(-1) == 0) return;
    const bool ofValue = t.is_contiguous() && ch_.pick(2) == 0;
    const bool conv = (mix(seed_, 0xC0417 + regs_.size()) & 3) == 0;
    const bool wasPending = engine_ && fuzzGate().pending() != 0;
    const uint64_t epoch = engine_ ? flushEpoch() : 0;
    at::Tensor a, w;
    {
      FusionBypass bypass;  // the program's data, not its ops
      auto gen = at::make_generator<at::CPUGeneratorImpl>(mix(seed_, 0x6E33 + regs_.size()));
      const std::vector<int64_t> wSizes = conv ? std::vector<int64_t>{2, 1, 3, 3} : std::vector<int64_t>{t.size(-1), 8};
      w = (at::rand(wSizes, gen, at::kFloat) - 0.5).to(t.device(), t.scalar_type());
      const std::vector<int64_t> aSizes = conv ? std::vector<int64_t>{1, 1, 4, t.size(-1)} : std::vector<int64_t>{4, t.size(-1)};
      if (!ofValue) a = (at::rand(aSizes, gen, at::kFloat) - 0.5).to(t.device(), t.scalar_type());
    }
    const char* what = conv ? "convolutions" : "matmuls";
    count(what);
    if (ofValue) {
      if (pending(r)) count(std::string(what) + "OfPending");
      a = conv ? t.view({1, 1, -1, t.size(-1)}) : t.view({-1, t.size(-1)});
    }
    at::Tensor out = conv ? at::conv2d(a, w, {}, {1, 1}, {1, 1}) : at::mm(a, w);
    if (!ofValue && wasPending && flushEpoch() == epoch) count(std::string(what) + "LetPass");
    addReg(std::move(out), ofValue ? r : -1);
  }

  // An op of a library with its own CUDA runtime (Note [Ops that flush first]): no command comes before it (on
  // the CPU none reaches the hook at all), so a pending value it reads is written only if the engine flushed at
  // its call. Contiguous float32 values only (dot's), read whole.
  void flushingOp(int r) {
    const at::Tensor t = regs_[static_cast<size_t>(r)].t;
    if (t.scalar_type() != at::kFloat || t.dim() < 1 || t.numel() == 0 || !t.is_contiguous()) return;
    count("flushingOps");
    if (pending(r)) count("flushingOpsOnPending");
    if (engine_ && fuzzGate().pending() != 0) count("flushingOpsWhilePending");
    const at::Tensor flat = t.view({-1});
    addReg(at::dot(flat, flat), r);
  }

  // A step's result as a register: `.to()` of a tensor's own dtype returns the tensor itself (a second name, not a
  // new value); an in-place step's result is computed from its operands (not a second name of `a`'s value), its
  // storage the one it wrote, and every register of that tensor now holds a value computed from `b` too.
  int addStepResult(const TStep& s, at::Tensor out, int a, int b) {
    const bool same = out.unsafeGetTensorImpl() == regs_[static_cast<size_t>(a)].t.unsafeGetTensorImpl();
    const int r = addReg(std::move(out), a, b, same && !s.inPlace);
    regs_[static_cast<size_t>(r)].inPlaceResult = s.inPlace;
    if (s.inPlace && b >= 0) {
      for (Reg& reg : regs_) {
        if (reg.t.defined() && reg.t.is_alias_of(regs_[static_cast<size_t>(r)].t)) reg.writtenFrom.push_back(b);
      }
    }
    return r;
  }

  // A step on another thread: its call flushes what is pending (Note [The fusion engine's lock]).
  void threadStep(const TStep& s, int a, int b) {
    count("threadSteps");
    if (pending(a) || (b >= 0 && pending(b))) count("threadStepsOnPending");
    at::Tensor out;
    const at::Tensor ta = regs_[static_cast<size_t>(a)].t;
    const at::Tensor tb = b >= 0 ? regs_[static_cast<size_t>(b)].t : at::Tensor();
    std::string error;
    const int stream = currentFuzzStream();
    worker_.run([&] {
      try {
        if (onDevice()) setCurrentFuzzStream(stream);  // Note [The fuzz suite on a GPU]
        out = applyStep(s, ta, tb);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    if (!error.empty()) throw std::runtime_error("on the worker: " + error);
    if (s.inPlace) count("threadStepsInPlace");
    addStepResult(s, std::move(out), a, b);
  }

  void threadForeign(int r) {
    count("threadForeignOps");
    if (pending(r)) count("threadForeignOpsOnPending");
    const int which = ch_.pick(5);
    if (engine_ && trace_ != nullptr) *trace_ << "    thread's foreign op " << which << " of value " << r << "\n";
    const at::Tensor t = regs_[static_cast<size_t>(r)].t;
    at::Tensor out;
    std::string error;
    const int stream = currentFuzzStream();
    worker_.run([&] {
      try {
        if (onDevice()) setCurrentFuzzStream(stream);  // Note [The fuzz suite on a GPU]
        fuzzGate().command(CommandKind::Launch);
        out = foreignOpAsLaunched(t, which);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    if (!error.empty()) throw std::runtime_error("on the worker: " + error);
    addReg(std::move(out), r);
  }

  void drop(int r) {
    if (r < 0 || !regs_[static_cast<size_t>(r)].t.defined()) return;
    count("dropped");
    if (engine_ && trace_ != nullptr) *trace_ << "    value " << r << "\n";
    at::Tensor& t = regs_[static_cast<size_t>(r)].t;
    if (onDevice() && t.numel() > 0) {
      // Note [Freeing a value used on another stream]
      // The caching allocator hands a freed block out again at once on the
      // stream that allocated it. A value allocated on one fuzz stream and
      // read on another may still be read there when the program drops it,
      // and the concurrent thread allocates on the default stream meanwhile:
      // a correct program records the stream it is on (Tensor.record_stream),
      // so the block waits for that stream's work, which follows every
      // earlier stream's through the switches' event waits. Both runs do it.
      FusionBypass bypass;
      t.record_stream(c10::impl::getDeviceGuardImpl(t.device().type())->getStream(t.device()));
    }
    t.reset();
  }

  // One action between template instances (or inside one, on values the rest of it does not read).
  void action(bool streams, bool threads, const std::set<int>& untouchable) {
    int r = anyAlive();
    if (r < 0) return;
    const bool free = untouchable.count(r) == 0;
    switch (ch_.pick(14)) {
      case 0: command(kCommandKinds[ch_.pick(5)]); break;
      case 1: if (streams) switchStream(); break;
      case 2: view(r); break;
      case 3: if (free) metadataInPlace(r); break;
      case 4: item(r); break;
      case 5: if (free) inPlace(r); break;
      case 6: foreign(r); break;
      case 7: if (threads) threadStep(TStep{Op::Silu, r}, r, -1); break;
      case 8: if (threads) threadForeign(r); break;
      case 9: if (free) drop(r); break;
      case 10:
        if (!dropLater_.empty()) {
          const size_t k = static_cast<size_t>(ch_.pick(static_cast<int>(dropLater_.size())));
          if (untouchable.count(dropLater_[k]) == 0) drop(dropLater_[k]);
          dropLater_.erase(dropLater_.begin() + static_cast<std::ptrdiff_t>(k));
        }
        break;
      case 11: matmul(r); break;
      case 12: flushingOp(r); break;
      default: {
        // A step of the vocabulary outside any template on a held value.
        const at::Tensor& t = regs_[static_cast<size_t>(r)].t;
        if (t.is_floating_point()) step(TStep{Op::MulS, r, -1, 0.5}, r, -1);
        break;
      }
    }
  }

  void instance(const Template& tpl, bool streams, bool threads) {
    count("instances");
    const size_t nIn = tpl.inputs.size();
    std::vector<int> map(nIn + tpl.steps.size(), -1);
    for (size_t k = 0; k < nIn; ++k) {
      const TInput& in = tpl.inputs[k];
      const std::vector<int64_t> sizes = valueSizes(in, tpl.rows, tpl.cols);
      if (!in.positive && ch_.chance(0.3)) {
        std::vector<int> fit;
        for (int r : alive()) {
          const at::Tensor& t = regs_[static_cast<size_t>(r)].t;
          if (t.sizes().vec() == sizes && t.scalar_type() == in.dtype &&
              std::find(map.begin(), map.end(), r) == map.end()) {
            fit.push_back(r);
          }
        }
        if (!fit.empty()) {
          const int r = fit[static_cast<size_t>(ch_.pick(static_cast<int>(fit.size())))];
          // The template's bounds hold for inputs within [-2, 2] (eager's values decide; the engine run replays).
          if (withinInputRange(r)) {
            map[k] = r;
            count("inputsReused");
            continue;
          }
        }
      }
      map[k] = newInput(in, tpl.rows, tpl.cols);
    }
    std::vector<bool> keep = tpl.keeps[static_cast<size_t>(ch_.pick(2))];
    if (ch_.chance(0.2)) {
      for (size_t k = 0; k < keep.size(); ++k) keep[k] = ch_.chance(0.3);
    }
    bool mutated = false;
    size_t done = 0;
    for (; done < tpl.steps.size(); ++done) {
      TStep s = tpl.steps[done];
      if (done > 0 && ch_.chance(0.12)) {
        mutated = true;
        // Values the rest of the instance reads are not changed in place or dropped.
        std::set<int> untouchable;
        for (size_t k = done; k < tpl.steps.size(); ++k) {
          untouchable.insert(map[static_cast<size_t>(tpl.steps[k].a)]);
          if (tpl.steps[k].b >= 0) untouchable.insert(map[static_cast<size_t>(tpl.steps[k].b)]);
        }
        if (ch_.chance(0.15)) {
          count("truncated");
          break;
        }
        action(streams, threads, untouchable);
      }
      if (isScalarOp(s.op) && ch_.chance(0.03)) {
        s.scalar += 0.125;
        mutated = true;
        count("scalarsChanged");
      }
      const int a = map[static_cast<size_t>(s.a)];
      const int b = s.b >= 0 ? map[static_cast<size_t>(s.b)] : -1;
      if (threads && ch_.chance(0.05)) {
        threadStep(s, a, b);
        map[nIn + done] = static_cast<int>(regs_.size()) - 1;
      } else {
        map[nIn + done] = step(s, a, b);
      }
    }
    if (mutated) count("instancesMutated");
    for (size_t k = 0; k < done; ++k) {
      if (keep[k]) continue;
      const int r = map[nIn + k];
      if (ch_.chance(0.2)) {
        dropLater_.push_back(r);
      } else {
        drop(r);
      }
    }
  }

  bool withinInputRange(int r) {
    bool eagerAnswer = false;
    if (!engine_) {
      FusionBypass bypass;
      const at::Tensor& t = regs_[static_cast<size_t>(r)].t;
      eagerAnswer = t.numel() > 0 && t.abs().max().item<double>() <= 2.0;
    }
    return ch_.decide(eagerAnswer);
  }

  void noise(uint64_t seed) {
    // Ops of another thread on its own values, while the program runs.
    std::mt19937_64 rng(seed);
    at::Tensor x, w;
    {
      FusionBypass bypass;
      x = at::rand({8, 16}).to(dataDevice()) * 4 - 2;
      w = at::rand({16}).to(dataDevice()) * 4 - 2;
    }
    noiseInputs_ = {x, w};
    at::Tensor v = x;
    noiseOps_.clear();
    for (int i = 0; i < 24; ++i) {
      const int op = static_cast<int>(rng() % 5);
      noiseOps_.push_back(op);
      v = noiseStep(op, v, w);
      if (rng() % 6 == 0) fuzzGate().command(CommandKind::Launch);
    }
    noiseOut_ = v;
    // Note [The fuzz suite on a GPU]: the main thread reads these values after this task, on its own stream.
    if (onDevice()) {
      fuzzGate().command(CommandKind::Synchronize);
      synchronizeFuzzStreams();
    }
  }
  static at::Tensor noiseStep(int op, const at::Tensor& v, const at::Tensor& w) {
    switch (op) {
      case 0: return at::tanh(v);
      case 1: return v * w;
      case 2: return at::silu(v) + 0.25;
      case 3: return at::sigmoid(v) - w;
      default: return v * 0.5;
    }
  }

  void body() {
    const bool streams = ch_.chance(0.3);
    const bool threads = ch_.chance(0.3);
    const bool concurrent = ch_.chance(0.1);
    // The noise thread uses this program's members: it is waited for however body() ends (a throw included).
    struct NoiseJoin {
      bool started = false;
      ~NoiseJoin() {
        if (started) noiseWorker().wait();
      }
    } noiseJoin;
    if (concurrent && engine_) {
      count("concurrentPrograms");
      const uint64_t noiseSeed = mix(seed_, 0xC0FFEE);
      noiseWorker().start([this, noiseSeed] { noise(noiseSeed); });
      noiseJoin.started = true;
    }
    const int instances = 1 + ch_.pick(4);
    for (int i = 0; i < instances; ++i) {
      for (int k = ch_.pick(3); k > 0; --k) action(streams, threads, {});
      instance(pool_[static_cast<size_t>(ch_.pick(static_cast<int>(pool_.size())))], streams, threads);
    }
    for (int k = ch_.pick(3); k > 0; --k) action(streams, threads, {});
    if (concurrent && engine_) {
      noiseWorker().wait();
      FusionBypass bypass;
      at::Tensor v = noiseInputs_.at(0);
      for (int op : noiseOps_) v = noiseStep(op, v, noiseInputs_.at(1));
      count("concurrentCalls", noiseOps_.size());
      if (!noiseOut_.defined() || !at::equal(v, noiseOut_)) noiseMismatch = true;
    }
  }

  static Worker& noiseWorker() {
    static Worker* w = new Worker();  // leaked: it may still be parked at exit
    return *w;
  }

 public:
  bool noiseMismatch = false;

 private:
  Choices& ch_;
  const std::vector<Template>& pool_;
  uint64_t seed_;
  bool engine_;
  LaunchLog& log_;
  FuzzReport& report_;
  Worker& worker_;
  std::vector<Reg> regs_;
  std::vector<Item> items_;
  std::vector<int> dropLater_;
  std::vector<at::Tensor> noiseInputs_;
  std::vector<int> noiseOps_;
  at::Tensor noiseOut_;
};

// ---------------------------------------------------------------- the checker

enum class Taint { None, Direct, Derived };

struct Compared {
  bool ok = true;
  bool unwritten = false;
  std::string what;
};

// Where two values of one shape differ, in a few words: a replay needs to know whether a value was never
// written (all NaN), written in part (a tail, every other row) or written wrong.
std::string whereDifferent(const at::Tensor& g, const at::Tensor& w, const at::Tensor& gn, const at::Tensor& wn) {
  const at::Tensor same = at::eq(g.view({-1}).view(at::kByte).view({g.numel(), -1}),
                                 w.view({-1}).view(at::kByte).view({w.numel(), -1}))
                              .all(1);
  const at::Tensor differ = at::logical_not(same).nonzero().view({-1});
  std::ostringstream s;
  s << differ.numel() << " of " << g.numel() << " elements (" << g.sizes() << " " << g.scalar_type() << ")";
  s << ", " << at::logical_and(gn, at::logical_not(wn)).sum().item<int64_t>() << " NaN where eager has none";
  if (differ.numel() > 0) {
    s << ", first at " << differ[0].item<int64_t>() << ", last at " << differ[-1].item<int64_t>();
  }
  return s.str();
}

Compared compareValues(const at::Tensor& got, const at::Tensor& want, Taint taint, double tol) {
  FusionBypass bypass;  // the checker's ops are not the program's
  if (!got.is_cpu() || !want.is_cpu()) return compareValues(got.cpu(), want.cpu(), taint, tol);
  Compared c;
  if (got.sizes() != want.sizes() || got.scalar_type() != want.scalar_type()) {
    c.ok = false;
    std::ostringstream s;
    s << "metadata " << got.sizes() << " " << got.scalar_type() << " vs eager " << want.sizes() << " "
      << want.scalar_type();
    c.what = s.str();
    return c;
  }
  const at::Tensor g = got.contiguous(), w = want.contiguous();
  const at::Tensor gn = at::isnan(g), wn = at::isnan(w);
  c.unwritten = at::logical_and(gn, at::logical_not(wn)).any().item<bool>();
  if (taint == Taint::None) {
    c.ok = std::memcmp(g.data_ptr(), w.data_ptr(), static_cast<size_t>(g.nbytes())) == 0;
    if (!c.ok) c.what = "not bit for bit: " + whereDifferent(g, w, gn, wn);
  } else if (taint == Taint::Direct) {
    at::Tensor gd = g.to(at::kDouble), wd = w.to(at::kDouble);
    at::Tensor within = (gd == wd) | ((gd - wd).abs() <= tol * (wd.abs() + 1)) | (gn & wn);
    c.ok = within.all().item<bool>();
    if (!c.ok) {
      std::ostringstream s;
      s << "beyond the chain's tolerance " << tol << ": worst " << ((gd - wd).abs() / (wd.abs() + 1)).nan_to_num(1e300).max().item<double>();
      c.what = s.str();
    }
  } else {
    c.ok = at::equal(gn, wn) && at::equal(at::isinf(g), at::isinf(w));
    if (!c.ok) c.what = "NaN or infinity where eager has none (downstream of a fused value)";
  }
  if (c.unwritten) c.ok = false;
  return c;
}

class Checker {
 public:
  Checker(const RunResult& got, const LaunchLog& log) : got_(got), log_(log) {}

  // How far a value is from bit-for-bit eager, and the tolerance of the chain that wrote it. The taints are
  // the least fixpoint of the rules below over every register at once: an in-place step makes a register
  // depend on a value that may itself derive from that register (x += x / s), a cycle a memoized recursion
  // would cut with a placeholder and leave the later value untainted.
  std::pair<Taint, double> taint(int r) {
    if (taints_.empty()) computeTaints();
    return taints_[static_cast<size_t>(r)];
  }

  // Whether a fused kernel wrote this value (not a view of one) on another
  // stream than the one its call ran on.
  bool writtenOnAnotherStream(int r) const {
    const Reg& reg = got_.regs[static_cast<size_t>(r)];
    if (reg.view || !reg.t.defined()) return false;  // a dropped value's storage may be another's since
    // An in-place result's storage holds the values written before it too, each checked under its own register (a
    // chain never spans a stream switch).
    if (reg.inPlaceResult) return false;
    for (const LaunchLog::Write& w : log_.written(reg.storage)) {
      if (w.stream != reg.stream) return true;
    }
    return false;
  }

 private:
  const RunResult& got_;
  const LaunchLog& log_;
  std::vector<std::pair<Taint, double>> taints_;

  // The rules: a fused write of the register's storage taints it directly (with that chain's tolerance); a
  // parent's taint is inherited (as it is through a view, as derived otherwise); a value an in-place step wrote
  // into the tensor taints it as derived; a modified register is at most derived. Each pass only raises a
  // taint, so the passes end.
  void computeTaints() {
    const size_t n = got_.regs.size();
    taints_.assign(n, {Taint::None, 0.0});
    // The kinds only rise (None, Direct, Derived); n + 1 passes bound a tolerance that a cycle passes around.
    bool changed = true;
    for (size_t pass = 0; changed && pass <= n + 1; ++pass) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        const Reg& reg = got_.regs[r];
        std::pair<Taint, double> t{Taint::None, 0.0};
        for (const LaunchLog::Write& w : log_.written(reg.storage)) {
          if (w.tolerance > t.second) t = {Taint::Direct, w.tolerance};
        }
        for (int p : {reg.parent, reg.parent2}) {
          if (p < 0) continue;
          const auto& pt = taints_[static_cast<size_t>(p)];
          if (pt.first == Taint::None) continue;
          const Taint inherited = reg.view ? pt.first : Taint::Derived;
          if (inherited > t.first) t = {inherited, pt.second};
        }
        for (int p : reg.writtenFrom) {
          const auto& pt = taints_[static_cast<size_t>(p)];
          if (pt.first != Taint::None && Taint::Derived > t.first) t = {Taint::Derived, pt.second};
        }
        if (reg.modified && t.first == Taint::Direct) t.first = Taint::Derived;
        if (t.first < taints_[r].first) t = taints_[r];  // never lower a kind an earlier pass found
        if (t != taints_[r]) {
          taints_[r] = t;
          changed = true;
        }
      }
    }
  }
};

// ---------------------------------------------------------------- the pool

struct Pool {
  std::vector<Template> templates;
  size_t chains = 0;
  size_t chainsWithLayouts = 0;  // strided values (Note [Chain layouts])
  size_t chainsWithCat = 0;
  size_t chainsWithSoftmax = 0;  // _softmax or _log_softmax (Note [Softmax in a chain])
  size_t chainsWithLayerNorm = 0;  // native_layer_norm (Note [LayerNorm in a chain])
  size_t chainsWithGroupNorm = 0;  // native_group_norm (Note [GroupNorm in a chain])
  size_t chainsWithBatchNorm = 0;  // eval native_batch_norm / cudnn_batch_norm (Note [Eval BatchNorm in a chain])
  size_t relayoutCopies = 0;     // chains of one copy (Note [Relayout copies])
  size_t transposedCopies = 0;   // ... of them transposed copies (Note [Transposed layouts])
  size_t transposedNdCopies = 0;  // ... of them over more than one row dim (a permuted N-d value)
  size_t ndLayoutChains = 0;      // other chains over more than one row dim (a permuted N-d value's)
  size_t chainsWithoutKernel = 0;  // the kernel maker had none: not published
};

Pool learnPool(uint64_t seed, int templates, LaunchLog& log, const FuzzOptions& options) {
  const bool skipLast = options.skipLastOutput;
  FusionEngine& engine = fuzzEngine();
  engine.resetForTest();
  log.clear();
  setCurrentFuzzStream(0);
  Pool pool;
  TemplateMaker maker(seed);
  std::mt19937_64 rng(mix(seed, 1));
  // Chains the engine found hot; under the shim any thread's CUDA command can end a window and report one.
  std::mutex hotMu;
  std::vector<HotChain> hot;  // Precondition: hotMu held
  engine.setHotCallback([&](const HotChain& h) {
    std::lock_guard<std::mutex> guard(hotMu);
    hot.push_back(h);
  });
  for (int i = 0; i < templates; ++i) {
    pool.templates.push_back(maker.make());
    const Template& tpl = pool.templates.back();
    for (const std::vector<bool>& keep : tpl.keeps) {
      for (int rep = 0; rep < 3; ++rep) {  // hotCalls windows, each ended by a command
        std::vector<at::Tensor> values;
        for (size_t k = 0; k < tpl.inputs.size(); ++k) {
          FusionBypass bypass;
          const TInput& in = tpl.inputs[k];
          values.push_back(inputFrom(in, tpl.cols, at::rand(drawnSizes(in, tpl.rows, tpl.cols)).to(dataDevice())));
        }
        fuzzGate().command(CommandKind::Synchronize);
        for (const TStep& s : tpl.steps) {
          values.push_back(applyStep(s, values[static_cast<size_t>(s.a)],
                                     s.b >= 0 ? values[static_cast<size_t>(s.b)] : at::Tensor()));
        }
        for (size_t k = 0; k < tpl.steps.size(); ++k) {
          if (!keep[k]) values[tpl.inputs.size() + k].reset();
        }
        fuzzGate().command(CommandKind::Synchronize);
      }
    }
    std::vector<HotChain> learned;
    {
      std::lock_guard<std::mutex> guard(hotMu);
      learned.swap(hot);
    }
    std::vector<std::shared_ptr<FusedChainKernel>> kernels;
    if (options.makeKernels && !learned.empty()) {
      // The optimizer's job in a serving process: its compiles, harness and CUDA commands are hotkernel's own.
      FusionBypass own;
      kernels = options.makeKernels(learned, log);
    }
    for (size_t k = 0; k < learned.size(); ++k) {
      const HotChain& h = learned[k];
      std::shared_ptr<FusedChainKernel> kernel;
      if (options.makeKernels) {
        kernel = k < kernels.size() ? kernels[k] : nullptr;
        if (!kernel) {
          ++pool.chainsWithoutKernel;
          continue;
        }
      } else {
        const bool interpreted = rng() % 2 == 0;
        kernel = interpreted ? makeInterpreterKernel(h, log, skipLast) : makeExactKernel(h, log, skipLast);
      }
      engine.publish(ReadyChain{h.pattern, h.build, kernel, h.key});
      ++pool.chains;
      if (!h.build.layout.contiguous()) ++pool.chainsWithLayouts;
      const auto& calls = h.pattern.calls;
      const auto holds = [&](auto&& pred) { return std::any_of(calls.begin(), calls.end(), pred); };
      if (holds([](const chain::RecordedCall& c) { return c.op == "aten::cat"; })) ++pool.chainsWithCat;
      if (holds([](const chain::RecordedCall& c) { return c.op == "aten::_softmax" || c.op == "aten::_log_softmax"; })) {
        ++pool.chainsWithSoftmax;
      }
      if (holds([](const chain::RecordedCall& c) { return c.op == "aten::native_layer_norm"; })) ++pool.chainsWithLayerNorm;
      if (holds([](const chain::RecordedCall& c) { return c.op == "aten::native_group_norm"; })) ++pool.chainsWithGroupNorm;
      if (holds([](const chain::RecordedCall& c) {
            return c.op == "aten::native_batch_norm" || c.op == "aten::cudnn_batch_norm";
          })) {
        ++pool.chainsWithBatchNorm;
      }
      if (chain::isRelayoutCopy(h.build)) ++pool.relayoutCopies;
      if (chain::isRelayoutCopy(h.build) && h.build.layout.transposed()) ++pool.transposedCopies;
      if (h.build.layout.rowDims.size() > 1) {
        if (chain::isRelayoutCopy(h.build) && h.build.layout.transposed()) {
          ++pool.transposedNdCopies;
        } else if (!chain::isRelayoutCopy(h.build)) {
          ++pool.ndLayoutChains;
        }
      }
    }
  }
  engine.setHotCallback(nullptr);
  return pool;
}

}  // namespace

std::string failuresText(const FuzzReport& r) {
  std::string s;
  for (const std::string& f : r.failures) s += f + "\n";
  return s;
}

uint64_t countOf(const FuzzReport& r, const char* name) {
  auto it = r.counts.find(name);
  return it == r.counts.end() ? 0 : it->second;
}

FuzzReport runFusionFuzz(const FuzzOptions& options) {
  FusionEngine& engine = fuzzEngine();
  FuzzReport report;
  LaunchLog log;
  Worker worker;
  Choices choices;
  Pool pool;
  int64_t poolIndex = -1;
  bool relearn = true;
  const FusionStats start = engine.stats();
  FusionStats poolStart = start;
  auto addEngineCounts = [&](const FusionStats& from, const FusionStats& to) {
    report.counts["deferredCalls"] += to.deferredCalls - from.deferredCalls;
    report.counts["fusedFlushes"] += to.fusedFlushes - from.fusedFlushes;
    report.counts["unfusedFlushes"] += to.unfusedFlushes - from.unfusedFlushes;
    report.counts["failedFlushes"] += to.failedFlushes - from.failedFlushes;
    report.counts["hookGaveUp"] += to.hookGaveUp - from.hookGaveUp;
  };
  auto fail = [&](int64_t program, const std::string& what) {
    ++report.mismatches;
    if (report.failures.size() < options.failuresKept) {
      report.failures.push_back("seed " + std::to_string(options.seed) + " pool " + std::to_string(poolIndex) +
                                " program " + std::to_string(program) + ": " + what);
    }
  };
  for (int64_t p = options.firstProgram; p < options.firstProgram + options.programs; ++p) {
    if (options.stop && options.stop()) break;
    if (relearn || p / options.programsPerPool != poolIndex || !engine.enabled()) {
      if (!relearn) addEngineCounts(poolStart, engine.stats());  // resetForTest zeroes the stats
      relearn = false;
      poolIndex = p / options.programsPerPool;
      pool = learnPool(mix(options.seed, static_cast<uint64_t>(poolIndex)), options.templatesPerPool, log, options);
      poolStart = engine.stats();
      report.counts["pools"] += 1;
      report.counts["poolTemplates"] += pool.templates.size();
      report.counts["poolChains"] += pool.chains;
      report.counts["poolChainsWithLayouts"] += pool.chainsWithLayouts;
      report.counts["poolChainsWithCat"] += pool.chainsWithCat;
      report.counts["poolChainsWithSoftmax"] += pool.chainsWithSoftmax;
      report.counts["poolChainsWithLayerNorm"] += pool.chainsWithLayerNorm;
      report.counts["poolChainsWithGroupNorm"] += pool.chainsWithGroupNorm;
      report.counts["poolChainsWithBatchNorm"] += pool.chainsWithBatchNorm;
      report.counts["poolRelayoutCopies"] += pool.relayoutCopies;
      report.counts["poolTransposedCopies"] += pool.transposedCopies;
      report.counts["poolTransposedNdCopies"] += pool.transposedNdCopies;
      report.counts["poolNdLayoutChains"] += pool.ndLayoutChains;
      report.counts["poolChainsWithoutKernel"] += pool.chainsWithoutKernel;
    }
    const uint64_t seed = mix(mix(options.seed, static_cast<uint64_t>(poolIndex)), static_cast<uint64_t>(p));
    log.clear();
    choices.record(seed);
    engine.setEnabled(false);
    RunResult want = Program(choices, pool.templates, seed, false, log, report, worker).run();
    engine.setEnabled(true);
    if (!want.error.empty()) {
      report.counts["discarded"] += 1;  // the program itself is not valid (eager throws)
      continue;
    }
    choices.replay();
    Program program(choices, pool.templates, seed, true, log, report, worker);
    program.trace_ = options.trace;
    RunResult got = program.run();
    report.programs += 1;
    report.counts["programs"] += 1;
    if (program.noiseMismatch) fail(p, "the concurrent thread's values differ from eager");
    if (!got.error.empty()) {
      fail(p, "the engine run threw: " + got.error);
      continue;
    }
    if (choices.diverged() || got.regs.size() != want.regs.size() || got.items.size() != want.items.size()) {
      fail(p, "the engine run took another path than eager");
      continue;
    }
    Checker checker(got, log);
    for (size_t r = 0; r < got.regs.size(); ++r) {
      if (checker.writtenOnAnotherStream(static_cast<int>(r))) {
        report.counts["streamViolations"] += 1;
        fail(p, "value " + std::to_string(r) + " written by a fused launch on another stream than its call's");
      }
      const at::Tensor& g = got.regs[r].t;
      const at::Tensor& w = want.regs[r].t;
      if (g.defined() != w.defined()) {
        fail(p, "value " + std::to_string(r) + " held in one run only");
        continue;
      }
      if (!g.defined()) continue;
      const auto [taint, tol] = checker.taint(static_cast<int>(r));
      report.counts[taint == Taint::None ? "comparedBitwise"
                                         : taint == Taint::Direct ? "comparedWithinTolerance" : "comparedNanPattern"] += 1;
      const Compared c = compareValues(g, w, taint, tol);
      if (c.unwritten) ++report.unwrittenReads;
      if (!c.ok) {
        const Reg& reg = got.regs[r];
        fail(p, "value " + std::to_string(r) + ": " + c.what + " (of values " + std::to_string(reg.parent) + ", " +
                    std::to_string(reg.parent2) + (reg.view ? ", a view" : "") + (reg.modified ? ", modified" : "") +
                    "; " + std::to_string(log.written(reg.storage).size()) + " fused writes of its storage)");
      }
    }
    for (size_t i = 0; i < got.items.size(); ++i) {
      report.counts["itemsCompared"] += 1;
      const double g = got.items[i].value, w = want.items[i].value;
      const auto [taint, tol] = checker.taint(got.items[i].reg);
      bool ok;
      if (taint == Taint::None) {
        ok = std::memcmp(&g, &w, sizeof g) == 0;
      } else if (taint == Taint::Direct) {
        ok = (std::isnan(g) && std::isnan(w)) || std::abs(g - w) <= tol * (1 + std::abs(w));
      } else {
        ok = std::isnan(g) == std::isnan(w) && std::isinf(g) == std::isinf(w);
      }
      if (std::isnan(g) && !std::isnan(w)) ++report.unwrittenReads;
      if (!ok) {
        static const char* kHow[] = {"bit for bit", "within the chain's tolerance", "NaN pattern"};
        fail(p, "item " + std::to_string(i) + " of value " + std::to_string(got.items[i].reg) + " (" +
                    kHow[static_cast<int>(taint)] + "): " + std::to_string(g) + " vs eager " + std::to_string(w));
      }
    }
    if (fuzzGate().pending() != 0) fail(p, "something is still pending after the final synchronize");
    if (options.progress && (p + 1) % 1000 == 0) options.progress(p + 1);
  }
  addEngineCounts(poolStart, engine.stats());
  report.counts["interpreterLaunches"] = log.interpreterLaunches();
  report.counts["exactLaunches"] = log.exactLaunches();
  report.counts["deviceLaunches"] = log.deviceLaunches();
  report.counts["streamViolations"] += 0;
  report.counts["hooksFired"] = fuzzGate().hooksFired();
  report.counts["mismatches"] = report.mismatches;
  report.counts["unwrittenReads"] = report.unwrittenReads;
  return report;
}

}  // namespace hotkernel::fusion::fuzz
