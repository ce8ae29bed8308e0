#pragma once
// Helpers of the rms_norm and layer_norm family tests: the named shapes
// (FamilyShapes.h), and compiling many parameter points with NVRTC in parallel while reading
// ptxas' report (registers, spills, stack), as SoftmaxFamilyCompileTest does.

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "CompileCache.h"
#include "FamilyShapes.h"
#include "hotkernel/kernels/NormCommon.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::kernels::testutil {

struct CompileJob {
  DType dtype;
  NormParams params;
  std::vector<std::string> flags;  // the variant's defines (-DHK_HAS_WEIGHT=..., ...)
  std::string arch;
};

struct CompileResult {
  bool ok = false;
  std::string error;
  int registers = -1;
  int spillBytes = -1;  // spill stores + spill loads
  int stackBytes = -1;
  std::string cubin;  // the image, for tests that compare two compiles
};

inline std::string describeJob(const CompileJob& j) {
  std::string s = std::string(dtypeName(j.dtype)) + " " + j.params.describe() + " " + j.arch;
  for (const std::string& f : j.flags) s += " " + f;
  return s;
}

inline int firstInt(const std::string& log, const std::regex& re) {
  std::smatch m;
  return std::regex_search(log, m, re) ? std::stoi(m[1].str()) : -1;
}

// Compiles every job; `options(job)` gives the family's defines (the point's and the flags').
template <typename OptionsFn>
std::vector<CompileResult> compileAll(const std::string& source, const std::string& program,
                                      const std::string& kernelName, const std::vector<CompileJob>& jobs,
                                      OptionsFn options) {
  std::vector<CompileResult> results(jobs.size());
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    CompileResult& r = results[i];
    try {
      std::vector<std::string> opts = options(jobs[i]);
      opts.push_back("--ptxas-options=-v");
      const NvrtcOutput out = hotkernel::testutil::compileCached(source, program, jobs[i].arch, opts);
      static const std::regex kRegisters(R"(Used (\d+) registers)");
      static const std::regex kStack(R"((\d+) bytes stack frame)");
      static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
      static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
      r.registers = firstInt(out.log, kRegisters);
      r.stackBytes = firstInt(out.log, kStack);
      const int stores = firstInt(out.log, kSpillStores), loads = firstInt(out.log, kSpillLoads);
      r.spillBytes = stores < 0 || loads < 0 ? -1 : stores + loads;
      r.cubin = out.cubin;
      r.ok = out.cubin.size() > 4 && out.cubin.compare(0, 4, "\x7f" "ELF") == 0 &&
             out.cubin.find(kernelName) != std::string::npos;
      if (!r.ok) r.error = "not an ELF image holding " + kernelName;
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  });
  return results;
}

inline void expectAllCompiledWithoutSpills(const std::vector<CompileJob>& jobs,
                                           const std::vector<CompileResult>& results) {
  ASSERT_EQ(jobs.size(), results.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const CompileResult& r = results[i];
    EXPECT_TRUE(r.ok) << describeJob(jobs[i]) << ": " << r.error;
    if (!r.ok) continue;
    EXPECT_EQ(r.spillBytes, 0) << describeJob(jobs[i]) << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stackBytes, 0) << describeJob(jobs[i]) << " uses a stack frame";
    EXPECT_GT(r.registers, 0) << describeJob(jobs[i]) << ": no register count in the ptxas report";
    EXPECT_LE(r.registers, 65536 / jobs[i].params.threads) << describeJob(jobs[i]);
  }
}

// The register report, for the README and for tuning (printed, not asserted).
inline void printRegisters(const char* title, const std::vector<CompileJob>& jobs,
                           const std::vector<CompileResult>& results) {
  std::map<std::string, std::string> rows;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const NormParams& p = jobs[i].params;
    char key[80];
    std::snprintf(key, sizeof(key), "%-8s t=%4d r=%2d v=%d%s%s", dtypeName(jobs[i].dtype), p.threads, p.rowsPerCta,
                  p.vec, p.cluster != 1 ? (" c=" + std::to_string(p.cluster)).c_str() : "",
                  p.split != 1 ? (" s=" + std::to_string(p.split)).c_str() : "");
    rows[key] += " i" + std::to_string(p.items) + ":" + std::to_string(results[i].registers);
  }
  std::printf("%s, items:registers\n", title);
  for (const auto& [key, line] : rows) std::printf("  %s %s\n", key.c_str(), line.c_str());
}

// A spread of points for the cheaper checks: at the narrowest and the widest
// vector, every streaming point and the largest register-resident point of
// each CTA shape (the most registers).
inline std::vector<NormParams> spreadOf(DType dtype, const std::vector<NormParams>& all) {
  std::vector<NormParams> out;
  std::map<std::tuple<int, int, int>, NormParams> largest;
  for (const NormParams& p : all) {
    if (p.cluster != 1) continue;  // sm_90+ only: clusterSample
    if (p.split != 1) continue;    // compiledPoints compiles every grid-split point
    if (p.vec != 1 && p.vec != static_cast<int>(16 / elementSize(dtype))) continue;
    if (p.items == 0) {
      out.push_back(p);
    } else {
      largest[{p.threads, p.rowsPerCta, p.vec}] = p;  // items ascend within (threads, rowsPerCta, vec)
    }
  }
  for (const auto& [key, p] : largest) out.push_back(p);
  return out;
}

// HOTKERNEL_NORM_COMPILE_ALL=1: every point for every weight / bias
// combination, not only for the one with every array (minutes on two cores).
inline bool compileEverything() {
  const char* e = std::getenv("HOTKERNEL_NORM_COMPILE_ALL");
  return e != nullptr && std::string(e) == "1";
}

// The points to compile for the combinations other than "every array": all of
// them under HOTKERNEL_NORM_COMPILE_ALL=1, else spreadOf.
inline std::vector<NormParams> otherCombinationPoints(DType dtype, const std::vector<NormParams>& all) {
  return compileEverything() ? all : spreadOf(dtype, all);
}

// The split-row (cluster) points of `all` worth a compile each (there are hundreds; sm_90+ only):
// every streamed slice at 1024 threads, and at the widest vector the register slice with the most
// items at 1024 and at 256 threads for clusters 4 and 16; all of them under HOTKERNEL_NORM_COMPILE_ALL=1.
inline std::vector<NormParams> clusterSample(DType dtype, const std::vector<NormParams>& all) {
  std::vector<NormParams> out;
  std::map<std::tuple<int, int>, NormParams> largest;
  for (const NormParams& p : all) {
    if (p.cluster == 1) continue;
    if (compileEverything() || (p.items == 0 && p.threads == 1024)) {
      out.push_back(p);
    } else if (p.items > 0 && p.vec == static_cast<int>(16 / elementSize(dtype)) &&
               (p.threads == 1024 || p.threads == 256) && (p.cluster == 4 || p.cluster == 16)) {
      largest[{p.cluster, p.threads}] = p;  // items ascend within (cluster, threads, vec)
    }
  }
  for (const auto& [key, p] : largest) out.push_back(p);
  return out;
}

// The points of `all` without a cluster (one CTA a row, or a row split over a cooperative grid) and
// clusterSample's.
inline std::vector<NormParams> compiledPoints(DType dtype, const std::vector<NormParams>& all) {
  std::vector<NormParams> out;
  for (const NormParams& p : all) {
    if (p.cluster == 1) out.push_back(p);
  }
  for (const NormParams& p : clusterSample(dtype, all)) out.push_back(p);
  return out;
}

}  // namespace hotkernel::kernels::testutil
