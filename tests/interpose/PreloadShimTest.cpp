#include <gtest/gtest.h>

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

// The build's torch libraries (set by tests/interpose/CMakeLists.txt with torch).
#ifndef HOTKERNEL_TORCH_LIB_DIR
#define HOTKERNEL_TORCH_LIB_DIR ""
#endif

namespace {

const std::string kLib = std::string(HOTKERNEL_TEST_BINARY_DIR) + "/lib";
const std::string kShim = kLib + "/libhotkernel_preload.so";

// Runs `cmd` through /bin/sh and returns its stdout; the exit status in *status.
std::string run(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = ::pclose(p);
  if (status) *status = st;
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string tempCache() {
  char tmpl[] = "/tmp/hk-preload-XXXXXX";
  char* dir = ::mkdtemp(tmpl);
  return std::string(dir ? dir : "/tmp") + "/cache";
}

TEST(PreloadShimTest, GivenShimPreloadedWhenRunningBashThenNoTorchIsLoaded) {
  ASSERT_TRUE(exists(kShim)) << kShim;
  int status = -1;
  std::string out = run("LD_PRELOAD=" + kShim + " bash -c 'grep -c libtorch /proc/self/maps'", &status);
  EXPECT_EQ(out, "0\n");
  // The shim itself is mapped, the real library is not.
  out = run("LD_PRELOAD=" + kShim + " bash -c 'grep -c libhotkernel_preload.so /proc/self/maps'");
  EXPECT_NE(out, "0\n");
  out = run("LD_PRELOAD=" + kShim + " bash -c 'grep -c /libhotkernel.so /proc/self/maps'");
  EXPECT_EQ(out, "0\n");
}

TEST(PreloadShimTest, GivenShimWhenInspectingItsDependenciesThenOnlyLibc) {
  std::string out = run("readelf -d " + kShim + " | grep NEEDED");
  EXPECT_EQ(out.find("torch"), std::string::npos) << out;
  EXPECT_EQ(out.find("stdc++"), std::string::npos) << out;
  EXPECT_NE(out.find("libc.so"), std::string::npos) << out;
}

std::string pythonProbe(const std::string& env) {
  const std::string script =
      "import torch\n"
      "maps = open('/proc/self/maps').read()\n"
      "x = torch.randn(4, 8)\n"
      "y = torch.softmax(x, -1)\n"
      "assert torch.allclose(y.sum(-1), torch.ones(4))\n"
      "print('libhotkernel.so' in maps.replace('libhotkernel_preload.so', ''))\n";
  return run(env + " LD_PRELOAD=" + kShim + " HOTKERNEL_CACHE_DIR=" + tempCache() + " " + HOTKERNEL_PYTHON +
             " -c \"" + script + "\" 2>&1");
}

TEST(PreloadShimTest, GivenPythonImportingTorchWhenPreloadedThenRealLibraryIsLoaded) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  std::string out = pythonProbe("");
  EXPECT_NE(out.find("True"), std::string::npos) << out;
}

TEST(PreloadShimTest, GivenOptOutWhenPythonImportsTorchThenNothingIsLoaded) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  std::string out = pythonProbe("HOTKERNEL=0");
  EXPECT_NE(out.find("False"), std::string::npos) << out;
}

TEST(PreloadShimTest, GivenMissingRealLibraryWhenPythonImportsTorchThenProcessRunsAndWarns) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  std::string out = pythonProbe("HOTKERNEL_LIBRARY=/nonexistent/libhotkernel.so");
  EXPECT_NE(out.find("False"), std::string::npos) << out;
  EXPECT_NE(out.find("cannot load the hotkernel library"), std::string::npos) << out;
}

// bench/ops_bench.py times in Python (torch.compile needs it) and takes its
// statistics from the library, so every figure uses one implementation.
TEST(PreloadShimTest, GivenAProfilePatternWithPidWhenTwoProcessesExitThenEachWritesItsOwnProfile) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  char tmpl[] = "/tmp/hk-profiles-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  ASSERT_NE(dir, nullptr);
  const std::string script =
      "import os, torch\n"
      "x = torch.randn(4, 8)\n"
      "for _ in range(20): torch.softmax(x, -1)\n"
      "print(os.getpid())\n";
  for (int i = 0; i < 2; ++i) {
    int status = 0;
    const std::string pid = run("HOTKERNEL_PROFILE=" + std::string(dir) + "/profile-%p.json HOTKERNEL_SAMPLE=1 " +
                                    "LD_PRELOAD=" + kShim + " HOTKERNEL_CACHE_DIR=" + tempCache() + " " +
                                    HOTKERNEL_PYTHON + " -c \"" + script + "\" 2>/dev/null",
                                &status);
    ASSERT_EQ(status, 0) << pid;
    const std::string file = std::string(dir) + "/profile-" + pid.substr(0, pid.find('\n')) + ".json";
    ASSERT_TRUE(exists(file)) << file;
    EXPECT_NE(run("cat " + file).find("aten::_softmax"), std::string::npos) << file;
  }
  EXPECT_EQ(run("ls " + std::string(dir) + " | wc -l"), "2\n");
  EXPECT_FALSE(exists(std::string(dir) + "/profile-%p.json"));
}

// Note [The profile on SIGTERM]: a process ended by SIGTERM's default action
// still writes its profile, and still ends by SIGTERM; a host handler is kept.
TEST(PreloadShimTest, GivenAProfileWhenTheProcessIsEndedBySigtermThenTheProfileIsWrittenAndItDiesBySigterm) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  char tmpl[] = "/tmp/hk-sigterm-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  ASSERT_NE(dir, nullptr);
  const std::string profile = std::string(dir) + "/profile.json";
  const std::string env = "HOTKERNEL_PROFILE=" + profile + " HOTKERNEL_SAMPLE=1 LD_PRELOAD=" + kShim +
                          " HOTKERNEL_CACHE_DIR=" + tempCache() + " ";
  const std::string script =
      "import os, signal, time, torch\n"
      "x = torch.randn(4, 8)\n"
      "for _ in range(20): torch.softmax(x, -1)\n"
      "os.kill(os.getpid(), signal.SIGTERM)\n"
      "time.sleep(30)\n"
      "print('survived')\n";
  int status = 0;
  const std::string out = run("sh -c '" + env + HOTKERNEL_PYTHON + " -c \"" + script + "\"; echo status=$?' 2>&1", &status);
  EXPECT_NE(out.find("status=143"), std::string::npos) << out;  // 128 + SIGTERM, as without hotkernel
  EXPECT_EQ(out.find("survived"), std::string::npos) << out;
  ASSERT_TRUE(exists(profile)) << out;
  EXPECT_NE(run("cat " + profile).find("aten::_softmax"), std::string::npos);
  // A host handler installed from Python afterwards is the host's: it runs, the process goes on.
  const std::string own =
      "import os, signal, torch\n"
      "signal.signal(signal.SIGTERM, lambda *a: print('host handler'))\n"
      "os.kill(os.getpid(), signal.SIGTERM)\n"
      "print('went on')\n";
  const std::string hostOut = run(env + HOTKERNEL_PYTHON + " -c \"" + own + "\" 2>&1");
  EXPECT_NE(hostOut.find("host handler"), std::string::npos) << hostOut;
  EXPECT_NE(hostOut.find("went on"), std::string::npos) << hostOut;
}

TEST(PreloadShimTest, GivenPairedSamplesWhenComparedThroughTheCApiThenTheBenchmarkStatistics) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  const std::string script =
      "import ctypes, json\n"
      "import torch\n"
      "lib = ctypes.CDLL(None)\n"
      "f = lib.hotkernel_compare_samples\n"
      "f.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]\n"
      "A = ctypes.c_double * 9\n"
      "a = A(*[20.0 + i for i in range(9)])\n"
      "b = A(*[(20.0 + i) / 2 for i in range(9)])\n"
      "n = f(a, b, 9, None, 0)\n"
      "buf = ctypes.create_string_buffer(n)\n"
      "assert f(a, b, 9, buf, n) == n\n"
      "r = json.loads(buf.value)\n"
      "print('speedup', r['speedup']['median'], r['speedup']['n'], 'baseline', r['baseline']['median'])\n"
      "print('bad', f(a, b, 0, buf, n), f(None, b, 9, buf, n))\n"
      "bad = A(*([0.0] * 9))\n"
      "print('zero', f(a, bad, 9, buf, n))\n";
  const std::string out = run("LD_PRELOAD=" + kShim + " HOTKERNEL_CACHE_DIR=" + tempCache() + " " +
                              HOTKERNEL_PYTHON + " -c \"" + script + "\" 2>&1");
  EXPECT_NE(out.find("speedup 2.0 9 baseline 24.0"), std::string::npos) << out;
  EXPECT_NE(out.find("bad -1 -1"), std::string::npos) << out;
  EXPECT_NE(out.find("zero -1"), std::string::npos) << out;
}

TEST(PreloadShimTest, GivenCppBinaryLinkedToTorchWhenPreloadedThenRealLibraryIsLoadedBeforeMain) {
  const std::string probe = std::string(HOTKERNEL_TEST_BINARY_DIR) + "/bin/torch_linked_probe";
  if (!exists(probe)) GTEST_SKIP() << "built without torch";
  std::string out = run("HOTKERNEL_CACHE_DIR=" + tempCache() + " LD_PRELOAD=" + kShim + " " + probe);
  EXPECT_EQ(out, "hotkernel=loaded plans=0\n");
  out = run(probe);
  EXPECT_EQ(out, "hotkernel=absent plans=-1\n");
  out = run("HOTKERNEL=0 LD_PRELOAD=" + kShim + " " + probe);
  EXPECT_EQ(out, "hotkernel=absent plans=-1\n");
}

// Note [The process's torch]: a libtorch whose version.py names another torch
// (the process's real libraries behind symlinks, so that it still runs) leaves
// hotkernel off with one line naming both versions; the real one turns it on.
TEST(PreloadShimTest, GivenAProcessWhoseTorchIsAnotherVersionWhenPreloadedThenHotkernelStaysOffAndSaysWhy) {
  const std::string probe = std::string(HOTKERNEL_TEST_BINARY_DIR) + "/bin/torch_linked_probe";
  if (!exists(probe) || std::string(HOTKERNEL_TORCH_LIB_DIR).empty()) GTEST_SKIP() << "built without torch";
  char tmpl[] = "/tmp/hk-other-torch-XXXXXX";
  const char* tmp = ::mkdtemp(tmpl);
  ASSERT_NE(tmp, nullptr);
  // <tmp>/site mirrors the real site-packages (the libraries' $ORIGIN/../../nvidia
  // paths resolve), with a torch/ of its own whose lib/ links the real libraries.
  const std::string site = std::string(tmp) + "/site", root = site + "/torch", lib = root + "/lib";
  const std::string realTorch = std::string(HOTKERNEL_TORCH_LIB_DIR) + "/..";
  int status = 0;
  run("mkdir -p " + lib + " && for f in " + realTorch + "/../*; do [ \"$(basename $f)\" = torch ] || ln -s $f " +
          site + "/; done && ln -s " + HOTKERNEL_TORCH_LIB_DIR + "/*.so* " + lib + "/",
      &status);
  ASSERT_EQ(status, 0);
  run("printf \"__version__ = '2.9.1+cu126'\\n\" > " + root + "/version.py");
  const std::string env = "HOTKERNEL_LOG_LEVEL=info HOTKERNEL_CACHE_DIR=" + tempCache() + " LD_LIBRARY_PATH=" + lib +
                          " LD_PRELOAD=" + kShim;
  const std::string out = run(env + " " + probe + " 2>&1");
  EXPECT_NE(out.find("hotkernel is off: built for torch"), std::string::npos) << out;
  EXPECT_NE(out.find("this process has torch 2.9.1+cu126"), std::string::npos) << out;
  EXPECT_NE(out.find("hotkernel=loaded"), std::string::npos) << out;  // the process runs on
  EXPECT_EQ(out.find("active"), std::string::npos) << out;
  // The same libraries with the build's own version beside them: on.
  run("cp " + realTorch + "/version.py " + root + "/version.py");
  const std::string same = run(env + " " + probe + " 2>&1");
  EXPECT_EQ(same.find("hotkernel is off"), std::string::npos) << same;
  EXPECT_NE(same.find("active"), std::string::npos) << same;
}

}  // namespace

// Note [Pausing during graph capture]: torch's capture calls bind to the shim.
TEST(PreloadShimTest, GivenPythonImportingTorchWhenPreloadedThenLibtorchCudaBindsItsCaptureCallsToTheShim) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  const std::string out = run("HOTKERNEL=0 LD_BIND_NOW=1 LD_DEBUG=bindings LD_PRELOAD=" + kShim + " " +
                              HOTKERNEL_PYTHON + " -c 'import torch' 2>&1 | grep -E 'cudaStream(Begin|End)Capture'");
  for (const char* symbol : {"`cudaStreamBeginCapture'", "`cudaStreamEndCapture'"}) {
    bool bound = false;
    size_t start = 0;
    while (start < out.size()) {
      const size_t end = out.find('\n', start);
      const std::string line = out.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (line.find("libtorch_cuda.so") != std::string::npos && line.find(symbol) != std::string::npos) {
        EXPECT_NE(line.find("to " + kShim), std::string::npos) << line;
        bound = true;
      }
      if (end == std::string::npos) break;
      start = end + 1;
    }
    EXPECT_TRUE(bound) << symbol << " of libtorch_cuda.so not bound:\n" << out;
  }
}

TEST(PreloadShimTest, GivenTheShimsCaptureWrappersWhenCalledThenTheyForwardToLibcudartAndCountNothingThatFailed) {
  if (!exists(kLib + "/libhotkernel.so")) GTEST_SKIP() << "built without torch";
  // The legacy stream cannot be captured (no GPU: the runtime's own error):
  // whatever libcudart answers comes back unchanged, never the shim's
  // "no runtime" 999, and nothing is counted.
  const std::string script =
      "import ctypes, torch\n"
      "g = ctypes.CDLL(None)\n"
      "b = g.cudaStreamBeginCapture; b.restype = ctypes.c_int; b.argtypes = [ctypes.c_void_p, ctypes.c_int]\n"
      "e = g.cudaStreamEndCapture; e.restype = ctypes.c_int; e.argtypes = [ctypes.c_void_p, ctypes.c_void_p]\n"
      "n = g.hotkernel_captures_in_progress; n.restype = ctypes.c_int\n"
      "graph = ctypes.c_void_p(0)\n"
      "rb = b(None, 0); nb = n(); re = e(None, ctypes.byref(graph)); ne = n()\n"
      "print('result', rb != 0 and rb != 999, re != 0 and re != 999, nb, ne)\n";
  const std::string out = run("HOTKERNEL=0 LD_PRELOAD=" + kShim + " " + HOTKERNEL_PYTHON + " -c \"" + script +
                              "\" 2>&1");
  EXPECT_NE(out.find("result True True 0 0"), std::string::npos) << out;
}

namespace {

struct ProbeCounts {
  int compiles = -1, foreign = -1, handled = -1;
};

// `status` gets the probe's exit status; a probe that did not print its counts fails the test when `required`.
ProbeCounts runSignalProbe(const std::string& env, const std::string& nvrtc, bool required, int* status) {
  const std::string probe = std::string(HOTKERNEL_TEST_BINARY_DIR) + "/bin/nvrtc_signal_probe";
  const std::string out = run(env + " " + probe + " " + nvrtc, status);
  ProbeCounts c;
  if ((*status != 0 || std::sscanf(out.c_str(), "compiles %d foreign %d handled %d", &c.compiles, &c.foreign,
                                   &c.handled) != 3) &&
      required) {
    ADD_FAILURE() << "probe failed (status " << *status << "): " << out;
  }
  return c;
}

// Note [NVRTC and the host's signals] (interpose/preload/SignalInterpose.c).
TEST(PreloadShimTest, GivenAHostSigtermHandlerWhenNvrtcCompilesUnderTheShimThenTheHostKeepsItsHandlers) {
  const char* env = std::getenv("HOTKERNEL_NVRTC_PATH");
  const std::string nvrtc = env && *env ? env : "/usr/local/cuda/lib64/libnvrtc.so";
  if (!exists(nvrtc)) GTEST_SKIP() << "no NVRTC at " << nvrtc;
  int status = 0;
  const ProbeCounts shim = runSignalProbe("LD_PRELOAD=" + kShim, nvrtc, true, &status);
  EXPECT_GT(shim.compiles, 0) << "the probe compiled nothing: the check saw no compile";
  EXPECT_EQ(shim.foreign, 0) << "a SIGINT / SIGTERM handler other than the host's was installed during a compile";
  EXPECT_EQ(shim.handled, 20) << "every SIGTERM raised during the compiles reaches the host's handler";
  // Without the shim NVRTC swaps the handlers in (what the shim prevents); said, not required. A SIGTERM that
  // meets NVRTC's own handler ends the probe (an exit status, no counts): the very failure the shim prevents.
  const ProbeCounts plain = runSignalProbe("", nvrtc, false, &status);
  if (status != 0) {
    std::printf("note: without the shim a SIGTERM ended the probe (status %d): NVRTC's handler took it\n", status);
  } else if (plain.foreign == 0) {
    std::printf("note: this NVRTC installed no signal handler during the probe's compiles\n");
  }
}

}  // namespace
