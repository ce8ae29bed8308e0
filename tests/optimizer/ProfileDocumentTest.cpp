// A recorded profile read back: versions 1 and 2 (camelCase keys) and 3
// (snake_case: Note [Profile versions]), GPU time when the profile carries it
// (Note [GPU time in the profile]), malformed entries refused.

#include <gtest/gtest.h>

#include <string>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/ProfileDocument.h"
#include "hotkernel/runtime/Check.h"

#include "../JsonKeyCase.h"

namespace hotkernel {
namespace {

using nlohmann::json;

json v1() {
  return {{"format", "hotkernel-profile"},
          {"version", 1},
          {"samplingProb", 0.5},
          {"ops", {{{"op", "aten::_softmax"}, {"sampledCalls", 4}, {"estimatedCalls", 8.0}}}},
          {"variants",
           {{{"op", "aten::_softmax"}, {"dtype", "bf16"}, {"device", 0}, {"rows", 64}, {"cols", 1000},
             {"sampledCalls", 4}, {"estimatedCalls", 8.0}}}}};
}

json v2WithGpu() {
  json p = v1();
  p["version"] = 2;
  for (json* e : {&p["ops"][0], &p["variants"][0]}) {
    (*e)["gpuNs"] = 3000;
    (*e)["gpuSampledCalls"] = 4;
    (*e)["estimatedGpuNs"] = 6000.0;
  }
  p["gpuTime"] = {{"source", "cupti"}, {"state", "started"}, {"kernelNs", 50000}, {"kernels", 12},
                  {"attributedNs", 3000}, {"droppedRecords", 2}, {"evicted", 0}};
  return p;
}

// What the recorder writes now: version 2's document with its keys in snake_case.
json v3WithGpu() {
  json p = {{"format", "hotkernel-profile"},
            {"version", 3},
            {"sampling_prob", 0.5},
            {"ops", {{{"op", "aten::_softmax"}, {"sampled_calls", 4}, {"estimated_calls", 8.0}}}},
            {"variants",
             {{{"op", "aten::_softmax"}, {"dtype", "bf16"}, {"device", 0}, {"rows", 64}, {"cols", 1000},
               {"sampled_calls", 4}, {"estimated_calls", 8.0}}}}};
  for (json* e : {&p["ops"][0], &p["variants"][0]}) {
    (*e)["gpu_ns"] = 3000;
    (*e)["gpu_sampled_calls"] = 4;
    (*e)["estimated_gpu_ns"] = 6000.0;
  }
  p["gpu_time"] = {{"source", "cupti"}, {"state", "started"}, {"kernel_ns", 50000}, {"kernels", 12},
                   {"attributed_ns", 3000}, {"dropped_records", 2}, {"evicted", 0}, {"taken_over", "a profiler"}};
  return p;
}

TEST(ProfileDocumentTest, GivenAVersion1ProfileWhenReadThenEntriesWithoutGpuTime) {
  const RecordedProfile p = parseRecordedProfile(v1(), 3);
  EXPECT_EQ(p.version, 1);
  EXPECT_DOUBLE_EQ(p.samplingProb, 0.5);
  EXPECT_FALSE(p.hasGpuTime());
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_EQ(p.ops[0].op, "aten::_softmax");
  EXPECT_EQ(p.ops[0].sampledCalls, 4);
  EXPECT_FALSE(p.ops[0].gpu.has_value());
  ASSERT_EQ(p.variants.size(), 1u);
  EXPECT_EQ(p.variants[0].key.device, 3);
  EXPECT_EQ(p.variants[0].key.rows, 64);
  EXPECT_EQ(p.variants[0].key.dtype, static_cast<int32_t>(kernels::DType::BFloat16));
  EXPECT_DOUBLE_EQ(p.variants[0].estimatedCalls, 8.0);
}

// Note [Profile format]: "variant", the whole key, gives what no field spells (group_norm's groups and HxW); it must
// name the variant its fields name.
TEST(ProfileDocumentTest, GivenAVariantSpelledWholeWhenReadThenTheKeyCarriesItsExtentsOrAMismatchIsRefused) {
  json p = v3WithGpu();
  json& v = p["variants"][0];
  v["op"] = "aten::native_group_norm";
  v["rows"] = 64;
  v["cols"] = 40960;
  v["weight"] = true;
  v["variant"] = "dtype=bfloat16;rows=64;cols=40960;more=32,4096,1,1;weight=1";
  const RecordedProfile r = parseRecordedProfile(p, 2);
  ASSERT_EQ(r.variants.size(), 1u);
  const VariantKey& k = r.variants[0].key;
  EXPECT_EQ(k.device, 2);
  EXPECT_EQ(k.rows, 64);
  EXPECT_EQ(k.more[0], 32);
  EXPECT_EQ(k.more[1], 4096);
  EXPECT_EQ(k.more[2], 1);
  EXPECT_TRUE(kernels::hasWeight(k));
  // Without it (a profile written before it), the fields alone: no extents.
  v.erase("variant");
  EXPECT_EQ(parseRecordedProfile(p, 2).variants[0].key.more[0], 0);
  for (const char* bad : {"dtype=bfloat16;rows=65;cols=40960;more=32,4096,1,1", "dtype=float16;rows=64;cols=40960",
                          "rows=64;cols=40960", "not a variant"}) {
    v["variant"] = bad;
    EXPECT_THROW(parseRecordedProfile(p, 2), Error) << bad;
  }
  v["variant"] = 12;
  EXPECT_THROW(parseRecordedProfile(p, 2), Error);
}

TEST(ProfileDocumentTest, GivenAVersion2ProfileWithGpuTimeWhenReadThenEveryEntryCarriesIt) {
  const RecordedProfile p = parseRecordedProfile(v2WithGpu(), 0);
  EXPECT_EQ(p.version, 2);
  ASSERT_TRUE(p.hasGpuTime());
  EXPECT_EQ(p.gpuTime->kernelNs, 50000);
  EXPECT_EQ(p.gpuTime->droppedRecords, 2);
  ASSERT_TRUE(p.ops[0].gpu.has_value());
  EXPECT_EQ(p.ops[0].gpu->ns, 3000);
  EXPECT_DOUBLE_EQ(p.variants[0].gpu->estimatedNs, 6000.0);
  EXPECT_EQ(p.variants[0].gpu->sampledCalls, 4);
}

TEST(ProfileDocumentTest, GivenAVersion3ProfileWhenReadThenItsSnakeCaseKeysGiveTheVersion2Values) {
  ASSERT_TRUE(jsoncase::nonSnakeCaseKeys(v3WithGpu()).empty());
  const RecordedProfile p = parseRecordedProfile(v3WithGpu(), 0);
  EXPECT_EQ(p.version, 3);
  EXPECT_DOUBLE_EQ(p.samplingProb, 0.5);
  ASSERT_TRUE(p.hasGpuTime());
  EXPECT_EQ(p.gpuTime->kernelNs, 50000);
  EXPECT_EQ(p.gpuTime->attributedNs, 3000);
  EXPECT_EQ(p.gpuTime->droppedRecords, 2);
  EXPECT_EQ(p.gpuTime->takenOver, "a profiler");
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_EQ(p.ops[0].sampledCalls, 4);
  EXPECT_DOUBLE_EQ(p.ops[0].estimatedCalls, 8.0);
  ASSERT_TRUE(p.ops[0].gpu.has_value());
  EXPECT_EQ(p.ops[0].gpu->ns, 3000);
  ASSERT_EQ(p.variants.size(), 1u);
  EXPECT_DOUBLE_EQ(p.variants[0].estimatedCalls, 8.0);
  EXPECT_DOUBLE_EQ(p.variants[0].gpu->estimatedNs, 6000.0);
  EXPECT_EQ(p.variants[0].gpu->sampledCalls, 4);
}

TEST(ProfileDocumentTest, GivenDeferredCallsWhenReadThenEntriesCarryThemAndTheCallsThatRan) {
  json p = v3WithGpu();
  p["ops"][0]["deferred_calls"] = 3;
  p["ops"][0]["estimated_deferred_calls"] = 6.0;
  p["variants"][0]["deferred_calls"] = 1;
  p["variants"][0]["estimated_deferred_calls"] = 2.0;
  const RecordedProfile r = parseRecordedProfile(p, 0);
  EXPECT_DOUBLE_EQ(r.ops[0].estimatedDeferredCalls, 6.0);
  EXPECT_DOUBLE_EQ(r.variants[0].estimatedDeferredCalls, 2.0);
  EXPECT_DOUBLE_EQ(r.variants[0].estimatedRunCalls(), 6.0);
  // Absent: none deferred (a profile written before the key, or with nothing deferred).
  const RecordedProfile plain = parseRecordedProfile(v3WithGpu(), 0);
  EXPECT_DOUBLE_EQ(plain.variants[0].estimatedDeferredCalls, 0.0);
  EXPECT_DOUBLE_EQ(plain.variants[0].estimatedRunCalls(), 8.0);
  // More deferred calls than calls, or a negative count: a malformed entry.
  p["variants"][0]["estimated_deferred_calls"] = 9.0;
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p["variants"][0]["estimated_deferred_calls"] = -1.0;
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p["variants"][0]["estimated_deferred_calls"] = "2";
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
}

TEST(ProfileDocumentTest, GivenOneVersionsDocumentSpelledWithTheOtherCaseWhenReadThenItsKeysAreNotFound) {
  // A version 2 document's keys are camelCase: the version 3 spelling is not read there, and the other way round.
  json p = v2WithGpu();
  ASSERT_FALSE(jsoncase::nonSnakeCaseKeys(p).empty());
  p["version"] = 3;
  const RecordedProfile relabelled = parseRecordedProfile(p, 0);
  EXPECT_FALSE(relabelled.gpuTime.has_value());  // "gpuTime", "samplingProb", "estimatedCalls" are unknown keys
  EXPECT_DOUBLE_EQ(relabelled.samplingProb, 0.0);
  EXPECT_DOUBLE_EQ(relabelled.variants[0].estimatedCalls, 0.0);
  EXPECT_FALSE(relabelled.ops[0].gpu.has_value());
  json q = v3WithGpu();
  q["version"] = 2;
  const RecordedProfile r = parseRecordedProfile(q, 0);
  EXPECT_FALSE(r.gpuTime.has_value());
  EXPECT_DOUBLE_EQ(r.samplingProb, 0.0);
  EXPECT_DOUBLE_EQ(r.variants[0].estimatedCalls, 0.0);
}

TEST(ProfileDocumentTest, GivenGpuTimeThatBackedOffWhenReadThenItsStateAndNoEntryTimes) {
  json p = v1();
  p["version"] = 2;
  p["gpuTime"] = {{"source", "cupti"}, {"state", "held-elsewhere"}, {"detail", "CUPTI is held by another tool"}};
  const RecordedProfile r = parseRecordedProfile(p, 0);
  ASSERT_TRUE(r.gpuTime.has_value());
  EXPECT_FALSE(r.hasGpuTime());
  EXPECT_EQ(r.gpuTime->state, "held-elsewhere");
  EXPECT_EQ(r.gpuTime->detail, "CUPTI is held by another tool");
  EXPECT_FALSE(r.variants[0].gpu.has_value());
}

TEST(ProfileDocumentTest, GivenAnotherVersionOrMissingOrMistypedGpuFieldsWhenReadThenError) {
  json p = v2WithGpu();
  p["version"] = 4;
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p = v2WithGpu();
  p["version"] = 0;
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p = v3WithGpu();
  p["variants"][0].erase("gpu_ns");
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p = v2WithGpu();
  p["variants"][0].erase("gpuNs");  // started: every entry carries its time
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p = v2WithGpu();
  p["ops"][0]["gpuNs"] = -1;
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p = v2WithGpu();
  p["gpuTime"]["kernelNs"] = "lots";
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p = v2WithGpu();
  p["ops"] = "none";
  EXPECT_THROW(parseRecordedProfile(p, 0), Error);
  p = v2WithGpu();
  p["variants"][0]["rows"] = 1e300;
  try {
    parseRecordedProfile(p, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed variant"), std::string::npos) << e.what();
    // The nested reason keeps its text, not its throw's source location.
    EXPECT_NE(std::string(e.what()).find("(variant.rows must be an integer"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("JsonFields.cpp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hotkernel
