#include "hotkernel/optimizer/Harness.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "hotkernel/optimizer/WorkSlices.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel {
namespace {

using kernels::DType;

}  // namespace

at::ScalarType scalarTypeOf(DType d) {
  switch (d) {
    case DType::Float32:
      return at::kFloat;
    case DType::Float16:
      return at::kHalf;
    case DType::BFloat16:
      return at::kBFloat16;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown dtype");
  return at::kFloat;
}

namespace {

at::ScalarType bitsType(DType d) { return d == DType::Float32 ? at::kInt : at::kShort; }

double dtypeMax(DType d) {
  switch (d) {
    case DType::Float32:
      return 3.4028234663852886e38;
    case DType::Float16:
      return 65504.0;
    case DType::BFloat16:
      return 3.3895313892515355e38;
  }
  return 1.0;
}

bool bitwiseEqual(const at::Tensor& a, const at::Tensor& b, DType d) {
  return at::equal(a.view(bitsType(d)), b.view(bitsType(d)));
}

// Max |out - ref|; +inf when NaN positions differ. Compared in float32 (exact
// for 16-bit values; for float32 the difference is rounded once, far below any
// tolerance) to keep the comparison cheap; the check calls it on row slices
// (Note [Bounded units of background GPU work]), so that the background
// optimizer yields quickly (Note [Optimize only on idle GPU time]).
double maxAbsError(const at::Tensor& out, const at::Tensor& ref) {
  const at::ScalarType t = out.scalar_type() == at::kDouble || ref.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor o = out.to(t), r = ref.to(t);
  if (!at::equal(o.isnan(), r.isnan())) return std::numeric_limits<double>::infinity();
  at::Tensor diff = (at::nan_to_num(o, 0.0, 0.0, 0.0) - at::nan_to_num(r, 0.0, 0.0, 0.0)).abs();
  // Infinite values must match exactly.
  if (!at::equal(o.isinf(), r.isinf())) return std::numeric_limits<double>::infinity();
  return diff.numel() ? diff.max().item<double>() : 0.0;
}

}  // namespace

RowOpSpec generalForm(const RowOpSpec& spec) {
  if (!spec.outputs.empty()) {
    HOTKERNEL_CHECK(spec.makeArgs && spec.references && spec.kernelArgs, "row op spec ", spec.op,
                    " with outputs needs makeArgs, references and kernelArgs");
    return spec;
  }
  HOTKERNEL_CHECK(spec.reference && spec.tolerance, "row op spec ", spec.op, " needs reference and tolerance");
  RowOpSpec g = spec;
  auto tolerance = spec.tolerance;
  g.outputs = {RowOpOutput{"out", false, [tolerance](const at::Tensor& in, const std::vector<at::Tensor>&, DType d) {
                             return at::scalar_tensor(tolerance(d, in.size(1)), at::kDouble);
                           }}};
  g.outputs[0].rowLocalBound = true;  // depends on the columns alone
  g.makeArgs = [](int64_t, int64_t, DType, at::Generator&) { return RowOpArgs{}; };
  auto reference = spec.reference;
  g.references = [reference](const at::Tensor& in, const RowOpArgs&) { return std::vector<at::Tensor>{reference(in)}; };
  if (spec.reference64) {
    auto reference64 = spec.reference64;
    g.references64 = [reference64](const at::Tensor& in64, const RowOpArgs&) { return reference64(in64); };
  }
  g.kernelArgs = [](const at::Tensor& in, const RowOpArgs&, const std::vector<at::Tensor>& outs) {
    KernelArgs a;
    a.pointer(in.const_data_ptr()).pointer(outs[0].mutable_data_ptr()).int64(in.size(0)).int64(in.size(1));
    return a;
  };
  return g;
}

// Note [A 0-dim view]
// `t.view({})` is not a 0-dim view: `{}` value-initializes the ScalarType
// overload's argument (kByte), so it reinterprets the bytes (a bf16 scalar
// became a [2] uint8 tensor and every cross_entropy mean/sum check threw).
// Spell the empty shape as an IntArrayRef.
at::Tensor outputView(const at::Tensor& flat, const RowOpOutput& o, int64_t rows, int64_t cols) {
  if (o.scalar) return flat.narrow(0, 0, 1).view(c10::IntArrayRef{});
  if (o.perRow) return flat.narrow(0, 0, rows);
  return flat.narrow(0, 0, rows * cols).view({rows, cols});
}

namespace {

// Elements of a slice of `out` farther from `ref` than the elementwise
// `bound` (finite positions; NaN and infinity positions are maxAbsError's
// business), compared in float32 like maxAbsError; the worst one by its flat
// index in the whole output (`flatOffset`: the slice's first element there).
struct OutsideBound {
  int64_t bad = 0;
  double worstExcess = 0;
  int64_t worstIndex = 0;
  double got = 0, reference = 0, bound = 0;

  // Merges a later slice: counts add up; the worst is the first largest
  // excess in flat order (as argmax over the whole output picks it).
  void merge(const OutsideBound& later) {
    if (later.bad == 0) return;
    if (bad == 0 || later.worstExcess > worstExcess) {
      const int64_t total = bad + later.bad;
      *this = later;
      bad = total;
    } else {
      bad += later.bad;
    }
  }
  std::string describe() const {
    std::ostringstream os;
    os << bad << " element(s) outside the bound; worst at flat index " << worstIndex << ": got " << got
       << ", reference " << reference << ", bound " << bound;
    return os.str();
  }
};

OutsideBound outsideBound(const at::Tensor& out, const at::Tensor& ref, const at::Tensor& bound, int64_t flatOffset) {
  OutsideBound r;
  at::Tensor o = out.to(at::kFloat), rf = ref.to(at::kFloat);
  at::Tensor excess = ((o - rf).abs() - bound.to(o.device()).to(at::kFloat)).masked_fill_(~(o.isfinite() & rf.isfinite()), 0.0);
  r.bad = (excess > 0).sum().item<int64_t>();
  if (r.bad == 0) return r;
  at::Tensor flatExcess = excess.reshape({-1});
  const int64_t i = flatExcess.argmax().item<int64_t>();
  at::Tensor b = bound.to(o.device()).to(at::kFloat).expand_as(o).reshape({-1});
  r.worstExcess = flatExcess[i].item<double>();
  r.worstIndex = flatOffset + i;
  r.got = o.reshape({-1})[i].item<double>();
  r.reference = rf.reshape({-1})[i].item<double>();
  r.bound = b[i].item<double>();
  return r;
}

// Rows [b, b + n) of what a check of `rows` rows holds per row: a reference
// ([rows, cols] or [rows]) or a per-row input; anything else (0-dim) whole.
at::Tensor rowsOf(const at::Tensor& t, int64_t rows, int64_t b, int64_t n) {
  return t.defined() && t.dim() >= 1 && t.size(0) == rows ? t.narrow(0, b, n) : t;
}

// Rows [b, b + n) of a bound of a [rows, cols] output: a [rows, cols] or
// [rows, 1] bound is narrowed; a scalar, [cols] or [1, cols] one broadcasts.
at::Tensor boundRowsOf(const at::Tensor& bound, int64_t rows, int64_t b, int64_t n) {
  return bound.dim() == 2 && bound.size(0) == rows ? bound.narrow(0, b, n) : bound;
}

// A check's extra arguments for rows [b, b + n): per-row inputs narrowed.
RowOpArgs argsRowsOf(const RowOpArgs& a, int64_t rows, int64_t b, int64_t n) {
  RowOpArgs s = a;
  for (at::Tensor& t : s.rowInputs) t = rowsOf(t, rows, b, n);
  return s;
}

// Thrown by the harness's pause when the yield point says stop; runHarness
// turns it into the stage's "interrupted" failure.
struct Interrupted {};

bool isExactInt64(const RowOpOutput& o) { return o.perRow && !o.scalar && o.exactInt64; }

// The dtype of output `o`'s buffer for an input of `inType`.
at::ScalarType outputType(const RowOpOutput& o, at::ScalarType inType) {
  if (isExactInt64(o)) return at::kLong;
  if (o.perRow && !o.scalar && !o.perRowInInputDtype) return at::kFloat;
  return inType;
}

// Elements of output `o` for a [rows, cols] input.
int64_t outputElements(const RowOpOutput& o, int64_t rows, int64_t cols) {
  return o.scalar ? 1 : o.perRow ? rows : rows * cols;
}

// The same bits viewed as integers of the element's width.
at::Tensor bitsOf(const at::Tensor& t) {
  switch (t.element_size()) {
    case 2:
      return t.view(at::kShort);
    case 4:
      return t.view(at::kInt);
    default:
      return t.view(at::kLong);
  }
}

// Note [Randomized pre-fill and guards]
// A kernel must not be able to tell the harness's launches from a served
// call, nor pass by leaving elements as it found them. So, per launch:
//  - the output view starts at a random offset (a random multiple of the
//    candidate's output alignment, at least 16 bytes) inside a larger buffer,
//    with a guard region before it and one of random length (64 to 1024
//    elements) after it, both holding random bit patterns that must be
//    bitwise unchanged after the launch ("wrote before the start" / "past
//    the end of the output");
//  - the output itself is pre-filled with a NaN of random sign and payload
//    or with random bit patterns (index outputs: INT64_MIN or random
//    negative values), the two alternating from a random start, so that a
//    kernel checking for NaN before it writes (or returning when out[0] is
//    not NaN) leaves the random patterns of every second launch in place: the
//    comparison with the reference sees them (a random pattern is a NaN, an
//    infinity or far outside the bound but with probability ~2^-13 per
//    16-bit element), and the determinism stage's runs, pre-filled
//    differently, must agree bitwise (a left element differs between them);
//  - every draw (offsets, lengths, patterns) derives from the run's seed, so
//    a failure replays.
enum class Prefill { NaN, RandomBits };

const char* prefillName(Prefill p) { return p == Prefill::NaN ? "NaN" : "random bits"; }

void fillRandomBits(const at::Tensor& t, at::Generator& gen) {
  at::Tensor bits = bitsOf(t);
  switch (t.element_size()) {
    case 2:
      bits.random_(std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max(), gen);
      break;
    case 4:
      bits.random_(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), gen);
      break;
    default:
      bits.random_(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), gen);
      break;
  }
}

// Pre-fills output `t` (Note [Randomized pre-fill and guards]); `draw` a random 64-bit word.
void prefillOutput(const at::Tensor& t, bool exactInt64, Prefill kind, uint64_t draw, at::Generator& gen) {
  if (exactInt64) {  // Note [Exact integer outputs]
    if (kind == Prefill::NaN) {
      t.fill_(std::numeric_limits<int64_t>::min());
    } else {
      t.random_(std::numeric_limits<int64_t>::min(), -1, gen);
    }
    return;
  }
  if (kind == Prefill::RandomBits) {
    fillRandomBits(t, gen);
    return;
  }
  // A quiet NaN with a random sign and payload.
  switch (t.scalar_type()) {
    case at::kFloat:
      bitsOf(t).fill_(static_cast<int32_t>(0x7fc00000u | (draw & 0x803fffffu)));
      break;
    case at::kBFloat16:
      bitsOf(t).fill_(static_cast<int16_t>(0x7fc0u | (draw & 0x803fu)));
      break;
    case at::kHalf:
      bitsOf(t).fill_(static_cast<int16_t>(0x7e00u | (draw & 0x81ffu)));
      break;
    default:
      t.fill_(std::numeric_limits<double>::quiet_NaN());
      break;
  }
}

}  // namespace

std::string exactOutputMismatch(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kLong);
  if (at::equal(out, r)) return {};
  const at::Tensor differs = (out != r).reshape({-1});
  const int64_t bad = differs.sum().item<int64_t>();
  const int64_t i = differs.to(at::kInt).argmax().item<int64_t>();
  std::ostringstream os;
  os << bad << " element(s) differ; first at flat index " << i << ": got " << out.reshape({-1})[i].item<int64_t>()
     << ", reference " << r.reshape({-1})[i].item<int64_t>();
  return os.str();
}

namespace {

struct Runner {
  const HarnessCandidate& c;
  const RowOpSpec& spec;  // general form
  DType dtype;
  int device;
  double watchdogSeconds;
  std::shared_ptr<CudaKernelLauncher> launcher;
  at::cuda::CUDAStream stream;
  // A yield point before the launch (the buffers are ready) and between the
  // launch and the checks of its outputs: the launch is a unit of its own.
  std::function<void()> pause;
  at::Generator gen;     // the run's device generator (pre-fill and guard patterns)
  std::mt19937_64 rng;   // the run's host draws (offsets, lengths, NaN payloads)
  int launches = 0;      // launches so far: the pre-fill alternates
  int prefillStart = 0;  // 0: the first launch is pre-filled with NaN, 1: with random bits
  Prefill lastPrefill = Prefill::NaN;

  // Runs the candidate on `in` (and `args`) into outputs at random offsets of
  // freshly pre-filled buffers, guarded before and after (Note [Randomized
  // pre-fill and guards]). Returns the outputs, or none and `why` on failure.
  std::vector<at::Tensor> run(const at::Tensor& in, const RowOpArgs& args, std::string& why) {
    const int64_t rows = in.size(0), cols = in.size(1);
    const Prefill kind = (launches++ + prefillStart) % 2 == 0 ? Prefill::NaN : Prefill::RandomBits;
    lastPrefill = kind;
    const size_t outAlign = std::max<size_t>({16, c.alignment, c.outputAlignment});
    std::vector<at::Tensor> outs, guards, guardCopies;
    std::vector<std::string> guardNames;
    for (const RowOpOutput& o : spec.outputs) {
      const int64_t n = outputElements(o, rows, cols);
      const at::ScalarType type = outputType(o, in.scalar_type());
      const int64_t elem = static_cast<int64_t>(c10::elementSize(type));
      const int64_t unit = std::max<int64_t>(1, static_cast<int64_t>(outAlign) / elem);
      const int64_t before = unit * static_cast<int64_t>(1 + rng() % 8);
      const int64_t after = 64 + static_cast<int64_t>(rng() % 961);
      at::Tensor buf = at::empty({before + n + after}, in.options().dtype(type));
      fillRandomBits(buf, gen);
      at::Tensor out = buf.narrow(0, before, n);
      prefillOutput(out, isExactInt64(o), kind, rng(), gen);
      const std::string label = spec.outputs.size() > 1 ? " '" + o.name + "'" : "";
      for (const auto& [g, name] : {std::pair<at::Tensor, std::string>{buf.narrow(0, 0, before), "wrote before the start of the output" + label},
                                    {buf.narrow(0, before + n, after), "wrote past the end of the output" + label}}) {
        guards.push_back(g);
        guardCopies.push_back(g.clone());
        guardNames.push_back(name);
      }
      outs.push_back(outputView(out, o, rows, cols));
    }
    // Scratch (Note [Row ops with per-row inputs, scalar outputs and a workspace]).
    const int64_t workFloats = spec.workspaceFloats ? spec.workspaceFloats(rows, cols) : 0;
    at::Tensor work, workTail;
    std::vector<at::Tensor> launchOuts = outs;
    if (workFloats > 0) {
      work = at::full({workFloats}, std::numeric_limits<float>::quiet_NaN(), in.options().dtype(at::kFloat));
      const int64_t tail = std::min(spec.workspaceZeroTail, workFloats);
      workTail = work.narrow(0, workFloats - tail, tail);
      workTail.zero_();
      launchOuts.push_back(work);
    }
    at::Tensor inCopy = in.clone();
    std::vector<at::Tensor> columnCopies, rowInputCopies;
    for (const at::Tensor& t : args.columns) columnCopies.push_back(t.defined() ? t.clone() : at::Tensor());
    for (const at::Tensor& t : args.rowInputs) rowInputCopies.push_back(t.defined() ? t.clone() : at::Tensor());
    const KernelArgs kernelArgs = spec.kernelArgs(in, args, launchOuts);
    if (pause) pause();
    // A launch the GPU refuses (a cluster wider than it co-schedules: Note
    // [Function attributes before launch]) fails here, synchronously, and
    // leaves the context usable: the candidate fails its stage, the next runs.
    if (const CUresult r = launcher->launchStatus(kernelArgs, stream.stream(), c.geometry(rows, cols));
        r != CUDA_SUCCESS) {
      why = "launch failed: " + cudaErrorString(r);
      return {};
    }
    at::cuda::CUDAEvent done(cudaEventDefault);
    done.record(stream);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(watchdogSeconds);
    // cudaEventQuery directly: CUDAEvent::query throws on a fault (an illegal
    // address), which is a failed stage here, not an exception.
    for (cudaError_t q = cudaEventQuery(done.event()); q != cudaSuccess; q = cudaEventQuery(done.event())) {
      if (q != cudaErrorNotReady) {
        why = std::string("CUDA error: ") + cudaGetErrorString(q);
        (void)cudaGetLastError();
        return {};
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::ostringstream os;
        os << "watchdog: not finished after " << watchdogSeconds << " s";
        why = os.str();
        return {};
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const cudaError_t err = cudaStreamSynchronize(stream.stream());
    if (err != cudaSuccess) {
      why = std::string("CUDA error: ") + cudaGetErrorString(err);
      (void)cudaGetLastError();
      return {};
    }
    if (pause) pause();
    for (size_t i = 0; i < guards.size(); ++i) {
      if (!at::equal(bitsOf(guards[i]), bitsOf(guardCopies[i]))) {
        why = guardNames[i];
        return {};
      }
    }
    if (!bitwiseEqual(in, inCopy, dtype)) {
      why = "modified its input (aliasing or in-place write)";
      return {};
    }
    for (size_t i = 0; i < args.columns.size(); ++i) {
      if (args.columns[i].defined() && !bitwiseEqual(args.columns[i], columnCopies[i], dtype)) {
        why = "modified its per-column input " + std::to_string(i);
        return {};
      }
    }
    for (size_t i = 0; i < args.rowInputs.size(); ++i) {
      if (args.rowInputs[i].defined() && !at::equal(args.rowInputs[i], rowInputCopies[i])) {
        why = "modified its per-row input " + std::to_string(i);
        return {};
      }
    }
    if (workTail.defined() && workTail.numel() > 0 && !at::all(workTail == 0).item<bool>()) {
      why = "left the workspace's counter non-zero (the next launch would misread it)";
      return {};
    }
    for (at::Tensor& o : outs) o = o.clone();
    return outs;
  }
};

// Outputs of one call against the reference (the harness's checks and the
// tuner's timed launches: checkOutputs).
struct Comparer {
  const RowOpSpec& spec;  // general form
  DType dtype;
  std::function<void()> pause;  // a yield point between bounded units of work; throws Interrupted

  // One output of a check against its reference under its bound, in row
  // slices (Note [Bounded units of background GPU work]); the result and
  // message are those of the whole output at once. `boundMax`: the largest
  // finite bound seen (for the float64 check of output 0).
  bool compareOutput(size_t i, const at::Tensor& in, const RowOpArgs& args, const at::Tensor& out,
                     const std::vector<at::Tensor>& refs, double& err, double& boundMax, std::string& why) const {
    const RowOpOutput& output = spec.outputs[i];
    const std::string name = spec.outputs.size() > 1 ? output.name + ": " : "";
    const int64_t r = in.size(0), n = in.size(1);
    const at::Tensor ref = refs[i].reshape(out.sizes());
    if (isExactInt64(output)) {  // [rows] int64 (argmax's indices): one comparison, no bound
      pause();
      err = 0;
      boundMax = 0;
      if (const std::string mismatch = exactOutputMismatch(out, ref); !mismatch.empty()) {
        std::ostringstream os;
        os << name << mismatch << " at [" << r << ", " << n << "]";
        why = os.str();
        return false;
      }
      return true;
    }
    auto boundOf = [&](const at::Tensor& inRows, const RowOpArgs& argsRows, const std::vector<at::Tensor>& refsRows) {
      return output.boundWithArgs ? output.boundWithArgs(inRows, argsRows, refsRows, dtype)
                                  : output.bound(inRows, refsRows, dtype);
    };
    // [rows, cols] outputs in row slices; a per-row output too when its bound
    // is row-local (the bound, not the comparison, is what costs: layer_norm's
    // rstd takes a float64 variance of the whole input); scalar outputs whole.
    const bool sliced = (out.dim() == 2 && out.size(0) == r) ||
                        (output.rowLocalBound && out.dim() == 1 && out.size(0) == r);
    at::Tensor wholeBound;
    if (!sliced || !output.rowLocalBound) {
      pause();
      wholeBound = boundOf(in, args, refs);
    }
    const std::vector<RowSlice> slices =
        sliced ? rowSlices(r, n, kCompareTrafficPerElement) : std::vector<RowSlice>{RowSlice{0, r}};
    err = 0;
    boundMax = 0;
    bool finite = true;
    std::optional<double> failedTolerance;  // a scalar bound some slice exceeded
    OutsideBound outside;
    for (const RowSlice& s : slices) {
      pause();
      const at::Tensor o = sliced ? out.narrow(0, s.begin, s.rows) : out;
      const at::Tensor rf = sliced ? ref.narrow(0, s.begin, s.rows) : ref;
      const double e = maxAbsError(o, rf);
      if (!std::isfinite(e)) {
        finite = false;
        break;
      }
      err = std::max(err, e);
      at::Tensor bound;
      if (wholeBound.defined()) {
        bound = sliced ? boundRowsOf(wholeBound, r, s.begin, s.rows) : wholeBound;
      } else {
        std::vector<at::Tensor> refRows;
        for (const at::Tensor& t : refs) refRows.push_back(rowsOf(t, r, s.begin, s.rows));
        bound = boundOf(in.narrow(0, s.begin, s.rows), argsRowsOf(args, r, s.begin, s.rows), refRows);
      }
      // The largest finite bound: rows the reference makes NaN or infinite
      // (the -inf / NaN stress set) have no finite bound.
      if (i == 0 && spec.references64) {
        boundMax = std::max(boundMax, bound.to(at::kDouble).nan_to_num(0.0, 0.0, 0.0).max().item<double>());
      }
      if (bound.numel() == 1) {
        // Note [A NaN scalar bound]
        // A one-element bound (a scalar, or a per-row bound of one row) is NaN
        // when the reference is not finite (a sum over an inf: inf - inf in the
        // bound's arithmetic). Such a reference must be met exactly, which
        // maxAbsError has already checked (e is 0 here), so it counts as 0, as
        // the elementwise path does by skipping non-finite positions. Seen on
        // the H200: every sum / mean point failed at [1, cols] on the row with an -inf.
        double tol = bound.item<double>();
        if (std::isnan(tol)) tol = 0.0;
        if (!(e <= tol) && !failedTolerance) failedTolerance = tol;
      } else {
        outside.merge(outsideBound(o, rf, bound, sliced ? s.begin * (out.dim() == 2 ? n : 1) : 0));
      }
    }
    if (!finite) {
      std::ostringstream os;
      os << name << "NaN or infinity where the reference has none (or the reverse) at [" << r << ", " << n << "]";
      why = os.str();
      return false;
    }
    if (failedTolerance) {
      std::ostringstream os;
      os << name << "max abs error " << err << " > tolerance " << *failedTolerance << " at [" << r << ", " << n
         << "]";
      why = os.str();
      return false;
    }
    if (outside.bad > 0) {
      std::ostringstream os;
      os << name << "max abs error " << err << ": " << outside.describe() << " at [" << r << ", " << n << "]";
      why = os.str();
      return false;
    }
    return true;
  }

  // Every output of a call on `in` (and `args`) under its own bound, then
  // output 0 against float64 and the family invariant; false + why on any
  // mismatch. `maxAbsError0`: the worst error of output 0 seen.
  bool compareAll(const at::Tensor& in, const RowOpArgs& args, const std::vector<at::Tensor>& outs, std::string& why,
                  double& maxAbsError0) const {
    pause();
    std::vector<at::Tensor> refs = spec.references(in, args);
    HOTKERNEL_CHECK(refs.size() == outs.size(), "the reference of ", spec.op, " gave ", refs.size(),
                    " outputs, the spec names ", outs.size());
    double bound0Max = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      double err = 0, boundMax = 0;
      if (!compareOutput(i, in, args, outs[i], refs, err, boundMax, why)) return false;
      if (i == 0) {
        maxAbsError0 = std::max(maxAbsError0, err);
        bound0Max = boundMax;
      }
    }
    if (spec.references64 && !isExactInt64(spec.outputs[0])) {
      // Against float64 (on up to 256 rows: "where cheap"), the candidate's
      // output 0 may not be worse than ATen's by more than its bound (the
      // largest finite one, so that rows the reference makes NaN or infinite
      // do not turn the tolerance into NaN, which would fail every candidate).
      pause();
      const int64_t n = std::min<int64_t>(in.size(0), 256);
      const at::Tensor in64 = in.narrow(0, 0, n).to(at::kDouble);
      at::Tensor ref64 = spec.references64(in64, argsRowsOf(args, in.size(0), 0, n));
      at::Tensor ref0 = refs[0].reshape(outs[0].sizes()).narrow(0, 0, n);
      const at::Tensor out0 = outs[0].narrow(0, 0, n);
      const double mine = maxAbsError(out0, ref64), aten = maxAbsError(ref0, ref64);
      const double tol = bound0Max;
      if (std::isfinite(aten) && !(mine <= aten + tol)) {
        std::ostringstream os;
        os << "float64 error " << mine << " exceeds ATen's " << aten << " + tolerance " << tol;
        why = os.str();
        return false;
      }
      // Note [Family invariants]
      if (spec.invariant) {
        const std::string broken = spec.invariant(in64, out0.to(at::kDouble), ref64, dtype);
        if (!broken.empty()) {
          std::ostringstream os;
          os << "invariant: " << broken << " at [" << in.size(0) << ", " << in.size(1) << "]";
          why = os.str();
          return false;
        }
      }
    }
    return true;
  }
};

}  // namespace

const char* toString(HarnessStage s) {
  switch (s) {
    case HarnessStage::Smoke:
      return "smoke";
    case HarnessStage::Sweep:
      return "sweep";
    case HarnessStage::Stability:
      return "stability";
    case HarnessStage::Determinism:
      return "determinism";
    case HarnessStage::EdgeCases:
      return "edge-cases";
  }
  return "?";
}

const StageResult* HarnessReport::failure() const {
  for (const StageResult& s : stages) {
    if (!s.passed) return &s;
  }
  return nullptr;
}

std::vector<at::Tensor> allocateOutputs(const RowOpSpec& spec, const at::Tensor& in) {
  const int64_t rows = in.size(0), cols = in.size(1);
  std::vector<at::Tensor> outs;
  for (const RowOpOutput& o : spec.outputs) {
    at::Tensor buf = at::empty({outputElements(o, rows, cols)}, in.options().dtype(outputType(o, in.scalar_type())));
    outs.push_back(outputView(buf, o, rows, cols));
  }
  return outs;
}

std::string checkOutputs(const RowOpSpec& opSpec, DType dtype, const at::Tensor& in, const RowOpArgs& args,
                         const std::vector<at::Tensor>& outs, const std::function<bool()>& yieldPoint) {
  const RowOpSpec spec = generalForm(opSpec);
  HOTKERNEL_CHECK(outs.size() == spec.outputs.size(), "checkOutputs: ", outs.size(), " outputs, the spec of ",
                  spec.op, " names ", spec.outputs.size());
  const int device = in.device().index();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  const at::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  auto pause = [&] {
    if (!yieldPoint) return;
    stream.synchronize();
    if (!yieldPoint()) throw Interrupted{};
  };
  const Comparer comparer{spec, dtype, pause};
  std::string why;
  double maxError = 0;
  try {
    std::vector<at::Tensor> shaped;
    for (size_t i = 0; i < outs.size(); ++i) {
      shaped.push_back(outs[i].reshape(outputView(outs[i].reshape({-1}), spec.outputs[i], in.size(0), in.size(1)).sizes()));
    }
    if (!comparer.compareAll(in, args, shaped, why, maxError)) return why;
  } catch (const Interrupted&) {
    return "interrupted";
  }
  return {};
}

HarnessReport runHarness(const RowOpSpec& opSpec, const HarnessCandidate& c, DType dtype, int64_t rows,
                         int64_t cols, int device, const HarnessOptions& options) {
  const RowOpSpec spec = generalForm(opSpec);
  HarnessReport report;
  report.seed = options.seed ? options.seed
                             : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(false, device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device).clone();
  gen.set_current_seed(report.seed);
  const auto floatOpts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  const at::ScalarType st = scalarTypeOf(dtype);
  HarnessStage stage = HarnessStage::Smoke;  // the stage running now (an interruption fails it)

  // A yield point between two bounded units of GPU work (Note [Bounded units
  // of background GPU work]): all of the harness's GPU work is on `stream`,
  // so after the synchronisation none of it is in flight while the yield
  // point waits. Throws Interrupted when it says stop.
  auto pause = [&] {
    if (!options.yieldPoint) return;
    stream.synchronize();
    if (!options.yieldPoint()) throw Interrupted{};
  };
  // A [r, n] input in the check's dtype, built in row slices: `rowsAt(b, k)`
  // gives rows [b, b + k) (float32), converted into place.
  auto buildSliced = [&](int64_t r, int64_t n, const std::function<at::Tensor(int64_t, int64_t)>& rowsAt) {
    at::Tensor t = at::empty({r, n}, floatOpts.dtype(st));
    for (const RowSlice& s : rowSlices(r, n, kBuildTrafficPerElement)) {
      pause();
      t.narrow(0, s.begin, s.rows).copy_(rowsAt(s.begin, s.rows));
    }
    return t;
  };
  // Uniform in [-1, 5): asymmetric on purpose, so that the negated set below
  // reaches values (down to -5) the smoke input never holds.
  auto randomInput = [&](int64_t r, int64_t n) {
    return buildSliced(r, n, [&](int64_t, int64_t k) { return at::rand({k, n}, gen, floatOpts).mul_(6.0).sub_(1.0); });
  };

  Runner runner{c, spec, dtype, device, options.watchdogSeconds, nullptr, stream, pause, gen,
                std::mt19937_64(report.seed ^ 0x9e3779b97f4a7c15ull)};
  runner.prefillStart = static_cast<int>(runner.rng() % 2);
  auto drawArgs = [&](int64_t r, int64_t n) { return spec.makeArgs(r, n, dtype, gen); };
  auto fail = [&](HarnessStage s, const std::string& why) {
    report.stages.push_back(StageResult{s, false, why});
    report.passed = false;
    return report;
  };
  try {
    pause();  // loading a module is work on the device too
    runner.launcher = CudaKernelLauncher::load(device, c.cubin, c.kernelName, c.geometry(rows, cols), c.alignment,
                                               c.description);
  } catch (const Interrupted&) {
    return fail(HarnessStage::Smoke, "interrupted");
  } catch (const std::exception& e) {
    return fail(HarnessStage::Smoke, std::string("cannot load: ") + e.what());
  }

  const Comparer comparer{spec, dtype, pause};

  // Checks one input (and its extra arguments) against the reference; false +
  // why on any mismatch, naming the launch's pre-fill. Every output is
  // compared under its own bound.
  auto check = [&](const at::Tensor& in, const RowOpArgs& args, std::string& why) -> bool {
    pause();
    std::vector<at::Tensor> outs = runner.run(in, args, why);
    if (outs.empty()) return false;
    if (!comparer.compareAll(in, args, outs, why, report.maxAbsError)) {
      why += std::string(" (output pre-filled with ") + prefillName(runner.lastPrefill) + ")";
      return false;
    }
    return true;
  };

  std::string why;
  try {
    // 1. smoke
    const at::Tensor x = randomInput(rows, cols);
    const RowOpArgs xArgs = drawArgs(rows, cols);
    if (!check(x, xArgs, why)) return fail(HarnessStage::Smoke, why);
    report.stages.push_back({HarnessStage::Smoke, true, "recorded variant"});

    // 2. variant sweep: neighbours the guard accepts.
    stage = HarnessStage::Sweep;
    std::vector<std::pair<int64_t, int64_t>> shapes = {
        {1, cols}, {rows + 1, cols}, {std::min<int64_t>(rows, 7), cols}};
    if (rows > 1) shapes.push_back({rows - 1, cols});
    for (int64_t dc : {-64, -8, -1, 1, 8}) {
      if (cols + dc >= 1) shapes.push_back({std::min<int64_t>(rows, 33), cols + dc});
    }
    shapes.push_back({std::min<int64_t>(rows, 5), 1});
    int swept = 0;
    for (auto [r, n] : shapes) {
      if (!c.acceptsShape(r, n)) continue;
      const RowOpArgs args = drawArgs(r, n);
      const at::Tensor in = randomInput(r, n);
      if (!check(in, args, why)) return fail(HarnessStage::Sweep, why);
      ++swept;
    }
    report.stages.push_back({HarnessStage::Sweep, true, std::to_string(swept) + " neighbour shapes"});

    // 3. numerical stability: each input set built (in row slices) just before its check.
    stage = HarnessStage::Stability;
    // Note [Near-max inputs of sums]
    // A quarter of the dtype's max tests that a row op's arithmetic survives
    // large values. A sum of such values overflows float32 or not depending on
    // the order of the additions (partial sums of either sign may pass the
    // max, or meet as inf - inf = NaN), so ATen's result is no reference there;
    // sums ask for max / (4 cols) instead, where no order overflows.
    const double big = spec.nearMaxMagnitude ? spec.nearMaxMagnitude(dtype, cols) : dtypeMax(dtype) / 4.0;
    // A copy even for float32 inputs (the sets below modify it in place).
    auto xf = [&](int64_t b, int64_t k) { return x.narrow(0, b, k).to(at::kFloat, /*non_blocking=*/false, /*copy=*/true); };
    auto fromX = [&](std::function<at::Tensor(at::Tensor)> f) {
      return [&, f] { return buildSliced(rows, cols, [&](int64_t b, int64_t k) { return f(xf(b, k)); }); };
    };
    // Note [Stress inputs]
    // Every family gets huge ("near max") and tiny magnitudes (2^-100 of the
    // smoke input, 2^-12 for float16, whose normal range ends at 2^-14: far
    // from float32's subnormals, so flush-to-zero arithmetic cannot matter),
    // all-zero rows and all-equal rows (a random multiple of 1/16 in [-2, 2]
    // per row: few mantissa bits, so every row sum and mean is exact in
    // float32 and ATen's result is exact too: layer_norm's output is its
    // bias), and a NaN. +inf and -inf entries, a row of -inf and a row of
    // +inf only where the reference defines the result (infinitiesDefined):
    // softmax, log_softmax and cross_entropy give NaN for a row holding +inf
    // and propagate -inf entries; the reductions give +-inf or NaN. The norms
    // do not: ATen's vectorized and generic CUDA paths for the same row
    // disagree (NaN from inf - inf in one, inf * 0 in the other), so there is
    // no one answer to match; their NaN propagation, huge, tiny and
    // all-equal rows are still checked.
    const double tiny = dtype == DType::Float16 ? std::ldexp(1.0, -12) : std::ldexp(1.0, -100);
    std::vector<std::pair<std::string, std::function<at::Tensor()>>> stress = {
        {"negated", fromX([](at::Tensor v) { return v.neg_(); })},
        {"x3", fromX([](at::Tensor v) { return v.mul_(3); })},
        {"x0.01", fromX([](at::Tensor v) { return v.mul_(0.01); })},
        {"near max", fromX([big](at::Tensor v) { return v.sign().mul_(big).mul_(at::rand_like(v)); })},
        {"tiny", fromX([tiny](at::Tensor v) { return v.mul_(tiny); })},
        {"zeros", [&] {
           pause();
           return at::zeros_like(x);
         }},
        {"all-equal rows", [&] {
           return buildSliced(rows, cols, [&](int64_t, int64_t k) {
             return at::rand({k, 1}, gen, floatOpts).mul_(64.0).sub_(32.0).round_().div_(16.0).expand({k, cols}).contiguous();
           });
         }},
        {"shifted", fromX([dtype](at::Tensor v) { return v.add_(dtype == DType::Float16 ? 1e4 : 1e5); })},
    };
    if (spec.infinitiesDefined) {
      stress.push_back({"-inf and NaN", [&] {
                          at::Tensor special = buildSliced(rows, cols, xf);
                          const int64_t r0 = 0, r1 = rows > 1 ? 1 : 0, r2 = rows > 2 ? 2 : 0;
                          special.select(0, r0).select(0, 0).fill_(-std::numeric_limits<float>::infinity());
                          if (r1 != r0) special.select(0, r1).fill_(-std::numeric_limits<float>::infinity());  // a row of -inf
                          if (r2 != r0 && r2 != r1) {
                            special.select(0, r2).select(0, cols - 1).fill_(std::numeric_limits<float>::quiet_NaN());
                          }
                          return special;
                        }});
      stress.push_back({"+inf", [&] {
                          at::Tensor special = buildSliced(rows, cols, xf);
                          const int64_t r0 = rows - 1, r1 = rows > 1 ? rows - 2 : rows - 1;
                          special.select(0, r0).select(0, cols / 2).fill_(std::numeric_limits<float>::infinity());
                          if (r1 != r0) special.select(0, r1).fill_(std::numeric_limits<float>::infinity());  // a row of +inf
                          return special;
                        }});
    } else {
      stress.push_back({"NaN", [&] {
                          at::Tensor special = buildSliced(rows, cols, xf);
                          special.select(0, rows > 2 ? 2 : 0)
                              .select(0, cols - 1)
                              .fill_(std::numeric_limits<float>::quiet_NaN());
                          return special;
                        }});
    }
    for (const auto& [name, make] : stress) {
      const at::Tensor in = make();
      const RowOpArgs args = drawArgs(rows, cols);
      if (!check(in, args, why)) return fail(HarnessStage::Stability, name + ": " + why);
    }
    report.stages.push_back({HarnessStage::Stability, true, std::to_string(stress.size()) + " input sets"});

    // 4. determinism: 3 runs, bitwise identical; the pre-fill alternates
    // (Note [Randomized pre-fill and guards]), so an element some run leaves
    // unwritten differs between them.
    stage = HarnessStage::Determinism;
    std::vector<at::Tensor> first;
    for (int i = 0; i < 3; ++i) {
      pause();
      std::vector<at::Tensor> outs = runner.run(x, xArgs, why);
      if (outs.empty()) return fail(HarnessStage::Determinism, why);
      if (i == 0) {
        first = outs;
        continue;
      }
      for (size_t k = 0; k < outs.size(); ++k) {
        const RowOpOutput& o = spec.outputs[k];
        const DType bits = o.perRow && !o.scalar && !o.perRowInInputDtype ? DType::Float32 : dtype;
        const bool same = isExactInt64(o) ? at::equal(first[k], outs[k]) : bitwiseEqual(first[k], outs[k], bits);
        if (!same) {
          return fail(HarnessStage::Determinism, "run " + std::to_string(i + 1) + " differs bitwise from run 1" +
                                                     (outs.size() > 1 ? " in '" + spec.outputs[k].name + "'" : "") +
                                                     " (runs pre-filled with NaN and with random bits: an element left "
                                                     "unwritten, or a nondeterministic result)");
        }
      }
    }
    report.stages.push_back({HarnessStage::Determinism, true, "3 runs bitwise identical, pre-filled differently"});

    // 5. edge cases: the guard refuses what the kernel cannot take.
    // Note [Misaligned pointers the guard must refuse]
    // A pointer off by one element when the guard needs more than one element
    // (a vector), else off by one byte: an element-aligned pointer is what a
    // vec = 1 point (or cross_entropy's output) legitimately takes, so offsetting
    // those by one element tested nothing the guard promises (and failed every
    // vec = 1 softmax point).
    stage = HarnessStage::EdgeCases;
    {
      at::Tensor flat = at::empty({rows * cols + 16}, x.options());
      char* base = static_cast<char*>(flat.mutable_data_ptr());
      const size_t elem = flat.element_size();
      auto offsetFor = [elem](size_t align) { return align > elem ? elem : size_t{1}; };
      const size_t outAlign = c.outputAlignment ? c.outputAlignment : c.alignment;
      if (c.alignment > 1 && c.acceptsPointers(base + offsetFor(c.alignment), base)) {
        return fail(HarnessStage::EdgeCases,
                    "guard accepts an input misaligned by " + std::to_string(offsetFor(c.alignment)) + " byte(s)");
      }
      if (outAlign > 1 && c.acceptsPointers(base, base + offsetFor(outAlign))) {
        return fail(HarnessStage::EdgeCases,
                    "guard accepts an output misaligned by " + std::to_string(offsetFor(outAlign)) + " byte(s)");
      }
    }
    if (!c.acceptsPointers(x.const_data_ptr(), first[0].mutable_data_ptr())) {
      return fail(HarnessStage::EdgeCases, "guard refuses aligned, distinct buffers");
    }
  } catch (const Interrupted&) {
    // Abandoned at a yield point: no stage of this run counts.
    return fail(stage, "interrupted");
  }
  report.stages.push_back({HarnessStage::EdgeCases, true, "misaligned refused, no aliasing, input untouched"});
  report.passed = true;
  return report;
}

}  // namespace hotkernel
