#include "HarnessBuffers.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <sstream>
#include <thread>

#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel {

using kernels::DType;

// Note [A 0-dim view]
// `t.view({})` is not a 0-dim view: `{}` value-initializes the ScalarType
// overload's argument (kByte), so it reinterprets the bytes (a bf16 scalar
// became a [2] uint8 tensor and every cross_entropy mean/sum check threw).
// Spell the empty shape as an IntArrayRef.
at::Tensor outputView(const at::Tensor& flat, const RowOpOutput& o, int64_t rows, int64_t cols) {
  if (o.scalar) return flat.narrow(0, 0, 1).view(c10::IntArrayRef{});
  if (o.perRow && o.perRowElements > 1) {
    return flat.narrow(0, 0, rows * o.perRowElements).view({rows, o.perRowElements});
  }
  if (o.perRow) return flat.narrow(0, 0, rows);
  return flat.narrow(0, 0, rows * cols).view({rows, cols});
}

namespace harness {
namespace {

at::ScalarType bitsType(DType d) { return d == DType::Float32 ? at::kInt : at::kShort; }

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

}  // namespace

bool bitwiseEqual(const at::Tensor& a, const at::Tensor& b, DType d) {
  return at::equal(a.view(bitsType(d)), b.view(bitsType(d)));
}

bool isExactInt64(const RowOpOutput& o) { return o.perRow && !o.scalar && o.exactInt64; }

at::ScalarType outputType(const RowOpOutput& o, at::ScalarType inType) {
  if (isExactInt64(o)) return at::kLong;
  if (o.perRow && !o.scalar && !o.perRowInInputDtype) return at::kFloat;
  return inType;
}

int64_t outputElements(const RowOpOutput& o, int64_t rows, int64_t cols) {
  return o.scalar ? 1 : o.perRow ? rows * std::max<int64_t>(o.perRowElements, 1) : rows * cols;
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
const char* prefillName(Prefill p) { return p == Prefill::NaN ? "NaN" : "random bits"; }

namespace {

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

std::vector<at::Tensor> Runner::run(const at::Tensor& in, const RowOpArgs& args, std::string& why) {
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

}  // namespace harness

std::vector<at::Tensor> allocateOutputs(const RowOpSpec& spec, const at::Tensor& in) {
  const int64_t rows = in.size(0), cols = in.size(1);
  std::vector<at::Tensor> outs;
  for (const RowOpOutput& o : spec.outputs) {
    const at::ScalarType type = harness::outputType(o, in.scalar_type());
    at::Tensor buf = at::empty({harness::outputElements(o, rows, cols)}, in.options().dtype(type));
    outs.push_back(outputView(buf, o, rows, cols));
  }
  return outs;
}

}  // namespace hotkernel
