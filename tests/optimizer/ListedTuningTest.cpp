// The listed tuners' loop (optimizer/ListedTuning.h) on the CPU, where no
// candidate reaches the benchmark: a candidate that cannot be prepared or
// fails its checks is recorded with its stage and reason and the next one is
// tried; "interrupted" from a check, or a yield point that says stop, stops
// the tuning with "tuning interrupted"; with nothing accepted, ATen stays.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "hotkernel/optimizer/ListedTuning.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

ListedCandidate failing(int id, const std::string& prepareError, const std::string& checkError, int* checks) {
  ListedCandidate c;
  c.params = {{"id", id}};
  if (!prepareError.empty()) {
    c.prepare = [prepareError](CandidateRecord& rec) -> std::string {
      rec.compileSeconds = 0.5;
      if (prepareError == "throw") throw std::runtime_error("nvrtc: error in the template");
      return prepareError;
    };
  }
  c.check = [checkError, checks] {
    ++*checks;
    return checkError;
  };
  c.run = [] { return at::zeros({2}); };
  return c;
}

TEST(ListedTuningTest, GivenCandidatesThatFailToPrepareOrToPassTheirChecksWhenTunedThenEachIsRecordedAndAtenStays) {
  int checks = 0;
  const std::vector<ListedCandidate> candidates = {failing(0, "the plan does not fit", "", &checks),
                                                   failing(1, "throw", "", &checks),
                                                   failing(2, "", "values: 3 element(s) outside the bound", &checks)};
  TuneMetrics metrics;
  int originals = 0;
  const std::optional<size_t> best =
      tuneListed(candidates, [&] { ++originals; }, /*device=*/0, TunerOptions{}, metrics);
  EXPECT_FALSE(best.has_value());
  EXPECT_EQ(originals, 0) << "nothing was timed";
  EXPECT_EQ(checks, 1) << "only the prepared candidate is checked";
  ASSERT_EQ(metrics.candidates.size(), 3u);
  EXPECT_EQ(metrics.candidates[0].stage, "compile");
  EXPECT_EQ(metrics.candidates[0].error, "the plan does not fit");
  EXPECT_EQ(metrics.candidates[0].compileSeconds, 0.5);
  EXPECT_EQ(metrics.candidates[1].stage, "compile");
  EXPECT_EQ(metrics.candidates[1].error, "nvrtc: error in the template");
  EXPECT_EQ(metrics.candidates[2].stage, "harness");
  EXPECT_EQ(metrics.candidates[2].error, "checks: values: 3 element(s) outside the bound");
  ASSERT_TRUE(metrics.candidates[2].stages.has_value());
  EXPECT_FALSE(metrics.candidates[2].stages->at("checks").passed);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(metrics.candidates[i].candidateId, static_cast<int64_t>(i));
    EXPECT_EQ(metrics.candidates[i].params, (nlohmann::json{{"id", i}}));
    EXPECT_FALSE(metrics.candidates[i].speedup.has_value());
  }
  ASSERT_TRUE(metrics.search.has_value());
  EXPECT_EQ(metrics.search->evaluations, 3);
  EXPECT_EQ(metrics.search->validPoints, 3u);
  EXPECT_EQ(metrics.search->stop, SearchStop::Exhausted);
  EXPECT_FALSE(metrics.kernel.has_value());
  EXPECT_FALSE(metrics.target.has_value()) << "no clock, no target summary";
}

TEST(ListedTuningTest, GivenACheckInterruptedOrAYieldThatSaysStopWhenTunedThenTuningIsInterrupted) {
  int checks = 0;
  TuneMetrics metrics;
  const std::vector<ListedCandidate> interrupted = {failing(0, "", "interrupted", &checks),
                                                    failing(1, "", "", &checks)};
  try {
    tuneListed(interrupted, [] {}, 0, TunerOptions{}, metrics);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tuning interrupted"), std::string::npos) << e.what();
  }
  EXPECT_EQ(checks, 1) << "the next candidate is not started";

  TunerOptions stop;
  int yields = 0;
  stop.yieldPoint = [&] { return ++yields < 2; };
  checks = 0;
  TuneMetrics second;
  const std::vector<ListedCandidate> two = {failing(0, "", "wrong", &checks), failing(1, "", "wrong", &checks)};
  EXPECT_THROW(tuneListed(two, [] {}, 0, stop, second), Error);
  EXPECT_EQ(checks, 1);
  EXPECT_EQ(second.candidates.size(), 1u);
}

}  // namespace
}  // namespace hotkernel
