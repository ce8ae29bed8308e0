// The fusion fuzz suite's batch for every CI run (Note [Fusion fuzz
// programs]): a few thousand random programs on the CPU key, each compared
// with plain eager, and the suite's own check that it catches a kernel that
// leaves a value unwritten.
#include <gtest/gtest.h>

#include <string>

#include "FusionFuzz.h"

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
        "inPlaceOnPending", "metadataInPlaceOnPending", "itemsOfPending", "foreignOpsOnPending", "threadStepsOnPending",
        "threadForeignOpsOnPending", "streamSwitchesWhilePending", "concurrentPrograms", "truncated", "scalarsChanged",
        "inputsReused", "dropped", "commands.eventRecord", "commands.streamWait", "comparedBitwise",
        "comparedWithinTolerance", "comparedNanPattern", "itemsCompared", "stridedInputs", "poolChainsWithLayouts",
        "poolChainsWithCat", "poolChainsWithSoftmax", "poolRelayoutCopies", "cloneDeferred", "rotateHalfDeferred", "rotateHalfOfPending", "matmulsOfPending", "matmulsLetPass"}) {
    EXPECT_GT(countOf(r, feature), 0u) << feature;
  }
  EXPECT_EQ(countOf(r, "failedFlushes"), 0u);
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
