// A tuning's typed metrics and their JSON (Note [Tune metrics JSON]): the
// keys and values the cache entry, the tune log and status hold, and the
// experiment lines made from the typed records (TuneExperiments.h).
#include <gtest/gtest.h>

#include <string>

#include "hotkernel/optimizer/TuneExperiments.h"
#include "hotkernel/optimizer/TuneOutcome.h"

#include "../JsonKeyCase.h"

namespace hotkernel {
namespace {

using nlohmann::json;

Comparison comparison(double atenUs, double kernelUs, double speedup, double low, double high, size_t pairs) {
  Comparison c;
  c.baseline = {atenUs, atenUs * 0.9, atenUs * 1.1, pairs};
  c.candidate = {kernelUs, kernelUs * 0.9, kernelUs * 1.1, pairs};
  c.speedup = {speedup, low, high, pairs};
  return c;
}

// A family search's record of a timed point, as the family tuner fills it.
CandidateRecord timedPoint(int id, int threads, bool accepted) {
  CandidateRecord c;
  c.candidateId = id;
  c.origin = id == 0 ? "seed" : "mutation";
  if (id > 0) {
    c.parentId = 0;
    c.mutation = "threads 256->" + std::to_string(threads);
  }
  c.round = id == 0 ? 0 : 1;
  c.params = json{{"threads", threads}, {"vec", 8}};
  c.compileSeconds = 0.25;
  c.stages = std::map<std::string, StageRecord>{{"smoke", {true, "4 shapes"}}, {"sweep", {true, ""}}};
  c.harnessSeed = 18446744073709551615ull;
  c.maxAbsError = 0.0078125;
  c.stage = "benchmark";
  c.atenUs = 310.5;
  c.kernelUs = 250.25;
  c.speedup = 1.24;
  c.speedupCi = ConfidenceInterval{1.21, 1.27};
  c.pairs = 31;
  c.budgetLevel = 2;
  c.accepted = accepted;
  return c;
}

CandidateRecord failedPoint(int id) {
  CandidateRecord c;
  c.candidateId = id;
  c.parentId = 0;
  c.origin = "mutation";
  c.round = 1;
  c.params = json{{"threads", 1024}, {"vec", 8}};
  c.compileSeconds = 0.5;
  c.stages = std::map<std::string, StageRecord>{{"smoke", {false, "row 3 differs"}}};
  c.harnessSeed = 7;
  c.maxAbsError = 0.0;
  c.stage = "harness";
  c.error = "harness smoke: row 3 differs";
  return c;
}

TuneOutcome familyOutcome() {
  TuneOutcome out;
  out.accepted = true;
  out.family = "softmax_lastdim";
  out.paramsJson = {{"threads", 512}, {"vec", 8}};
  out.kernelName = "hk_softmax_lastdim";
  out.cubin = "cubin";
  out.metrics.kernel = KernelMetrics::of(comparison(310.5, 250.25, 1.24, 1.21, 1.27, 31), 0.0078125);
  out.metrics.kernel->tolerance = 0.001953125;
  out.metrics.search = SearchSummary{18446744073709551615ull, 12, 3, SearchStop::NoImprovement, 96};
  out.metrics.candidates = {timedPoint(0, 256, false), failedPoint(1), timedPoint(2, 512, true)};
  out.metrics.target = json{{"budgetSeconds", 30.0}, {"spentSeconds", 12.5}, {"stop", "no_improvement"}};
  out.metrics.arch = "sm_90a";
  return out;
}

TEST(TuneOutcomeTest, GivenAnAcceptedFamilyKernelWhenWrittenThenEveryKeyAndValueIsThere) {
  const json j = familyOutcome().metrics.toJson();
  EXPECT_EQ(j.at("speedup"), 1.24);
  EXPECT_EQ(j.at("speedupCi"), json::array({1.21, 1.27}));
  EXPECT_EQ(j.at("atenUs"), 310.5);
  EXPECT_EQ(j.at("kernelUs"), 250.25);
  EXPECT_EQ(j.at("maxAbsError"), 0.0078125);
  EXPECT_EQ(j.at("pairs"), 31);
  EXPECT_EQ(j.at("tolerance"), 0.001953125);
  EXPECT_FALSE(j.contains("origin"));
  EXPECT_FALSE(j.contains("bound"));
  // The seed as text: a 64-bit seed does not survive a reader's doubles.
  EXPECT_EQ(j.at("search").dump(),
            R"({"evaluations":12,"rounds":3,"seed":"18446744073709551615","stop":"no_improvement","validPoints":96})");
  EXPECT_EQ(j.at("target").at("stop"), "no_improvement");
  EXPECT_EQ(j.at("arch"), "sm_90a");
  EXPECT_FALSE(j.contains("reduction"));
  EXPECT_FALSE(j.contains("op"));
  ASSERT_EQ(j.at("candidates").size(), 3u);
}

TEST(TuneOutcomeTest, GivenCandidateRecordsWhenWrittenThenTheLineIsTheCandidateLogFormat) {
  EXPECT_EQ(timedPoint(2, 512, true).toJson().dump(),
            R"({"accepted":true,"atenUs":310.5,"budgetLevel":2,"candidateId":2,"compileSeconds":0.25,)"
            R"("harnessSeed":"18446744073709551615","kernelUs":250.25,"maxAbsError":0.0078125,)"
            R"("mutation":"threads 256->512","origin":"mutation","pairs":31,"params":{"threads":512,"vec":8},)"
            R"("parentId":0,"round":1,"speedup":1.24,"speedupCi":[1.21,1.27],"stage":"benchmark",)"
            R"("stages":{"smoke":"pass","sweep":"pass"}})");
  EXPECT_EQ(failedPoint(1).toJson().dump(),
            R"({"candidateId":1,"compileSeconds":0.5,"error":"harness smoke: row 3 differs","harnessSeed":"7",)"
            R"("maxAbsError":0.0,"origin":"mutation","params":{"threads":1024,"vec":8},"parentId":0,"round":1,)"
            R"("stage":"harness","stages":{"smoke":"fail: row 3 differs"}})");
  // An agent round that ended at the reply: no params, no timings, no empty error.
  CandidateRecord reply;
  reply.candidateId = 100001;
  reply.origin = "agent";
  reply.attempt = 1;
  reply.stage = "reply";
  EXPECT_EQ(reply.toJson().dump(), R"({"attempt":1,"candidateId":100001,"origin":"agent","stage":"reply"})");
}

TEST(TuneOutcomeTest, GivenAnAgentKernelOrNoneWhenWrittenThenOnlyTheirKeysAreThere) {
  TuneMetrics agent;
  agent.kernel = KernelMetrics::of(comparison(200.0, 160.0, 1.25, 1.2, 1.3, 31), 0.001);
  agent.kernel->bound = ErrorBound{0.0009765625, 0.0078125};
  agent.kernel->fromAgent = true;
  agent.arch = "sm_90a";
  EXPECT_EQ(agent.toJson().dump(),
            R"({"arch":"sm_90a","atenUs":200.0,"bound":{"absolute":0.0009765625,"relative":0.0078125},)"
            R"("candidates":[],"kernelUs":160.0,"maxAbsError":0.001,"origin":"agent","pairs":31,"speedup":1.25,)"
            R"("speedupCi":[1.2,1.3]})");
  TuneMetrics kept;
  kept.search = SearchSummary{5, 40, 8, SearchStop::EvaluationBudget, 12};
  kept.arch = "sm_90a";
  kept.reduction = "mean";
  const json j = kept.toJson();
  EXPECT_FALSE(j.contains("speedup"));
  EXPECT_FALSE(j.contains("target"));
  EXPECT_EQ(j.at("reduction"), "mean");
  EXPECT_EQ(j.at("search").at("stop"), "evaluation_budget");
}

TEST(TuneOutcomeTest, GivenATuningOnARowSubsetWhenWrittenThenTunedRowsIsThereAndAbsentOtherwise) {
  TuneMetrics subset = familyOutcome().metrics;
  EXPECT_FALSE(subset.toJson().contains("tunedRows"));  // all of the variant's rows
  subset.tunedRows = 1956;
  const json j = subset.toJson();
  EXPECT_EQ(j.at("tunedRows"), 1956);
  EXPECT_EQ(j.at("speedup"), 1.24);  // the other keys unchanged
  EXPECT_EQ(j.at("arch"), "sm_90a");
}

TEST(TuneOutcomeTest, GivenAHarnessOnFewerRowsWhenWrittenThenHarnessRowsIsThereAndAbsentOtherwise) {
  TuneMetrics split = familyOutcome().metrics;
  EXPECT_FALSE(split.toJson().contains("harnessRows"));  // the harness on the timed calls' rows
  split.harnessRows = 12;
  const json j = split.toJson();
  EXPECT_EQ(j.at("harnessRows"), 12);
  EXPECT_FALSE(j.contains("tunedRows"));  // the timed calls on all of the variant's rows
  EXPECT_EQ(j.at("speedup"), 1.24);
}

TEST(TuneOutcomeTest, GivenAnAcceptedOutcomeWhenItsExperimentsAreMadeThenOneLinePerCandidateAndTheStopOnTheChosen) {
  const std::vector<Experiment> lines = tuneExperiments("fp", "aten::_softmax", "v", familyOutcome());
  ASSERT_EQ(lines.size(), 3u);  // no kept_aten line
  EXPECT_EQ(lines[0].decision, ExperimentDecision::Rejected);
  EXPECT_EQ(lines[0].reason, "correct, but its speed-up CI does not clear the threshold");
  EXPECT_EQ(lines[0].extra.at("origin"), "seed");
  EXPECT_FALSE(lines[0].parentId.has_value());
  EXPECT_EQ(lines[1].decision, ExperimentDecision::Rejected);
  EXPECT_EQ(lines[1].reason, "harness: harness smoke: row 3 differs");
  EXPECT_EQ(lines[1].stages.at("smoke"), "fail");
  EXPECT_FALSE(lines[1].timings.speedup.has_value());
  const Experiment& chosen = lines[2];
  EXPECT_EQ(chosen.decision, ExperimentDecision::Accepted);
  EXPECT_EQ(chosen.reason, "fastest correct candidate; swapped in");
  EXPECT_EQ(chosen.fingerprint, "fp");
  EXPECT_EQ(chosen.op, "aten::_softmax");
  EXPECT_EQ(chosen.candidateId, 2);
  EXPECT_EQ(chosen.parentId, 0);
  EXPECT_EQ(chosen.params, json({{"threads", 512}, {"vec", 8}}));
  EXPECT_EQ(chosen.compileSeconds, 0.25);
  EXPECT_EQ(chosen.stages.at("sweep"), "pass");
  EXPECT_EQ(chosen.timings.kernelUs, 250.25);
  EXPECT_EQ(chosen.timings.speedupCi, std::make_pair(1.21, 1.27));
  EXPECT_EQ(chosen.extra.at("mutation"), "threads 256->512");
  EXPECT_EQ(chosen.extra.at("budget_level"), 2);
  EXPECT_EQ(chosen.extra.at("target").at("stop"), "no_improvement");
  EXPECT_FALSE(lines[0].extra.contains("target"));
  // Note [Experiment line versions]: every line's keys snake_case but the maps of data (params, stages).
  for (const Experiment& line : lines) {
    EXPECT_EQ(jsoncase::nonSnakeCaseKeys(line.toJson(), {"/params", "/stages"}), std::vector<std::string>{})
        << line.toJson().dump();
  }
}

TEST(TuneOutcomeTest, GivenNoAcceptedKernelWhenItsExperimentsAreMadeThenAKeptAtenLineCarriesTheStop) {
  TuneOutcome out = familyOutcome();
  out.accepted = false;
  out.metrics.kernel.reset();
  out.metrics.candidates[2].accepted = false;
  const std::vector<Experiment> lines = tuneExperiments("fp", "aten::_softmax", "v", out);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2].decision, ExperimentDecision::Rejected);
  const Experiment& kept = lines[3];
  EXPECT_EQ(kept.decision, ExperimentDecision::KeptAten);
  EXPECT_FALSE(kept.candidateId.has_value());
  EXPECT_EQ(kept.reason,
            "no candidate was correct and faster; the ATen kernel stays (search stopped: no_improvement)");
  EXPECT_EQ(kept.extra.at("target").at("budget_seconds"), 30.0);
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(kept.toJson(), {"/params", "/stages"}), std::vector<std::string>{})
      << kept.toJson().dump();

  // A faster candidate that was not the one chosen says so.
  out = familyOutcome();
  out.metrics.candidates[0].accepted = true;
  EXPECT_EQ(tuneExperiments("fp", "op", "v", out)[0].reason,
            "correct and faster than ATen, but another candidate was accepted");
}

// A chain entry's params hold the chain and the variant, its kernel point under "kernel": the candidate whose
// point that is was swapped in (the log showed every chain candidate rejected before).
TEST(TuneOutcomeTest, GivenAnAcceptedChainEntryWhenItsExperimentsAreMadeThenTheCandidateOfItsKernelPointIsAccepted) {
  TuneOutcome out = familyOutcome();
  out.family = "chain";
  out.paramsJson = {{"format", "hotkernel-chain-entry"}, {"rows", 12288}, {"kernel", {{"threads", 512}, {"vec", 8}}}};
  const std::vector<Experiment> lines = tuneExperiments("fp", "hotkernel::chain", "v", out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].decision, ExperimentDecision::Accepted);
  EXPECT_EQ(lines[2].reason.rfind("fastest correct candidate; swapped in", 0), 0u) << lines[2].reason;
  EXPECT_EQ(lines[0].decision, ExperimentDecision::Rejected);
  // Another kernel point in the entry: no candidate is the accepted one.
  out.paramsJson["kernel"] = {{"threads", 128}, {"vec", 8}};
  EXPECT_EQ(tuneExperiments("fp", "hotkernel::chain", "v", out)[2].decision, ExperimentDecision::Rejected);
}

TEST(TuneOutcomeTest, GivenTimedCandidatesThatClearTheThresholdButLostWhenLoggedThenTheReasonSaysAnotherWasAccepted) {
  TuneOutcome out = familyOutcome();
  out.metrics.candidates[0].accepted = false;
  out.metrics.candidates[0].clears = true;  // its CI clears; another was accepted (Note [Which candidate is accepted])
  EXPECT_EQ(tuneExperiments("fp", "op", "v", out)[0].reason,
            "correct and faster than ATen, but another candidate was accepted");
  out.metrics.candidates[0].clears = false;
  EXPECT_EQ(tuneExperiments("fp", "op", "v", out)[0].reason,
            "correct, but its speed-up CI does not clear the threshold");
  EXPECT_EQ(out.metrics.candidates[0].toJson().at("clears"), false);
}

}  // namespace
}  // namespace hotkernel
