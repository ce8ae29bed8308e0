// The fusion fuzz suite's batch for every CI run (Note [Fusion fuzz
// programs]): a few thousand random programs on the CPU key, each compared
// with plain eager, and the suite's own check that it catches a kernel that
// leaves a value unwritten.
#include <gtest/gtest.h>

#include <string>

#include "FusionFuzz.h"
#include "FuzzHostKernels.h"

using namespace hotkernel::fusion::fuzz;

TEST(FusionFuzzTest, GivenThreeThousandRandomProgramsWhenRunWithTheEngineThenEveryValueMatchesEager) {
  FuzzOptions options;
  options.seed = 20;
  options.programs = 3000;
  options.programsPerPool = 500;
  const FuzzReport r = runFusionFuzz(options);
  EXPECT_EQ(r.mismatches, 0u) << failuresText(r);
  EXPECT_EQ(r.unwrittenReads, 0u) << failuresText(r);
  EXPECT_GE(r.programs, 2900);  // at most a few programs eager itself refuses
  // Every feature the suite claims ran, and both paths of a flush.
  for (const char* feature :
       {"deferredCalls", "fusedFlushes", "unfusedFlushes", "interpreterLaunches", "exactLaunches", "viewsOfPending",
        "inPlaceOnPending", "metadataInPlaceOnPending", "itemsOfPending", "foreignOpsOnPending", "threadStepsOnPending", "threadStepsInPlace",
        "threadForeignOpsOnPending", "streamSwitchesWhilePending", "concurrentPrograms", "truncated", "scalarsChanged",
        "inputsReused", "dropped", "commands.eventRecord", "commands.streamWait", "comparedBitwise",
        "comparedWithinTolerance", "comparedNanPattern", "itemsCompared", "stridedInputs", "poolChainsWithLayouts",
        "poolChainsWithCat", "poolChainsWithSoftmax", "poolRelayoutCopies", "transposedInputs", "poolTransposedCopies", "permutedInputs", "clampDeferred", "hardtanhDeferred", "leakyReluDeferred", "hardActivationDeferred", "maximumDeferred", "poolTransposedNdCopies", "poolNdLayoutChains", "cloneDeferred", "rotateHalfDeferred", "rotateHalfOfPending", "matmulsOfPending", "matmulsLetPass", "convolutionsOfPending", "convolutionsLetPass",
        "flushingOpsOnPending", "flushingOpsWhilePending", "groupNormDeferred", "poolChainsWithGroupNorm",
        "batchNormDeferred", "poolChainsWithBatchNorm", "inPlaceDeferred", "inPlaceStepsOnPending",
        "softplusMishDeferred"}) {
    EXPECT_GT(countOf(r, feature), 0u) << feature;
  }
  EXPECT_EQ(countOf(r, "failedFlushes"), 0u);
}

namespace {

// One program of a run again (its pool learned as the run learned it), as `fusion_fuzz --first-program` replays it.
FuzzReport replayProgram(uint64_t seed, int64_t program) {
  FuzzOptions options;
  options.seed = seed;
  options.firstProgram = program;
  options.programs = 1;
  return runFusionFuzz(options);
}

}  // namespace

// The checker's taint over an in-place cycle (x = cast(gelu(fused value)); q = x / s; x += q): q descends from a
// fused value and is compared within its tolerance, not bit for bit (seed 6207's program 66671 was a false
// mismatch while a memoized recursion cut the cycle).
TEST(FusionFuzzTest, GivenAnInPlaceStepThatWritesAValueDerivedFromItsTargetWhenCheckedThenTheDerivedValueIsTainted) {
  const FuzzReport r = replayProgram(6207, 66671);
  EXPECT_EQ(r.programs, 1);
  EXPECT_EQ(r.mismatches, 0u) << failuresText(r);
  EXPECT_GT(countOf(r, "comparedNanPattern"), 0u);  // the derived values
}

// An in-place step on the worker thread writes a value a fused launch wrote on the owner's earlier stream: its
// result is the register of the tensor it wrote (as on the owner's thread), checked under that register's stream, not
// a new value on the worker's stream (seed 6401's program 384563 was a false stream violation before).
TEST(FusionFuzzTest, GivenAnInPlaceStepOnTheWorkerThreadWhenCheckedThenItsResultIsTheTensorItWrote) {
  const FuzzReport r = replayProgram(6401, 384563);
  EXPECT_EQ(r.programs, 1);
  EXPECT_EQ(countOf(r, "threadStepsInPlace"), 1u);
  EXPECT_EQ(countOf(r, "streamViolations"), 0u);
  EXPECT_EQ(r.mismatches, 0u) << failuresText(r);
}

TEST(FusionFuzzTest, GivenFusedKernelsThatLeaveTheirLastOutputUnwrittenWhenProgramsRunThenTheSuiteReportsUnwrittenReads) {
  FuzzOptions options;
  options.seed = 21;
  options.programs = 300;
  options.programsPerPool = 300;
  options.skipLastOutput = true;
  const FuzzReport r = runFusionFuzz(options);
  EXPECT_GT(r.unwrittenReads, 0u);
  EXPECT_GT(r.mismatches, 0u);
  EXPECT_FALSE(r.failures.empty());
}

// Note [Generated kernels in the CPU fuzz]: the generator's own kernels, compiled for the host, as the pools'
// fused kernels: every value still matches eager within the harness's bound, the kernels launched.
TEST(FusionFuzzTest, GivenGeneratedKernelsCompiledForTheHostWhenProgramsRunThenEveryValueMatchesEager) {
  FuzzOptions options;
  options.seed = 22;
  options.programs = 600;
  options.programsPerPool = 300;
  host::HostKernelCounts counts;
  options.makeKernels = host::hostKernelMaker(counts);
  FuzzReport r = runFusionFuzz(options);
  host::addHostKernelCounts(r, counts);
  EXPECT_EQ(r.mismatches, 0u) << failuresText(r);
  EXPECT_EQ(r.unwrittenReads, 0u) << failuresText(r);
  EXPECT_GE(r.programs, 580);
  EXPECT_GT(counts.built, 0u);
  EXPECT_EQ(counts.compileFailed, 0u);
  EXPECT_GT(countOf(r, "deviceLaunches"), 0u) << "no generated kernel launched";
  EXPECT_GT(countOf(r, "fusedFlushes"), 0u);
  EXPECT_EQ(countOf(r, "failedFlushes"), 0u);
}
