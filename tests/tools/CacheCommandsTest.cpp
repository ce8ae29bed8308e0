// `hotkernel cache ...`, run as a subprocess against caches filled through the
// CacheStore API.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <nlohmann/json.hpp>

#include "CacheTestUtil.h"
#include "RunCli.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/EntryKey.h"

namespace hotkernel::cli {
namespace {

using cache::CacheStore;
using cache::EntryKey;
using cache::EntryTrust;
using cache::test::keepAtenEntry;
using cache::test::kernelEntry;
using cache::test::RawDb;
using cache::test::TempDir;
using cache::test::testFingerprint;
using test::runCli;

const std::string kOp = "aten::_softmax";
const std::string kVariant = "dtype=bf16;rows=4096;cols=32000;dev=0";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A cache with a kernel entry (1.42x) and a keep_aten entry, in `dir`.
void fill(const std::string& dir) {
  auto store = CacheStore::open(dir);
  cache::Entry k = kernelEntry(kOp, kVariant, testFingerprint(), 5000);
  k.createdUnix = 1735689600;  // 2025-01-01 00:00:00 UTC
  store->put(k);
  store->put(keepAtenEntry("aten::_log_softmax", "dtype=fp32;rows=8;cols=128256;dev=0"));
}

TEST(CacheCommandsTest, GivenFilledCacheWhenLsThenTableShowsEveryEntry) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "ls", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "FINGERPRINT")) << r.out;
  EXPECT_TRUE(contains(r.out, testFingerprint().key())) << r.out;
  EXPECT_TRUE(contains(r.out, kOp + "  ")) << r.out;
  EXPECT_TRUE(contains(r.out, kVariant)) << r.out;
  EXPECT_TRUE(contains(r.out, "softmax_lastdim")) << r.out;
  EXPECT_TRUE(contains(r.out, "1.42x")) << r.out;
  EXPECT_TRUE(contains(r.out, "4.9 KiB")) << r.out;
  EXPECT_TRUE(contains(r.out, "2025-01-01 00:00:00")) << r.out;
  EXPECT_TRUE(contains(r.out, "keep_aten")) << r.out;
  EXPECT_TRUE(contains(r.out, "2 entries")) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(CacheCommandsTest, GivenFilledCacheWhenLsJsonThenParsableWithAllFields) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "ls", "--json", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const nlohmann::json listing = nlohmann::json::parse(r.out);
  ASSERT_TRUE(listing.is_object()) << r.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(r.out).begin().key(), "format");  // first, as every --json of the CLI
  EXPECT_EQ(listing["format"], "hotkernel-cache-ls");
  EXPECT_EQ(listing["version"], 1);
  EXPECT_EQ(listing["found"], true);
  EXPECT_EQ(listing["database"], CacheStore::databasePathFor(tmp.path()));
  const nlohmann::json& j = listing["entries"];
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  const nlohmann::json& k = j[1]["op"] == kOp ? j[1] : j[0];
  EXPECT_EQ(k["variant"], kVariant);
  EXPECT_EQ(k["decision"], "kernel");
  EXPECT_EQ(k["cubin_bytes"], 5000);
  EXPECT_EQ(k["params"]["block"], 256);
  EXPECT_DOUBLE_EQ(k["metrics"]["speedup"].get<double>(), 1.42);
  EXPECT_EQ(k["environment"]["gpu"], "NVIDIA H200");
  EXPECT_EQ(k["created_unix"], 1735689600);
  // The test fingerprints are made up: no machine, with or without a GPU, matches them.
  EXPECT_EQ(k["matches_machine"], false);
  EXPECT_EQ(j[0]["matches_machine"], false);
}

TEST(CacheCommandsTest, GivenFilledCacheWhenLsThenItSaysWhichEntriesMatchThisMachine) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "ls", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const bool unknown = contains(r.out, "none can be matched to this machine: its fingerprint is unknown (");
  if (unknown) {
    EXPECT_FALSE(contains(r.out, "HERE")) << r.out;
  } else {
    // A known machine: a HERE column, and none of the made-up fingerprints marked.
    EXPECT_TRUE(contains(r.out, "HERE  FINGERPRINT")) << r.out;
    EXPECT_TRUE(contains(r.out, "0 of them (marked *) match this machine")) << r.out;
    EXPECT_FALSE(contains(r.out, "*  ")) << r.out;
  }
}

TEST(CacheCommandsTest, GivenCacheDirInEnvironmentWhenLsWithoutDirThenItIsUsed) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "ls"}, {{"HOTKERNEL_CACHE_DIR", tmp.path()}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, kVariant)) << r.out;
  auto p = runCli({"cache", "path"}, {{"HOTKERNEL_CACHE_DIR", tmp.path() + "/"}});
  EXPECT_EQ(p.out, tmp.path() + "\n");
}

TEST(CacheCommandsTest, GivenNoEnvironmentWhenPathThenDefaultUnderXdgCacheHome) {
  auto r = runCli({"cache", "path", "--database"}, {{"XDG_CACHE_HOME", "/nonexistent/xdg"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "/nonexistent/xdg/hotkernel/kernels.sqlite\n");
}

TEST(CacheCommandsTest, GivenNoCacheWhenLsThenEmptyExitZeroAndNothingCreated) {
  TempDir tmp;
  std::string dir = tmp.sub("none");
  auto r = runCli({"cache", "ls", "--dir", dir});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_TRUE(contains(r.err, "no hotkernel cache at " + dir)) << r.err;
  auto j = runCli({"cache", "ls", "--json", "--dir", dir});
  const nlohmann::json listing = nlohmann::json::parse(j.out);
  EXPECT_EQ(listing["format"], "hotkernel-cache-ls");
  EXPECT_EQ(listing["found"], false);
  EXPECT_EQ(listing["entries"], nlohmann::json::array());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(CacheCommandsTest, GivenFilledCacheWhenLsThenDatabaseBytesUnchanged) {
  TempDir tmp;
  fill(tmp.path());
  std::string db = CacheStore::databasePathFor(tmp.path());
  std::string before = cache::test::readFile(db);
  ASSERT_EQ(runCli({"cache", "ls", "--dir", tmp.path()}).exitCode, 0);
  ASSERT_EQ(runCli({"cache", "verify", "--dir", tmp.path()}).exitCode, 0);
  EXPECT_EQ(cache::test::readFile(db), before);
}

TEST(CacheCommandsTest, GivenEntryWhenShowThenFullMetadataButNoCubinBytes) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "show", kOp, kVariant, "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "decision:     kernel")) << r.out;
  EXPECT_TRUE(contains(r.out, "kernel name:  softmax_lastdim_kernel")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"block\": 256")) << r.out;     // params, pretty-printed
  EXPECT_TRUE(contains(r.out, "\"speedup\": 1.42")) << r.out;  // metrics
  EXPECT_TRUE(contains(r.out, testFingerprint().canonicalJson())) << r.out;
  EXPECT_TRUE(contains(r.out, "cubin:        5000 bytes, sha256 ")) << r.out;
  EXPECT_TRUE(contains(r.out, "integrity:    ok")) << r.out;
  std::string cubin = kernelEntry(kOp, kVariant, testFingerprint(), 5000).cubin;
  EXPECT_FALSE(contains(r.out, cubin.substr(0, 16)));
}

TEST(CacheCommandsTest, GivenTwoEnvironmentsWhenShowWithFingerprintThenOnlyThatOne) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Fingerprint a100 = testFingerprint("NVIDIA A100");
  store->put(kernelEntry(kOp, kVariant));
  store->put(kernelEntry(kOp, kVariant, a100));
  auto both = runCli({"cache", "show", kOp, kVariant, "--json", "--dir", tmp.path()});
  ASSERT_EQ(both.exitCode, 0) << both.err;
  EXPECT_EQ(nlohmann::json::parse(both.out)["entries"].size(), 2u);
  auto one = runCli({"cache", "show", kOp, kVariant, "--fingerprint", a100.key(), "--json", "--dir", tmp.path()});
  ASSERT_EQ(one.exitCode, 0) << one.err;
  const nlohmann::json listing = nlohmann::json::parse(one.out);
  EXPECT_EQ(listing["format"], "hotkernel-cache-show");
  EXPECT_EQ(listing["version"], 1);
  const nlohmann::json& j = listing["entries"];
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["fingerprint"], a100.key());
  EXPECT_EQ(j[0]["integrity"], "ok");
}

TEST(CacheCommandsTest, GivenUnknownEntryWhenShowThenExitOneWithMessage) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "show", kOp, "dtype=fp64", "--dir", tmp.path()});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(contains(r.err, "no cache entry for op=aten::_softmax variant=dtype=fp64")) << r.err;
}

TEST(CacheCommandsTest, GivenIntactCacheWhenVerifyThenExitZero) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "verify", "--dir", tmp.path()});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "verified 2 entries")) << r.out;
  EXPECT_TRUE(contains(r.out, "all ok")) << r.out;
}

TEST(CacheCommandsTest, GivenTamperedCubinWhenVerifyThenExitOneAndFailurePrinted) {
  TempDir tmp;
  fill(tmp.path());
  RawDb(tmp.path()).flipCubinByte(kOp, kVariant);
  auto r = runCli({"cache", "verify", "--dir", tmp.path()});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "FAIL hash-mismatch  op=aten::_softmax variant=" + kVariant)) << r.out;
  EXPECT_TRUE(contains(r.out, "1 failed")) << r.out;
  auto show = runCli({"cache", "show", kOp, kVariant, "--dir", tmp.path()});
  EXPECT_TRUE(contains(show.out, "integrity:    hash-mismatch")) << show.out;
}

TEST(CacheCommandsTest, GivenCommittedEntriesLostWithTheWalWhenVerifyThenEachNamedAndExitOne) {
  TempDir tmp;
  const std::string crashed = tmp.sub("crashed");
  cache::test::putWithCommitsOnlyInWal(tmp.sub("live"), {kernelEntry(kOp, "kept")},
                                       {kernelEntry(kOp, "late=1"), kernelEntry(kOp, "late=2")}, crashed);
  // Damage the first frame after the -wal header: SQLite drops that commit and every later one.
  std::string wal = cache::test::readFile(crashed + "/kernels.sqlite-wal");
  ASSERT_GT(wal.size(), 100u);
  wal[60] = static_cast<char>(wal[60] ^ 0x01);
  cache::test::writeFile(crashed + "/kernels.sqlite-wal", wal);
  auto r = runCli({"cache", "verify", "--dir", crashed});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "LOST lost  op=aten::_softmax variant=late=1")) << r.out;
  EXPECT_TRUE(contains(r.out, "LOST lost  op=aten::_softmax variant=late=2")) << r.out;
  EXPECT_TRUE(contains(r.out, "missing from the database")) << r.out;
  EXPECT_TRUE(contains(r.out, "write-ahead log (-wal) was damaged")) << r.out;
  EXPECT_TRUE(contains(r.out, "verified 1 entry")) << r.out;
  EXPECT_TRUE(contains(r.out, "2 committed entries lost")) << r.out;
  EXPECT_FALSE(contains(r.out, "all ok")) << r.out;
}

TEST(CacheCommandsTest, GivenIntactCacheWhenVerifyJsonThenOneObjectWithFormatAndCounts) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "verify", "--json", "--dir", tmp.path()});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "hotkernel-cache-verify");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["database"], CacheStore::databasePathFor(tmp.path()));
  EXPECT_EQ(j["found"], true);
  EXPECT_EQ(j["entries"], 2);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["lost"], 0);
  EXPECT_EQ(j["ok"], true);
  EXPECT_TRUE(j["problems"].is_array() && j["problems"].empty()) << r.out;
  EXPECT_EQ(r.out.rfind("{\n  \"format\": \"hotkernel-cache-verify\",\n  \"version\": 1,", 0), 0u) << r.out;
}

TEST(CacheCommandsTest, GivenTamperedCubinWhenVerifyJsonThenTheEntryListedAndExitOne) {
  TempDir tmp;
  fill(tmp.path());
  RawDb(tmp.path()).flipCubinByte(kOp, kVariant);
  auto r = runCli({"cache", "verify", "--json", "--dir", tmp.path()});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["entries"], 2);
  EXPECT_EQ(j["failed"], 1);
  ASSERT_EQ(j["problems"].size(), 1u) << r.out;
  const nlohmann::json& p = j["problems"][0];
  EXPECT_EQ(p["kind"], "fail");
  EXPECT_EQ(p["status"], "hash-mismatch");
  EXPECT_EQ(p["op"], kOp);
  EXPECT_EQ(p["variant"], kVariant);
  EXPECT_EQ(p["fingerprint"], testFingerprint().key());
  EXPECT_FALSE(p["detail"].get<std::string>().empty());
}

TEST(CacheCommandsTest, GivenNoCacheWhenVerifyJsonThenNotFoundAndNothingCreated) {
  TempDir tmp;
  const std::string dir = tmp.sub("none");
  auto r = runCli({"cache", "verify", "--json", "--dir", dir});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "hotkernel-cache-verify");
  EXPECT_EQ(j["found"], false);
  EXPECT_EQ(j["entries"], 0);
  EXPECT_EQ(j["ok"], true);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// A key file (32 bytes, mode 0600) at `path`, and the key it holds.
EntryKey writeKey(const std::string& path, char fill) {
  cache::test::writeFile(path, std::string(32, fill));
  EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
  return EntryKey::fromBytes(std::string(32, fill));
}

// A same-user attacker without the key: stores its own cubin for (kOp, variant)
// through the library (cubin and both digests consistent), then puts the old
// signature back so that the row still looks signed.
void forgeWithoutKey(const std::string& dir, const std::string& variant) {
  const std::string signature =
      RawDb(dir).queryText("SELECT signature FROM entries WHERE variant = '" + variant + "'");
  cache::Entry forged = kernelEntry(kOp, variant);
  forged.cubin = std::string(300, '\x42');
  CacheStore::open(dir, EntryTrust::none())->put(forged);
  RawDb(dir).exec("UPDATE entries SET signature = '" + signature + "' WHERE variant = '" + variant + "'");
}

TEST(CacheCommandsTest, GivenSignedUnsignedAndForgedEntriesWhenVerifyWithKeyThenEachNamedAndExitOne) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  const std::string keyPath = tmp.sub("key");
  EntryTrust trust = EntryTrust::withKey(writeKey(keyPath, 'a'));
  {
    auto store = CacheStore::open(dir, trust);
    store->put(kernelEntry(kOp, "good"));
    store->put(kernelEntry(kOp, "forged"));
  }
  CacheStore::open(dir, EntryTrust::none())->put(kernelEntry(kOp, "plain"));
  forgeWithoutKey(dir, "forged");
  // Without a key, the forgery is invisible: both digests match.
  EXPECT_EQ(runCli({"cache", "verify", "--dir", dir}).exitCode, 0);

  auto r = runCli({"cache", "verify", "--dir", dir, "--key-file", keyPath});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "ok (signed)  op=aten::_softmax variant=good")) << r.out;
  EXPECT_TRUE(contains(r.out, "FAIL unsigned  op=aten::_softmax variant=plain")) << r.out;
  EXPECT_TRUE(contains(r.out, "FAIL bad signature  op=aten::_softmax variant=forged")) << r.out;
  EXPECT_TRUE(contains(r.out, "verified 3 entries")) << r.out;
  EXPECT_TRUE(contains(r.out, "2 failed")) << r.out;

  // The variable works like --key-file; --json lists every entry's signature.
  auto j = runCli({"cache", "verify", "--json", "--dir", dir}, {{"HOTKERNEL_CACHE_KEY_FILE", keyPath}});
  EXPECT_EQ(j.exitCode, 1) << j.out << j.err;
  nlohmann::json out = nlohmann::json::parse(j.out);
  EXPECT_EQ(out["key_id"], trust.key->id());
  EXPECT_EQ(out["failed"], 2);
  std::map<std::string, std::string> verdicts;
  for (const auto& s : out["signatures"]) verdicts[s["variant"]] = s["signature"];
  EXPECT_EQ(verdicts["good"], "ok (signed)");
  EXPECT_EQ(verdicts["plain"], "unsigned");
  EXPECT_EQ(verdicts["forged"], "bad signature");
  std::map<std::string, std::string> problems;
  for (const auto& p : out["problems"]) problems[p["variant"]] = p["status"];
  EXPECT_EQ(problems["plain"], "unsigned");
  EXPECT_EQ(problems["forged"], "bad-signature");

  // Stores opened without an explicit key (show, like the serving engine) take the variable.
  auto show = runCli({"cache", "show", kOp, "forged", "--dir", dir}, {{"HOTKERNEL_CACHE_KEY_FILE", keyPath}});
  EXPECT_TRUE(contains(show.out, "bad-signature")) << show.out << show.err;
  auto plain = runCli({"cache", "show", kOp, "forged", "--dir", dir});
  EXPECT_FALSE(contains(plain.out, "bad-signature")) << plain.out;
}

TEST(CacheCommandsTest, GivenEntriesSignedWithAnotherKeyWhenVerifyThenBadSignatureAndExitOne) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  CacheStore::open(dir, EntryTrust::withKey(writeKey(tmp.sub("key-a"), 'a')))->put(kernelEntry(kOp, kVariant));
  writeKey(tmp.sub("key-b"), 'b');
  auto r = runCli({"cache", "verify", "--dir", dir, "--key-file", tmp.sub("key-b")});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "FAIL bad signature")) << r.out;
  auto a = runCli({"cache", "verify", "--dir", dir, "--key-file", tmp.sub("key-a")});
  EXPECT_EQ(a.exitCode, 0) << a.out << a.err;
  EXPECT_TRUE(contains(a.out, "all ok")) << a.out;
}

TEST(CacheCommandsTest, GivenRefusedKeyFileWhenVerifyThenOneLineErrorAndExitTwo) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  fill(dir);
  const std::string keyPath = tmp.sub("key");
  writeKey(keyPath, 'a');
  ASSERT_EQ(::chmod(keyPath.c_str(), 0644), 0);
  auto r = runCli({"cache", "verify", "--dir", dir, "--key-file", keyPath});
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "mode is 0644")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  auto missing = runCli({"cache", "verify", "--dir", dir, "--key-file", tmp.sub("absent")});
  EXPECT_EQ(missing.exitCode, 2) << missing.err;
}

TEST(CacheCommandsTest, GivenNoFilterWhenRmThenRefusedWithExitTwoAndNothingRemoved) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "rm", "--dir", tmp.path()});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "without --all")) << r.err;
  EXPECT_EQ(CacheStore::open(tmp.path())->listMetadata().size(), 2u);
  auto conflicting = runCli({"cache", "rm", "--all", "--op", kOp, "--dir", tmp.path()});
  EXPECT_EQ(conflicting.exitCode, 2);
  EXPECT_EQ(CacheStore::open(tmp.path())->listMetadata().size(), 2u);
}

TEST(CacheCommandsTest, GivenFilterOrAllWhenRmThenMatchingEntriesRemoved) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "rm", "--op", kOp, "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "removed 1 entry")) << r.out;
  auto left = CacheStore::open(tmp.path())->listMetadata();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].op, "aten::_log_softmax");
  auto all = runCli({"cache", "rm", "--all", "--dir", tmp.path()});
  ASSERT_EQ(all.exitCode, 0) << all.err;
  EXPECT_TRUE(contains(all.out, "removed 1 entry")) << all.out;
  EXPECT_TRUE(CacheStore::open(tmp.path())->listMetadata().empty());
}

TEST(CacheCommandsTest, GivenNoCacheWhenRmThenNothingCreated) {
  TempDir tmp;
  std::string dir = tmp.sub("none");
  auto r = runCli({"cache", "rm", "--all", "--dir", dir});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(CacheCommandsTest, GivenWorldWritableCacheDirWhenAnyCommandThenExitTwoWithReason) {
  TempDir tmp;
  std::string dir = tmp.sub("cache");
  fill(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"cache", "ls"}, {"cache", "show", kOp, kVariant}, {"cache", "verify"}, {"cache", "rm", "--op", kOp}}) {
    args.push_back("--dir");
    args.push_back(dir);
    auto r = runCli(args);
    EXPECT_EQ(r.exitCode, 2) << args[1];
    EXPECT_TRUE(contains(r.err, "hotkernel: error: refusing cache directory " + dir)) << r.err;
    EXPECT_TRUE(contains(r.err, "writable by group or others")) << r.err;
    EXPECT_FALSE(contains(r.err, ".cpp:")) << r.err;  // a user error names no source location
  }
  ::chmod(dir.c_str(), 0700);
  EXPECT_EQ(CacheStore::open(dir)->listMetadata().size(), 2u);
}

TEST(CacheCommandsTest, GivenCorruptDatabaseWhenLsThenExitTwoWithReason) {
  TempDir tmp;
  std::string db = CacheStore::databasePathFor(tmp.path());
  cache::test::writeFile(db, std::string(4096, 'x'));
  ::chmod(db.c_str(), 0600);
  auto r = runCli({"cache", "ls", "--dir", tmp.path()});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "is damaged or not a hotkernel cache")) << r.err;
}

TEST(CacheCommandsTest, GivenBadUsageWhenRunThenExitTwo) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {}, {"frob"}, {"cache"}, {"cache", "frob"}, {"cache", "ls", "--bogus"}, {"cache", "show", kOp}}) {
    auto r = runCli(args);
    EXPECT_EQ(r.exitCode, 2) << (args.empty() ? "(none)" : args.back()) << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

TEST(CacheCommandsTest, GivenHelpWhenRunThenUsageAndExitZero) {
  auto top = runCli({"--help"});
  EXPECT_EQ(top.exitCode, 0);
  EXPECT_TRUE(contains(top.out, "cache")) << top.out;
  auto cache = runCli({"cache", "--help"});
  EXPECT_EQ(cache.exitCode, 0);
  for (const char* cmd : {"ls", "show", "verify", "rm", "path", "stats", "prune", "export", "import"}) {
    EXPECT_TRUE(contains(cache.out, std::string("\n  ") + cmd + " ")) << cmd << "\n" << cache.out;
  }
  auto version = runCli({"--version"});
  EXPECT_EQ(version.exitCode, 0);
  EXPECT_TRUE(contains(version.out, "hotkernel ")) << version.out;
}

}  // namespace
}  // namespace hotkernel::cli
