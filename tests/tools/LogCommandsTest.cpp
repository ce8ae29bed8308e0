// `hotkernel log` and `hotkernel report`, run as a subprocess against
// experiment logs written through ExperimentLog.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "CacheTestUtil.h"
#include "RunCli.h"
#include "hotkernel/optimizer/ExperimentLog.h"

#include "../JsonKeyCase.h"

namespace hotkernel::cli {
namespace {

using cache::test::readFile;
using cache::test::TempDir;
using test::runCli;

const std::string kBf16 = "dtype=bfloat16;rows=4096;cols=32000";
const std::string kFp32 = "dtype=float32;rows=8;cols=128256";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

Experiment experiment(double time, const std::string& op, const std::string& variant, int64_t id,
                      std::optional<double> speedup, ExperimentDecision decision, const std::string& reason) {
  Experiment e;
  e.time = time;
  e.fingerprint = "fp-h200";
  e.op = op;
  e.variant = variant;
  e.candidateId = id;
  if (id > 0) e.parentId = id - 1;
  e.params = {{"threads", 128 << (id % 3)}, {"vec", 8}};
  e.compileSeconds = 0.4;
  e.stages = {{"smoke", "pass"}, {"sweep", speedup ? "pass" : "fail"}};
  if (speedup) {
    e.timings.atenUs = 310.0;
    e.timings.kernelUs = 310.0 / *speedup;
    e.timings.speedup = speedup;
    e.timings.speedupCi = {{*speedup - 0.02, *speedup + 0.02}};
  }
  e.decision = decision;
  e.reason = reason;
  return e;
}

// Five experiments: four of aten::_softmax (two variants), one of aten::_log_softmax,
// appended out of time order (as concurrent processes may).
void fill(const std::string& dir) {
  ExperimentLog log(dir);
  ASSERT_TRUE(log.append(
      experiment(1735689600, "aten::_softmax", kBf16, 0, 0.95, ExperimentDecision::Rejected, "slower than ATen")));
  ASSERT_TRUE(log.append(experiment(1735689660, "aten::_softmax", kBf16, 1, std::nullopt, ExperimentDecision::Rejected,
                                    "correctness: sweep")));
  ASSERT_TRUE(log.append(experiment(1735689720, "aten::_softmax", kBf16, 2, 1.31, ExperimentDecision::Accepted,
                                    "speed-up CI [1.29, 1.33] clears 1.02")));
  ASSERT_TRUE(log.append(experiment(1735689900, "aten::_log_softmax", kFp32, 0, 1.01, ExperimentDecision::KeptAten,
                                    "no candidate cleared 1.02")));
  ASSERT_TRUE(log.append(experiment(1735689780, "aten::_softmax", kFp32, 0, 1.12, ExperimentDecision::Rejected,
                                    "CI [0.99, 1.25] does not clear 1.02")));
}

TEST(LogCommandsTest, GivenLogWhenListedThenTableOfEveryExperimentInTimeOrder) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"log", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const char* header : {"#", "TIME (UTC)", "OP", "VARIANT", "CAND", "PARENT", "PARAMS", "STAGES", "SPEEDUP",
                             "KERNEL US", "ATEN US", "DECISION", "REASON"}) {
    EXPECT_TRUE(contains(r.out, header)) << header;
  }
  EXPECT_TRUE(contains(r.out, "2025-01-01 00:00:00")) << r.out;
  EXPECT_TRUE(contains(r.out, "1.31x [1.29,1.33]")) << r.out;
  EXPECT_TRUE(contains(r.out, "threads=512 vec=8")) << r.out;
  EXPECT_TRUE(contains(r.out, "fail:sweep")) << r.out;
  EXPECT_TRUE(contains(r.out, "236.6")) << r.out;  // 310 / 1.31 us
  EXPECT_TRUE(contains(r.out, "correctness: sweep")) << r.out;
  EXPECT_TRUE(contains(r.out, "kept_aten")) << r.out;
  EXPECT_TRUE(contains(r.out, "5 experiments (1 accepted, 3 rejected, 1 kept_aten)")) << r.out;
  // Time order, not append order: the fp32 softmax experiment (t+180) comes before the log_softmax one (t+300).
  EXPECT_LT(r.out.find("does not clear"), r.out.find("no candidate cleared")) << r.out;
  // One line per experiment, a header, a summary.
  EXPECT_EQ(count(r.out, "\n"), 7u) << r.out;
}

TEST(LogCommandsTest, GivenFiltersWhenListedThenOnlyMatchingExperiments) {
  TempDir tmp;
  fill(tmp.path());
  auto op = runCli({"log", "--dir", tmp.path(), "--op", "aten::_softmax"});
  ASSERT_EQ(op.exitCode, 0) << op.err;
  EXPECT_TRUE(contains(op.out, "4 experiments")) << op.out;
  EXPECT_FALSE(contains(op.out, "aten::_log_softmax")) << op.out;

  auto both = runCli({"log", "--dir", tmp.path(), "--op", "aten::_softmax", "--variant", kBf16});
  ASSERT_EQ(both.exitCode, 0) << both.err;
  EXPECT_TRUE(contains(both.out, "3 experiments (1 accepted, 2 rejected, 0 kept_aten)")) << both.out;
  EXPECT_FALSE(contains(both.out, kFp32)) << both.out;

  auto none = runCli({"log", "--dir", tmp.path(), "--variant", "no-such-variant"});
  EXPECT_EQ(none.exitCode, 0);
  EXPECT_TRUE(contains(none.out, "0 experiments")) << none.out;
}

TEST(LogCommandsTest, GivenLastWhenListedThenOnlyNewestWithTheirIndices) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"log", "--dir", tmp.path(), "--last", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(count(r.out, "\n"), 4u) << r.out;
  EXPECT_TRUE(contains(r.out, "the last 2 shown")) << r.out;
  EXPECT_TRUE(contains(r.out, "\n4 ")) << r.out;  // indices count every matching experiment
  EXPECT_TRUE(contains(r.out, "\n5 ")) << r.out;
  EXPECT_FALSE(contains(r.out, "slower than ATen")) << r.out;
}

TEST(LogCommandsTest, GivenLastOutOfRangeWhenListedThenExitTwoAndTheRangeInOneLine) {
  TempDir tmp;
  fill(tmp.path());
  for (const char* bad : {"0", "-1", "1000001", "99999999999999999999", "lots"}) {
    auto r = runCli({"log", "--dir", tmp.path(), "--last", bad});
    EXPECT_EQ(r.exitCode, 2) << bad;
    EXPECT_TRUE(contains(r.err, std::string("--last: must be an integer in [1, 1000000], got '") + bad + "'"))
        << r.err;
    EXPECT_LT(r.err.size(), 200u) << r.err;  // no 300-digit bound
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  auto largest = runCli({"log", "--dir", tmp.path(), "--last", "1000000"});
  EXPECT_EQ(largest.exitCode, 0) << largest.err;
  EXPECT_FALSE(contains(largest.out, "shown")) << largest.out;  // more than there are: all of them
}

TEST(LogCommandsTest, GivenJsonWhenListedThenOneObjectWithFormatVersionAndTheLogsObjects) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"log", "--dir", tmp.path(), "--json", "--op", "aten::_softmax", "--last", "3"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(r.out);
  ASSERT_TRUE(doc.is_object());
  ASSERT_GE(doc.size(), 2u);
  EXPECT_EQ(doc.begin().key(), "format");  // format and version first, as every --json of the CLI
  EXPECT_EQ(std::next(doc.begin()).key(), "version");
  EXPECT_EQ(doc["format"], "hotkernel-log");
  EXPECT_EQ(doc["version"], 2);
  EXPECT_EQ(doc["log"], ExperimentLog::pathFor(tmp.path()));
  EXPECT_EQ(doc["found"], true);
  EXPECT_EQ(doc["skipped"], 0);
  const auto all = nlohmann::json::parse(runCli({"log", "--dir", tmp.path(), "--json", "--op", "aten::_softmax"}).out);
  EXPECT_EQ(doc["matching"], all["experiments"].size());  // --last shortens the list, not the count
  EXPECT_GT(all["experiments"].size(), 3u);
  const nlohmann::json j = doc["experiments"];
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["format"], "hotkernel-experiment");
  EXPECT_EQ(j[0]["version"], 2);
  EXPECT_EQ(j[0]["reason"], "correctness: sweep");
  EXPECT_TRUE(j[0]["timings"]["speedup"].is_null());
  EXPECT_EQ(j[1]["decision"], "accepted");
  EXPECT_EQ(j[1]["params"]["threads"], 512);
  EXPECT_EQ(j[2]["variant"], kFp32);
}

TEST(LogCommandsTest, GivenVersion1AndVersion2LinesWhenListedAsJsonThenEveryLineAsVersion2InSnakeCase) {
  TempDir tmp;
  fill(tmp.path());
  {
    // A line an older hotkernel wrote (Note [Experiment line versions]): camelCase keys, extra's too.
    std::ofstream out(ExperimentLog::pathFor(tmp.path()), std::ios::app);
    out << R"({"format":"hotkernel-experiment","version":1,"time":1735690000,"fingerprint":"fp-h200",)"
        << R"("op":"aten::_softmax","variant":")" << kBf16 << R"(","candidateId":9,"parentId":2,)"
        << R"("params":{"threads":256,"rowsPerCta":2},"compileSeconds":0.5,"stages":{"smoke":"pass"},)"
        << R"("timings":{"atenUs":300,"kernelUs":200,"speedup":1.5,"speedupCi":[1.4,1.6]},)"
        << R"("decision":"rejected","reason":"old","extra":{"budgetLevel":1,"kernelName":"k",)"
        << R"("target":{"spentSeconds":3.5,"stop":"budget_spent"}}})"
        << "\n";
  }
  auto r = runCli({"log", "--dir", tmp.path(), "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["skipped"], 0);
  ASSERT_EQ(doc["experiments"].size(), 6u);
  // Every key snake_case but those of the maps of data: a family's parameter names, harness stage names.
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(doc, {"/experiments/*/params", "/experiments/*/stages"}),
            std::vector<std::string>{})
      << r.out;
  const nlohmann::json& old = doc["experiments"][5];
  EXPECT_EQ(old["version"], 2);
  EXPECT_EQ(old["candidate_id"], 9);
  EXPECT_EQ(old["parent_id"], 2);
  EXPECT_DOUBLE_EQ(old["compile_seconds"].get<double>(), 0.5);
  EXPECT_EQ(old["params"]["rowsPerCta"], 2);  // data: kept as the cache stores it
  EXPECT_DOUBLE_EQ(old["timings"]["aten_us"].get<double>(), 300);
  EXPECT_DOUBLE_EQ(old["timings"]["kernel_us"].get<double>(), 200);
  EXPECT_EQ(old["timings"]["speedup_ci"], nlohmann::json::array({1.4, 1.6}));
  EXPECT_EQ(old["extra"]["budget_level"], 1);
  EXPECT_EQ(old["extra"]["kernel_name"], "k");
  EXPECT_DOUBLE_EQ(old["extra"]["target"]["spent_seconds"].get<double>(), 3.5);
  // The table shows it like any other line.
  auto table = runCli({"log", "--dir", tmp.path()});
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_TRUE(contains(table.out, "6 experiments")) << table.out;
  EXPECT_TRUE(contains(table.out, "1.50x [1.40,1.60]")) << table.out;  // the v1 line's speed-up and its CI
}

TEST(LogCommandsTest, GivenCorruptLinesWhenListedThenSkippedWithNoteOnStderr) {
  TempDir tmp;
  fill(tmp.path());
  {
    std::ofstream out(ExperimentLog::pathFor(tmp.path()), std::ios::app);
    out << "garbage\n{\"format\":\"hotkernel-experiment\",\"version\":9,\"time\":1}\n{\"format\":\"hotk";
  }
  auto r = runCli({"log", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "5 experiments")) << r.out;
  EXPECT_TRUE(contains(r.err, "skipped 3 lines")) << r.err;
  EXPECT_TRUE(contains(r.err, "1 of a newer format version")) << r.err;
}

TEST(LogCommandsTest, GivenNoLogWhenListedThenEmptyExitZeroAndNothingCreated) {
  TempDir tmp;
  std::string dir = tmp.sub("none");
  auto r = runCli({"log", "--dir", dir});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_TRUE(contains(r.err, "no experiment log at " + dir + "/experiments.jsonl")) << r.err;
  const auto none = nlohmann::json::parse(runCli({"log", "--dir", dir, "--json"}).out);
  EXPECT_EQ(none["found"], false);
  EXPECT_EQ(none["matching"], 0);
  EXPECT_EQ(none["experiments"], nlohmann::json::array());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(LogCommandsTest, GivenCacheDirInEnvironmentWhenListedWithoutDirThenItIsUsed) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"log", "--last", "1"}, {{"HOTKERNEL_CACHE_DIR", tmp.path()}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "no candidate cleared")) << r.out;
}

TEST(LogCommandsTest, GivenSymlinkedLogWhenListedThenRefusedWithExitTwo) {
  TempDir tmp;
  fill(tmp.sub("real"));
  ASSERT_EQ(::mkdir(tmp.sub("linked").c_str(), 0700), 0);
  ASSERT_EQ(
      ::symlink(ExperimentLog::pathFor(tmp.sub("real")).c_str(), ExperimentLog::pathFor(tmp.sub("linked")).c_str()), 0);
  auto r = runCli({"log", "--dir", tmp.sub("linked")});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "symlink")) << r.err;
}

TEST(LogCommandsTest, GivenLogWhenReportedThenSvgWithOneMarkerPerExperiment) {
  TempDir tmp;
  fill(tmp.path());
  const std::string svgPath = tmp.sub("report.svg");
  auto r = runCli({"report", "--dir", tmp.path(), "--out", svgPath});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "wrote " + svgPath + ": 5 experiments")) << r.out;
  std::string svg = readFile(svgPath);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(svg, "class=\"marker "), 5u);
  EXPECT_EQ(count(svg, "class=\"marker accepted\""), 1u);
  EXPECT_EQ(count(svg, "class=\"marker failed\""), 1u);
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));
  EXPECT_TRUE(contains(svg, "aten::_log_softmax " + kFp32)) << "several ops: series are named 'op variant'";
}

TEST(LogCommandsTest, GivenFiltersWhenReportedThenOnlyMatchingPlottedAndNamedInSubtitle) {
  TempDir tmp;
  fill(tmp.path());
  const std::string svgPath = tmp.sub("bf16.svg");
  auto r = runCli({"report", "--dir", tmp.path(), "--op", "aten::_softmax", "--variant", kBf16, "--out", svgPath,
                   "--title", "bf16 softmax"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string svg = readFile(svgPath);
  EXPECT_EQ(count(svg, "class=\"marker "), 3u);
  EXPECT_TRUE(contains(svg, ">bf16 softmax</text>"));
  EXPECT_TRUE(contains(svg, "op aten::_softmax, variant " + kBf16));
}

TEST(LogCommandsTest, GivenNothingToPlotOrNoOutWhenReportedThenProblemOrUsage) {
  TempDir tmp;
  fill(tmp.path());
  const std::string svgPath = tmp.sub("none.svg");
  auto none = runCli({"report", "--dir", tmp.path(), "--variant", "nope", "--out", svgPath});
  EXPECT_EQ(none.exitCode, 1);
  EXPECT_TRUE(contains(none.err, "no experiments to plot")) << none.err;
  EXPECT_FALSE(std::filesystem::exists(svgPath));
  EXPECT_EQ(runCli({"report", "--dir", tmp.path()}).exitCode, 2);  // --out is required
  auto unwritable = runCli({"report", "--dir", tmp.path(), "--out", tmp.sub("no/such/dir.svg")});
  EXPECT_EQ(unwritable.exitCode, 2);
  EXPECT_TRUE(contains(unwritable.err, "cannot write")) << unwritable.err;
}

TEST(LogCommandsTest, GivenHelpWhenRequestedThenBothCommandsListed) {
  auto r = runCli({"--help"});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_TRUE(contains(r.out, "log")) << r.out;
  EXPECT_TRUE(contains(r.out, "report")) << r.out;
  auto log = runCli({"log", "--help"});
  EXPECT_EQ(log.exitCode, 0);
  EXPECT_TRUE(contains(log.out, "--last")) << log.out;
}

}  // namespace
}  // namespace hotkernel::cli
