#pragma once

// The harness's launches of a candidate: each output at a random offset of a
// freshly pre-filled buffer, guarded before and after, and the checks after
// the launch (watchdog, guards, inputs and workspace counter untouched: Note
// [Randomized pre-fill and guards] in HarnessBuffers.cpp), plus the output
// buffer helpers the comparison shares. Internal to hotkernel::optimizer.

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hotkernel/optimizer/Harness.h"

namespace hotkernel::harness {

// Thrown by the harness's pause when the yield point says stop; runHarness
// turns it into the stage's "interrupted" failure.
struct Interrupted {};

// Whether `a` and `b` hold the same bits (elements of dtype `d`).
bool bitwiseEqual(const at::Tensor& a, const at::Tensor& b, kernels::DType d);

// An exact int64 output (Note [Exact integer outputs]).
bool isExactInt64(const RowOpOutput& o);

// The dtype of output `o`'s buffer for an input of `inType`.
at::ScalarType outputType(const RowOpOutput& o, at::ScalarType inType);

// Elements of output `o` for a [rows, cols] input (rows * perRowElements per row).
int64_t outputElements(const RowOpOutput& o, int64_t rows, int64_t cols);

// What a launch's outputs are pre-filled with (Note [Randomized pre-fill and guards]).
enum class Prefill { NaN, RandomBits };

const char* prefillName(Prefill p);

struct Runner {
  const HarnessCandidate& c;
  const RowOpSpec& spec;  // general form
  kernels::DType dtype;
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
  std::vector<at::Tensor> run(const at::Tensor& in, const RowOpArgs& args, std::string& why);
};

}  // namespace hotkernel::harness
