// fuzz_experiment_log: readExperiments and Experiment::fromJson
// (optimizer/schedule/ExperimentLog.cpp) on any file content, as `hotkernel log`
// and `hotkernel report` read <cacheDir>/experiments.jsonl.
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "FuzzSupport.h"
#include "hotkernel/optimizer/ExperimentLog.h"

using namespace hotkernel;

namespace {

std::string& logDir() {
  static std::string dir;
  return dir;
}

void removeLogDir() {
  ::unlink(ExperimentLog::pathFor(logDir()).c_str());
  ::rmdir(logDir().c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/hotkernel-fuzz-log-XXXXXX";
  HK_FUZZ_ASSERT(::mkdtemp(tmpl) != nullptr);
  logDir() = tmpl;
  std::atexit(removeLogDir);
  return fuzz::quiet();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ExperimentLog::pathFor(logDir());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  HK_FUZZ_ASSERT(fd >= 0);
  HK_FUZZ_ASSERT(::write(fd, data, size) == static_cast<ssize_t>(size));
  ::close(fd);

  ExperimentReadResult read;
  if (!fuzz::accepts([&] { read = readExperiments(logDir(), ExperimentFilter{}); })) return 0;
  HK_FUZZ_ASSERT(read.experiments.size() + read.skipped == read.lines);
  for (const Experiment& e : read.experiments) {
    // What the reader keeps, it writes back (as ExperimentLog::append) and reads again to the same line.
    const std::string line = e.toJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const Experiment back = Experiment::fromJson(nlohmann::json::parse(line));
    HK_FUZZ_ASSERT(back.toJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) == line);
  }
  return 0;
}
