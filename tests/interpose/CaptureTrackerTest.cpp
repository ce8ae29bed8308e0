// The capture bookkeeping of the preload shim (Note [Pausing during graph
// capture] in interpose/preload/CaptureTracker.h) against a fake CUDA runtime.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "CaptureTracker.h"

namespace {

// A fake runtime: which streams capture, and what the next calls return.
struct FakeRuntime {
  std::map<void*, bool> capturing;
  int beginResult = HK_CUDA_SUCCESS;
  int endResult = HK_CUDA_SUCCESS;
  bool endStopsCapture = true;  // whether end leaves the stream not capturing
  int isCapturingResult = HK_CUDA_SUCCESS;
  int calls = 0;
};
FakeRuntime* gFake = nullptr;

int fakeBegin(void* stream, int) {
  ++gFake->calls;
  if (gFake->beginResult == HK_CUDA_SUCCESS) gFake->capturing[stream] = true;
  return gFake->beginResult;
}
int fakeEnd(void* stream, void** graph) {
  ++gFake->calls;
  if (gFake->endStopsCapture) gFake->capturing[stream] = false;
  if (graph) *graph = nullptr;
  return gFake->endResult;
}
int fakeIsCapturing(void* stream, int* status) {
  if (gFake->isCapturingResult != HK_CUDA_SUCCESS) return gFake->isCapturingResult;
  *status = gFake->capturing[stream] ? 1 : HK_CAPTURE_STATUS_NONE;
  return HK_CUDA_SUCCESS;
}

class CaptureTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hk_capture_reset();
    gFake = &fake_;
  }
  void TearDown() override {
    hk_capture_reset();
    gFake = nullptr;
  }
  FakeRuntime fake_;
  HkCaptureApi api_{fakeBegin, fakeEnd, fakeIsCapturing};
  void* s1_ = reinterpret_cast<void*>(0x1000);
  void* s2_ = reinterpret_cast<void*>(0x2000);
};

TEST_F(CaptureTrackerTest, GivenTwoStreamsCapturingWhenTheyEndThenTheCountFollowsAndResultsPassThrough) {
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
  EXPECT_EQ(hk_capture_begin(&api_, s1_, 0), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 1);
  EXPECT_EQ(hk_capture_begin(&api_, s2_, 2), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 2);
  void* graph = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(hk_capture_end(&api_, s1_, &graph), HK_CUDA_SUCCESS);
  EXPECT_EQ(graph, nullptr);  // the real call's output reaches the caller
  EXPECT_EQ(hotkernel_captures_in_progress(), 1);
  EXPECT_EQ(hk_capture_end(&api_, s2_, &graph), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
  EXPECT_EQ(fake_.calls, 4);
}

TEST_F(CaptureTrackerTest, GivenBeginThatFailsWhenCalledThenNothingIsCountedAndTheErrorIsReturned) {
  fake_.beginResult = 900;  // cudaErrorStreamCaptureUnsupported
  EXPECT_EQ(hk_capture_begin(&api_, s1_, 0), 900);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
}

TEST_F(CaptureTrackerTest, GivenInvalidatedCaptureWhenEndFailsThenTheCaptureIsStillUncounted) {
  ASSERT_EQ(hk_capture_begin(&api_, s1_, 0), HK_CUDA_SUCCESS);
  fake_.endResult = 901;  // cudaErrorStreamCaptureInvalidated: the capture ended anyway
  EXPECT_EQ(hk_capture_end(&api_, s1_, nullptr), 901);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
}

TEST_F(CaptureTrackerTest, GivenEndFromTheWrongThreadWhenTheStreamStillCapturesThenItStaysCounted) {
  ASSERT_EQ(hk_capture_begin(&api_, s1_, 0), HK_CUDA_SUCCESS);
  fake_.endResult = HK_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  fake_.endStopsCapture = false;
  EXPECT_EQ(hk_capture_end(&api_, s1_, nullptr), HK_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  EXPECT_EQ(hotkernel_captures_in_progress(), 1);
  fake_.endResult = HK_CUDA_SUCCESS;
  fake_.endStopsCapture = true;
  EXPECT_EQ(hk_capture_end(&api_, s1_, nullptr), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
}

TEST_F(CaptureTrackerTest, GivenNoCaptureQueryWhenEndFailsThenOnlyTheWrongThreadErrorKeepsTheCount) {
  HkCaptureApi noQuery{fakeBegin, fakeEnd, nullptr};
  ASSERT_EQ(hk_capture_begin(&noQuery, s1_, 0), HK_CUDA_SUCCESS);
  fake_.endResult = HK_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  EXPECT_EQ(hk_capture_end(&noQuery, s1_, nullptr), HK_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  EXPECT_EQ(hotkernel_captures_in_progress(), 1);
  fake_.endResult = 901;
  EXPECT_EQ(hk_capture_end(&noQuery, s1_, nullptr), 901);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
}

TEST_F(CaptureTrackerTest, GivenEndOnAStreamNeverCountedWhenCalledThenOthersStayCounted) {
  ASSERT_EQ(hk_capture_begin(&api_, s1_, 0), HK_CUDA_SUCCESS);
  fake_.endResult = 906;  // cudaErrorIllegalState-like: s2 was not capturing
  EXPECT_EQ(hk_capture_end(&api_, s2_, nullptr), 906);
  EXPECT_EQ(hotkernel_captures_in_progress(), 1);
}

TEST_F(CaptureTrackerTest, GivenNoRealRuntimeWhenCalledThenAnErrorAndNoCount) {
  EXPECT_EQ(hk_capture_begin(nullptr, s1_, 0), HK_CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(hk_capture_end(nullptr, s1_, nullptr), HK_CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
}

TEST_F(CaptureTrackerTest, GivenMoreStreamsThanSlotsWhenAllEndThenTheCountReturnsToZero) {
  std::vector<void*> streams;
  for (uintptr_t i = 1; i <= 300; ++i) streams.push_back(reinterpret_cast<void*>(i * 16));
  for (void* s : streams) ASSERT_EQ(hk_capture_begin(&api_, s, 0), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 300);
  for (void* s : streams) ASSERT_EQ(hk_capture_end(&api_, s, nullptr), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
}

TEST_F(CaptureTrackerTest, GivenTheLegacyStreamWhenCapturedThenCountedLikeAnyOther) {
  ASSERT_EQ(hk_capture_begin(&api_, nullptr, 0), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 1);
  ASSERT_EQ(hk_capture_end(&api_, nullptr, nullptr), HK_CUDA_SUCCESS);
  EXPECT_EQ(hotkernel_captures_in_progress(), 0);
}

}  // namespace
