// Compiles the softmax parameter space of a set of variants to cubins and
// writes them with a manifest, for tests/kernels/gpu/check_softmax.py to run
// on a GPU machine against torch (correctness, determinism, timing):
//
//   dump_softmax_cubins <out-dir> [arch=sm_90a] [--variants=REGEX] [tag=-DOPT,-DOPT2 ...]
//
// --variants keeps only the variants whose "dtype[rows,cols]" matches REGEX
// (e.g. "bfloat16\[8192,128256\]": a quick look at one shape's SASS).
// Each tag=options argument adds an experiment: every point again, compiled
// with the extra options, listed as "<describe> [tag]" (for trying template
// changes behind a macro before they become parameters).
// <out-dir>/manifest.json lists every variant with its parameter points, the
// cubin file of each point, its launch geometry and the family's tolerance.

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/Nvrtc.h"

using namespace hotkernel;
using namespace hotkernel::kernels;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <out-dir> [arch] [--variants=REGEX] [tag=-DOPT,...]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::string arch = argc > 2 ? argv[2] : "sm_90a";
  const int computeCapability = std::stoi(arch.substr(3, 2));  // "sm_90a" -> 90
  std::vector<std::pair<std::string, std::vector<std::string>>> experiments = {{"", {}}};
  std::regex only(".*");
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--variants=", 0) == 0) {
      only = std::regex(arg.substr(11));
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "bad experiment '%s' (want tag=-DA,-DB)\n", argv[i]);
      return 2;
    }
    std::vector<std::string> options;
    size_t start = eq + 1;
    while (start <= arg.size()) {
      const size_t comma = std::min(arg.find(',', start), arg.size());
      if (comma > start) options.push_back(arg.substr(start, comma - start));
      start = comma + 1;
    }
    experiments.push_back({arg.substr(0, eq), options});
  }

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }

  std::vector<SoftmaxVariant> variants;
  for (DType d : kAllDTypes) {
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {4096, 32000}, {8192, 128256}, {1, 128256}, {7, 13}, {1, 1}, {16384, 8192}, {64, 24576},
             {1000, 50}, {3, 1001}, {1, 32768}, {2, 32769}, {10, 2}, {4096, 1024}, {32768, 128},
             {257, 4000}, {5, 100000}, {16384, 8}, {65536, 256}, {999, 100}, {32, 128256}, {3, 50000}}) {
      const std::string name =
          std::string(dtypeName(d)) + "[" + std::to_string(rows) + "," + std::to_string(cols) + "]";
      if (std::regex_search(name, only)) variants.push_back({d, rows, cols});
    }
  }

  // Unique (dtype, point, experiment) triples to compile.
  struct Job {
    DType dtype;
    SoftmaxParams params;
    std::vector<std::string> extra;
  };
  std::map<std::string, Job> points;
  auto fileOf = [&](DType d, const SoftmaxParams& p, const std::string& tag) {
    return std::string(dtypeName(d)) + "_t" + std::to_string(p.threads) + "_v" + std::to_string(p.vec) + "_i" +
           std::to_string(p.items) + "_r" + std::to_string(p.rowsPerCta) + "_c" + std::to_string(p.cluster) +
           (p.smem ? "_smem" : "") +
           (tag.empty() ? "" : "_" + tag) + ".cubin";
  };
  nlohmann::json manifest = {{"arch", arch}, {"variants", nlohmann::json::array()}};
  for (const SoftmaxVariant& v : variants) {
    nlohmann::json jv = {{"dtype", dtypeName(v.dtype)},
                         {"rows", v.rows},
                         {"cols", v.cols},
                         {"tolerance", SoftmaxFamily::tolerance(v.dtype, v.cols)},
                         {"bytes", SoftmaxFamily::bytesMoved(v)},
                         {"points", nlohmann::json::array()}};
    // The family's space for this GPU, plus every cluster point of the large
    // bf16 variants (to see the whole split-row axis, not only the guesses).
    std::vector<SoftmaxParams> space = SoftmaxFamily::parameterSpace(v, computeCapability);
    if (computeCapability >= 90 && v.dtype == DType::BFloat16 && v.cols >= 32000) {
      for (const SoftmaxParams& p : SoftmaxFamily::allParameterPoints(v.dtype)) {
        if (p.cluster > 1 && p.vec == 8 && SoftmaxFamily::guardParams(v, p) &&
            std::find(space.begin(), space.end(), p) == space.end()) {
          space.push_back(p);
        }
      }
    }
    for (const auto& [tag, extra] : experiments) {
      for (const SoftmaxParams& p : space) {
        const LaunchGeometry g = SoftmaxFamily::launchGeometry(v, p);
        const std::string file = fileOf(v.dtype, p, tag);
        points[file] = {v.dtype, p, extra};
        jv["points"].push_back({{"params", p.toJson()},
                                {"describe", p.describe() + (tag.empty() ? "" : " [" + tag + "]")},
                                {"cubin", file},
                                {"grid", g.gridX},
                                {"block", g.blockX},
                                {"shared", g.sharedBytes},
                                {"alignment", SoftmaxFamily::requiredAlignment(v.dtype, p)},
                                {"cluster", p.cluster}});
      }
    }
    manifest["variants"].push_back(jv);
  }

  std::vector<std::pair<std::string, Job>> jobs(points.begin(), points.end());
  std::vector<std::string> errors(jobs.size());
  std::vector<int> registers(jobs.size(), -1);
  tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
    try {
      const Job& job = jobs[i].second;
      std::vector<std::string> options = SoftmaxFamily::compileOptions(job.dtype, job.params);
      options.insert(options.end(), job.extra.begin(), job.extra.end());
      options.push_back("--ptxas-options=-v");
      NvrtcOutput out = compileToCubin(SoftmaxFamily::source(), "softmax_lastdim.cu", arch, options);
      std::smatch m;
      static const std::regex kRegisters(R"(Used (\d+) registers)");
      if (std::regex_search(out.log, m, kRegisters)) registers[i] = std::stoi(m[1].str());
      std::ofstream f(dir + "/" + jobs[i].first, std::ios::binary);
      f << out.cubin;
      if (!f.flush()) throw std::runtime_error("cannot write " + dir + "/" + jobs[i].first);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  });
  int failed = 0;
  nlohmann::json regs = nlohmann::json::object();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!errors[i].empty()) {
      std::fprintf(stderr, "%s: %s\n", jobs[i].first.c_str(), errors[i].c_str());
      ++failed;
    }
    regs[jobs[i].first] = registers[i];
  }
  // Points whose cubin failed (an experiment that does not fit a point, e.g.
  // shared memory) leave the manifest, so the checker runs the rest.
  for (auto& jv : manifest["variants"]) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& pt : jv["points"]) {
      const std::string cubin = pt["cubin"];
      const auto it = std::find_if(jobs.begin(), jobs.end(), [&](const auto& j) { return j.first == cubin; });
      if (it == jobs.end() || errors[static_cast<size_t>(it - jobs.begin())].empty()) kept.push_back(pt);
    }
    jv["points"] = kept;
  }
  manifest["registers"] = regs;
  std::ofstream mf(dir + "/manifest.json");
  mf << manifest.dump(1);
  if (!mf.flush()) {
    std::fprintf(stderr, "cannot write %s/manifest.json\n", dir.c_str());
    return 1;
  }
  std::printf("%zu variants, %zu cubins for %s in %s, %d failed\n", variants.size(), jobs.size(), arch.c_str(),
              dir.c_str(), failed);
  return failed == 0 ? 0 : 1;
}
