// `hotkernel doctor`, run as a subprocess: the JSON document's fields, the
// table, the cache verdict, the variables in effect, and the exit code that
// says whether a serving process would be served. Holds with and without
// torch, a driver or a GPU: what the machine lacks is checked to be reported.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "CacheTestUtil.h"
#include "remote/RedisServer.h"
#include "RunCli.h"
#include "hotkernel/cache/CacheStore.h"

namespace hotkernel::cli {
namespace {

using cache::CacheStore;
using cache::test::kernelEntry;
using cache::test::TempDir;
using nlohmann::json;
using test::runCli;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// `doctor --json` with `env`; fails the test unless it printed one JSON object and exited by its verdict.
json doctorJson(std::map<std::string, std::optional<std::string>> env) {
  auto r = runCli({"doctor", "--json"}, std::move(env));
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  if (j.is_discarded() || !j.is_object()) return json::object();
  EXPECT_EQ(r.exitCode, j.value("ready", false) ? 0 : 1) << r.out;
  return j;
}

bool anyProblemContains(const json& j, const std::string& text) {
  for (const json& p : j["problems"]) {
    if (contains(p.get<std::string>(), text)) return true;
  }
  return false;
}

TEST(DoctorCommandTest, GivenJsonWhenDoctorThenOneObjectWithEveryField) {
  TempDir tmp;
  json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.sub("cache")}});
  EXPECT_EQ(j["format"], "hotkernel-doctor");
  EXPECT_EQ(j["version"], 1);
  ASSERT_TRUE(j["ready"].is_boolean());
  ASSERT_TRUE(j["problems"].is_array());
  EXPECT_EQ(j["ready"].get<bool>(), j["problems"].empty());
  EXPECT_TRUE(j["hotkernel_version"].is_string());
  for (const char* key : {"built_with", "version", "full_version", "cuda_runtime"}) {
    EXPECT_TRUE(j["torch"].contains(key)) << key;
  }
  // The binary's path as /proc/self/exe gives it: symlinks in the build directory's path resolved.
  EXPECT_EQ(j["preload"]["path"],
            std::filesystem::canonical(HOTKERNEL_TEST_BINARY_DIR "/lib/libhotkernel_preload.so").string());
  EXPECT_EQ(j["preload"]["found"], true);
  EXPECT_TRUE(j["library"]["found"].is_boolean());
  EXPECT_TRUE(j["cuda_driver"]["found"].is_boolean());
  EXPECT_TRUE(j["devices"].is_array());
  EXPECT_TRUE(j["nvrtc"]["found"].is_boolean());
  EXPECT_EQ(j["cache"]["directory"], tmp.sub("cache"));
  EXPECT_EQ(j["cache"]["verdict"], "absent");
  EXPECT_EQ(j["enabled"], true);
  EXPECT_EQ(j["optimize"], true);
  EXPECT_TRUE(j["environment"].is_array());
}

TEST(DoctorCommandTest, GivenWhatTheMachineLacksWhenDoctorThenEachIsAProblem) {
  TempDir tmp;
  json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.path()}});
  if (j["devices"].empty()) EXPECT_TRUE(anyProblemContains(j, "no CUDA device")) << j.dump(2);
  if (!j["torch"]["built_with"].get<bool>()) {
    EXPECT_EQ(j["torch"]["version"], nullptr);
    EXPECT_TRUE(anyProblemContains(j, "torch-free")) << j.dump(2);
  }
  if (!j["nvrtc"]["found"].get<bool>()) EXPECT_TRUE(anyProblemContains(j, "NVRTC")) << j.dump(2);
  for (const json& d : j["devices"]) {
    EXPECT_TRUE(d["fingerprint"].is_string() || d["fingerprint_note"].is_string()) << d.dump();
  }
}

TEST(DoctorCommandTest, GivenFilledCacheWhenDoctorThenOkWithItsEntries) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  store->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=32000;dev=0"));
  store.reset();
  json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.path()}});
  EXPECT_EQ(j["cache"]["verdict"], "ok");
  EXPECT_EQ(j["cache"]["entries"], 1);
  EXPECT_FALSE(anyProblemContains(j, "cache")) << j.dump(2);
}

TEST(DoctorCommandTest, GivenWorldWritableCacheWhenDoctorThenRefusedProblemAndExitOne) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto r = runCli({"doctor", "--json"}, {{"HOTKERNEL_CACHE_DIR", dir}});
  EXPECT_EQ(r.exitCode, 1) << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["ready"], false);
  EXPECT_EQ(j["cache"]["verdict"], "refused");
  const std::string detail = j["cache"]["detail"];
  EXPECT_TRUE(contains(detail, "writable by group or others")) << detail;
  EXPECT_FALSE(contains(detail, ".cpp:")) << detail;
  EXPECT_TRUE(anyProblemContains(j, "the cache is refused")) << r.out;
  ::chmod(dir.c_str(), 0700);
}

TEST(DoctorCommandTest, GivenReadOnlyCachesWhenDoctorThenEachTierHasTheVerdictAServingProcessWouldReachAndStaysReady) {
  TempDir tmp;
  const std::string good = tmp.sub("baked"), unsafe = tmp.sub("unsafe"), none = tmp.sub("none");
  {
    auto store = CacheStore::open(good);
    store->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=32000;dev=0"));
  }
  ASSERT_EQ(::mkdir(unsafe.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(unsafe.c_str(), 0777), 0);
  json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.sub("own")}, {"HOTKERNEL_CACHE_PATH", good + ":" + unsafe + ":" + none}});
  ASSERT_EQ(j["cache_tiers"].size(), 3u) << j.dump(2);
  EXPECT_EQ(j["cache_tiers"][0]["directory"], good);
  EXPECT_EQ(j["cache_tiers"][0]["verdict"], "ok");
  EXPECT_EQ(j["cache_tiers"][0]["entries"], 1);
  EXPECT_EQ(j["cache_tiers"][1]["verdict"], "refused");
  const std::string detail = j["cache_tiers"][1]["detail"];
  EXPECT_TRUE(contains(detail, "writable by group or others")) << detail;
  EXPECT_FALSE(contains(detail, ".cpp:")) << detail;
  EXPECT_EQ(j["cache_tiers"][2]["verdict"], "absent");
  EXPECT_EQ(j["cache_tiers"][2]["entries"], nullptr);
  // A tier a serving process skips keeps it from nothing: not a problem.
  EXPECT_FALSE(anyProblemContains(j, "unsafe")) << j.dump(2);
  const auto text = runCli({"doctor"}, {{"HOTKERNEL_CACHE_DIR", tmp.sub("own")}, {"HOTKERNEL_CACHE_PATH", unsafe}});
  EXPECT_TRUE(contains(text.out, "cache tier 1")) << text.out;
  EXPECT_TRUE(contains(text.out, "refused")) << text.out;
  ::chmod(unsafe.c_str(), 0700);
}

TEST(DoctorCommandTest, GivenHotkernelVariablesWhenDoctorThenEachWithWhatItResolvesTo) {
  TempDir tmp;
  json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.path()},
                       {"HOTKERNEL_HOT_CALLS", "lots"},
                       {"HOTKERNEL_IDLE_MS", "99999999999"},
                       {"HOTKERNEL_SAMPLE", "0.5"},
                       {"HOTKERNEL_OPTIMIZE", "0"},
                       {"HOTKERNEL_CAHCE_DIR", "/typo"}});
  std::map<std::string, json> byName;
  for (const json& v : j["environment"]) byName[v["name"]] = v;
  ASSERT_EQ(byName.count("HOTKERNEL_HOT_CALLS"), 1u) << j.dump(2);
  EXPECT_EQ(byName["HOTKERNEL_HOT_CALLS"]["value"], "lots");
  EXPECT_EQ(byName["HOTKERNEL_HOT_CALLS"]["resolved"], "50");  // Note [Reading numeric variables]: the default
  EXPECT_EQ(byName["HOTKERNEL_IDLE_MS"]["resolved"], "86400000 ms");  // the maximum
  EXPECT_EQ(byName["HOTKERNEL_SAMPLE"]["resolved"], "0.5");
  EXPECT_EQ(byName["HOTKERNEL_CACHE_DIR"]["resolved"], tmp.path());
  EXPECT_EQ(byName["HOTKERNEL_CAHCE_DIR"]["known"], false);
  EXPECT_EQ(byName["HOTKERNEL_HOT_CALLS"]["known"], true);
  EXPECT_EQ(j["optimize"], false);
}

TEST(DoctorCommandTest, GivenHotkernelNvtxWhenDoctorThenKnownAndResolvedToOnOrOff) {
  TempDir tmp;
  for (const auto& [value, resolved] : {std::pair<std::string, std::string>{"0", "off"}, {"1", "on"}, {"loud", "on"}}) {
    json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.path()}, {"HOTKERNEL_NVTX", value}});
    std::map<std::string, json> byName;
    for (const json& v : j["environment"]) byName[v["name"]] = v;
    ASSERT_EQ(byName.count("HOTKERNEL_NVTX"), 1u) << j.dump(2);
    EXPECT_EQ(byName["HOTKERNEL_NVTX"]["known"], true);
    EXPECT_EQ(byName["HOTKERNEL_NVTX"]["resolved"].get<std::string>().rfind(resolved + ":", 0), 0u)
        << value << ": " << byName["HOTKERNEL_NVTX"].dump();
  }
}

TEST(DoctorCommandTest, GivenHotkernelFusionStartWhenDoctorThenKnownAndResolvedToAlwaysOrBusy) {
  TempDir tmp;
  for (const auto& [value, resolved] :
       {std::pair<std::string, std::string>{"busy", "busy"}, {"always", "always"}, {"sometimes", "always"}}) {
    json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.path()}, {"HOTKERNEL_FUSION_START", value}});
    std::map<std::string, json> byName;
    for (const json& v : j["environment"]) byName[v["name"]] = v;
    ASSERT_EQ(byName.count("HOTKERNEL_FUSION_START"), 1u) << j.dump(2);
    EXPECT_EQ(byName["HOTKERNEL_FUSION_START"]["known"], true);
    EXPECT_EQ(byName["HOTKERNEL_FUSION_START"]["resolved"].get<std::string>().rfind(resolved + ":", 0), 0u)
        << value << ": " << byName["HOTKERNEL_FUSION_START"].dump();
  }
}

TEST(DoctorCommandTest, GivenHotkernelFusionRoundingWhenDoctorThenKnownAndResolvedToFusedOrEager) {
  TempDir tmp;
  for (const auto& [value, resolved] :
       {std::pair<std::string, std::string>{"eager", "eager"}, {"fused", "fused"}, {"exact", "fused"}}) {
    json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.path()}, {"HOTKERNEL_FUSION_ROUNDING", value}});
    std::map<std::string, json> byName;
    for (const json& v : j["environment"]) byName[v["name"]] = v;
    ASSERT_EQ(byName.count("HOTKERNEL_FUSION_ROUNDING"), 1u) << j.dump(2);
    EXPECT_EQ(byName["HOTKERNEL_FUSION_ROUNDING"]["known"], true);
    EXPECT_EQ(byName["HOTKERNEL_FUSION_ROUNDING"]["resolved"].get<std::string>().rfind(resolved + ":", 0), 0u)
        << value << ": " << byName["HOTKERNEL_FUSION_ROUNDING"].dump();
  }
}

TEST(DoctorCommandTest, GivenKeyFilesWhenDoctorThenTheKeyInUseOrTheRefusalWithoutASourceLocation) {
  TempDir tmp;
  const std::string key = tmp.sub("key");
  std::ofstream(key) << std::string(32, 'k');
  ASSERT_EQ(::chmod(key.c_str(), 0400), 0);
  const auto resolvedKey = [&](const json& j) {
    for (const json& v : j["environment"]) {
      if (v["name"] == "HOTKERNEL_CACHE_KEY_FILE") return v["resolved"].get<std::string>();
    }
    return std::string("(not listed)");
  };
  const std::string ok = resolvedKey(doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.sub("c")}, {"HOTKERNEL_CACHE_KEY_FILE", key}}));
  EXPECT_EQ(ok.rfind("key ", 0), 0u) << ok;
  EXPECT_NE(ok.find("entries are signed"), std::string::npos) << ok;
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  const std::string refused =
      resolvedKey(doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.sub("c")}, {"HOTKERNEL_CACHE_KEY_FILE", key}}));
  EXPECT_EQ(refused.rfind("refused", 0), 0u) << refused;
  EXPECT_NE(refused.find("0644"), std::string::npos) << refused;
  EXPECT_EQ(refused.find(".cpp:"), std::string::npos) << refused;
}

TEST(DoctorCommandTest, GivenRemoteCacheWhenDoctorThenItsStateIsShownAndServingStaysReady) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  TempDir tmp;
  cache::test::RedisServer redis;
  const auto resolvedRemote = [&](const std::string& url) {
    const json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.sub("c")}, {"HOTKERNEL_REMOTE_CACHE", url}});
    for (const json& v : j["environment"]) {
      if (v["name"] == "HOTKERNEL_REMOTE_CACHE") return v["resolved"].get<std::string>();
    }
    return std::string("(not listed)");
  };

  const std::string up = resolvedRemote(redis.unixUrl(1));
  redis.kill();
  const std::string down = resolvedRemote(redis.unixUrl(1));
  const std::string malformed = resolvedRemote("redis://user:pw@host");

  EXPECT_EQ(up, redis.unixUrl(1) + ": reachable; no HOTKERNEL_CACHE_KEY_FILE: its entries are not authenticated");
  EXPECT_EQ(down.rfind(redis.unixUrl(1) + ": unreachable, serving uses the local cache only", 0), 0u) << down;
  EXPECT_EQ(malformed.rfind("not used: ", 0), 0u) << malformed;
  EXPECT_NE(malformed.find("credentials"), std::string::npos) << malformed;
  EXPECT_EQ(malformed.find(".cpp:"), std::string::npos) << malformed;
}

TEST(DoctorCommandTest, GivenHotkernelOffWhenDoctorThenNotReady) {
  TempDir tmp;
  json j = doctorJson({{"HOTKERNEL_CACHE_DIR", tmp.path()}, {"HOTKERNEL", "0"}});
  EXPECT_EQ(j["enabled"], false);
  EXPECT_EQ(j["ready"], false);
  EXPECT_TRUE(anyProblemContains(j, "HOTKERNEL is set to off")) << j.dump(2);
}

TEST(DoctorCommandTest, GivenNoJsonWhenDoctorThenATableAndTheVerdict) {
  TempDir tmp;
  auto r = runCli({"doctor"}, {{"HOTKERNEL_CACHE_DIR", tmp.path()}, {"HOTKERNEL_SAMPLE", "0.5"}});
  for (const char* row : {"CHECK", "\npreload ", "\nlibrary ", "\ntorch ", "\ncuda driver ", "\nnvrtc ", "\ncache ",
                          "\nHOTKERNEL_SAMPLE "}) {
    EXPECT_TRUE(contains(r.out, row)) << row << "\n" << r.out;
  }
  auto j = json::parse(runCli({"doctor", "--json"}, {{"HOTKERNEL_CACHE_DIR", tmp.path()}}).out);
  if (j["ready"].get<bool>()) {
    EXPECT_EQ(r.exitCode, 0);
    EXPECT_TRUE(contains(r.out, "\nready to serve\n")) << r.out;
  } else {
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_TRUE(contains(r.out, "\nnot ready to serve:\n  - ")) << r.out;
  }
  if (j["devices"].empty()) EXPECT_TRUE(contains(r.out, "no CUDA device")) << r.out;
}

TEST(DoctorCommandTest, GivenHelpWhenDoctorThenListedWithItsExitCodes) {
  auto top = runCli({"--help"});
  EXPECT_TRUE(contains(top.out, "\n  doctor ")) << top.out;
  auto r = runCli({"doctor", "--help"});
  EXPECT_EQ(r.exitCode, 0);
  for (const char* text : {"--json", "0 ready to serve", "1 something a serving process needs is missing"}) {
    EXPECT_TRUE(contains(r.out, text)) << text << "\n" << r.out;
  }
  EXPECT_EQ(runCli({"doctor", "--bogus"}).exitCode, 2);
}

}  // namespace
}  // namespace hotkernel::cli
