// Compiles the softmax template with NVRTC (CPU only, no GPU needed): every
// parameter point of every dtype for sm_90a, a spread of them for sm_80, and
// checks ptxas' report that no point spills registers to local memory.

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "CompileCache.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels {
namespace {

struct Job {
  DType dtype;
  SoftmaxParams params;
  std::string arch;
};

struct Result {
  bool ok = false;
  std::string error;
  int registers = -1;
  int spillBytes = -1;  // spill stores + spill loads
  int stackBytes = -1;
  size_t cubinBytes = 0;
};

std::string name(const Job& j) {
  return std::string(dtypeName(j.dtype)) + " " + j.params.describe() + " " + j.arch;
}

int firstInt(const std::string& log, const std::regex& re) {
  std::smatch m;
  return std::regex_search(log, m, re) ? std::stoi(m[1].str()) : -1;
}

Result compileOne(const Job& j) {
  Result r;
  try {
    std::vector<std::string> options = SoftmaxFamily::compileOptions(j.dtype, j.params);
    options.push_back("--ptxas-options=-v");
    NvrtcOutput out = hotkernel::testutil::compileCached(SoftmaxFamily::source(), "softmax_lastdim.cu", j.arch, options);
    static const std::regex kRegisters(R"(Used (\d+) registers)");
    static const std::regex kStack(R"((\d+) bytes stack frame)");
    static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
    static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
    r.registers = firstInt(out.log, kRegisters);
    r.stackBytes = firstInt(out.log, kStack);
    const int stores = firstInt(out.log, kSpillStores), loads = firstInt(out.log, kSpillLoads);
    r.spillBytes = stores < 0 || loads < 0 ? -1 : stores + loads;
    r.cubinBytes = out.cubin.size();
    r.ok = out.cubin.size() > 4 && out.cubin.compare(0, 4, "\x7f" "ELF") == 0 &&
           out.cubin.find(SoftmaxFamily::kKernelName) != std::string::npos;
    if (!r.ok) r.error = "not an ELF image holding " + std::string(SoftmaxFamily::kKernelName);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::vector<Result> compileAll(const std::vector<Job>& jobs) {
  std::vector<Result> results(jobs.size());
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) { results[i] = compileOne(jobs[i]); });
  return results;
}

void expectAllCompiledWithoutSpills(const std::vector<Job>& jobs, const std::vector<Result>& results) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Result& r = results[i];
    EXPECT_TRUE(r.ok) << name(jobs[i]) << ": " << r.error;
    if (!r.ok) continue;
    EXPECT_EQ(r.spillBytes, 0) << name(jobs[i]) << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stackBytes, 0) << name(jobs[i]) << " uses a stack frame";
    EXPECT_GT(r.registers, 0) << name(jobs[i]) << ": no register count in the ptxas report";
    EXPECT_LE(r.registers, 65536 / jobs[i].params.threads) << name(jobs[i]);
  }
}

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason()

TEST(SoftmaxFamilyCompileTest, GivenEveryPointOfEveryDTypeWhenCompiledForSm90aThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    for (const SoftmaxParams& p : SoftmaxFamily::allParameterPoints(d)) jobs.push_back({d, p, "sm_90a"});
  }
  // The non-portable cluster points are among them, register- and shared-memory-resident
  // (the decode points of Note [Decode clusters]).
  for (const SoftmaxParams& decode : {SoftmaxParams{256, 8, 4, 1, 16}, SoftmaxParams{512, 8, 2, 1, 16}}) {
    SoftmaxParams staged = decode;
    staged.smem = true;
    for (const SoftmaxParams& p : {decode, staged}) {
      EXPECT_TRUE(std::any_of(jobs.begin(), jobs.end(),
                              [&](const Job& j) { return j.dtype == DType::BFloat16 && j.params == p; }))
          << p.describe();
    }
  }
  // Tight staged slices (Note [Tight staged slices]): item counts outside the listed ones.
  for (const auto& [d, p] : {std::pair{DType::Float32, SoftmaxParams{512, 4, 13, 1, 16}},
                             std::pair{DType::BFloat16, SoftmaxParams{256, 8, 5, 1, 8}}}) {
    SoftmaxParams tight = p;
    tight.smem = true;
    jobs.push_back({d, tight, "sm_90a"});
  }
  // Pipelined slices (Note [Pipelined slices]): the tight float32 point and a bf16 staged point
  // (clusterRows changes the grid only: one compile each covers both counts).
  for (const auto& [d, p] : {std::pair{DType::Float32, SoftmaxParams{512, 4, 13, 1, 16}},
                             std::pair{DType::BFloat16, SoftmaxParams{256, 8, 8, 1, 4}}}) {
    SoftmaxParams piped = p;
    piped.smem = true;
    piped.clusterRows = 4;
    jobs.push_back({d, piped, "sm_90a"});
  }
  const std::vector<Result> results = compileAll(jobs);
  expectAllCompiledWithoutSpills(jobs, results);

  // The register report, for the README and for tuning (printed, not asserted).
  std::map<std::string, std::string> rows;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SoftmaxParams& p = jobs[i].params;
    char key[64];
    std::snprintf(key, sizeof(key), "%-8s t=%4d r=%2d v=%d", dtypeName(jobs[i].dtype), p.threads, p.rowsPerCta,
                  p.vec);
    rows[key] += " i" + std::to_string(p.items) + ":" + std::to_string(results[i].registers);
  }
  std::printf("registers per point (sm_90a), items:registers\n");
  for (const auto& [key, line] : rows) std::printf("  %s %s\n", key.c_str(), line.c_str());
}

TEST(SoftmaxFamilyCompileTest, GivenASpreadOfPointsWhenCompiledForSm80ThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  // Every dtype, at the narrowest and the widest vector: the streaming point of
  // each CTA size and the largest register-resident point of each CTA shape.
  std::vector<Job> jobs;
  for (DType d : kAllDTypes) {
    std::map<std::tuple<int, int, int>, SoftmaxParams> largest;
    for (const SoftmaxParams& p : SoftmaxFamily::allParameterPoints(d)) {
      if (p.minComputeCapability() > 80) continue;  // clusters: sm_90+ (see below)
      if (p.vec != 1 && p.vec != static_cast<int>(16 / elementSize(d))) continue;
      if (p.items == 0) {
        jobs.push_back({d, p, "sm_80"});
      } else {
        largest[{p.threads, p.rowsPerCta, p.vec}] = p;  // items ascend within (threads, rowsPerCta, vec)
      }
    }
    for (const auto& [key, p] : largest) jobs.push_back({d, p, "sm_80"});
  }
  expectAllCompiledWithoutSpills(jobs, compileAll(jobs));
}

TEST(SoftmaxFamilyCompileTest, GivenEveryPointAsLogSoftmaxWhenCompiledForSm90aThenCubinsWithoutSpills) {
  SKIP_WITHOUT_NVRTC();
  // log_softmax keeps x instead of exp(x - max): same registers, other epilogue.
  std::vector<Job> jobs;
  std::vector<Result> results;
  for (DType d : kAllDTypes) {
    for (const SoftmaxParams& p : SoftmaxFamily::allParameterPoints(d)) {
      if (p.vec != static_cast<int>(16 / elementSize(d)) && p.vec != 1) continue;
      jobs.push_back({d, p, "sm_90a"});
    }
  }
  results.resize(jobs.size());
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    Result& r = results[i];
    try {
      std::vector<std::string> options = SoftmaxFamily::compileOptions(jobs[i].dtype, jobs[i].params, SoftmaxOp::LogSoftmax);
      EXPECT_EQ(options.back(), "-DHK_LOG=1");
      options.push_back("--ptxas-options=-v");
      NvrtcOutput out = hotkernel::testutil::compileCached(SoftmaxFamily::source(), "softmax_lastdim.cu", jobs[i].arch, options);
      static const std::regex kRegisters(R"(Used (\d+) registers)");
      static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
      r.registers = firstInt(out.log, kRegisters);
      r.spillBytes = firstInt(out.log, kSpillStores);
      r.stackBytes = 0;
      r.ok = out.cubin.find(SoftmaxFamily::kKernelName) != std::string::npos;
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(results[i].ok) << name(jobs[i]) << ": " << results[i].error;
    EXPECT_EQ(results[i].spillBytes, 0) << name(jobs[i]) << " spills";
  }
}

TEST(SoftmaxFamilyCompileTest, GivenAClusterPointWhenCompiledForSm80ThenTheTemplateRefusesIt) {
  SKIP_WITHOUT_NVRTC();
  SoftmaxParams staged{256, 8, 4, 1, 16};
  staged.smem = true;
  for (const SoftmaxParams& p :
       {SoftmaxParams{1024, 8, 2, 1, 8}, SoftmaxParams{256, 8, 4, 1, 16}, staged, SoftmaxParams{1024, 8, 0, 1, 4}}) {
    EXPECT_EQ(p.minComputeCapability(), 90) << p.describe();
    EXPECT_THROW(hotkernel::testutil::compileCached(SoftmaxFamily::source(), "softmax_lastdim.cu", "sm_80",
                                SoftmaxFamily::compileOptions(DType::BFloat16, p)),
                 Error)
        << p.describe();
    const NvrtcOutput ok = hotkernel::testutil::compileCached(SoftmaxFamily::source(), "softmax_lastdim.cu", "sm_90a",
                                          SoftmaxFamily::compileOptions(DType::BFloat16, p));
    EXPECT_NE(ok.cubin.find(SoftmaxFamily::kKernelName), std::string::npos) << p.describe();
  }
}

TEST(SoftmaxFamilyCompileTest, GivenParametersOutsideTheTemplatesLimitsWhenCompiledThenTheTemplateRefuses) {
  SKIP_WITHOUT_NVRTC();
  const std::string source = SoftmaxFamily::source();
  const std::vector<std::vector<std::string>> bad = {
      {"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=16", "-DHK_ITEMS=0"},  // 32-byte vectors
      {"-DHK_DTYPE=0", "-DHK_THREADS=384", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0"},   // not a power of two
      {"-DHK_DTYPE=3", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=0"},   // unknown dtype
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=4", "-DHK_ITEMS=17"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=128", "-DHK_ROWS=2", "-DHK_VEC=4", "-DHK_ITEMS=1"},   // rows span warps
      {"-DHK_DTYPE=0", "-DHK_THREADS=128", "-DHK_ROWS=3", "-DHK_VEC=4", "-DHK_ITEMS=1"},
      {"-DHK_DTYPE=0", "-DHK_THREADS=512", "-DHK_VEC=4", "-DHK_ITEMS=0"},  // missing define
      {"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_ITEMS=0", "-DHK_CLUSTER=4",
       "-DHK_SMEM=1"},  // a stage of no items
      {"-DHK_DTYPE=2", "-DHK_THREADS=128", "-DHK_ROWS=8", "-DHK_VEC=8", "-DHK_ITEMS=1", "-DHK_CLUSTER=2"},  // rows per CTA
      {"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_ITEMS=2", "-DHK_CLUSTER=3"},
      {"-DHK_DTYPE=2", "-DHK_THREADS=256", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_ITEMS=2", "-DHK_CLUSTER=32"},  // > a warp
      {"-DHK_DTYPE=2", "-DHK_THREADS=512", "-DHK_ROWS=1", "-DHK_VEC=8", "-DHK_ITEMS=2", "-DHK_LOG=2"},
  };
  for (const std::vector<std::string>& options : bad) {
    EXPECT_THROW(hotkernel::testutil::compileCached(source, "softmax_lastdim.cu", "sm_90a", options), Error) << options.back();
  }
}

}  // namespace
}  // namespace hotkernel::kernels
