// Note [Entries a process loads]: which cache entries may become a served op's plan.
#include <gtest/gtest.h>

#include <string>

#include "EntryAdmission.h"
#include "hotkernel/kernels/FamilyDescriptor.h"

namespace hotkernel::engine {
namespace {

TEST(EntryAdmissionTest, GivenEveryFamilyWhenAnEntryNamesTheFamilyOfItsOpThenAdmitted) {
  for (const kernels::FamilyDescriptor* f : kernels::allFamilies()) {
    EXPECT_EQ(entryRefusal(f->name, *f, /*trustAgentEntries=*/false), "") << f->name;
  }
}

TEST(EntryAdmissionTest, GivenAnEntryOfAnotherFamilyWhenLoadedForAnOpThenRefusedNamingBoth) {
  for (const kernels::FamilyDescriptor* served : kernels::allFamilies()) {
    for (const kernels::FamilyDescriptor* other : kernels::allFamilies()) {
      if (served == other) continue;
      const std::string why = entryRefusal(other->name, *served, /*trustAgentEntries=*/true);
      EXPECT_NE(why.find(other->name), std::string::npos) << why;
      EXPECT_NE(why.find(served->atenOp), std::string::npos) << why;
    }
  }
  EXPECT_NE(entryRefusal("", *kernels::familyNamed("rms_norm"), true), "");
  EXPECT_NE(entryRefusal("softmax_lastdim_v2", *kernels::familyNamed("softmax_lastdim"), true), "");
}

TEST(EntryAdmissionTest, GivenAnAgentEntryWhenAgentEntriesAreNotTrustedThenRefusedElseAdmitted) {
  const kernels::FamilyDescriptor& softmax = *kernels::familyNamed("softmax_lastdim");
  const std::string why = entryRefusal(kAgentFamily, softmax, /*trustAgentEntries=*/false);
  EXPECT_NE(why.find("HOTKERNEL_TRUST_AGENT_ENTRIES=1"), std::string::npos) << why;
  EXPECT_EQ(entryRefusal(kAgentFamily, softmax, /*trustAgentEntries=*/true), "");
}

TEST(EntryAdmissionTest, GivenTrustedAgentEntriesWhenLoadedForAnOpTheAgentDoesNotTuneThenRefusedNamingTheOp) {
  int refused = 0;
  for (const kernels::FamilyDescriptor* f : kernels::allFamilies()) {
    if (std::string(f->name) == "softmax_lastdim") continue;
    const std::string why = entryRefusal(kAgentFamily, *f, /*trustAgentEntries=*/true);
    EXPECT_NE(why.find(f->atenOp), std::string::npos) << f->name << ": " << why;
    EXPECT_NE(why.find("aten::_softmax"), std::string::npos) << f->name << ": " << why;
    ++refused;
  }
  EXPECT_GE(refused, 5);  // log_softmax, the norms, the reductions, cross_entropy
}

TEST(EntryAdmissionTest, GivenAdmittedEntriesWhenPublishedThenOnlyAgentKernelsWaitForTheOptimizersCheck) {
  EXPECT_TRUE(checkedBeforePublishing(kAgentFamily));
  for (const kernels::FamilyDescriptor* f : kernels::allFamilies()) EXPECT_FALSE(checkedBeforePublishing(f->name));
}

}  // namespace
}  // namespace hotkernel::engine
