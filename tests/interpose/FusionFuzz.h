#pragma once
// The fusion engine's fuzz suite on the CPU key (issue 20): random programs
// run once in plain eager and once with the engine deferring and fusing the
// chains it learned, compared value by value.
//
// Note [Fusion fuzz programs]
// A pool of random chain templates (pointwise ops, scalar ops, broadcasts of
// row and column operands, casts, row reductions, HF's rotate_half (`cat` of
// the negated upper half and the lower half, both slices) mostly of the
// first input, which may be a strided window of a wider buffer; values kept
// bounded and away from the ops' singularities) is learned by the engine (each template
// run hotCalls times between commands, with a random set of intermediates
// held) and every hot chain is published with an interpreter or an exact
// kernel (FusionFuzzHarness.h). A program then runs 1-4 template instances
// on fresh or earlier values, mutated at random (a changed scalar, a
// truncation, a command, a stream switch, a step on another thread, a view,
// an in-place or metadata change, `.item()` in the middle of a chain), with
// random actions between them (the same ones, foreign ops, GEMMs a chain lets
// pass, ops that flush first with no command before them (Note [Ops that
// flush first]), held and dropped values), sometimes while another thread
// runs ops of its own. All random
// choices go through one recorder: the eager run draws them, the engine run
// replays them, so both run the same program. At the end (a synchronize)
// every value still held and every `.item()` is compared: bit for bit,
// except a value an interpreter kernel wrote (within the chain's tolerance,
// Note [Interpreter modes tolerance]) or one computed from such a value
// (NaN where eager has NaN, finite elsewhere). Deferred outputs are filled
// with NaN when allocated, so a read of memory a flush never wrote is a NaN
// where eager has a number: counted as an unwritten read (and a mismatch).

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hotkernel::fusion {
class FusedChainKernel;
struct HotChain;
}  // namespace hotkernel::fusion

namespace hotkernel::fusion::fuzz {

class LaunchLog;

struct FuzzOptions {
  uint64_t seed = 1;
  int64_t programs = 1000;
  int64_t programsPerPool = 500;  // programs between two pools (the catalog is reset)
  int templatesPerPool = 12;
  bool skipLastOutput = false;  // plants a bug: fused kernels leave their last output unwritten
  size_t failuresKept = 20;
  // Replaying a failure: start at this program (its pool is learned as in the full run); with `trace`, the
  // engine run's actions are written there.
  int64_t firstProgram = 0;
  std::ostream* trace = nullptr;
  std::function<void(int64_t done)> progress;  // called every 1000 programs
  // Asked before each program: true stops the run there (the report holds the programs run).
  std::function<bool()> stop;
  // The kernels of a pool's hot chains on a GPU (Note [The fuzz suite on a GPU]): one per chain, or null
  // for a chain it has none for (the chain is then not published and runs unfused). Unset: the CPU's
  // interpreter and exact kernels.
  std::function<std::vector<std::shared_ptr<FusedChainKernel>>(const std::vector<HotChain>&, LaunchLog&)>
      makeKernels;
};

struct FuzzReport {
  int64_t programs = 0;
  uint64_t mismatches = 0;
  uint64_t unwrittenReads = 0;
  // Features exercised and comparisons made, by name (Note [Fusion fuzz programs]).
  std::map<std::string, uint64_t> counts;
  // The first failures: "pool P program N: what".
  std::vector<std::string> failures;
};

// Runs `options.programs` programs in this process's fuzz engine (one at a
// time: the engine is the process's).
FuzzReport runFusionFuzz(const FuzzOptions& options);

// The report's failures, a line each (for test messages).
std::string failuresText(const FuzzReport& r);
// The count named `name`, 0 when absent.
uint64_t countOf(const FuzzReport& r, const char* name);

}  // namespace hotkernel::fusion::fuzz
