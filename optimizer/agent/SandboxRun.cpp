#include "hotkernel/optimizer/SandboxRun.h"

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/JsonFields.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

constexpr const char* kHelperName = "hotkernel-sandbox-run";

// Host-side float -> bits of the element type (round to nearest even).
void encode(float f, int elementSize, unsigned char* out, bool half) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (elementSize == 4) {
    std::memcpy(out, &u, 4);
    return;
  }
  uint16_t h;
  if (!half) {
    h = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  } else {
    // Inputs are small (|f| < 8): normal fp16, no overflow handling needed.
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff) - 127 + 15;
    const uint32_t mant = u & 0x7fffffu;
    h = exp <= 0 ? static_cast<uint16_t>(sign) : static_cast<uint16_t>(sign | (exp << 10) | (mant >> 13));
  }
  std::memcpy(out, &h, 2);
}

}  // namespace

// Note [Sandbox run wire format is read strictly]
// Both ends read JSON written by another process: the helper reads its
// parent's request, the parent reads whatever the helper (or a kernel that
// scribbled over it) left on stdout. The helper reads the request field by
// field (Note [Strict JSON fields]: every integer checked to be one of the
// field's range before it is converted), so a malformed line is an Error the
// helper reports, never a crash or an exception of another type; the parent
// takes anything but {"ok":true} on the first line as a failed run.

const std::vector<std::string>& sandboxStageNames() {
  static const std::vector<std::string> names = {"smoke", "sweep", "stability", "determinism", "edge-cases"};
  return names;
}

bool SandboxRunResult::failedInStage() const {
  return !ok && !stages.empty() && !stages.back().passed;
}

std::string sandboxRunHeaderLine(const SandboxRunRequest& r) {
  nlohmann::json header = {{"format", "hotkernel-sandbox-run"}, {"version", 2},
                                 {"kernelName", r.kernelName},         {"block", r.geometry.blockX},
                                 {"gridX", r.geometry.gridX},          {"sharedBytes", r.geometry.sharedBytes},
                                 {"rows", r.rows},                     {"cols", r.cols},
                                 {"elementSize", r.elementSize},       {"half", r.half},
                                 {"device", r.device},                 {"cubinBytes", r.cubin.size()}};
  if (r.harness) header["harness"] = {{"launch", r.harness->launch.toJson()}, {"seed", r.harness->seed}};
  return header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

SandboxRunHeader parseSandboxRunHeader(const std::string& line) {
  const std::string where = "sandbox run request";
  const nlohmann::json h = jsonfield::object(jsonfield::parse(line, where, jsonfield::kMaxDepth), where);
  HOTKERNEL_REQUIRE(jsonfield::string(h, "format", where) == "hotkernel-sandbox-run", where,
                    ".format must be \"hotkernel-sandbox-run\"");
  const int64_t version = jsonfield::integer(h, "version", where, 1, 2);
  constexpr int64_t kU32 = std::numeric_limits<uint32_t>::max();
  constexpr int64_t kI64 = std::numeric_limits<int64_t>::max();
  SandboxRunHeader out;
  SandboxRunRequest& r = out.request;
  r.kernelName = jsonfield::string(h, "kernelName", where);
  r.geometry.blockX = static_cast<unsigned>(jsonfield::integer(h, "block", where, 0, kU32));
  r.geometry.gridX = static_cast<unsigned>(jsonfield::integer(h, "gridX", where, 0, kU32));
  r.geometry.sharedBytes = static_cast<unsigned>(jsonfield::integer(h, "sharedBytes", where, 0, kU32));
  r.rows = jsonfield::integer(h, "rows", where, 1, kI64);
  r.cols = jsonfield::integer(h, "cols", where, 1, kI64);
  r.elementSize = static_cast<int>(jsonfield::integer(h, "elementSize", where, 2, 4));
  HOTKERNEL_REQUIRE(r.elementSize == 2 || r.elementSize == 4, where, ".elementSize must be 2 or 4, got ",
                    r.elementSize);
  HOTKERNEL_REQUIRE(r.rows <= kI64 / r.cols / r.elementSize, where, ": rows * cols * elementSize overflows");
  r.half = jsonfield::optionalBoolean(h, "half", where).value_or(false);
  r.device = static_cast<int>(
      jsonfield::optionalInteger(h, "device", where, 0, std::numeric_limits<int>::max()).value_or(0));
  out.cubinBytes = static_cast<size_t>(
      jsonfield::integer(h, "cubinBytes", where, 0, static_cast<int64_t>(kSandboxRunMaxCubinBytes)));
  if (jsonfield::present(h, "harness")) {
    const std::string at = where + ".harness";
    HOTKERNEL_REQUIRE(version >= 2, at, " needs version 2");
    const nlohmann::json& harness = jsonfield::objectField(h, "harness", where);
    for (const auto& item : harness.items()) {
      HOTKERNEL_REQUIRE(item.key() == "launch" || item.key() == "seed", at, " has an unknown key \"", item.key(),
                        "\"");
    }
    SandboxHarnessRequest stages;
    try {
      stages.launch = AgentLaunch::fromJson(jsonfield::get(harness, "launch", at));
    } catch (const Error& e) {
      HOTKERNEL_THROW(at, ".launch: ", e.what());
    }
    stages.seed = static_cast<uint64_t>(
        jsonfield::integer(harness, "seed", at, 0, std::numeric_limits<int64_t>::max()));
    r.harness = stages;
  }
  return out;
}

size_t sandboxRunInputBytes(const SandboxRunRequest& r) {
  HOTKERNEL_CHECK(r.rows >= 1 && r.cols >= 1 && (r.elementSize == 2 || r.elementSize == 4) &&
                      r.rows <= std::numeric_limits<int64_t>::max() / r.cols / r.elementSize,
                  "sandbox run: no buffer of rows=", r.rows, " cols=", r.cols, " elementSize=", r.elementSize);
  return static_cast<size_t>(r.rows * r.cols * r.elementSize);
}

SandboxRunResult parseSandboxRunReply(const std::string& out, bool helperSucceeded, const std::string& describe,
                                      bool expectStages) {
  SandboxRunResult result;
  const nlohmann::json reply = nlohmann::json::parse(out.substr(0, out.find('\n')), nullptr, false);
  auto stages = reply.is_object() ? reply.find("stages") : reply.end();
  if (stages != reply.end() && stages->is_array()) {
    for (const nlohmann::json& s : *stages) {
      if (!s.is_object()) continue;
      auto name = s.find("stage"), passed = s.find("passed"), detail = s.find("detail");
      if (name == s.end() || !name->is_string() || passed == s.end() || !passed->is_boolean()) continue;
      result.stages.push_back({name->get<std::string>(), passed->get<bool>(),
                               detail != s.end() && detail->is_string() ? detail->get<std::string>() : ""});
    }
  }
  // With stages asked for: exactly the five, in order, each passed (a helper that skipped one did not check it).
  bool allStages = result.stages.size() == sandboxStageNames().size();
  for (size_t i = 0; allStages && i < result.stages.size(); ++i) {
    allStages = result.stages[i].stage == sandboxStageNames()[i] && result.stages[i].passed;
  }
  auto ok = reply.is_object() ? reply.find("ok") : reply.end();
  if (helperSucceeded && ok != reply.end() && ok->is_boolean() && ok->get<bool>() && (!expectStages || allStages)) {
    result.ok = true;
    return result;
  }
  if (helperSucceeded && ok != reply.end() && ok->is_boolean() && ok->get<bool>()) {
    result.error = "sandbox run reported ok without the five harness stages passed";
    return result;
  }
  auto error = reply.is_object() ? reply.find("error") : reply.end();
  result.error = error != reply.end() && error->is_string() && !error->get<std::string>().empty()
                     ? error->get<std::string>()
                     : "sandbox run failed: " + describe;
  return result;
}

SandboxRunResult sandboxRun(const SandboxRunRequest& r, double timeoutSeconds) {
  SandboxRunResult result;
  std::string why;
  const std::string helper = findHelperExecutable(kHelperName, LazyVariable::SandboxRun, &why);
  if (helper.empty()) {
    result.error = why;
    HOTKERNEL_LOG_ONCE(Warn, "sandbox-run-missing") << result.error << "; untrusted kernels are refused";
    return result;
  }
  SubprocessOptions o;
  o.argv = {helper};
  o.stdinData = sandboxRunHeaderLine(r) + "\n" + r.cubin;
  if (timeoutSeconds <= 0) timeoutSeconds = r.harness ? 120.0 : 20.0;
  o.timeoutSeconds = timeoutSeconds;
  o.env.push_back({"HOTKERNEL", "0"});
  SubprocessResult s = runSubprocess(o);
  if (s.timedOut) {
    result.error = "did not finish within " + std::to_string(timeoutSeconds) + " s in the sandbox (killed)";
    return result;
  }
  return parseSandboxRunReply(s.out, s.succeeded(), s.describe(), r.harness.has_value());
}

namespace {

nlohmann::json stagesJson(const std::vector<SandboxStage>& stages) {
  nlohmann::json out = nlohmann::json::array();
  for (const SandboxStage& s : stages) {
    out.push_back({{"stage", s.stage}, {"passed", s.passed}, {"detail", s.detail.substr(0, 2000)}});
  }
  return out;
}

}  // namespace

int sandboxRunHelperMain(const SandboxStagesRunner& runStages) {
  auto fail = [](const std::string& why) {
    std::cout << nlohmann::json({{"ok", false}, {"error", why}})
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
    return 1;
  };
  try {
    std::string line;
    if (!std::getline(std::cin, line)) return fail("no request");
    SandboxRunHeader h;
    try {
      h = parseSandboxRunHeader(line);
    } catch (const Error& e) {
      return fail(e.what());
    }
    const size_t n = h.cubinBytes;
    std::string cubin(n, '\0');
    if (!std::cin.read(cubin.data(), static_cast<std::streamsize>(n))) return fail("truncated cubin");
    const int64_t rows = h.request.rows, cols = h.request.cols;
    const int elem = h.request.elementSize;
    const unsigned block = h.request.geometry.blockX, grid = h.request.geometry.gridX,
                   shared = h.request.geometry.sharedBytes;
    const CudaDriverApi* d = cudaDriver();
    if (!d) return fail("no CUDA driver");
    auto ok = [&](CUresult res, const char* what) {
      if (res != CUDA_SUCCESS) HOTKERNEL_THROW(what, ": ", cudaErrorString(res));
    };
    CUdevice dev;
    CUcontext ctx;
    ok(d->cuDeviceGet(&dev, h.request.device), "cuDeviceGet");
    ok(d->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    ok(d->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    using MemAlloc = CUresult (*)(CUdeviceptr*, size_t);
    using Memcpy = CUresult (*)(CUdeviceptr, const void*, size_t);
    using Sync = CUresult (*)();
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto memAlloc = reinterpret_cast<MemAlloc>(lib ? ::dlsym(lib, "cuMemAlloc_v2") : nullptr);
    auto memcpyHtoD = reinterpret_cast<Memcpy>(lib ? ::dlsym(lib, "cuMemcpyHtoD_v2") : nullptr);
    auto ctxSync = reinterpret_cast<Sync>(lib ? ::dlsym(lib, "cuCtxSynchronize") : nullptr);
    if (!memAlloc || !memcpyHtoD || !ctxSync) return fail("libcuda lacks cuMemAlloc_v2/cuMemcpyHtoD_v2/cuCtxSynchronize");
    const size_t bytes = sandboxRunInputBytes(h.request);
    std::vector<unsigned char> host(bytes);
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> u(-1.0f, 5.0f);
    for (int64_t i = 0; i < rows * cols; ++i) encode(u(rng), elem, host.data() + i * elem, h.request.half);
    CUdeviceptr in = 0, out = 0;
    ok(memAlloc(&in, bytes), "cuMemAlloc");
    ok(memAlloc(&out, bytes), "cuMemAlloc");
    ok(memcpyHtoD(in, host.data(), bytes), "cuMemcpyHtoD");
    CUmodule module;
    CUfunction fn;
    ok(d->cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData");
    ok(d->cuModuleGetFunction(&fn, module, h.request.kernelName.c_str()), "cuModuleGetFunction");
    // What the in-process launcher sets too (Note [Function attributes before launch]).
    const char* step = "prepareFunction";
    ok(prepareFunction(*d, fn, shared, &step), step);
    long long r = rows, c = cols;
    void* args[] = {&in, &out, &r, &c};
    const auto t0 = std::chrono::steady_clock::now();
    ok(d->cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, shared, nullptr, args, nullptr), "cuLaunchKernel");
    ok(ctxSync(), "kernel execution");
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json reply = {{"ok", true}, {"seconds", secs}};
    if (h.request.harness) {
      // Note [The harness stages in the sandbox process]
      if (!runStages) return fail("this hotkernel-sandbox-run was built without torch: no harness stages");
      h.request.cubin = std::move(cubin);
      const std::vector<SandboxStage> stages = runStages(h.request);
      reply["stages"] = stagesJson(stages);
      const bool allPassed = stages.size() == sandboxStageNames().size() && stages.back().passed;
      if (!allPassed) {
        reply["ok"] = false;
        reply["error"] = stages.empty() ? std::string("no harness stage ran")
                                        : stages.back().stage + " stage: " + stages.back().detail;
      }
    }
    std::cout << reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return reply["ok"].get<bool>() ? 0 : 1;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace hotkernel
