#include "hotkernel/optimizer/SandboxRun.h"

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
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

SandboxRunResult sandboxRun(const SandboxRunRequest& r, double timeoutSeconds) {
  SandboxRunResult result;
  std::string why;
  const std::string helper = findHelperExecutable(kHelperName, "HOTKERNEL_SANDBOX_RUN", &why);
  if (helper.empty()) {
    result.error = why;
    HOTKERNEL_LOG_ONCE(Warn, "sandbox-run-missing") << result.error << "; untrusted kernels are refused";
    return result;
  }
  nlohmann::json header = {{"format", "hotkernel-sandbox-run"}, {"version", 1},
                           {"kernelName", r.kernelName},         {"block", r.geometry.blockX},
                           {"gridX", r.geometry.gridX},          {"sharedBytes", r.geometry.sharedBytes},
                           {"rows", r.rows},                     {"cols", r.cols},
                           {"elementSize", r.elementSize},       {"half", r.half}, {"device", r.device},
                           {"cubinBytes", r.cubin.size()}};
  SubprocessOptions o;
  o.argv = {helper};
  o.stdinData = header.dump() + "\n" + r.cubin;
  o.timeoutSeconds = timeoutSeconds;
  o.env.push_back({"HOTKERNEL", "0"});
  SubprocessResult s = runSubprocess(o);
  if (s.timedOut) {
    result.error = "did not finish within " + std::to_string(timeoutSeconds) + " s in the sandbox (killed)";
    return result;
  }
  nlohmann::json reply = nlohmann::json::parse(s.out.substr(0, s.out.find('\n')), nullptr, false);
  if (s.succeeded() && reply.is_object() && reply.value("ok", false)) {
    result.ok = true;
    return result;
  }
  result.error = reply.is_object() && reply.contains("error") ? reply["error"].get<std::string>()
                                                               : "sandbox run failed: " + s.describe();
  return result;
}

int sandboxRunHelperMain() {
  auto fail = [](const std::string& why) {
    std::cout << nlohmann::json({{"ok", false}, {"error", why}}).dump() << std::endl;
    return 1;
  };
  try {
    std::string line;
    if (!std::getline(std::cin, line)) return fail("no request");
    nlohmann::json h = nlohmann::json::parse(line, nullptr, false);
    if (!h.is_object() || h.value("format", "") != "hotkernel-sandbox-run" || h.value("version", 0) != 1) {
      return fail("not a hotkernel-sandbox-run v1 request");
    }
    const size_t n = h.at("cubinBytes").get<size_t>();
    std::string cubin(n, '\0');
    if (!std::cin.read(cubin.data(), static_cast<std::streamsize>(n))) return fail("truncated cubin");
    const int64_t rows = h.at("rows"), cols = h.at("cols");
    const int elem = h.at("elementSize");
    const unsigned block = h.at("block"), grid = h.at("gridX"), shared = h.at("sharedBytes");
    if (rows < 1 || cols < 1 || (elem != 2 && elem != 4)) return fail("bad shape");
    const CudaDriverApi* d = cudaDriver();
    if (!d) return fail("no CUDA driver");
    auto ok = [&](CUresult res, const char* what) {
      if (res != CUDA_SUCCESS) HOTKERNEL_THROW(what, ": ", cudaErrorString(res));
    };
    CUdevice dev;
    CUcontext ctx;
    ok(d->cuDeviceGet(&dev, h.value("device", 0)), "cuDeviceGet");
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
    const size_t bytes = static_cast<size_t>(rows * cols) * static_cast<size_t>(elem);
    std::vector<unsigned char> host(bytes);
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> u(-1.0f, 5.0f);
    for (int64_t i = 0; i < rows * cols; ++i) encode(u(rng), elem, host.data() + i * elem, h.value("half", false));
    CUdeviceptr in = 0, out = 0;
    ok(memAlloc(&in, bytes), "cuMemAlloc");
    ok(memAlloc(&out, bytes), "cuMemAlloc");
    ok(memcpyHtoD(in, host.data(), bytes), "cuMemcpyHtoD");
    CUmodule module;
    CUfunction fn;
    ok(d->cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData");
    ok(d->cuModuleGetFunction(&fn, module, h.at("kernelName").get<std::string>().c_str()), "cuModuleGetFunction");
    // What the in-process launcher sets too (Note [Function attributes before launch]).
    const char* step = "prepareFunction";
    ok(prepareFunction(*d, fn, shared, &step), step);
    long long r = rows, c = cols;
    void* args[] = {&in, &out, &r, &c};
    const auto t0 = std::chrono::steady_clock::now();
    ok(d->cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, shared, nullptr, args, nullptr), "cuLaunchKernel");
    ok(ctxSync(), "kernel execution");
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << nlohmann::json({{"ok", true}, {"seconds", secs}}).dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace hotkernel
