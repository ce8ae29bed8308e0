// The experiment log: line format, round trip, tolerant reading, appends
// from concurrent processes, rotation, refusals that never throw.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/runtime/Check.h"

#include "../JsonKeyCase.h"
#include "../TempDir.h"

namespace hotkernel {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Note [No std::filesystem::remove_all next to libtorch]
class TempDir : public hotkernel::test::TempDir {
 public:
  TempDir() : hotkernel::test::TempDir("hotkernel-explog") {}
};

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void appendRaw(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

Experiment accepted() {
  Experiment e;
  e.time = 1735689600.125;
  e.fingerprint = "9f2c0a";
  e.op = "aten::_softmax";
  e.variant = "dtype=bfloat16;rows=4096;cols=32000";
  e.candidateId = 12;
  e.parentId = 7;
  e.params = {{"threads", 256}, {"vec", 8}, {"items", 16}};
  e.compileSeconds = 0.41;
  e.stages = {{"smoke", "pass"}, {"sweep", "pass"}, {"stability", "pass"}, {"determinism", "pass"}, {"edge", "pass"}};
  e.timings.atenUs = 310.25;
  e.timings.kernelUs = 250.5;
  e.timings.speedup = 1.24;
  e.timings.speedupCi = {{1.21, 1.27}};
  e.decision = ExperimentDecision::Accepted;
  e.reason = "speed-up CI [1.21, 1.27] clears 1.02";
  e.extra = {{"seed", 123456789}, {"budget_level", 2}, {"target", {{"spent_seconds", 1.5}, {"stop", "none"}}}};
  return e;
}

Experiment rejected(double time, const std::string& variant, int64_t id) {
  Experiment e;
  e.time = time;
  e.op = "aten::_softmax";
  e.variant = variant;
  e.candidateId = id;
  e.params = {{"threads", 128}};
  e.stages = {{"smoke", "fail"}};
  e.decision = ExperimentDecision::Rejected;
  e.reason = "correctness: smoke";
  return e;
}

TEST(ExperimentLogTest, GivenExperimentsWhenAppendedAndReadThenRoundTripEveryField) {
  TempDir tmp;
  ExperimentLog log(tmp.path());
  Experiment a = accepted();
  Experiment r = rejected(1735689601.5, "dtype=float32;rows=8;cols=128256", 13);
  Experiment k;
  k.time = 1735689602;
  k.op = "aten::_softmax";
  k.variant = "dtype=float16;rows=1;cols=128256";
  k.decision = ExperimentDecision::KeptAten;
  k.reason = "no candidate cleared 1.02";
  ASSERT_TRUE(log.append(a));
  ASSERT_TRUE(log.append(r));
  ASSERT_TRUE(log.append(k));

  ExperimentReadResult read = readExperiments(tmp.path());
  EXPECT_EQ(read.lines, 3u);
  EXPECT_EQ(read.skipped, 0u);
  ASSERT_EQ(read.files, std::vector<std::string>{tmp.sub("experiments.jsonl")});
  ASSERT_EQ(read.experiments.size(), 3u);
  const Experiment& a2 = read.experiments[0];
  EXPECT_DOUBLE_EQ(a2.time, a.time);
  EXPECT_EQ(a2.fingerprint, a.fingerprint);
  EXPECT_EQ(a2.op, a.op);
  EXPECT_EQ(a2.variant, a.variant);
  EXPECT_EQ(a2.candidateId, a.candidateId);
  EXPECT_EQ(a2.parentId, a.parentId);
  EXPECT_EQ(a2.params, a.params);
  EXPECT_EQ(a2.compileSeconds, a.compileSeconds);
  EXPECT_EQ(a2.stages, a.stages);
  EXPECT_EQ(a2.timings.atenUs, a.timings.atenUs);
  EXPECT_EQ(a2.timings.kernelUs, a.timings.kernelUs);
  EXPECT_EQ(a2.timings.speedup, a.timings.speedup);
  EXPECT_EQ(a2.timings.speedupCi, a.timings.speedupCi);
  EXPECT_EQ(a2.decision, ExperimentDecision::Accepted);
  EXPECT_EQ(a2.reason, a.reason);
  EXPECT_EQ(a2.extra, a.extra);

  EXPECT_EQ(read.experiments[1].decision, ExperimentDecision::Rejected);
  EXPECT_FALSE(read.experiments[1].parentId.has_value());
  EXPECT_FALSE(read.experiments[1].timings.speedup.has_value());
  const Experiment& k2 = read.experiments[2];
  EXPECT_EQ(k2.decision, ExperimentDecision::KeptAten);
  EXPECT_FALSE(k2.candidateId.has_value());
  EXPECT_TRUE(k2.params.is_object() && k2.params.empty());
}

TEST(ExperimentLogTest, GivenAppendWhenWrittenThenOneVersionedLineWithEveryKeyAndMode0600) {
  TempDir tmp;
  ExperimentLog log(tmp.path());
  ASSERT_TRUE(log.append(accepted()));
  EXPECT_EQ(log.path(), tmp.sub("experiments.jsonl"));
  std::string text = readFile(log.path());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.find('\n'), text.size() - 1);  // one line
  json j = json::parse(text);
  EXPECT_EQ(j["format"], "hotkernel-experiment");
  EXPECT_EQ(j["version"], 2);
  for (const char* key : {"time", "fingerprint", "op", "variant", "candidate_id", "parent_id", "params",
                          "compile_seconds", "stages", "timings", "decision", "reason", "extra"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"aten_us", "kernel_us", "speedup", "speedup_ci"}) EXPECT_TRUE(j["timings"].contains(key)) << key;
  // Note [Experiment line versions]: every key snake_case but those of the maps of data.
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(j, {"/params", "/stages"}), std::vector<std::string>{}) << text;
  EXPECT_EQ(j["decision"], "accepted");
  EXPECT_EQ(j["timings"]["speedup_ci"], json::array({1.21, 1.27}));
  EXPECT_EQ(j["stages"]["smoke"], "pass");
  struct stat st;
  ASSERT_EQ(::stat(log.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ExperimentLogTest, GivenZeroTimeWhenAppendedThenStampedWithNow) {
  TempDir tmp;
  Experiment e = rejected(0, "v", 1);
  const double before = experimentTimeNow();
  ASSERT_TRUE(ExperimentLog(tmp.path()).append(e));
  ExperimentReadResult read = readExperiments(tmp.path());
  ASSERT_EQ(read.experiments.size(), 1u);
  EXPECT_GE(read.experiments[0].time, before);
  EXPECT_LE(read.experiments[0].time, experimentTimeNow() + 0.001);
}

TEST(ExperimentLogTest, GivenCorruptAndTruncatedLinesWhenReadThenSkippedAndCounted) {
  TempDir tmp;
  ExperimentLog log(tmp.path());
  ASSERT_TRUE(log.append(rejected(1, "v", 1)));
  appendRaw(log.path(), "this is not json\n");
  appendRaw(log.path(), "\n");  // blank: ignored, not counted
  appendRaw(log.path(), "{\"format\":\"hotkernel-experiment\",\"version\":1,\"time\":2,\"op\":\"x\"}\n");  // no variant
  appendRaw(log.path(), "[1,2,3]\n");
  appendRaw(log.path(), "{\"format\":\"other\",\"version\":1}\n");
  appendRaw(log.path(), "{\"format\":\"hotkernel-experiment\",\"version\":3,\"time\":3}\n");  // newer version
  ASSERT_TRUE(log.append(rejected(4, "v", 2)));
  std::string full = rejected(5, "v", 3).toJson().dump();
  appendRaw(log.path(), full.substr(0, full.size() / 2));  // killed mid-write: no newline
  ExperimentReadResult read = readExperiments(tmp.path());
  EXPECT_EQ(read.lines, 8u);
  EXPECT_EQ(read.skipped, 6u);
  EXPECT_EQ(read.newerVersion, 1u);
  ASSERT_EQ(read.experiments.size(), 2u);
  EXPECT_EQ(read.experiments[0].candidateId, 1);
  EXPECT_EQ(read.experiments[1].candidateId, 2);
}

TEST(ExperimentLogTest, GivenMissingOptionalKeysWhenParsedThenAcceptedAndRequiredKeysEnforced) {
  json minimal = {
      {"format", "hotkernel-experiment"}, {"version", 1},        {"time", 10.5}, {"op", "o"}, {"variant", "v"},
      {"decision", "kept_aten"},          {"future", {{"x", 1}}}};
  Experiment e = Experiment::fromJson(minimal);
  EXPECT_EQ(e.op, "o");
  EXPECT_EQ(e.decision, ExperimentDecision::KeptAten);
  EXPECT_FALSE(e.candidateId.has_value());
  EXPECT_TRUE(e.stages.empty());
  for (const char* key : {"format", "version", "time", "op", "variant", "decision"}) {
    json broken = minimal;
    broken.erase(key);
    EXPECT_THROW(Experiment::fromJson(broken), Error) << key;
  }
  json badDecision = minimal;
  badDecision["decision"] = "maybe";
  EXPECT_THROW(Experiment::fromJson(badDecision), Error);
  json badType = minimal;
  badType["candidateId"] = "twelve";
  EXPECT_THROW(Experiment::fromJson(badType), Error);
  EXPECT_EQ(parseExperimentDecision("accepted"), ExperimentDecision::Accepted);
  EXPECT_FALSE(parseExperimentDecision("ACCEPTED").has_value());
}

// A line as version 1 wrote it: the keys of Note [Experiment line versions] in camelCase, extra's too.
json version1Line() {
  return {{"format", "hotkernel-experiment"},
          {"version", 1},
          {"time", 1735689600.5},
          {"fingerprint", "9f2c0a"},
          {"op", "aten::_softmax"},
          {"variant", "dtype=bfloat16;rows=4096;cols=32000"},
          {"candidateId", 12},
          {"parentId", 7},
          {"params", {{"threads", 256}, {"rowsPerCta", 2}}},
          {"compileSeconds", 0.41},
          {"stages", {{"smoke", "pass"}}},
          {"timings", {{"atenUs", 310.25}, {"kernelUs", 250.5}, {"speedup", 1.24}, {"speedupCi", {1.21, 1.27}}}},
          {"decision", "accepted"},
          {"reason", "fastest"},
          {"extra",
           {{"budgetLevel", 2},
            {"kernelName", "my_softmax"},
            {"ranking", {{"gpuSeconds", 4.5}, {"rooflineFraction", 0.5}}},
            {"target", {{"spentSeconds", 3.0}, {"rooflineUs", 12.5}, {"stop", "budget_spent"}}}}}};
}

TEST(ExperimentLogTest, GivenAVersion1LineInTheLogWhenReadThenEveryFieldAsTheVersion2LineWouldGiveIt) {
  TempDir tmp;
  ExperimentLog log(tmp.path());
  appendRaw(log.path(), version1Line().dump() + "\n");
  ASSERT_TRUE(log.append(rejected(1735689601, "v", 13)));
  ExperimentReadResult read = readExperiments(tmp.path());
  EXPECT_EQ(read.skipped, 0u);
  ASSERT_EQ(read.experiments.size(), 2u);
  const Experiment& e = read.experiments[0];
  EXPECT_EQ(e.candidateId, 12);
  EXPECT_EQ(e.parentId, 7);
  EXPECT_EQ(e.compileSeconds, 0.41);
  EXPECT_EQ(e.params, json({{"threads", 256}, {"rowsPerCta", 2}}));  // data: as written
  EXPECT_EQ(e.timings.atenUs, 310.25);
  EXPECT_EQ(e.timings.kernelUs, 250.5);
  EXPECT_EQ(e.timings.speedupCi, std::make_pair(1.21, 1.27));
  EXPECT_EQ(e.decision, ExperimentDecision::Accepted);
  EXPECT_EQ(e.extra, json({{"budget_level", 2},
                           {"kernel_name", "my_softmax"},
                           {"ranking", {{"gpu_seconds", 4.5}, {"roofline_fraction", 0.5}}},
                           {"target", {{"spent_seconds", 3.0}, {"roofline_us", 12.5}, {"stop", "budget_spent"}}}}));
  // Written out again, it is a version 2 line with the same content.
  const json again = e.toJson();
  EXPECT_EQ(again["version"], 2);
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(again, {"/params", "/stages"}), std::vector<std::string>{}) << again.dump();
  EXPECT_EQ(read.experiments[1].candidateId, 13);
}

TEST(ExperimentLogTest, GivenOneVersionsKeysUnderTheOtherVersionWhenParsedThenTheyAreNotRead) {
  json line = version1Line();
  line["version"] = 2;  // camelCase keys under version 2: unknown keys, ignored
  const Experiment e = Experiment::fromJson(line);
  EXPECT_FALSE(e.candidateId.has_value());
  EXPECT_FALSE(e.compileSeconds.has_value());
  EXPECT_FALSE(e.timings.atenUs.has_value());
  EXPECT_FALSE(e.timings.speedupCi.has_value());
  EXPECT_EQ(e.extra["budgetLevel"], 2);  // version 2's extra is read as written
  json mistyped = version1Line();
  mistyped["timings"]["speedupCi"] = "wide";
  EXPECT_THROW(Experiment::fromJson(mistyped), Error);
}

TEST(ExperimentLogTest, GivenCamelCaseKeysWhenSnakeCasedThenWordsSplitAtCaseChangesInEveryNestedObject) {
  const json camel = json::parse(
      R"({"speedupCi":1,"copyGBs":2,"already_snake":3,"sm90Arch":4,"list":[{"innerKey":{"deepKey":5}},"aValue"]})");
  const json snake = json::parse(
      R"({"speedup_ci":1,"copy_gbs":2,"already_snake":3,"sm90_arch":4,"list":[{"inner_key":{"deep_key":5}},"aValue"]})");
  EXPECT_EQ(snakeCaseKeys(camel), snake);
  EXPECT_EQ(snakeCaseKeys(json("notAKey")), json("notAKey"));  // values stay
}

TEST(ExperimentLogTest, GivenFilterWhenReadThenOnlyMatchingOpAndVariant) {
  TempDir tmp;
  ExperimentLog log(tmp.path());
  ASSERT_TRUE(log.append(rejected(1, "a", 1)));
  ASSERT_TRUE(log.append(rejected(2, "b", 2)));
  Experiment other = rejected(3, "a", 3);
  other.op = "aten::_log_softmax";
  ASSERT_TRUE(log.append(other));
  EXPECT_EQ(readExperiments(tmp.path(), {"", "a", ""}).experiments.size(), 2u);
  EXPECT_EQ(readExperiments(tmp.path(), {"aten::_softmax", "", ""}).experiments.size(), 2u);
  ExperimentReadResult both = readExperiments(tmp.path(), {"aten::_softmax", "a", ""});
  ASSERT_EQ(both.experiments.size(), 1u);
  EXPECT_EQ(both.experiments[0].candidateId, 1);
  EXPECT_EQ(both.lines, 3u);  // counts every line, matching or not
  EXPECT_TRUE(readExperiments(tmp.path(), {"", "", "no-such-fingerprint"}).experiments.empty());
}

TEST(ExperimentLogTest, GivenOutOfOrderTimesWhenReadThenSortedByTime) {
  TempDir tmp;
  ExperimentLog log(tmp.path());
  ASSERT_TRUE(log.append(rejected(30, "v", 3)));
  ASSERT_TRUE(log.append(rejected(10, "v", 1)));
  ASSERT_TRUE(log.append(rejected(20, "v", 2)));
  ExperimentReadResult read = readExperiments(tmp.path());
  ASSERT_EQ(read.experiments.size(), 3u);
  EXPECT_EQ(read.experiments[0].candidateId, 1);
  EXPECT_EQ(read.experiments[1].candidateId, 2);
  EXPECT_EQ(read.experiments[2].candidateId, 3);
}

TEST(ExperimentLogTest, GivenForkedProcessesAppendingConcurrentlyThenEveryLineLandsIntact) {
  TempDir tmp;
  const int kProcesses = 8;
  const int kLines = 150;
  // Lines of ~6 KiB: larger than PIPE_BUF, so only O_APPEND's single write keeps them whole.
  const std::string padding(6000, 'x');
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ExperimentLog log(tmp.path());
      bool ok = true;
      for (int i = 0; i < kLines; ++i) {
        Experiment e = rejected(1000 + i, "proc" + std::to_string(p), i);
        e.reason = padding;
        ok = log.append(e) && ok;
      }
      ::_exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ExperimentReadResult read = readExperiments(tmp.path());
  EXPECT_EQ(read.skipped, 0u);
  ASSERT_EQ(read.experiments.size(), static_cast<size_t>(kProcesses * kLines));
  std::set<std::pair<std::string, int64_t>> seen;
  for (const Experiment& e : read.experiments) {
    EXPECT_EQ(e.reason, padding);
    EXPECT_TRUE(seen.emplace(e.variant, *e.candidateId).second);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kProcesses * kLines));
}

TEST(ExperimentLogTest, GivenSizeCapWhenExceededThenRotatesToDotOneAndKeepsNewestLines) {
  TempDir tmp;
  const int64_t cap = 4096;
  ExperimentLog log(tmp.path(), cap);
  const int kLines = 40;
  for (int i = 0; i < kLines; ++i) ASSERT_TRUE(log.append(rejected(100 + i, "v", i)));
  const std::string rotated = tmp.sub("experiments.jsonl.1");
  ASSERT_TRUE(fs::exists(rotated));
  EXPECT_LE(static_cast<int64_t>(fs::file_size(log.path())), cap);
  EXPECT_LE(static_cast<int64_t>(fs::file_size(rotated)), cap);
  ExperimentReadResult read = readExperiments(tmp.path());
  EXPECT_EQ(read.skipped, 0u);
  ASSERT_EQ(read.files.size(), 2u);
  EXPECT_EQ(read.files[0], rotated);  // oldest first
  // What is kept is the newest lines, contiguous: older .1 files were replaced.
  ASSERT_GE(read.experiments.size(), 2u);
  EXPECT_EQ(read.experiments.back().candidateId, kLines - 1);
  for (size_t i = 1; i < read.experiments.size(); ++i) {
    EXPECT_EQ(*read.experiments[i].candidateId, *read.experiments[i - 1].candidateId + 1);
  }
  struct stat st;
  ASSERT_EQ(::stat(rotated.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ExperimentLogTest, GivenConcurrentWritersAndSmallCapWhenRotatingThenNoLineIsCorrupted) {
  TempDir tmp;
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ExperimentLog log(tmp.path(), 16384);
      bool ok = true;
      for (int i = 0; i < 200; ++i) ok = log.append(rejected(1 + i, "p" + std::to_string(p), i)) && ok;
      ::_exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ExperimentReadResult read = readExperiments(tmp.path());
  EXPECT_EQ(read.skipped, 0u);
  EXPECT_GT(read.experiments.size(), 0u);
  std::set<std::pair<std::string, int64_t>> seen;
  for (const Experiment& e : read.experiments) EXPECT_TRUE(seen.emplace(e.variant, *e.candidateId).second);
}

TEST(ExperimentLogTest, GivenSymlinkedLogWhenAppendedThenRefusedWithoutThrowingAndTargetUntouched) {
  TempDir tmp;
  const std::string target = tmp.sub("elsewhere");
  appendRaw(target, "precious\n");
  ASSERT_EQ(::symlink(target.c_str(), tmp.sub("experiments.jsonl").c_str()), 0);
  ExperimentLog log(tmp.path());
  bool ok = true;
  EXPECT_NO_THROW(ok = log.append(accepted()));
  EXPECT_FALSE(ok);
  EXPECT_EQ(readFile(target), "precious\n");
  EXPECT_THROW(readExperiments(tmp.path()), Error);  // the reader refuses it too, loudly
}

TEST(ExperimentLogTest, GivenUnsafeOrUnusablePlaceWhenAppendedThenFalseNeverThrows) {
  TempDir tmp;
  // A directory others can write.
  const std::string open = tmp.sub("open");
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  EXPECT_FALSE(ExperimentLog(open).append(accepted()));
  EXPECT_FALSE(fs::exists(open + "/experiments.jsonl"));
  // The directory path is a file.
  appendRaw(tmp.sub("file"), "x");
  EXPECT_FALSE(ExperimentLog(tmp.sub("file")).append(accepted()));
  // A line over the cap.
  Experiment huge = accepted();
  huge.reason.assign(ExperimentLog::kMaxLineBytes, 'r');
  EXPECT_FALSE(ExperimentLog(tmp.path()).append(huge));
  EXPECT_FALSE(fs::exists(tmp.sub("experiments.jsonl")));
  // Invalid UTF-8 is replaced, not thrown.
  Experiment bad = accepted();
  bad.reason = std::string("bad \xff\xfe bytes");
  EXPECT_TRUE(ExperimentLog(tmp.path()).append(bad));
  EXPECT_EQ(readExperiments(tmp.path()).experiments.size(), 1u);
}

TEST(ExperimentLogTest, GivenMissingDirectoryWhenAppendedThenCreatedPrivateAndReadAsEmptyBefore) {
  TempDir tmp;
  const std::string dir = tmp.sub("a/b/cache");
  ExperimentReadResult none = readExperiments(dir);
  EXPECT_TRUE(none.experiments.empty());
  EXPECT_TRUE(none.files.empty());
  EXPECT_FALSE(fs::exists(dir));  // reading creates nothing
  ASSERT_TRUE(ExperimentLog(dir + "/").append(accepted()));
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(readExperiments(dir).experiments.size(), 1u);
}

}  // namespace
}  // namespace hotkernel
