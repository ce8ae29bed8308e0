#pragma once
// Compiling generated chain kernels with NVRTC in parallel, reading ptxas'
// report (registers, spills), for the codegen and random-chain tests.

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <regex>
#include <string>
#include <vector>

#include "../CompileCache.h"
#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::chain::testutil {

struct ChainCompileJob {
  std::string name;
  ChainIR chain;
  ChainKernelParams params;
  std::string arch = "sm_90a";
  ChainLayout layout;  // the variant's (Note [Chain layouts]); empty: contiguous
};

struct ChainCompileResult {
  bool ok = false;
  std::string error;
  int registers = -1;
  int spillBytes = -1;
};

inline int firstInt(const std::string& log, const std::regex& re) {
  std::smatch m;
  return std::regex_search(log, m, re) ? std::stoi(m[1].str()) : -1;
}

inline std::vector<ChainCompileResult> compileChains(const std::vector<ChainCompileJob>& jobs) {
  std::vector<ChainCompileResult> results(jobs.size());
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    ChainCompileResult& r = results[i];
    const std::string source = generateChainSource(jobs[i].chain, jobs[i].params, jobs[i].layout);
    try {
      std::vector<std::string> options = chainCompileOptions();
      options.push_back("--ptxas-options=-v");
      const NvrtcOutput out = hotkernel::testutil::compileCached(source, jobs[i].name + ".cu", jobs[i].arch, options);
      static const std::regex kRegisters(R"(Used (\d+) registers)");
      static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
      static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
      r.registers = firstInt(out.log, kRegisters);
      const int stores = firstInt(out.log, kSpillStores), loads = firstInt(out.log, kSpillLoads);
      r.spillBytes = stores < 0 || loads < 0 ? -1 : stores + loads;
      r.ok = out.cubin.size() > 4 && out.cubin.compare(0, 4, "\x7f" "ELF") == 0 &&
             out.cubin.find(kChainKernelName) != std::string::npos;
      if (!r.ok) r.error = "not an ELF image holding hk_chain";
    } catch (const std::exception& e) {
      r.error = std::string(e.what()) + "\n--- source ---\n" + source;
    }
  });
  return results;
}

inline void expectCompiledWithoutSpills(const std::vector<ChainCompileJob>& jobs,
                                        const std::vector<ChainCompileResult>& results) {
  ASSERT_EQ(jobs.size(), results.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string what = jobs[i].name + " " + jobs[i].params.describe() + " " + jobs[i].arch;
    EXPECT_TRUE(results[i].ok) << what << ": " << results[i].error;
    if (!results[i].ok) continue;
    EXPECT_EQ(results[i].spillBytes, 0) << what << " spills (" << results[i].registers << " registers)";
    EXPECT_GT(results[i].registers, 0) << what << ": no register count in ptxas' report";
  }
}

#define SKIP_WITHOUT_NVRTC() \
  if (!::hotkernel::nvrtcAvailable()) GTEST_SKIP() << ::hotkernel::nvrtcUnavailableReason()

}  // namespace hotkernel::chain::testutil
