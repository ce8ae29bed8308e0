// Tests of the agent protocol's documents (optimizer/agent/include/hotkernel/optimizer/AgentTask.h):
// the task round trip, the softmax task's content, and every reply rule R1-R8.

#include <gtest/gtest.h>

#include <string>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using nlohmann::json;

kernels::SoftmaxVariant bf16Variant() { return kernels::SoftmaxVariant{kernels::DType::BFloat16, 4096, 32000}; }

const char* kKernel =
    R"(extern "C" __global__ void my_softmax(const void* in, void* out, long long rows, long long cols) {})";

json validReply() {
  return {{"format", "hotkernel-agent-reply"},
          {"version", 1},
          {"source", kKernel},
          {"kernelName", "my_softmax"},
          {"launch", {{"block", 256}, {"rowsPerBlock", 1}, {"sharedBytes", 0}}},
          {"notes", "first try"}};
}

// The message of the Error that parsing `reply` throws ("" when it does not throw).
std::string rejection(const json& reply) {
  try {
    AgentReply::fromJson(reply);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string rejectionOfText(const std::string& text) {
  try {
    AgentReply::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REJECTED_WITH(message, fragment) \
  EXPECT_NE((message).find(fragment), std::string::npos) << "message: " << (message)

TEST(AgentTaskTest, givenValidReplyText_whenParsed_thenEveryFieldIsKept) {
  const AgentReply r = AgentReply::parse(validReply().dump());
  EXPECT_EQ(r.source, kKernel);
  EXPECT_EQ(r.kernelName, "my_softmax");
  EXPECT_EQ(r.launch, (AgentLaunch{256, 1, 0}));
  EXPECT_EQ(r.notes, "first try");
  EXPECT_EQ(AgentReply::fromJson(r.toJson()), r);
}

TEST(AgentTaskTest, givenReplyWithoutNotes_whenParsed_thenNotesAreEmpty) {
  json j = validReply();
  j.erase("notes");
  EXPECT_EQ(AgentReply::fromJson(j).notes, "");
}

TEST(AgentTaskTest, givenTextThatIsNotOneJsonObject_whenParsed_thenR1Rejects) {
  EXPECT_REJECTED_WITH(rejectionOfText("{this is not json"), "R1");
  EXPECT_REJECTED_WITH(rejectionOfText(""), "R1");
  EXPECT_REJECTED_WITH(rejectionOfText(validReply().dump() + " trailing"), "R1");
  EXPECT_REJECTED_WITH(rejectionOfText("[1, 2]"), "R1");
  EXPECT_REJECTED_WITH(rejectionOfText(std::string(100000, '[') + std::string(100000, ']')), "nested deeper");
}

TEST(AgentTaskTest, givenWrongFormatOrVersion_whenParsed_thenR2Rejects) {
  json j = validReply();
  j["format"] = "hotkernel-agent-task";
  EXPECT_REJECTED_WITH(rejection(j), "R2");
  j = validReply();
  j["version"] = 2;
  EXPECT_REJECTED_WITH(rejection(j), "R2");
  j = validReply();
  j.erase("version");
  EXPECT_REJECTED_WITH(rejection(j), "R2");
}

TEST(AgentTaskTest, givenMissingOrUnknownKeys_whenParsed_thenR3Rejects) {
  for (const char* key : {"source", "kernelName", "launch"}) {
    json j = validReply();
    j.erase(key);
    EXPECT_REJECTED_WITH(rejection(j), std::string("R3: \"") + key + "\" is missing");
  }
  json j = validReply();
  j["kernel_name"] = "my_softmax";
  EXPECT_REJECTED_WITH(rejection(j), "R3: unknown key \"kernel_name\"");
}

TEST(AgentTaskTest, givenBadSource_whenParsed_thenR4Rejects) {
  json j = validReply();
  j["source"] = 42;
  EXPECT_REJECTED_WITH(rejection(j), "R4");
  j["source"] = "";
  EXPECT_REJECTED_WITH(rejection(j), "R4");
  j["source"] = std::string(kKernel) + std::string(kAgentMaxSourceBytes, ' ');
  EXPECT_REJECTED_WITH(rejection(j), "more than 1048576");
  j["source"] = std::string(kKernel) + std::string("\0", 1);
  EXPECT_REJECTED_WITH(rejection(j), "NUL");
}

TEST(AgentTaskTest, givenIncludeInAnySpelling_whenParsed_thenR5Rejects) {
  const std::string spellings[] = {
      "#include <cuda_fp16.h>\n",
      "  #  include \"/etc/passwd\"\n",
      "#/* hidden */include <x>\n",
      "# /* spans\n lines */ include <x>\n",
      "%:include <x>\n",
      "?\?=include <x>\n",
      "#inc\\\nlude <x>\n",
      "#\\\ninclude <x>\n",
      "#include_next <x>\n",
      "#import <x>\n",
      "// a comment that says #include\n",
      "const char* s = \"#include\";\n",
      "#\\u0069nclude <x>\n",
  };
  for (const std::string& s : spellings) {
    EXPECT_TRUE(holdsIncludeDirective(s)) << s;
    json j = validReply();
    j["source"] = s + kKernel;
    EXPECT_REJECTED_WITH(rejection(j), "R5");
  }
}

TEST(AgentTaskTest, givenOtherDirectives_whenChecked_thenR5Accepts) {
  EXPECT_FALSE(holdsIncludeDirective("#define HK_VEC 8\n#pragma unroll\n#if X\n#error no\n#endif\n"));
  EXPECT_FALSE(holdsIncludeDirective("int include = 1; // includes no header\n"));
  EXPECT_FALSE(holdsIncludeDirective(kernels::SoftmaxFamily::source()));
}

TEST(AgentTaskTest, givenBadKernelName_whenParsed_thenR6Rejects) {
  for (const std::string& name : {std::string(""), std::string("9lives"), std::string("my-softmax"), std::string("a b"),
                                  std::string("my_softmax();"), std::string(300, 'k')}) {
    json j = validReply();
    j["kernelName"] = name;
    EXPECT_REJECTED_WITH(rejection(j), "R6");
  }
  json j = validReply();
  j["kernelName"] = 7;
  EXPECT_REJECTED_WITH(rejection(j), "R6");
  j["kernelName"] = "other_kernel";
  EXPECT_REJECTED_WITH(rejection(j), "does not occur");
  EXPECT_TRUE(isCIdentifier("_k9"));
  EXPECT_FALSE(isCIdentifier("k.9"));
}

TEST(AgentTaskTest, givenBadLaunch_whenParsed_thenR7Rejects) {
  const json bad[] = {
      {{"block", 100}, {"rowsPerBlock", 1}, {"sharedBytes", 0}},               // not a multiple of 32
      {{"block", 0}, {"rowsPerBlock", 1}, {"sharedBytes", 0}},                 // below 32
      {{"block", 2048}, {"rowsPerBlock", 1}, {"sharedBytes", 0}},              // above 1024
      {{"block", 256.0}, {"rowsPerBlock", 1}, {"sharedBytes", 0}},             // not an integer
      {{"block", "256"}, {"rowsPerBlock", 1}, {"sharedBytes", 0}},             // a string
      {{"block", 256}, {"rowsPerBlock", 0}, {"sharedBytes", 0}},               // no rows
      {{"block", 256}, {"rowsPerBlock", 70000}, {"sharedBytes", 0}},           // too many rows
      {{"block", 256}, {"rowsPerBlock", 1}, {"sharedBytes", 227 * 1024 + 1}},  // over 227 KiB
      {{"block", 256}, {"rowsPerBlock", 1}, {"sharedBytes", -1}},              // negative
      {{"block", 256}, {"rowsPerBlock", 1}},                                   // missing sharedBytes
      {{"block", 256}, {"rowsPerBlock", 1}, {"sharedBytes", 0}, {"grid", 9}},  // unknown key
      json::array({256, 1, 0}),                                                // not an object
  };
  for (const json& launch : bad) {
    json j = validReply();
    j["launch"] = launch;
    EXPECT_REJECTED_WITH(rejection(j), "R7") << launch.dump();
  }
  json j = validReply();
  j["launch"] = {{"block", 1024}, {"rowsPerBlock", 65536}, {"sharedBytes", 227 * 1024}};
  EXPECT_EQ(rejection(j), "");
}

TEST(AgentTaskTest, givenBadNotes_whenParsed_thenR8Rejects) {
  json j = validReply();
  j["notes"] = json::object();
  EXPECT_REJECTED_WITH(rejection(j), "R8");
  j["notes"] = std::string(kAgentMaxNotesBytes + 1, 'n');
  EXPECT_REJECTED_WITH(rejection(j), "R8");
}

TEST(AgentTaskTest, givenLaunch_whenGeometryForRows_thenGridCoversRowGroupsAndIsClamped) {
  const AgentLaunch launch{128, 8, 4096};
  kernels::LaunchGeometry g = launch.geometry(17);
  EXPECT_EQ(g.gridX, 3u);
  EXPECT_EQ(g.blockX, 128u);
  EXPECT_EQ(g.sharedBytes, 4096u);
  EXPECT_EQ(launch.geometry(16).gridX, 2u);
  EXPECT_EQ(launch.geometry(1).gridX, 1u);
  EXPECT_EQ(AgentLaunch{}.geometry(int64_t{1} << 40).gridX, 2147483647u);
  EXPECT_THROW(launch.geometry(0), Error);
}

TEST(AgentTaskTest, givenFamilyPoint_whenLaunchAndSourceAreBuilt_thenTheyMatchTheFamily) {
  const AgentTask task = makeSoftmaxAgentTask(bf16Variant(), "sm_90a");
  const auto space = kernels::SoftmaxFamily::parameterSpace(bf16Variant());
  ASSERT_EQ(task.family.points.size(), space.size());
  ASSERT_FALSE(space.empty());
  for (size_t i = 0; i < space.size(); ++i) {
    const AgentFamilyPoint& p = task.family.points[i];
    EXPECT_EQ(kernels::SoftmaxParams::fromJson(p.params), space[i]);
    const kernels::LaunchGeometry mine = p.launch.geometry(bf16Variant().rows);
    const kernels::LaunchGeometry family = kernels::SoftmaxFamily::launchGeometry(bf16Variant(), space[i]);
    EXPECT_EQ(mine.gridX, family.gridX);
    EXPECT_EQ(mine.blockX, family.blockX);
    EXPECT_EQ(mine.sharedBytes, family.sharedBytes);
    EXPECT_EQ(p.defines.at("HK_DTYPE"), "2");
    EXPECT_EQ(p.defines.at("HK_THREADS"), std::to_string(space[i].threads));
  }
  const std::string specialized = specializeSource(task.family.source, task.family.points[0].defines);
  EXPECT_EQ(specialized.rfind("#define HK_DTYPE 2\n#define HK_ITEMS ", 0), 0u) << specialized.substr(0, 200);
  EXPECT_NO_THROW(checkAgentSource(specialized));
}

TEST(AgentTaskTest, givenSoftmaxVariant_whenTaskIsMade_thenItStatesSemanticsAbiAndTarget) {
  const AgentTask task = makeSoftmaxAgentTask(bf16Variant(), "sm_90a");
  EXPECT_EQ(task.op, "aten::_softmax");
  EXPECT_NE(task.semantics.find("-inf is NaN"), std::string::npos) << task.semantics;
  EXPECT_NE(task.semantics.find("NaN"), std::string::npos);
  EXPECT_DOUBLE_EQ(task.tolerance, 1.0 / 256.0);
  EXPECT_EQ(task.abiSignature,
            "extern \"C\" __global__ void <kernelName>(const void* in, void* out, long long rows, long long cols)");
  EXPECT_GE(task.abiRules.size(), 5u);
  EXPECT_EQ(task.compileOptions,
            (std::vector<std::string>{"--gpu-architecture=sm_90a", "-std=c++17", "-default-device"}));
  EXPECT_EQ(task.family.kernelName, "hk_softmax_lastdim");
  EXPECT_FALSE(task.best.has_value());
  EXPECT_FALSE(task.lastAttempt.has_value());
  EXPECT_EQ(task.attempt, 1);

  const json j = task.toJson();
  EXPECT_EQ(j.at("format"), "hotkernel-agent-task");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("variant").at("dtype"), "bfloat16");
  EXPECT_EQ(j.at("limits").at("maxSharedBytes"), 232448);
  EXPECT_TRUE(j.at("best").is_null());
  EXPECT_TRUE(j.at("lastAttempt").is_null());
}

TEST(AgentTaskTest, givenVariantTheFamilyCannotServe_whenTaskIsMade_thenErrorIsThrown) {
  EXPECT_THROW(makeSoftmaxAgentTask(kernels::SoftmaxVariant{kernels::DType::Float32, 0, 128}, "sm_90a"), Error);
}

TEST(AgentTaskTest, givenTaskWithBestAndFeedback_whenRoundTripped_thenEveryFieldSurvives) {
  AgentTask task = makeSoftmaxAgentTask(bf16Variant(), "sm_90a");
  AgentBest best;
  best.origin = "family";
  best.kernel.source = specializeSource(task.family.source, task.family.points[0].defines);
  best.kernel.kernelName = task.family.kernelName;
  best.kernel.launch = task.family.points[0].launch;
  best.timing = AgentTiming{310.5, 201.25, 1.5432};
  task.best = best;
  AgentFeedback feedback;
  feedback.stage = AgentStage::Compile;
  feedback.error = "NVRTC failed to compile agent.cu";
  feedback.log = "agent.cu(3): error: expected a \";\"";
  feedback.reply = AgentReply::fromJson(validReply());
  task.lastAttempt = feedback;
  task.attempt = 2;

  const AgentTask back = AgentTask::fromJson(json::parse(task.serialize()));
  EXPECT_EQ(back.op, task.op);
  EXPECT_EQ(back.variant.dtype, task.variant.dtype);
  EXPECT_EQ(back.variant.rows, 4096);
  EXPECT_EQ(back.variant.cols, 32000);
  EXPECT_EQ(back.semantics, task.semantics);
  EXPECT_DOUBLE_EQ(back.tolerance, task.tolerance);
  EXPECT_EQ(back.arch, "sm_90a");
  EXPECT_EQ(back.compileOptions, task.compileOptions);
  EXPECT_EQ(back.abiSignature, task.abiSignature);
  EXPECT_EQ(back.abiRules, task.abiRules);
  EXPECT_EQ(back.family.source, task.family.source);
  ASSERT_EQ(back.family.points.size(), task.family.points.size());
  EXPECT_EQ(back.family.points[1].defines, task.family.points[1].defines);
  EXPECT_EQ(back.family.points[1].launch, task.family.points[1].launch);
  EXPECT_EQ(back.family.points[1].params, task.family.points[1].params);
  ASSERT_TRUE(back.best.has_value());
  EXPECT_EQ(back.best->kernel, best.kernel);
  EXPECT_EQ(back.best->timing, best.timing);
  ASSERT_TRUE(back.lastAttempt.has_value());
  EXPECT_EQ(back.lastAttempt->stage, AgentStage::Compile);
  EXPECT_FALSE(back.lastAttempt->passed);
  EXPECT_EQ(back.lastAttempt->error, feedback.error);
  EXPECT_EQ(back.lastAttempt->log, feedback.log);
  EXPECT_FALSE(back.lastAttempt->timing.has_value());
  ASSERT_TRUE(back.lastAttempt->reply.has_value());
  EXPECT_EQ(*back.lastAttempt->reply, *feedback.reply);
  EXPECT_EQ(back.attempt, 2);
}

TEST(AgentTaskTest, givenHugeLogOrInvalidUtf8_whenSerialized_thenLogIsCutAndTextIsValidJson) {
  AgentTask task = makeSoftmaxAgentTask(bf16Variant(), "sm_90a");
  AgentFeedback feedback;
  feedback.stage = AgentStage::Compile;
  feedback.log = std::string(kAgentMaxLogBytes * 2, 'e') + "\xff\xfe";
  task.lastAttempt = feedback;
  const std::string text = task.serialize();
  const AgentTask back = AgentTask::fromJson(json::parse(text));
  EXPECT_LT(back.lastAttempt->log.size(), kAgentMaxLogBytes + 100);
  EXPECT_NE(back.lastAttempt->log.find("bytes cut"), std::string::npos);
}

TEST(AgentTaskTest, givenMalformedTask_whenRead_thenErrorNamesTheField) {
  json j = makeSoftmaxAgentTask(bf16Variant(), "sm_90a").toJson();
  j["version"] = 2;
  EXPECT_THROW(AgentTask::fromJson(j), Error);
  j = makeSoftmaxAgentTask(bf16Variant(), "sm_90a").toJson();
  j["variant"]["rows"] = "many";
  try {
    AgentTask::fromJson(j);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("variant.rows must be an integer"), std::string::npos) << e.what();
  }
  j = makeSoftmaxAgentTask(bf16Variant(), "sm_90a").toJson();
  j["lastAttempt"] = {{"stage", "linking"}, {"passed", false}, {"error", ""}, {"log", ""}};
  EXPECT_THROW(AgentTask::fromJson(j), Error);
}

TEST(AgentTaskTest, givenStageNames_whenParsed_thenEveryStageRoundTrips) {
  for (AgentStage s : {AgentStage::Agent, AgentStage::Reply, AgentStage::Compile, AgentStage::Load,
                       AgentStage::Correctness, AgentStage::Benchmark}) {
    EXPECT_EQ(parseAgentStage(agentStageName(s)), s);
  }
  EXPECT_THROW(parseAgentStage("Compile"), Error);
}

TEST(AgentTaskTest, givenCompileOptions_whenConvertedToDefines_thenNamesMapToValues) {
  const auto d = definesFromOptions({"-DHK_VEC=8", "-DHK_FLAG"});
  EXPECT_EQ(d.at("HK_VEC"), "8");
  EXPECT_EQ(d.at("HK_FLAG"), "1");
  EXPECT_THROW(definesFromOptions({"-lineinfo"}), Error);
  EXPECT_THROW(specializeSource("x", {{"BAD NAME", "1"}}), Error);
}

}  // namespace
}  // namespace hotkernel
