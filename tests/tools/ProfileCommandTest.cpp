// `hotkernel profile`, run as a subprocess on profiles written here: the table
// and the JSON object, --top and --by, several files merged, and the exit
// codes for a bad file (2) and for GPU time asked of profiles without it (1).

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "CacheTestUtil.h"
#include "RunCli.h"

namespace hotkernel::cli {
namespace {

using cache::test::TempDir;
using nlohmann::json;
using test::runCli;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A key as `version` spells it: camelCase before version 3, snake_case from it (Note [Profile versions]).
const char* key(int version, const char* camelCase, const char* snakeCase) {
  return version >= 3 ? snakeCase : camelCase;
}

json entry(int version, const std::string& op, double calls, double gpuNs) {
  return {{"op", op},
          {key(version, "sampledCalls", "sampled_calls"), 1},
          {key(version, "estimatedCalls", "estimated_calls"), calls},
          {key(version, "gpuNs", "gpu_ns"), static_cast<int64_t>(gpuNs / 2)},
          {key(version, "gpuSampledCalls", "gpu_sampled_calls"), 1},
          {key(version, "estimatedGpuNs", "estimated_gpu_ns"), gpuNs}};
}

// aten::bmm: 7 ms of 10 ms; aten::_softmax: 2 ms in 300 calls; aten::view: most calls, no GPU time.
// Version 3 is what the recorder writes; version 2 the same profile as an older one wrote it.
json profileWithGpu(int version = 3) {
  json softmax = entry(version, "aten::_softmax", 300, 2e6);
  softmax["dtype"] = "float16";
  softmax["device"] = 0;
  softmax["rows"] = 4096;
  softmax["cols"] = 32000;
  return {{"format", "hotkernel-profile"},
          {"version", version},
          {key(version, "samplingProb", "sampling_prob"), 0.5},
          {"ops",
           {entry(version, "aten::view", 900, 0), entry(version, "aten::_softmax", 300, 2e6),
            entry(version, "aten::bmm", 100, 7e6)}},
          {"variants", {softmax}},
          {key(version, "gpuTime", "gpu_time"),
           {{"source", "cupti"},
            {"state", "started"},
            {key(version, "kernelNs", "kernel_ns"), 10000000},
            {"kernels", 400},
            {key(version, "attributedNs", "attributed_ns"), 4500000},
            {key(version, "droppedRecords", "dropped_records"), 0},
            {"evicted", 0}}}};
}

json profileV1() {
  return {{"format", "hotkernel-profile"},
          {"version", 1},
          {"samplingProb", 0.05},
          {"ops", {{{"op", "aten::view"}, {"sampledCalls", 5}, {"estimatedCalls", 100.0}}}},
          {"variants", json::array()}};
}

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.sub(name);
  std::ofstream(path) << text;
  return path;
}

TEST(ProfileCommandTest, GivenAProfileWithGpuTimeWhenShownThenOpsRankedByGpuTimeWithShareAndServed) {
  TempDir tmp;
  const std::string p = write(tmp, "p.json", profileWithGpu().dump());
  auto r = runCli({"profile", p, "--dir", tmp.sub("cache")});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ranked by GPU time")) << r.out;
  const size_t mm = r.out.find("aten::bmm");
  const size_t softmax = r.out.find("aten::_softmax");
  const size_t view = r.out.find("aten::view");
  ASSERT_NE(mm, std::string::npos) << r.out;
  EXPECT_LT(mm, softmax) << r.out;
  EXPECT_LT(softmax, view) << r.out;
  EXPECT_TRUE(contains(r.out, "70.0%")) << r.out;
  EXPECT_TRUE(contains(r.out, "7.00 ms")) << r.out;
  EXPECT_TRUE(contains(r.out, "dtype=float16;rows=4096;cols=32000")) << r.out;
  EXPECT_TRUE(contains(r.out, "softmax_lastdim")) << r.out;
  EXPECT_TRUE(contains(r.out, "ops a family of this build serves: 20.0% of the GPU time")) << r.out;
}

// Note [Opt-in ops in the view]: a served op outside HOTKERNEL_OPS' default is marked opt-in, and the line below
// the table names what to add; a profile with no such op prints no such line.
TEST(ProfileCommandTest, GivenAnOptInOpInTheProfileWhenShownThenItIsMarkedAndTheOpsToNameAreSaid) {
  TempDir tmp;
  json p = profileWithGpu();
  p["ops"].push_back(entry(3, "aten::native_group_norm", 50, 5e5));
  const std::string path = write(tmp, "p.json", p.dump());
  auto r = runCli({"profile", path, "--dir", tmp.sub("cache")});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const size_t row = r.out.find("aten::native_group_norm");
  ASSERT_NE(row, std::string::npos) << r.out;
  EXPECT_TRUE(contains(r.out.substr(row, r.out.find('\n', row) - row), "opt-in")) << r.out;
  EXPECT_TRUE(contains(r.out, "opt-in: served only when named in HOTKERNEL_OPS, e.g. HOTKERNEL_OPS=_softmax,"))
      << r.out;
  EXPECT_TRUE(contains(r.out, ",min.dim,native_group_norm\n")) << r.out;

  auto plain = runCli({"profile", write(tmp, "q.json", profileWithGpu().dump()), "--dir", tmp.sub("cache")});
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  EXPECT_FALSE(contains(plain.out, "opt-in")) << plain.out;
}

TEST(ProfileCommandTest, GivenJsonWhenShownThenOneObjectWithFormatAndVersionFirstAndTopApplied) {
  TempDir tmp;
  const std::string p = write(tmp, "p.json", profileWithGpu().dump());
  auto r = runCli({"profile", p, "--json", "--top", "2", "--dir", tmp.sub("cache")});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\n  \"format\": \"hotkernel-profile-view\",\n  \"version\": 3,", 0), 0u) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["ranked_by"], "gpu_time");
  EXPECT_EQ(j["shown_ops"], 2);
  ASSERT_EQ(j["ops"].size(), 2u);
  EXPECT_EQ(j["ops"][0]["op"], "aten::bmm");
  EXPECT_EQ(j["ops"][0]["served"], false);
  EXPECT_TRUE(j["ops"][0]["opt_in"].is_null());
  EXPECT_TRUE(j["ops"][1]["opt_in"].is_null());  // _softmax: in HOTKERNEL_OPS' default
  EXPECT_DOUBLE_EQ(j["ops"][0]["share"].get<double>(), 0.7);
  EXPECT_EQ(j["ops"][1]["variants"][0]["family"], "softmax_lastdim");
  // No cache here: nothing is cached for any variant, whatever the machine.
  EXPECT_TRUE(j["ops"][1]["variants"][0]["cached"].is_null());
  EXPECT_EQ(j["cache"]["found"], false);
}

TEST(ProfileCommandTest, GivenCallsFusedChainsTookWhenShownThenTheTableAndJsonSayWhichShare) {
  TempDir tmp;
  json p = profileWithGpu();
  p["ops"][1]["estimated_deferred_calls"] = 225.0;  // aten::_softmax: 3 of its 4 calls
  p["variants"][0]["estimated_deferred_calls"] = 225.0;
  const std::string path = write(tmp, "p.json", p.dump());
  auto r = runCli({"profile", path, "--dir", tmp.sub("cache")});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "IN CHAINS")) << r.out;
  const size_t row = r.out.find("aten::_softmax");
  ASSERT_NE(row, std::string::npos) << r.out;
  EXPECT_TRUE(contains(r.out.substr(row, r.out.find('\n', row) - row), "75")) << r.out;
  auto j = runCli({"profile", path, "--json", "--dir", tmp.sub("cache")});
  ASSERT_EQ(j.exitCode, 0) << j.err;
  const json view = json::parse(j.out);
  for (const json& op : view["ops"]) {
    const double want = op["op"] == "aten::_softmax" ? 225.0 : 0.0;
    EXPECT_DOUBLE_EQ(op["estimated_deferred_calls"].get<double>(), want) << op.dump();
  }
  // No call deferred: no such column.
  auto plain = runCli({"profile", write(tmp, "q.json", profileWithGpu().dump()), "--dir", tmp.sub("cache")});
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  EXPECT_FALSE(contains(plain.out, "IN CHAINS")) << plain.out;
}

TEST(ProfileCommandTest, GivenTheSameProfileAsVersion2AndAsVersion3WhenShownAsJsonThenTheSameView) {
  TempDir tmp;
  json views[2];
  for (int version : {2, 3}) {
    const std::string p = write(tmp, "v" + std::to_string(version) + ".json", profileWithGpu(version).dump());
    auto r = runCli({"profile", p, "--json", "--dir", tmp.sub("cache")});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    views[version - 2] = json::parse(r.out);
    views[version - 2].erase("files");
  }
  EXPECT_EQ(views[0]["ranked_by"], "gpu_time");
  EXPECT_DOUBLE_EQ(views[0]["total_gpu_ns"].get<double>(), 1e7);
  EXPECT_EQ(views[0], views[1]) << views[0].dump() << "\n" << views[1].dump();
}

TEST(ProfileCommandTest, GivenByCallsAndTwoProfilesWhenShownThenMergedAndRankedByCalls) {
  TempDir tmp;
  const std::string a = write(tmp, "a.json", profileWithGpu().dump());
  const std::string b = write(tmp, "b.json", profileV1().dump());
  auto r = runCli({"profile", a, b, "--json", "--by", "calls", "--dir", tmp.sub("cache")});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["ranked_by"], "calls");
  EXPECT_EQ(j["profiles_with_gpu_time"], 1);
  EXPECT_EQ(j["ops"][0]["op"], "aten::view");
  EXPECT_DOUBLE_EQ(j["ops"][0]["estimated_calls"].get<double>(), 1000.0);
  EXPECT_TRUE(j["ops"][0]["estimated_gpu_ns"].is_null());
}

TEST(ProfileCommandTest, GivenByGpuTimeOfProfilesWithoutItWhenShownThenExit1WithOneLine) {
  TempDir tmp;
  const std::string p = write(tmp, "p.json", profileV1().dump());
  auto r = runCli({"profile", p, "--by", "gpu-time"});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "no profile carries GPU time (record with HOTKERNEL_CUPTI=1)")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(ProfileCommandTest, GivenABadFileWhenShownThenExit2WithOneLineNamingItAndNoSourceLocation) {
  TempDir tmp;
  const std::string notJson = write(tmp, "x.json", "{not json");
  const std::string other = write(tmp, "o.json", R"({"format": "something-else", "version": 1})");
  json bad = profileWithGpu();
  bad["variants"][0]["rows"] = "many";
  const std::string malformed = write(tmp, "m.json", bad.dump());
  for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
           {notJson, notJson + " is not valid JSON, not a hotkernel profile"},
           {other, other + " is not a hotkernel profile (format hotkernel-profile, version 1 to 3)"},
           {malformed, malformed + " malformed variant in the profile"},
           {tmp.sub("missing.json"), "cannot read " + tmp.sub("missing.json")},
           {tmp.path(), "cannot read " + tmp.path() + ": it is a directory"}}) {
    auto r = runCli({"profile", path});
    EXPECT_EQ(r.exitCode, 2) << path << ": " << r.err;
    EXPECT_TRUE(contains(r.err, message)) << r.err;
    EXPECT_FALSE(contains(r.err, ".cpp:")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  auto r = runCli({"profile"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  r = runCli({"profile", notJson, "--by", "speed"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
}

}  // namespace
}  // namespace hotkernel::cli
