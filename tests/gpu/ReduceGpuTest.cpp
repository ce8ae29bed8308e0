// The last-dim reduction family on the GPU: parameter points compiled with
// NVRTC for the device and run through the five-stage harness against ATen's
// CUDA kernels (at::cuda::<op>) at odd and extreme
// sizes in every dtype; every whitelisted point of bfloat16 at one shape; the
// special values the template's Note [What ATen's last-dim reductions
// compute] describes, checked against ATen exactly through a plan; the
// extrema (amin and argmin as mirrors of amax and argmax on -x) on rows built around each point's threads and vectors (the cases
// the two-level folds could get wrong: the maximum twice in one thread, NaNs
// after it, ties across threads, +0 / -0, rows of -inf, the last partial
// batch), against a CPU reference and ATen, in every dtype. No timing here:
// speed is measured by the tuner and bench/ops_bench.py --cases reductions.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::ReduceFamily;
using kernels::ReduceOp;
using kernels::ReduceParams;
using kernels::ReduceVariant;

// Odd and extreme (rows, cols): one element, one column, lengths no vector
// width divides (13, 4097, 1001), short rows served several per CTA, a row
// of 10^6 elements, decode-like few long rows.
std::vector<std::pair<int64_t, int64_t>> oddShapes() {
  return {{1, 1}, {7, 1}, {7, 13}, {1, 4097}, {33, 4097}, {3, 1001}, {1000, 8}, {300, 128}, {257, 4096},
          {2, 16385}, {1, 1000000}, {4, 128256}};
}

struct Case {
  ReduceVariant v;
  ReduceParams params;
  std::string cubin, error;
  std::string describe() const {
    std::ostringstream os;
    os << kernels::reduceOpName(v.op) << " " << kernels::dtypeName(v.dtype) << " [" << v.rows << ", " << v.cols
       << "] " << params.describe();
    return os.str();
  }
};

void compileCases(std::vector<Case>& cases) {
  const std::string arch = queryDevice(0).nvrtcArch();
  const std::string source = ReduceFamily::source();
  tbb::parallel_for(size_t(0), cases.size(), [&](size_t i) {
    try {
      cases[i].cubin = compileToCubin(source, "reduce_lastdim.cu", arch,
                                      ReduceFamily::compileOptions(cases[i].v.dtype, cases[i].params, cases[i].v.op))
                           .cubin;
    } catch (const std::exception& e) {
      cases[i].error = e.what();
    }
  });
}

std::string failureOf(const HarnessReport& r) {
  const StageResult* f = r.failure();
  std::ostringstream os;
  if (f) os << toString(f->stage) << ": " << f->detail;
  os << " (seed " << r.seed << ")";
  return os.str();
}

class ReduceGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static void* stream() { return at::cuda::getCurrentCUDAStream().stream(); }
  // One compile per (dtype, point, op) in the process.
  static const std::string& cubinOf(DType d, const ReduceParams& p, ReduceOp op) {
    static std::map<std::string, std::string> cubins;
    const std::vector<std::string> options = ReduceFamily::compileOptions(d, p, op);
    std::string key;
    for (const std::string& o : options) key += o + " ";
    auto it = cubins.find(key);
    if (it == cubins.end()) {
      it = cubins
               .emplace(key, compileToCubin(ReduceFamily::source(), "reduce_lastdim.cu", queryDevice(0).nvrtcArch(),
                                            options)
                                 .cubin)
               .first;
    }
    return it->second;
  }
  // One plan's result for `x` ([rows, cols] CUDA), [rows].
  static at::Tensor runPlan(const at::Tensor& x, ReduceOp op, const ReduceParams& p) {
    const DType d = x.scalar_type() == at::kFloat ? DType::Float32
                    : x.scalar_type() == at::kHalf ? DType::Float16
                                                   : DType::BFloat16;
    const ReduceVariant v{d, x.size(0), x.size(1), op};
    const std::string& cubin = cubinOf(d, p, op);
    const Plan plan = kernels::reduceDescriptor(op).makePlan(VariantKey{static_cast<int32_t>(d), 0, v.rows, v.cols}, p.toJson(), cubin, 0);
    at::Tensor out = kernels::reduceOpInfo(op).index
                         ? at::full({v.rows}, -7, x.options().dtype(at::kLong))
                         : at::full({v.rows}, std::numeric_limits<float>::quiet_NaN(), x.options());
    EXPECT_TRUE(plan.launcher->launch(RowKernelArgs{x.const_data_ptr(), out.mutable_data_ptr(), v.rows, v.cols},
                                      stream()));
    return out;
  }
};

TEST_F(ReduceGpuTest, GivenEveryOpAndDTypeWhenTheHarnessRunsOnOddAndExtremeSizesThenEveryStagePasses) {
  std::vector<Case> cases;
  for (ReduceOp op : kernels::kAllReduceOps) {
    for (DType d : kernels::kAllDTypes) {
      for (auto [rows, cols] : oddShapes()) {
        const ReduceVariant v{d, rows, cols, op};
        ASSERT_TRUE(ReduceFamily::guardVariant(v)) << rows << "x" << cols;
        const std::vector<ReduceParams> space = ReduceFamily::parameterSpace(v);
        ASSERT_FALSE(space.empty());
        cases.push_back({v, space.front(), "", ""});  // the best guess
        if (space.size() > 1) cases.push_back({v, space.back(), "", ""});  // the vec == 1 end
      }
    }
  }
  compileCases(cases);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    const HarnessReport r = runHarness(reduceSpec(c.v.op), reduceCandidate(c.v, c.params, c.cubin), c.v.dtype,
                                       c.v.rows, c.v.cols, 0);
    EXPECT_TRUE(r.passed) << failureOf(r);
  }
}

TEST_F(ReduceGpuTest, GivenEveryBFloat16PointWhenTheHarnessRunsThenEveryStagePassesForEveryOp) {
  // [37, 4104]: 4104 = 8 x 513, every vector width divides it; 37 rows: a
  // partial group of rows for the several-rows points.
  std::vector<Case> cases;
  for (ReduceOp op : kernels::kAllReduceOps) {
    const ReduceVariant v{DType::BFloat16, 37, 4104, op};
    for (const ReduceParams& p : ReduceFamily::allParameterPoints(v.dtype)) {
      if (ReduceFamily::guardParams(v, p)) cases.push_back({v, p, "", ""});
    }
  }
  ASSERT_EQ(cases.size(), kernels::kReduceOpCount * ReduceFamily::allParameterPoints(DType::BFloat16).size());
  compileCases(cases);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    const HarnessReport r = runHarness(reduceSpec(c.v.op), reduceCandidate(c.v, c.params, c.cubin), c.v.dtype,
                                       c.v.rows, c.v.cols, 0);
    EXPECT_TRUE(r.passed) << failureOf(r);
  }
}

TEST_F(ReduceGpuTest, GivenTiesNansAndInfinitiesWhenTheExtremaRunThenTheyEqualAtenExactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Rows of 8: ties (first index), two NaNs (the first), NaN after the max,
  // all -inf (index 0), +0 / -0 ties, +inf, a lone maximum at the end.
  const std::vector<std::vector<float>> rows = {
      {1, 3, 2, 3, 3, 0, -1, 3},     {1, nan, 2, nan, 5, 0, -1, 7}, {9, 1, 2, 3, 4, 5, 6, nan},
      {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},            {-0.0f, 0, -0.0f, 0, -1, -2, -3, -4},
      {1, 2, inf, 3, inf, 4, 5, 6},  {-5, -4, -3, -2, -1, -1, -1, 0}};
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const at::Tensor x32 =
      at::from_blob(flat.data(), {static_cast<int64_t>(rows.size()), 8}, at::kFloat).clone().to(at::kCUDA);
  // The expected indices, which ATen must give too (the Note's reading of GreaterOrNan).
  const at::Tensor expected = at::tensor(std::vector<int64_t>{1, 1, 7, 0, 0, 2, 7}, at::kLong);
  for (at::ScalarType t : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(t));
    const at::Tensor x = x32.to(t);
    const at::Tensor atenIdx = atenReduceLastDim(x, ReduceOp::Argmax).cpu();
    EXPECT_TRUE(at::equal(atenIdx, expected)) << atenIdx;
    const at::Tensor atenMax = atenReduceLastDim(x, ReduceOp::Amax).cpu().to(at::kFloat);
    for (const ReduceParams& p : {ReduceParams{32, 1, 1, 1}, ReduceParams{128, 2, 1, 32}, ReduceParams{128, 1, 2, 16},
                                  ReduceParams{64, 4, 2, 1}}) {
      if (!ReduceFamily::guardParams({DType::Float32, 7, 8, ReduceOp::Sum}, p)) continue;
      SCOPED_TRACE(p.describe());
      EXPECT_TRUE(at::equal(runPlan(x, ReduceOp::Argmax, p).cpu(), expected));
      const at::Tensor mine = runPlan(x, ReduceOp::Amax, p).cpu().to(at::kFloat);
      // Equal values (+0 == -0) or NaN on both sides.
      EXPECT_TRUE(at::all((mine == atenMax) | (mine.isnan() & atenMax.isnan())).item<bool>()) << mine << atenMax;
      // A zero maximum comes out as +0 (Note [What ATen's last-dim reductions compute]).
      EXPECT_FALSE(std::signbit(mine[4].item<float>()));
      // argmin and amin of -x: the same indices (LessOrNan mirrors GreaterOrNan),
      // the negated maxima, a zero minimum as -0.
      const at::Tensor negated = x.neg();
      EXPECT_TRUE(at::equal(runPlan(negated, ReduceOp::Argmin, p).cpu(), expected));
      EXPECT_TRUE(at::equal(atenReduceLastDim(negated, ReduceOp::Argmin).cpu(), expected));
      const at::Tensor mineMin = runPlan(negated, ReduceOp::Amin, p).cpu().to(at::kFloat);
      const at::Tensor atenMin = atenReduceLastDim(negated, ReduceOp::Amin).cpu().to(at::kFloat);
      EXPECT_TRUE(at::all((mineMin == atenMin) | (mineMin.isnan() & atenMin.isnan())).item<bool>())
          << mineMin << atenMin;
      EXPECT_TRUE(std::signbit(mineMin[4].item<float>()));
    }
  }
}

// ---- rows built around the threads' vectors ---------------------------------
// The extrema fold a thread's vectors first (Note [Packed maxima], Note
// [Two-level argmax] in the template): what could go wrong there is placed
// at known threads, vectors and lanes of a point's layout (vector
// k * rowThreads + t to thread t) and checked against the CPU reference of
// Note [What ATen's last-dim reductions compute] and against ATen.

// The first NaN's index, else the first index of the maximum (+0 == -0).
int64_t referenceArgmax(const float* x, int64_t cols) {
  int64_t best = 0;
  for (int64_t c = 0; c < cols; ++c) {
    if (std::isnan(x[c])) return c;
    if (x[c] > x[best]) best = c;
  }
  return best;
}

// NaN if the row holds one, else the maximum; a zero maximum is +0 if any of
// the zeros is +0, -0 if all are (the family's rule).
float referenceAmax(const float* x, int64_t cols) {
  float m = -std::numeric_limits<float>::infinity();
  bool plusZero = false;
  for (int64_t c = 0; c < cols; ++c) {
    if (std::isnan(x[c])) return std::numeric_limits<float>::quiet_NaN();
    if (x[c] > m) m = x[c];
    if (x[c] == 0.0f && !std::signbit(x[c])) plusZero = true;
  }
  if (m == 0.0f) return plusZero ? 0.0f : -0.0f;
  return m;
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

// Where lane j of thread t's k-th vector lies in a row (-1: past the row, or
// no such thread / lane), for a point's layout.
struct Layout {
  int64_t rowThreads, vec, cols;
  int64_t nvec() const { return cols / vec; }
  int64_t at(int64_t t, int64_t k, int64_t j) const {
    if (t < 0 || t >= rowThreads || k < 0 || j < 0 || j >= vec) return -1;
    const int64_t i = (k * rowThreads + t) * vec + j;
    return i < cols ? i : -1;
  }
  // The last vector (k) of thread t; -1 if it has none.
  int64_t lastVector(int64_t t) const { return t < nvec() ? (nvec() - 1 - t) / rowThreads : -1; }
};

// Named rows, each a case the two-level folds could get wrong: values are
// small integers, +-0, +-inf and NaN, exact in every dtype.
struct Scenario {
  std::string name;
  std::vector<float> row;
};

std::vector<Scenario> scenarios(const Layout& l, uint32_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(seed);
  const int64_t holders = std::min(l.rowThreads, l.nvec());  // threads that hold a vector
  const int64_t tHigh = holders - 1, tMid = holders / 2;
  auto ints = [&](int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<float> r(static_cast<size_t>(l.cols));
    for (float& x : r) x = static_cast<float>(d(rng));
    return r;
  };
  auto filled = [&](float v) { return std::vector<float>(static_cast<size_t>(l.cols), v); };
  auto put = [](std::vector<float>& r, int64_t i, float v) {
    if (i >= 0) r[static_cast<size_t>(i)] = v;
  };
  auto pool = [&](std::vector<float> values, double nanRate) {
    std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
    std::bernoulli_distribution isNan(nanRate);
    std::vector<float> r(static_cast<size_t>(l.cols));
    for (float& x : r) x = isNan(rng) ? nan : values[pick(rng)];
    return r;
  };
  const int64_t lastVec = l.nvec() - 1;
  std::vector<Scenario> out;
  out.push_back({"random integers", ints(-50, 50)});
  out.push_back({"all -inf", filled(-inf)});
  {
    std::vector<float> r = filled(-inf);
    put(r, l.cols - 1, 3.0f);
    out.push_back({"-inf but the last element", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, lastVec * l.vec, 100.0f);
    put(r, l.cols - 1, 100.0f);
    out.push_back({"the maximum in the row's last vector, twice", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, l.at(tMid, 1, l.vec - 1), 100.0f);
    put(r, l.at(tMid, 2, 0), 100.0f);
    put(r, l.at(tMid, l.lastVector(tMid), 0), 100.0f);
    put(r, l.at(tMid, 0, 0), 99.0f);
    out.push_back({"the maximum in several vectors of one thread", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, l.at(tHigh, 0, l.vec - 1), 100.0f);  // a higher thread, the lower index
    put(r, l.at(0, 1, 0), 100.0f);
    out.push_back({"a tie across threads", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, l.at(tMid, 0, 0), 100.0f);
    put(r, l.at(tMid, 1, l.vec - 1), nan);
    out.push_back({"a NaN in a later vector than the maximum", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, l.at(0, 1, 0), nan);
    put(r, l.at(tHigh, 0, l.vec - 1), nan);
    put(r, l.at(tMid, l.lastVector(tMid), l.vec - 1), nan);
    out.push_back({"the first NaN and later ones", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, l.at(tMid, 0, 0), 100.0f);
    put(r, l.at(tMid, 1, 0), 90.0f);
    put(r, l.at(tMid, 1, l.vec - 1), nan);
    out.push_back({"a NaN behind a smaller value in a later vector", r});
  }
  {
    std::vector<float> r = ints(-50, -1);
    put(r, l.at(tMid, 0, l.vec - 1), -0.0f);
    put(r, l.at(tMid, 1, 0), 0.0f);
    put(r, l.at(0, 1, 0), 0.0f);
    put(r, l.at(tHigh, 0, 0), -0.0f);
    out.push_back({"+0 and -0 maxima in several threads", r});
  }
  {
    std::vector<float> r = ints(-50, -1);
    put(r, l.at(tMid, 1, 0), -0.0f);
    put(r, l.at(tMid, 1, l.vec - 1), 0.0f);
    put(r, l.at(tMid, 2, 0), 0.0f);
    out.push_back({"-0 then +0 in one vector and the next", r});
  }
  {
    std::vector<float> r = ints(-50, -1);
    put(r, l.at(tMid, 0, l.vec - 1), -0.0f);
    put(r, l.at(tHigh, 1, 0), -0.0f);
    put(r, l.at(0, 2, 0), -0.0f);
    out.push_back({"only -0 maxima", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, l.at(tMid, 1, l.vec - 1), 100.0f);
    put(r, l.at(tMid, 1, l.vec / 2), 100.0f);
    out.push_back({"the maximum twice in one vector", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, l.at(tHigh, 1, 0), inf);
    put(r, l.at(0, 2, l.vec - 1), inf);
    out.push_back({"+inf twice", r});
  }
  {
    std::vector<float> r = ints(-50, -10);
    put(r, l.at(tHigh, l.lastVector(tHigh), 0), -3.0f);
    put(r, l.at(0, l.lastVector(0), l.vec - 1), -3.0f);
    out.push_back({"a negative maximum in the threads' last vectors", r});
  }
  {
    std::vector<float> r = filled(-inf);
    put(r, l.cols - 1, nan);
    out.push_back({"-inf and a NaN at the end", r});
  }
  {
    std::vector<float> r = ints(-50, 50);
    put(r, 0, nan);
    out.push_back({"a NaN first", r});
  }
  out.push_back({"ties everywhere", pool({-inf, -1.0f, -0.0f, 0.0f, 1.0f, 2.0f}, 0.0)});
  out.push_back({"ties and rare NaNs", pool({-inf, -1.0f, 0.0f, 1.0f, 2.0f}, 2.0 / static_cast<double>(l.cols))});
  out.push_back({"-inf, -0 and +0", pool({-inf, -0.0f, 0.0f}, 0.0)});
  return out;
}

TEST_F(ReduceGpuTest, GivenRowsBuiltAroundTheThreadsVectorsWhenTheExtremaRunThenTheyEqualTheReferenceAndAten) {
  // Points: one lane a vector (vec 1), packed pairs (vec 2), unroll 1-8, one
  // warp to 1024 threads a row (the cross-warp merge), 4 and 32 lanes a row.
  // cols: one vector; fewer vectors than threads; 513 vectors of 8; 4129
  // (1024 x 4 a batch: one whole batch and a partial one).
  const std::vector<ReduceParams> points = {{32, 1, 1, 1},  {32, 2, 8, 1},    {64, 8, 2, 1},   {256, 4, 4, 1},
                                            {1024, 8, 4, 1}, {128, 8, 8, 16}, {128, 4, 1, 32}, {128, 1, 8, 4}};
  int64_t checked = 0;
  for (at::ScalarType t : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const DType d = t == at::kFloat ? DType::Float32 : t == at::kHalf ? DType::Float16 : DType::BFloat16;
    for (ReduceParams p : points) {
      p.vec = std::min<int>(p.vec, static_cast<int>(16 / kernels::elementSize(d)));
      for (int64_t cols : {int64_t{8}, int64_t{40}, int64_t{4104}, int64_t{33032}}) {
        const std::vector<Scenario> rows = scenarios({p.rowThreads(), p.vec, cols}, static_cast<uint32_t>(cols));
        const int64_t n = static_cast<int64_t>(rows.size());
        ASSERT_TRUE(ReduceFamily::guardParams({d, n, cols, ReduceOp::Argmax}, p)) << p.describe();
        std::vector<float> flat;
        for (const Scenario& r : rows) flat.insert(flat.end(), r.row.begin(), r.row.end());
        const at::Tensor x = at::from_blob(flat.data(), {n, cols}, at::kFloat).to(t).to(at::kCUDA);
        const at::Tensor values = x.to(at::kFloat).cpu().contiguous();  // exact: what the kernel reads
        const at::Tensor idx = runPlan(x, ReduceOp::Argmax, p).cpu();
        const at::Tensor atenIdx = atenReduceLastDim(x, ReduceOp::Argmax).cpu();
        const at::Tensor max = runPlan(x, ReduceOp::Amax, p).cpu().to(at::kFloat);
        const at::Tensor atenMax = atenReduceLastDim(x, ReduceOp::Amax).cpu().to(at::kFloat);
        // argmin / amin of -x mirror argmax / amax of x: the same index, the
        // negated extremum bit for bit (a zero minimum is -0 where the maximum is +0).
        const at::Tensor negated = x.neg();
        const at::Tensor minIdx = runPlan(negated, ReduceOp::Argmin, p).cpu();
        const at::Tensor atenMinIdx = atenReduceLastDim(negated, ReduceOp::Argmin).cpu();
        const at::Tensor min = runPlan(negated, ReduceOp::Amin, p).cpu().to(at::kFloat);
        for (int64_t r = 0; r < n; ++r) {
          SCOPED_TRACE(std::string(c10::toString(t)) + " " + p.describe() + " cols=" + std::to_string(cols) + ": " +
                       rows[static_cast<size_t>(r)].name);
          const float* row = values.const_data_ptr<float>() + r * cols;
          const int64_t want = referenceArgmax(row, cols);
          EXPECT_EQ(atenIdx[r].item<int64_t>(), want);  // the reference is ATen's rule
          EXPECT_EQ(idx[r].item<int64_t>(), want);
          EXPECT_EQ(minIdx[r].item<int64_t>(), want);
          EXPECT_EQ(atenMinIdx[r].item<int64_t>(), want);
          const float wantMax = referenceAmax(row, cols), got = max[r].item<float>(), aten = atenMax[r].item<float>();
          if (std::isnan(wantMax)) {
            EXPECT_TRUE(std::isnan(got)) << got;
            EXPECT_TRUE(std::isnan(aten)) << aten;
            EXPECT_TRUE(std::isnan(min[r].item<float>()));
          } else {
            EXPECT_EQ(bitsOf(got), bitsOf(wantMax)) << got << " vs " << wantMax;  // the zero's sign too
            EXPECT_EQ(bitsOf(min[r].item<float>()), bitsOf(-wantMax)) << min[r].item<float>() << " vs " << -wantMax;
            EXPECT_EQ(aten, wantMax);                                            // +0 == -0
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 8 * 4 * 20);
}

TEST_F(ReduceGpuTest, GivenExactSumsWhenMeanRunsThenItMatchesAtensFactorBitForBit) {
  // Small integers: every partial sum is exact in float32 in any order, so the
  // only rounding left is mean's product with ATen's factor
  // fl(float(rows) / float(rows * cols)); cols = 3, 7, 1000: factors 1/cols
  // does not hold exactly.
  for (int64_t cols : {3, 7, 1000}) {
    const at::Tensor x = at::randint(-50, 50, {5, cols}, at::TensorOptions().device(at::kCUDA)).to(at::kFloat);
    const at::Tensor ref = atenReduceLastDim(x, ReduceOp::Mean);
    for (const ReduceParams& p : {ReduceParams{32, 1, 1, 1}, ReduceParams{256, 1, 4, 1}}) {
      const at::Tensor mine = runPlan(x, ReduceOp::Mean, p);
      EXPECT_TRUE(at::equal(mine.view(at::kInt), ref.view(at::kInt))) << cols << ": " << mine << ref;
    }
    const at::Tensor sum = runPlan(x, ReduceOp::Sum, {64, 1, 2, 1});
    EXPECT_TRUE(at::equal(sum, atenReduceLastDim(x, ReduceOp::Sum)));
  }
}

TEST_F(ReduceGpuTest, GivenWhatAtenReturnsThenDtypesAndShapesAreTheFamilysAssumptions) {
  const at::Tensor x = at::randn({4, 6, 10}, at::kCUDA).to(at::kBFloat16);
  EXPECT_EQ(at::sum(x, {-1}).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::mean(x, {-1}).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::amax(x, {-1}).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::argmax(x, -1).scalar_type(), at::kLong);
  EXPECT_EQ(at::sum(x, {-1}, true).sizes(), (at::IntArrayRef{4, 6, 1}));
  EXPECT_EQ(at::argmax(x, -1, false).sizes(), (at::IntArrayRef{4, 6}));
  // bf16 sums accumulate in float32: 256 ones then 256 values of 1/32 (which a
  // bf16 accumulator, one step 2 past 256, would drop) sum to 264 (exact in bf16).
  at::Tensor y = at::ones({1, 512}, at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16));
  y.slice(1, 256, 512).fill_(1.0 / 32.0);
  EXPECT_EQ(at::sum(y, {-1}).item<float>(), 264.0f);
  EXPECT_EQ(runPlan(y, ReduceOp::Sum, {256, 8, 1, 1}).item<float>(), 264.0f);
}

}  // namespace
}  // namespace hotkernel
