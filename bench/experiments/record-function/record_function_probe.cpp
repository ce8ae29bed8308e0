// What a record_function scope around each served launch would cost: a
// RECORD_USER_SCOPE per iteration, timed by the steady clock, with no
// callbacks, with a global FUNCTION-scope callback sampled at 0.05 (what
// hotkernel's recorder registers), and with a USER_SCOPE callback (what an
// active profiler adds). Prints the median of 15 loops per setting.
//
//   TP=$(python -c 'import torch, os; print(os.path.dirname(torch.__file__))')
//   g++ -O2 -std=c++17 -I$TP/include record_function_probe.cpp -o probe \
//       -L$TP/lib -ltorch_cpu -lc10 -Wl,-rpath,$TP/lib && ./probe
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction&) { return nullptr; }

double nsPerScope(long n) {
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    RECORD_USER_SCOPE("softmax[threads=256 vec=8 items=4 (register-resident)] for dtype=bf16;rows=4096;cols=32000");
    asm volatile("" ::: "memory");
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n);
}

double median(long n) {
  std::vector<double> v;
  for (int r = 0; r < 15; ++r) v.push_back(nsPerScope(n));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const double none = median(1000000);
  at::addGlobalCallback(
      at::RecordFunctionCallback(&onStart).needsInputs(false).samplingProb(0.05).scopes({at::RecordScope::FUNCTION}));
  const double recorder = median(1000000);
  at::addGlobalCallback(at::RecordFunctionCallback(&onStart).needsInputs(false).scopes({at::RecordScope::USER_SCOPE}));
  const double profiler = median(100000);
  std::printf("ns per RECORD_USER_SCOPE: no callbacks %.1f; the recorder's FUNCTION callback %.1f; "
              "a USER_SCOPE callback %.1f\n",
              none, recorder, profiler);
  return 0;
}
