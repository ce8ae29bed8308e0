#include "hotkernel/chain/RandomChain.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/Rounding.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

constexpr double kMaxMagnitude = 8.0;
constexpr double kAwayFromZero = 0.25;

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return below(100) < percent; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  uint64_t state_;
};

struct Interval {
  double lo, hi;
  double magnitude() const { return std::max(std::fabs(lo), std::fabs(hi)); }
  bool positive() const { return lo >= kAwayFromZero; }
  bool awayFromZero() const { return lo >= kAwayFromZero || hi <= -kAwayFromZero; }
};

Interval monotone(const Interval& x, double (*f)(double)) { return {f(x.lo), f(x.hi)}; }

// The interval of x op y for the binary ops (y away from zero for div).
Interval combine(OpKind op, const Interval& x, const Interval& y, double alpha) {
  auto span = [](std::array<double, 4> v) { return Interval{*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())}; };
  switch (op) {
    case OpKind::Add:
      return span({x.lo + alpha * y.lo, x.lo + alpha * y.hi, x.hi + alpha * y.lo, x.hi + alpha * y.hi});
    case OpKind::Sub:
      return span({x.lo - alpha * y.lo, x.lo - alpha * y.hi, x.hi - alpha * y.lo, x.hi - alpha * y.hi});
    case OpKind::Mul:
      return span({x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi});
    case OpKind::Maximum:
      return {std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
    case OpKind::Minimum:
      return {std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
    default:
      return span({x.lo / y.lo, x.lo / y.hi, x.hi / y.lo, x.hi / y.hi});
  }
}

class Generator {
 public:
  Generator(uint64_t seed, const RandomChainOptions& o) : rng_(seed), o_(o) {}

  bool build() {
    values_.push_back({newInput(ShapeClass::Full), {-2, 2}});
    int ops = 1 + rng_.below(o_.maxOps);
    for (int tries = 0; ops > 0 && tries < 40 * o_.maxOps; ++tries) {
      if (step()) --ops;
    }
    // Outputs: every value nothing reads, and sometimes an intermediate too.
    std::vector<bool> read(ir_.size(), false);
    for (const Node& n : ir_.nodes()) {
      for (int operand : n.operands) read[static_cast<size_t>(operand)] = true;
    }
    for (size_t i = 0; i < ir_.size(); ++i) {
      const Node& n = ir_.nodes()[i];
      if (n.op == OpKind::Input || n.shape == ShapeClass::Scalar) continue;
      if (n.cols > 0 && n.cols != o_.catWidth) continue;  // a cat's part: narrower than the chain
      if (!read[i] || rng_.chance(8)) ir_.markOutput(static_cast<int>(i));
    }
    if (ir_.outputs().empty()) ir_.markOutput(ir_.addUnary(OpKind::Tanh, values_.back().node));
    return ir_.inputs().size() + ir_.outputs().size() <= 10;
  }

  ChainIR chain() const { return ir_; }

 private:
  struct Value {
    int node;
    Interval range;
  };

  static DType anyDType(Rng& rng) { return kernels::kAllDTypes[static_cast<size_t>(rng.below(3))]; }

  int newInput(ShapeClass shape, int64_t cols = -1) {
    ++inputs_;
    const bool columns = shape == ShapeClass::Full || shape == ShapeClass::Column;
    const int64_t extent = !columns ? 0 : cols >= 0 ? cols : o_.catWidth;
    return ir_.addInput(shape == ShapeClass::Scalar ? DType::Float32 : anyDType(rng_), shape, extent);
  }

  // A cat of the chain's width from two or three parts cut at multiples of 8
  // (Note [Random chains]); each part a new input, maybe negated, or a cat of two.
  void catStep() {
    const int64_t units = o_.catWidth / 8;
    const int count = units >= 3 && rng_.chance(40) ? 3 : 2;
    std::vector<int64_t> cuts = {0, units};
    while (static_cast<int>(cuts.size()) < count + 1) {
      const int64_t c = 1 + rng_.below(static_cast<int>(units - 1));
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    std::vector<int> parts;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int64_t e = (cuts[k + 1] - cuts[k]) * 8;
      int part;
      if (e >= 16 && rng_.chance(25)) {
        const int64_t left = 8 * (1 + rng_.below(static_cast<int>(e / 8 - 1)));
        part = ir_.addCat({newInput(ShapeClass::Full, left), newInput(ShapeClass::Full, e - left)});
      } else {
        part = newInput(ShapeClass::Full, e);
      }
      if (rng_.chance(50)) part = ir_.addUnary(OpKind::Neg, part);
      parts.push_back(part);
    }
    values_.push_back({ir_.addCat(parts), {-2, 2}});
  }

  // A value to apply an op to: mostly one nothing reads yet, so chains grow long.
  const Value& pick() {
    if (rng_.chance(70)) return values_.back();
    return values_[static_cast<size_t>(rng_.below(static_cast<int>(values_.size())))];
  }

  // The second operand of a binary op with `a`: an earlier value, a new
  // input, a scalar argument or a constant.
  Value second(const Value& a) {
    const bool canInput = inputs_ < o_.maxInputs;
    const int kind = rng_.below(10);
    if (kind < 3 && canInput) {
      static constexpr std::array<ShapeClass, 4> kShapes = {ShapeClass::Full, ShapeClass::Column, ShapeClass::Row,
                                                            ShapeClass::Full};
      const ShapeClass shape = ir_.node(a.node).shape == ShapeClass::RowFlat
                                   ? ShapeClass::Full
                                   : kShapes[static_cast<size_t>(rng_.below(4))];
      if (ir_.node(a.node).shape != ShapeClass::RowFlat) return {newInput(shape), {-2, 2}};
    }
    if (kind == 3 && canInput) return {newInput(ShapeClass::Scalar), {0.5, 2}};
    if (kind < 7) {
      static constexpr std::array<double, 8> kConstants = {0.5, 2.0, -1.5, 0.044715, 1e-6, 3.0, -0.25, 0.7978845608028654};
      const double c = kConstants[static_cast<size_t>(rng_.below(8))];
      return {ir_.addConstant(c), {c, c}};
    }
    return pick();
  }

  bool fits(const Interval& r) const { return std::isfinite(r.lo) && std::isfinite(r.hi) && r.magnitude() <= kMaxMagnitude; }

  bool step() {
    const Value a = pick();
    const ShapeClass aShape = ir_.node(a.node).shape;  // a copy: adding nodes moves them
    const Interval& x = a.range;
    if (o_.catWidth > 0 && values_.size() > 1 && rng_.chance(12)) {  // once the first input is read
      catStep();
      return true;
    }
    const int choice = rng_.below(o_.reductions ? 24 : 21);
    if (choice < 13) {  // unary
      static constexpr std::array<OpKind, 24> kUnary = {
          OpKind::Neg,  OpKind::Exp,  OpKind::Log,   OpKind::Rsqrt, OpKind::Sqrt,        OpKind::Tanh,
          OpKind::Sigmoid, OpKind::Silu, OpKind::GeluErf, OpKind::GeluTanh, OpKind::Relu, OpKind::Abs,
          OpKind::PowScalar, OpKind::Reciprocal, OpKind::Sin, OpKind::Cos, OpKind::Erf, OpKind::Log1p,
          OpKind::Expm1, OpKind::Hardsigmoid, OpKind::Hardswish, OpKind::LeakyRelu, OpKind::Softplus, OpKind::Mish};
      const OpKind op = kUnary[static_cast<size_t>(rng_.below(24))];
      static constexpr std::array<double, 7> kExponents = {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.5};
      const double e = kExponents[static_cast<size_t>(rng_.below(7))];
      const double m = x.magnitude();
      const bool needsPositive = op == OpKind::Log || op == OpKind::Log1p || op == OpKind::Rsqrt || op == OpKind::Sqrt ||
                                 (op == OpKind::PowScalar && e != 2.0 && e != 3.0);
      if (needsPositive && !x.positive() && x.magnitude() <= 4 && rng_.chance(60)) {
        // Make a positive value for a later step: abs(x) + 1/2.
        const int absolute = ir_.addUnary(OpKind::Abs, a.node);
        const Interval r{0.5, 0.5 + x.magnitude()};
        values_.push_back({ir_.addBinary(OpKind::Add, absolute, ir_.addConstant(0.5)), r});
        return true;
      }
      Interval r{0, 0};
      switch (op) {
        case OpKind::Neg: r = {-x.hi, -x.lo}; break;
        case OpKind::Exp: if (x.hi > 2) return false; r = monotone(x, std::exp); break;
        case OpKind::Log: if (!x.positive()) return false; r = monotone(x, std::log); break;
        case OpKind::Rsqrt: if (!x.positive()) return false; r = {1 / std::sqrt(x.hi), 1 / std::sqrt(x.lo)}; break;
        case OpKind::Sqrt: if (!x.positive()) return false; r = monotone(x, std::sqrt); break;
        case OpKind::Tanh: r = monotone(x, std::tanh); break;
        case OpKind::Sigmoid: r = {1 / (1 + std::exp(-x.lo)), 1 / (1 + std::exp(-x.hi))}; break;
        case OpKind::Silu: case OpKind::GeluErf: case OpKind::GeluTanh: r = {-0.3, std::max(0.0, x.hi)}; break;
        case OpKind::Relu: r = {std::max(0.0, x.lo), std::max(0.0, x.hi)}; break;
        case OpKind::Abs: r = {x.lo >= 0 ? x.lo : (x.hi <= 0 ? -x.hi : 0.0), m}; break;
        case OpKind::Reciprocal: if (!x.awayFromZero()) return false; r = {1 / x.hi, 1 / x.lo}; break;
        case OpKind::Sin: case OpKind::Cos: r = {-1, 1}; break;
        case OpKind::Erf: r = monotone(x, std::erf); break;
        case OpKind::Log1p: if (!x.positive()) return false; r = monotone(x, std::log1p); break;
        case OpKind::Expm1: if (x.hi > 2) return false; r = monotone(x, std::expm1); break;
        case OpKind::Hardsigmoid: r = {std::clamp(x.lo + 3, 0.0, 6.0) / 6, std::clamp(x.hi + 3, 0.0, 6.0) / 6}; break;
        case OpKind::Hardswish: r = {-0.375, std::max(0.0, x.hi)}; break;
        case OpKind::LeakyRelu: r = {x.lo < 0 ? 0.2 * x.lo : x.lo, x.hi > 0 ? x.hi : 0.2 * x.hi}; break;
        case OpKind::Softplus: r = monotone(x, [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); }); break;
        case OpKind::Mish: r = {-0.31, std::max(0.0, x.hi)}; break;
        default:  // pow
          if (e == 2.0) r = {x.lo >= 0 ? x.lo * x.lo : (x.hi <= 0 ? x.hi * x.hi : 0.0), m * m};
          else if (e == 3.0) r = {x.lo * x.lo * x.lo, x.hi * x.hi * x.hi};
          else if (!x.positive()) return false;
          else r = {std::min(std::pow(x.lo, e), std::pow(x.hi, e)), std::max(std::pow(x.lo, e), std::pow(x.hi, e))};
          break;
      }
      if (!fits(r)) return false;
      values_.push_back({ir_.addUnary(op, a.node, op == OpKind::LeakyRelu ? 0.2 : e), r});
      return true;
    }
    if (choice < 19) {  // binary
      static constexpr std::array<OpKind, 6> kBinary = {OpKind::Add, OpKind::Sub,     OpKind::Mul,
                                                       OpKind::Div, OpKind::Maximum, OpKind::Minimum};
      const OpKind op = kBinary[static_cast<size_t>(rng_.below(6))];
      const size_t before = ir_.size();
      const int inputsBefore = inputs_;
      const Value b = second(a);
      const ShapeClass bShape = ir_.node(b.node).shape;
      const double alpha = (op == OpKind::Add || op == OpKind::Sub) && rng_.chance(20) ? 0.5 : 1.0;
      const bool swap = bShape != ShapeClass::Scalar && rng_.chance(30);
      const Value& lhs = swap ? b : a;
      const Value& rhs = swap ? a : b;
      const bool ok = (op != OpKind::Div || rhs.range.awayFromZero()) &&
                      (aShape != ShapeClass::RowFlat || bShape == ShapeClass::RowFlat || bShape == ShapeClass::Scalar) &&
                      (bShape != ShapeClass::RowFlat || aShape == ShapeClass::RowFlat);
      const Interval r = ok ? combine(op, lhs.range, rhs.range, alpha) : Interval{0, 0};
      if (!ok || !fits(r)) {
        if (ir_.size() != before) rollback(before, inputsBefore);
        return false;
      }
      values_.push_back({ir_.addBinary(op, lhs.node, rhs.node, alpha), r});
      return true;
    }
    if (choice < 21) {  // cast
      values_.push_back({ir_.addCast(a.node, anyDType(rng_)), x});
      return true;
    }
    if (aShape != ShapeClass::Full) return false;  // a reduction
    static constexpr std::array<OpKind, 3> kReduce = {OpKind::Sum, OpKind::Mean, OpKind::Amax};
    const OpKind op = kReduce[static_cast<size_t>(rng_.below(3))];
    // A sum of values >= 0 keeps their relative error; it may grow to
    // kMaxMagnitude * maxCols, and only ops whose result fits read it.
    if (op == OpKind::Sum && x.lo < 0) return false;
    const Interval r = op == OpKind::Sum ? Interval{x.lo, x.hi * static_cast<double>(o_.maxCols)} : x;
    values_.push_back({ir_.addReduce(op, a.node, rng_.chance(80)), r});
    return true;
  }

  // Drops the nodes a refused binary op's second operand added (a new input or constant).
  void rollback(size_t size, int inputs) {
    ChainIR kept;
    for (size_t i = 0; i < size; ++i) kept.appendUnchecked(ir_.nodes()[i]);
    ir_ = kept;
    inputs_ = inputs;
  }

  Rng rng_;
  RandomChainOptions o_;
  ChainIR ir_;
  std::vector<Value> values_;  // the values ops may read (no constants)
  int inputs_ = 0;
};

}  // namespace

ChainIR randomChain(uint64_t seed, const RandomChainOptions& options) {
  HOTKERNEL_REQUIRE(options.maxOps >= 1 && options.maxInputs >= 1 && options.maxCols >= 1,
                    "random chain options need maxOps, maxInputs and maxCols >= 1");
  HOTKERNEL_REQUIRE(options.catWidth == 0 || (options.catWidth >= 16 && options.catWidth % 8 == 0),
                    "a random chain's catWidth is 0 or a multiple of 8 from 16");
  for (uint64_t attempt = 0;; ++attempt) {
    Generator g(seed * 0x100000001b3ull + attempt, options);
    if (g.build()) {
      ChainIR ir = g.chain();
      ir.validate();
      return ir;
    }
  }
}

std::vector<std::vector<float>> randomChainInputs(const ChainIR& ir, int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng(seed ^ 0x5eed5eed5eed5eedull);
  std::vector<std::vector<float>> inputs;
  for (int in : ir.inputs()) {
    const Node& n = ir.node(in);
    std::vector<float> v(static_cast<size_t>(elementCount(n, rows, cols)));
    for (float& x : v) {
      x = n.shape == ShapeClass::Scalar ? static_cast<float>(rng.uniform(0.5, 2.0))
                                        : roundTo(n.dtype, static_cast<float>(rng.uniform(-2.0, 2.0)));
    }
    inputs.push_back(std::move(v));
  }
  return inputs;
}

ChainLayout randomChainLayout(const ChainIR& ir, const std::vector<int64_t>& rowDims, int64_t cols, uint64_t seed) {
  Rng rng(seed ^ 0x1a7002u);
  const std::vector<int> args = chainTensorArgs(ir);
  const size_t inputs = args.size() - ir.outputs().size();
  ChainLayout layout;
  layout.rowDims = rowDims;
  int64_t rows = 1;
  for (int64_t d : rowDims) rows *= d;
  for (size_t k = 0; k < args.size(); ++k) {
    const Node& n = ir.node(args[k]);
    std::vector<int64_t> strides(rowDims.size(), 0);
    if (n.shape == ShapeClass::Row || n.shape == ShapeClass::RowFlat) {
      int64_t next = 1;
      for (size_t d = rowDims.size(); d-- > 0;) {
        strides[d] = next;
        next *= rowDims[d];
      }
    } else if (n.shape == ShapeClass::Full) {
      // A random dim order, fastest first; rows padded by 0 to 16 elements; inputs broadcast over some dims.
      std::vector<size_t> order(rowDims.size());
      for (size_t d = 0; d < order.size(); ++d) order[d] = d;
      for (size_t d = order.size(); d > 1; --d) std::swap(order[d - 1], order[static_cast<size_t>(rng.below(static_cast<int>(d)))]);
      int64_t next = extentOf(n, cols) + 8 * rng.below(3);
      for (size_t d : order) {
        if (k < inputs && rng.chance(25)) continue;  // broadcast: stride 0
        strides[d] = next;
        next *= rowDims[d];
      }
    }
    layout.strides.push_back(std::move(strides));
  }
  return normalizeLayout(ir, rows, cols, layout);
}

std::vector<std::vector<float>> randomChainInputs(const ChainIR& ir, int64_t rows, int64_t cols,
                                                  const ChainLayout& layout, uint64_t seed) {
  std::vector<std::vector<float>> inputs = randomChainInputs(ir, rows, cols, seed);
  if (layout.contiguous()) return inputs;
  Rng rng(seed ^ 0x5eed5eed5eed5eedull ^ 0x5a7eu);
  size_t arg = 0;
  const std::vector<int> nodes = ir.inputs();
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = ir.node(nodes[k]);
    if (n.shape == ShapeClass::Scalar) continue;
    if (n.shape == ShapeClass::Full) {
      std::vector<float> memory(static_cast<size_t>(layoutSpan(ir, layout, arg, rows, cols)));
      for (float& x : memory) x = roundTo(n.dtype, static_cast<float>(rng.uniform(-2.0, 2.0)));
      inputs[k] = std::move(memory);
    }
    ++arg;
  }
  return inputs;
}

}  // namespace hotkernel::chain
