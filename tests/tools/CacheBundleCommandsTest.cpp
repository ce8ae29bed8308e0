// `hotkernel cache export` / `import`, run as a subprocess: a bundle written
// from one cache and imported into another, idempotence, signatures, the
// selection, and every refusal with its exit code and one line.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
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
using cache::test::TempDir;
using cache::test::testFingerprint;
using nlohmann::json;
using test::runCli;

const std::string kOp = "aten::_softmax";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Two entries of the H200 test fingerprint and one of an A100, in `dir`, under `trust`.
void fill(const std::string& dir, const EntryTrust& trust = EntryTrust::none()) {
  auto store = CacheStore::open(dir, trust);
  store->put(kernelEntry(kOp, "dtype=bf16;rows=8;cols=64"));
  store->put(keepAtenEntry("aten::_log_softmax", "dtype=fp32;rows=8;cols=64"));
  store->put(kernelEntry(kOp, "dtype=bf16;rows=8;cols=64", testFingerprint("NVIDIA A100")));
}

std::string writeKey(const std::string& path, char fill) {
  cache::test::writeFile(path, std::string(32, fill));
  EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
  return EntryKey::fromBytes(std::string(32, fill)).id();
}

json parse(const std::string& out) {
  json j = json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << out;
  return j.is_object() ? j : json::object();
}

TEST(CacheBundleCommandsTest, GivenAFingerprintWhenExportedAndImportedThenTheOtherCacheHoldsItsEntries) {
  TempDir tmp;
  fill(tmp.sub("a"));
  const std::string bundle = tmp.sub("h200.hkbundle");
  auto e = runCli({"cache", "export", "--out", bundle, "--fingerprint", testFingerprint().key(), "--dir", tmp.sub("a")});
  ASSERT_EQ(e.exitCode, 0) << e.err;
  EXPECT_TRUE(contains(e.out, "exported 2 entries of 1 fingerprint to " + bundle)) << e.out;
  EXPECT_TRUE(contains(e.out, "unsigned")) << e.out;
  EXPECT_EQ(cache::test::readFile(bundle).substr(0, 8), "HKBUNDLE");

  auto i = runCli({"cache", "import", bundle, "--dir", tmp.sub("b")});
  ASSERT_EQ(i.exitCode, 0) << i.err;
  EXPECT_TRUE(contains(i.out, "2 added, 0 replaced, 0 unchanged, 0 kept")) << i.out;
  auto store = CacheStore::openReadOnly(tmp.sub("b"), EntryTrust::none());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->listForFingerprint(testFingerprint().key()).size(), 2u);
  EXPECT_TRUE(store->listForFingerprint(testFingerprint("NVIDIA A100").key()).empty());
  EXPECT_EQ(runCli({"cache", "verify", "--dir", tmp.sub("b")}).exitCode, 0);
}

TEST(CacheBundleCommandsTest, GivenABundleImportedWhenImportedAgainThenNothingChangesAndItSaysSo) {
  TempDir tmp;
  fill(tmp.sub("a"));
  const std::string bundle = tmp.sub("all.hkbundle");
  ASSERT_EQ(runCli({"cache", "export", "--out", bundle, "--all", "--dir", tmp.sub("a")}).exitCode, 0);
  ASSERT_EQ(runCli({"cache", "import", bundle, "--dir", tmp.sub("b")}).exitCode, 0);
  const std::string db = CacheStore::databasePathFor(tmp.sub("b"));
  const std::string before = cache::test::readFile(db);
  const std::string commits = cache::test::readFile(tmp.sub("b") + "/kernels.commits");
  auto again = runCli({"cache", "import", bundle, "--dir", tmp.sub("b"), "--json"});
  ASSERT_EQ(again.exitCode, 0) << again.err;
  json j = parse(again.out);
  EXPECT_EQ(j["format"], "hotkernel-cache-import");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["entries"], 3);
  EXPECT_EQ(j["unchanged"], 3);
  EXPECT_EQ(j["added"], 0);
  EXPECT_EQ(j["changed"], false);
  EXPECT_EQ(j["signed"], false);
  EXPECT_EQ(cache::test::readFile(db), before);
  EXPECT_EQ(cache::test::readFile(tmp.sub("b") + "/kernels.commits"), commits);
  auto text = runCli({"cache", "import", bundle, "--dir", tmp.sub("b")});
  EXPECT_TRUE(contains(text.out, "nothing changed: the cache already holds every entry of the bundle")) << text.out;
}

TEST(CacheBundleCommandsTest, GivenAKeyWhenExportedThenSignedAndOnlyTheSameKeyImportsIt) {
  TempDir tmp;
  const std::string keyA = tmp.sub("key-a");
  const std::string idA = writeKey(keyA, 'a');
  writeKey(tmp.sub("key-b"), 'b');
  fill(tmp.sub("a"), EntryTrust::withKey(EntryKey::fromBytes(std::string(32, 'a'))));
  const std::string bundle = tmp.sub("signed.hkbundle");
  auto e = runCli({"cache", "export", "--out", bundle, "--all", "--dir", tmp.sub("a"), "--json"},
                  {{"HOTKERNEL_CACHE_KEY_FILE", keyA}});
  ASSERT_EQ(e.exitCode, 0) << e.err;
  json ej = parse(e.out);
  EXPECT_EQ(ej["format"], "hotkernel-cache-export");
  EXPECT_EQ(ej["version"], 1);
  EXPECT_EQ(ej["signed"], true);
  EXPECT_EQ(ej["key_id"], idA);
  EXPECT_EQ(ej["entries"], 3);
  EXPECT_EQ(ej["fingerprints"].size(), 2u);

  auto wrong = runCli({"cache", "import", bundle, "--dir", tmp.sub("b"), "--key-file", tmp.sub("key-b")});
  EXPECT_EQ(wrong.exitCode, 1);
  EXPECT_TRUE(contains(wrong.err, "refused, nothing imported: bad signature")) << wrong.err;
  EXPECT_FALSE(std::filesystem::exists(CacheStore::databasePathFor(tmp.sub("b"))));

  auto right = runCli({"cache", "import", bundle, "--dir", tmp.sub("b"), "--key-file", keyA});
  ASSERT_EQ(right.exitCode, 0) << right.err;
  EXPECT_TRUE(contains(right.out, "signature verified under key " + idA)) << right.out;
  // The imported entries are signed with the importing key: they load under it.
  auto signedStore = CacheStore::openReadOnly(tmp.sub("b"), EntryTrust::withKey(EntryKey::fromBytes(std::string(32, 'a'))));
  EXPECT_EQ(signedStore->listForFingerprint(testFingerprint().key()).size(), 2u);
  EXPECT_EQ(runCli({"cache", "verify", "--dir", tmp.sub("b"), "--key-file", keyA}).exitCode, 0);
}

TEST(CacheBundleCommandsTest, GivenAnUnsignedBundleAndAKeyWhenImportedThenRefusedAsUnsigned) {
  TempDir tmp;
  fill(tmp.sub("a"));
  const std::string bundle = tmp.sub("plain.hkbundle");
  ASSERT_EQ(runCli({"cache", "export", "--out", bundle, "--all", "--dir", tmp.sub("a")}).exitCode, 0);
  writeKey(tmp.sub("key"), 'k');
  auto r = runCli({"cache", "import", bundle, "--dir", tmp.sub("b")}, {{"HOTKERNEL_CACHE_KEY_FILE", tmp.sub("key")}});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(contains(r.err, "refused, nothing imported: unsigned: ")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CacheBundleCommandsTest, GivenDamagedTruncatedOrForeignFilesWhenImportedThenOneLineExitOneNothingWritten) {
  TempDir tmp;
  fill(tmp.sub("a"));
  const std::string bundle = tmp.sub("good.hkbundle");
  ASSERT_EQ(runCli({"cache", "export", "--out", bundle, "--all", "--dir", tmp.sub("a")}).exitCode, 0);
  const std::string bytes = cache::test::readFile(bundle);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x10);
  std::string version = bytes;
  version[8] = 7;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {bytes.substr(0, bytes.size() - 9), "truncated: "},
      {bytes.substr(0, 30), "truncated: "},
      {flipped, "damaged: "},
      {version, "unsupported bundle format version 7: this hotkernel reads version 1"},
      {bytes + "more", "trailing bytes: "},
      {"SQLite format 3", "not a hotkernel cache bundle"},
      {"", "not a hotkernel cache bundle: the file is empty"}};
  for (const auto& [content, why] : cases) {
    const std::string path = tmp.sub("bad.hkbundle");
    cache::test::writeFile(path, content);
    auto r = runCli({"cache", "import", path, "--dir", tmp.sub("b")});
    EXPECT_EQ(r.exitCode, 1) << why << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "hotkernel cache import: bundle " + path + " refused, nothing imported: " + why))
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(contains(r.err, ".cpp:")) << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp.sub("b"))) << why;
  }
}

TEST(CacheBundleCommandsTest, GivenNoUsableFileOrKeyWhenImportedThenExitTwo) {
  TempDir tmp;
  auto missing = runCli({"cache", "import", tmp.sub("absent"), "--dir", tmp.sub("b")});
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_TRUE(contains(missing.err, "cannot read " + tmp.sub("absent") + " (No such file or directory)"))
      << missing.err;
  auto directory = runCli({"cache", "import", tmp.path(), "--dir", tmp.sub("b")});
  EXPECT_EQ(directory.exitCode, 2);
  EXPECT_TRUE(contains(directory.err, "it is a directory, not a bundle file")) << directory.err;
  ASSERT_EQ(::mkfifo(tmp.sub("fifo").c_str(), 0600), 0);
  auto fifo = runCli({"cache", "import", tmp.sub("fifo"), "--dir", tmp.sub("b")});
  EXPECT_EQ(fifo.exitCode, 2);
  EXPECT_TRUE(contains(fifo.err, "it is a FIFO")) << fifo.err;

  fill(tmp.sub("a"));
  ASSERT_EQ(runCli({"cache", "export", "--out", tmp.sub("x"), "--all", "--dir", tmp.sub("a")}).exitCode, 0);
  writeKey(tmp.sub("key"), 'k');
  ASSERT_EQ(::chmod(tmp.sub("key").c_str(), 0644), 0);
  auto key = runCli({"cache", "import", tmp.sub("x"), "--dir", tmp.sub("b"), "--key-file", tmp.sub("key")});
  EXPECT_EQ(key.exitCode, 2);
  EXPECT_TRUE(contains(key.err, "refused: its mode is 0644")) << key.err;
  EXPECT_FALSE(contains(key.err, ".cpp:")) << key.err;
}

TEST(CacheBundleCommandsTest, GivenNoFingerprintSelectedWhenExportedThenThisMachinesOrAClearRefusal) {
  TempDir tmp;
  fill(tmp.sub("a"));
  const std::string bundle = tmp.sub("mine.hkbundle");
  auto r = runCli({"cache", "export", "--out", bundle, "--dir", tmp.sub("a")});
  auto stats = runCli({"cache", "stats", "--json", "--dir", tmp.sub("a")});
  const bool known = parse(stats.out)["machine"]["known"].get<bool>();
  if (!known) {
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_TRUE(contains(r.err, "this machine's fingerprint is unknown (")) << r.err;
    EXPECT_TRUE(contains(r.err, "--fingerprint FP")) << r.err;
    EXPECT_TRUE(contains(r.err, "--all")) << r.err;
  } else {
    // The test entries never carry a real machine's fingerprint: nothing to export.
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "no file written")) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(bundle));
}

TEST(CacheBundleCommandsTest, GivenAFingerprintWithoutEntriesWhenExportedThenExitOneAndNoFile) {
  TempDir tmp;
  fill(tmp.sub("a"));
  auto r = runCli({"cache", "export", "--out", tmp.sub("none"), "--fingerprint", "0123456789abcdef", "--dir",
                   tmp.sub("a")});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(contains(r.err, "no entry of fingerprint 0123456789abcdef")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.sub("none")));
  auto both = runCli({"cache", "export", "--out", tmp.sub("x"), "--all", "--fingerprint", "f", "--dir", tmp.sub("a")});
  EXPECT_EQ(both.exitCode, 2) << both.err;
  auto noOut = runCli({"cache", "export", "--all", "--dir", tmp.sub("a")});
  EXPECT_EQ(noOut.exitCode, 2) << noOut.err;
  EXPECT_TRUE(contains(noOut.err, "--out is required")) << noOut.err;
}

TEST(CacheBundleCommandsTest, GivenADamagedEntryWhenExportedThenSkippedAndNamed) {
  TempDir tmp;
  fill(tmp.sub("a"));
  cache::test::RawDb(tmp.sub("a")).flipCubinByte(kOp, "dtype=bf16;rows=8;cols=64");
  auto r = runCli({"cache", "export", "--out", tmp.sub("x"), "--fingerprint", testFingerprint().key(), "--dir",
                   tmp.sub("a"), "--json"},
                  {{"HOTKERNEL_LOG_LEVEL", "error"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json j = parse(r.out);
  EXPECT_EQ(j["entries"], 1);
  EXPECT_EQ(j["skipped"], 1);
  EXPECT_TRUE(contains(r.err, "not exported: 1 entry failing their checks")) << r.err;
}

}  // namespace
}  // namespace hotkernel::cli
