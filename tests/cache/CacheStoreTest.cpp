// CacheStore: storing, reading, verifying, listing and removing entries, and
// the permission checks on the cache directory and database.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include "CacheTestUtil.h"
#include "hotkernel/Config.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using test::keepAtenEntry;
using test::kernelEntry;
using test::modeOf;
using test::RawDb;
using test::TempDir;
using test::testFingerprint;

const std::string kOp = "aten::_softmax";
const std::string kVariant = "dtype=bf16;rows=4096;cols=32000;dev=0";

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CacheStoreTest, GivenMissingDirWhenOpenThenCreatesPrivateDirAndDatabase) {
  TempDir tmp;
  std::string dir = tmp.sub("a/b/cache");
  auto store = CacheStore::open(dir);
  EXPECT_EQ(store->directory(), dir);
  EXPECT_EQ(store->databasePath(), dir + "/" + CacheStore::kDatabaseFileName);
  EXPECT_EQ(modeOf(dir), 0700u);
  EXPECT_EQ(modeOf(tmp.sub("a")), 0700u);
  EXPECT_EQ(modeOf(store->databasePath()), 0600u);
}

TEST(CacheStoreTest, GivenNewDatabaseWhenInspectedThenFormatVersionAndMetaRecorded) {
  TempDir tmp;
  CacheStore::open(tmp.path());
  RawDb raw(tmp.path());
  EXPECT_EQ(raw.queryInt("PRAGMA user_version"), CacheStore::kFormatVersion);
  EXPECT_EQ(raw.queryInt("PRAGMA application_id"), 0x484B4341);
  EXPECT_EQ(raw.queryText("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.queryInt("PRAGMA auto_vacuum"), 2);  // incremental
  EXPECT_EQ(raw.queryText("SELECT value FROM meta WHERE key = 'format_version'"), "3");
  EXPECT_EQ(raw.queryText("SELECT value FROM meta WHERE key = 'commit_seq'"), "0");
  EXPECT_EQ(raw.queryText("SELECT value FROM meta WHERE key = 'store_id'").size(), 32u);
  EXPECT_EQ(raw.queryText("SELECT value FROM meta WHERE key = 'created_by'"), "hotkernel " HOTKERNEL_VERSION);
  EXPECT_GT(std::stoll(raw.queryText("SELECT value FROM meta WHERE key = 'created_unix'")), 1600000000);
}

TEST(CacheStoreTest, GivenPutEntryWhenGetThenSameFieldsAndHashComputed) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry in = kernelEntry(kOp, kVariant);
  in.cubinSha256 = "ignored";
  store->put(in);

  std::optional<Entry> out = store->get(in.fingerprint, kOp, kVariant);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->cubin, in.cubin);
  EXPECT_EQ(out->cubinSha256, sha256Hex(in.cubin));
  EXPECT_EQ(out->cubinBytes, static_cast<int64_t>(in.cubin.size()));
  EXPECT_EQ(out->fingerprintJson, in.fingerprintJson);
  EXPECT_EQ(out->decision, "kernel");
  EXPECT_EQ(out->family, in.family);
  EXPECT_EQ(out->params, in.params);
  EXPECT_EQ(out->kernelName, in.kernelName);
  EXPECT_EQ(out->metrics, in.metrics);
  EXPECT_GT(out->createdUnix, 1600000000);
  EXPECT_FALSE(store->get(in.fingerprint, kOp, "dtype=fp32;rows=1;cols=1;dev=0").has_value());
  EXPECT_FALSE(store->get("0000000000000000", kOp, kVariant).has_value());
}

TEST(CacheStoreTest, GivenCubinWithZeroBytesWhenPutThenStoredExactly) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry in = kernelEntry(kOp, kVariant);
  in.cubin = std::string(
      "\x7f"
      "ELF\0\0\0\x01\0",
      9);
  store->put(in);
  EXPECT_EQ(store->get(in.fingerprint, kOp, kVariant)->cubin, in.cubin);
}

TEST(CacheStoreTest, GivenKeepAtenEntryWhenGetThenReturnedWithEmptyCubin) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry in = keepAtenEntry(kOp, kVariant);
  in.createdUnix = 1700000000;
  store->put(in);
  auto out = store->get(in.fingerprint, kOp, kVariant);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->decision, "keep_aten");
  EXPECT_TRUE(out->cubin.empty());
  EXPECT_EQ(out->cubinBytes, 0);
  EXPECT_EQ(out->createdUnix, 1700000000);
}

TEST(CacheStoreTest, GivenSameKeyWhenPutTwiceThenSecondReplacesFirst) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry first = kernelEntry(kOp, kVariant);
  store->put(first);
  Entry second = keepAtenEntry(kOp, kVariant);
  store->put(second);
  EXPECT_EQ(store->listMetadata().size(), 1u);
  EXPECT_EQ(store->get(first.fingerprint, kOp, kVariant)->decision, "keep_aten");
}

TEST(CacheStoreTest, GivenInvalidEntryWhenPutThenThrowsAndStoresNothing) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  struct Case {
    const char* name;
    std::function<void(Entry&)> spoil;
    const char* expected;
  };
  const Case cases[] = {
      {"kernel without cubin", [](Entry& e) { e.cubin.clear(); }, "without cubin"},
      {"kernel without name", [](Entry& e) { e.kernelName.clear(); }, "without kernel name"},
      {"keep_aten with cubin", [](Entry& e) { e.decision = kDecisionKeepAten; }, "with a cubin"},
      {"unknown decision", [](Entry& e) { e.decision = "maybe"; }, "unknown decision"},
      {"aten_backend with cubin", [](Entry& e) { e.decision = kDecisionAtenBackend; }, "'aten_backend' with a cubin"},
      {"aten_backend with a kernel name",
       [](Entry& e) {
         e.decision = kDecisionAtenBackend;
         e.cubin.clear();
       },
       "'aten_backend' with a kernel name"},
      {"aten_backend without family",
       [](Entry& e) {
         e.decision = kDecisionAtenBackend;
         e.cubin.clear();
         e.kernelName.clear();
         e.family.clear();
       },
       "'aten_backend' without family"},
      {"empty op", [](Entry& e) { e.op.clear(); }, "empty fingerprint, op or variant"},
      {"fingerprint of another environment", [](Entry& e) { e.fingerprint = testFingerprint("A100").key(); },
       "is not the key of fingerprintJson"},
      {"fingerprint JSON malformed", [](Entry& e) { e.fingerprintJson = "{"; }, "bad fingerprintJson"},
      {"params not JSON", [](Entry& e) { e.params = "block=256"; }, "params is not JSON"},
      {"metrics not JSON", [](Entry& e) { e.metrics = ""; }, "metrics is not JSON"},
  };
  for (const Case& c : cases) {
    Entry e = kernelEntry(kOp, kVariant);
    c.spoil(e);
    std::string error = errorOf([&] { store->put(e); });
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
  }
  EXPECT_TRUE(store->listMetadata().empty());
}

TEST(CacheStoreTest, GivenTamperedCubinWhenGetThenRefusedAndLoggedOnce) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry e = kernelEntry(kOp, kVariant);
  store->put(e);
  RawDb(tmp.path()).flipCubinByte(kOp, kVariant);

  setLogLevel(LogLevel::Warn);
  ::testing::internal::CaptureStderr();
  std::optional<Entry> first = store->get(e.fingerprint, kOp, kVariant);
  std::optional<Entry> second = store->get(e.fingerprint, kOp, kVariant);
  std::string log = ::testing::internal::GetCapturedStderr();

  EXPECT_FALSE(first.has_value());
  EXPECT_FALSE(second.has_value());
  EXPECT_NE(log.find("refusing cache entry op=aten::_softmax variant=" + kVariant), std::string::npos) << log;
  EXPECT_NE(log.find("cubin SHA-256"), std::string::npos) << log;
  EXPECT_EQ(log.find("refusing"), log.rfind("refusing")) << "logged more than once: " << log;
}

TEST(CacheStoreTest, GivenTamperedParamsWhenGetThenRefusedByRecordDigest) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry e = kernelEntry(kOp, kVariant);
  store->put(e);
  RawDb(tmp.path()).exec(R"(UPDATE entries SET params = '{"block":1024,"vec":8}')");
  EXPECT_FALSE(store->get(e.fingerprint, kOp, kVariant).has_value());
  auto reports = store->verifyAll();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].status, VerifyStatus::HashMismatch);
  EXPECT_NE(reports[0].detail.find("record digest"), std::string::npos);
}

TEST(CacheStoreTest, GivenCubinAndItsHashBothRewrittenWhenGetThenRefused) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry e = kernelEntry(kOp, kVariant);
  store->put(e);
  std::string other = "another cubin";
  RawDb(tmp.path())
      .exec("UPDATE entries SET cubin = CAST('" + other + "' AS BLOB), cubin_sha256 = '" + sha256Hex(other) + "'");
  EXPECT_FALSE(store->get(e.fingerprint, kOp, kVariant).has_value());
}

TEST(CacheStoreTest, GivenAnAtenBackendChoiceWhenPutAndReadThenItRoundTripsWithoutACubin) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry e = kernelEntry("aten::scaled_dot_product_attention", kVariant);
  e.decision = kDecisionAtenBackend;
  e.family = "sdpa_backend";
  e.params = R"({"backend":"cudnn","format":"hotkernel-attention-choice","version":1})";
  e.kernelName.clear();
  e.cubin.clear();
  store->put(e);
  const std::optional<Entry> got = store->get(e.fingerprint, e.op, e.variant);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->decision, kDecisionAtenBackend);
  EXPECT_EQ(got->params, e.params);
  EXPECT_EQ(got->cubinBytes, 0);
  EXPECT_EQ(store->verify().at(0).status, VerifyStatus::Ok);
}

TEST(CacheStoreTest, GivenDecisionFlippedToKeepAtenWhenVerifyThenMalformed) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Entry e = kernelEntry(kOp, kVariant);
  store->put(e);
  RawDb(tmp.path()).exec("UPDATE entries SET decision = 'keep_aten'");
  auto reports = store->verifyAll();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].status, VerifyStatus::Malformed);
  EXPECT_EQ(reports[0].op, kOp);
  EXPECT_EQ(reports[0].variant, kVariant);
  EXPECT_EQ(reports[0].fingerprint, e.fingerprint);
  EXPECT_FALSE(store->get(e.fingerprint, kOp, kVariant).has_value());
}

TEST(CacheStoreTest, GivenEntriesOfTwoEnvironmentsWhenListForFingerprintThenOnlyVerifiedEntriesOfThatOne) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Fingerprint h200 = testFingerprint("NVIDIA H200");
  Fingerprint a100 = testFingerprint("NVIDIA A100");
  store->put(kernelEntry(kOp, "v=2", h200));
  store->put(kernelEntry(kOp, "v=1", h200));
  store->put(keepAtenEntry("aten::_log_softmax", "v=1", h200));
  store->put(kernelEntry(kOp, "v=3", h200));
  store->put(kernelEntry(kOp, "v=1", a100));
  RawDb(tmp.path()).flipCubinByte(kOp, "v=3");

  setLogLevel(LogLevel::Warn);
  ::testing::internal::CaptureStderr();
  std::vector<Entry> loaded = store->listForFingerprint(h200.key());
  std::string log = ::testing::internal::GetCapturedStderr();

  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[0].op, "aten::_log_softmax");
  EXPECT_EQ(loaded[1].variant, "v=1");
  EXPECT_EQ(loaded[2].variant, "v=2");
  for (const Entry& e : loaded) {
    EXPECT_EQ(e.fingerprint, h200.key());
    EXPECT_EQ(sha256Hex(e.cubin), e.cubinSha256);
  }
  EXPECT_NE(log.find("variant=v=3"), std::string::npos) << log;
  EXPECT_EQ(store->listForFingerprint(a100.key()).size(), 1u);
}

TEST(CacheStoreTest, GivenEntriesWhenListMetadataThenFilteredWithSizesButNoCubin) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Fingerprint h200 = testFingerprint("NVIDIA H200");
  Fingerprint a100 = testFingerprint("NVIDIA A100");
  store->put(kernelEntry(kOp, "v=1", h200, 1000));
  store->put(kernelEntry(kOp, "v=2", h200, 2000));
  store->put(kernelEntry("aten::_log_softmax", "v=1", a100, 3000));

  std::vector<Entry> all = store->listMetadata();
  ASSERT_EQ(all.size(), 3u);
  int64_t total = 0;
  for (const Entry& e : all) {
    EXPECT_TRUE(e.cubin.empty());
    EXPECT_FALSE(e.fingerprintJson.empty());
    total += e.cubinBytes;
  }
  EXPECT_EQ(total, 6000);

  EntryFilter byOp;
  byOp.op = kOp;
  EXPECT_EQ(store->listMetadata(byOp).size(), 2u);
  EntryFilter byKey;
  byKey.fingerprint = a100.key();
  byKey.op = "aten::_log_softmax";
  byKey.variant = "v=1";
  auto one = store->listMetadata(byKey);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].cubinBytes, 3000);
  byKey.variant = "v=2";
  EXPECT_TRUE(store->listMetadata(byKey).empty());
}

TEST(CacheStoreTest, GivenOneTamperedEntryWhenVerifyAllThenOnlyItFails) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  for (int i = 0; i < 4; ++i) store->put(kernelEntry(kOp, "v=" + std::to_string(i)));
  store->put(keepAtenEntry(kOp, "v=keep"));
  RawDb(tmp.path()).flipCubinByte(kOp, "v=2", 100);

  auto reports = store->verifyAll();
  ASSERT_EQ(reports.size(), 5u);
  int failed = 0;
  for (const auto& r : reports) {
    if (r.status == VerifyStatus::Ok) continue;
    ++failed;
    EXPECT_EQ(r.variant, "v=2");
    EXPECT_EQ(r.status, VerifyStatus::HashMismatch);
    EXPECT_STREQ(toString(r.status), "hash-mismatch");
  }
  EXPECT_EQ(failed, 1);
  EntryFilter one;
  one.variant = "v=1";
  auto single = store->verify(one);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].status, VerifyStatus::Ok);
}

TEST(CacheStoreTest, GivenFilterWhenRemoveThenOnlyMatchingEntriesGo) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  Fingerprint a100 = testFingerprint("NVIDIA A100");
  store->put(kernelEntry(kOp, "v=1"));
  store->put(kernelEntry(kOp, "v=2"));
  store->put(kernelEntry("aten::_log_softmax", "v=1"));
  store->put(kernelEntry(kOp, "v=1", a100));

  EntryFilter f;
  f.op = kOp;
  f.variant = "v=1";
  EXPECT_EQ(store->remove(f), 2u);
  EXPECT_EQ(store->listMetadata().size(), 2u);
  EXPECT_TRUE(store->listMetadata(f).empty());
  f = EntryFilter{};
  f.fingerprint = a100.key();
  EXPECT_EQ(store->remove(f), 0u);
}

TEST(CacheStoreTest, GivenEmptyFilterWhenRemoveThenRefusedButRemoveAllWorks) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  store->put(kernelEntry(kOp, "v=1"));
  store->put(kernelEntry(kOp, "v=2"));
  EXPECT_NE(errorOf([&] { store->remove(EntryFilter{}); }).find("removeAll"), std::string::npos);
  EXPECT_EQ(store->listMetadata().size(), 2u);
  EXPECT_EQ(store->removeAll(), 2u);
  EXPECT_TRUE(store->listMetadata().empty());
}

TEST(CacheStoreTest, GivenLargeEntriesRemovedWhenCheckpointedThenFileShrinks) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  for (int i = 0; i < 16; ++i) store->put(kernelEntry(kOp, "v=" + std::to_string(i), testFingerprint(), 256 * 1024));
  RawDb raw(tmp.path());
  raw.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  off_t full = std::filesystem::file_size(store->databasePath());
  EXPECT_GT(full, 4 * 1024 * 1024);
  store->removeAll();
  raw.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  EXPECT_LT(std::filesystem::file_size(store->databasePath()), 64 * 1024u);
}

TEST(CacheStoreTest, GivenStoreClosedWhenReopenedThenEntriesPersist) {
  TempDir tmp;
  Entry e = kernelEntry(kOp, kVariant);
  CacheStore::open(tmp.path())->put(e);
  auto reopened = CacheStore::open(tmp.path());
  ASSERT_TRUE(reopened->get(e.fingerprint, kOp, kVariant).has_value());
  auto readOnly = CacheStore::openReadOnly(tmp.path());
  ASSERT_NE(readOnly, nullptr);
  EXPECT_TRUE(readOnly->readOnly());
  EXPECT_EQ(readOnly->get(e.fingerprint, kOp, kVariant)->cubin, e.cubin);
}

TEST(CacheStoreTest, GivenNoCacheWhenOpenReadOnlyThenNullAndNothingCreated) {
  TempDir tmp;
  EXPECT_EQ(CacheStore::openReadOnly(tmp.sub("missing")), nullptr);
  EXPECT_FALSE(std::filesystem::exists(tmp.sub("missing")));
  EXPECT_EQ(CacheStore::openReadOnly(tmp.path()), nullptr);  // directory without database
  EXPECT_FALSE(std::filesystem::exists(CacheStore::databasePathFor(tmp.path())));
}

TEST(CacheStoreTest, GivenReadOnlyStoreWhenWritingThenRefusedAndDatabaseUnchanged) {
  TempDir tmp;
  CacheStore::open(tmp.path())->put(kernelEntry(kOp, "v=1"));
  auto store = CacheStore::openReadOnly(tmp.path());
  ASSERT_NE(store, nullptr);
  EXPECT_NE(errorOf([&] { store->put(kernelEntry(kOp, "v=2")); }).find("read-only"), std::string::npos);
  EntryFilter f;
  f.op = kOp;
  EXPECT_NE(errorOf([&] { store->remove(f); }).find("read-only"), std::string::npos);
  EXPECT_EQ(CacheStore::open(tmp.path())->listMetadata().size(), 1u);
}

TEST(CacheStoreTest, GivenRelativeDirWithTrailingSlashWhenOpenThenPathsAbsolute) {
  TempDir tmp;
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(tmp.path().c_str()), 0);
  auto store = CacheStore::open("rel/cache/");
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_EQ(store->directory(), tmp.path() + "/rel/cache");
  EXPECT_EQ(CacheStore::databasePathFor(tmp.path() + "//"), tmp.path() + "/kernels.sqlite");
}

// --- permission checks -------------------------------------------------------

TEST(CacheStoreTest, GivenWorldWritableDirWhenOpenThenRefused) {
  TempDir tmp;
  std::string dir = tmp.sub("cache");
  CacheStore::open(dir)->put(kernelEntry(kOp, kVariant));
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  std::string error = errorOf([&] { CacheStore::open(dir); });
  EXPECT_NE(error.find("writable by group or others (mode 0777)"), std::string::npos) << error;
  EXPECT_NE(errorOf([&] { CacheStore::openReadOnly(dir); }).find("writable by group or others"), std::string::npos);
}

TEST(CacheStoreTest, GivenGroupWritableDirWhenOpenThenRefused) {
  TempDir tmp;
  std::string dir = tmp.sub("cache");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  EXPECT_NE(errorOf([&] { CacheStore::open(dir); }).find("writable by group or others"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/kernels.sqlite"));
}

TEST(CacheStoreTest, GivenPrivateOrReadableDirWhenOpenThenAccepted) {
  TempDir tmp;
  for (mode_t mode : {0700, 0755}) {
    std::string dir = tmp.sub("cache" + std::to_string(mode));
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    EXPECT_NO_THROW(CacheStore::open(dir)->put(kernelEntry(kOp, kVariant))) << std::oct << mode;
  }
}

TEST(CacheStoreTest, GivenSymlinkToPrivateDirWhenOpenThenRefused) {
  TempDir tmp;
  std::string real = tmp.sub("real");
  CacheStore::open(real);
  std::string link = tmp.sub("link");
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  EXPECT_NE(errorOf([&] { CacheStore::open(link); }).find("symlink"), std::string::npos);
  EXPECT_NE(errorOf([&] { CacheStore::open(link + "/"); }).find("symlink"), std::string::npos);
  EXPECT_NE(errorOf([&] { CacheStore::openReadOnly(link); }).find("symlink"), std::string::npos);
}

TEST(CacheStoreTest, GivenFileInPlaceOfDirWhenOpenThenRefused) {
  TempDir tmp;
  std::string path = tmp.sub("file");
  test::writeFile(path, "x");
  EXPECT_NE(errorOf([&] { CacheStore::open(path); }).find("not a directory"), std::string::npos);
}

TEST(CacheStoreTest, GivenSymlinkedDatabaseFileWhenOpenThenRefused) {
  TempDir tmp;
  std::string elsewhere = tmp.sub("elsewhere");
  CacheStore::open(elsewhere);
  std::string dir = tmp.sub("cache");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::symlink((elsewhere + "/kernels.sqlite").c_str(), (dir + "/kernels.sqlite").c_str()), 0);
  EXPECT_NE(errorOf([&] { CacheStore::open(dir); }).find("symlink"), std::string::npos);
}

TEST(CacheStoreTest, GivenWorldWritableDatabaseOrWalFileWhenOpenThenRefused) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path());
  store->put(kernelEntry(kOp, kVariant));  // keeps -wal and -shm in place while `store` is open
  for (std::string suffix : {"", "-wal", "-shm"}) {
    std::string file = store->databasePath() + suffix;
    ASSERT_TRUE(std::filesystem::exists(file)) << file;
    ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
    std::string error = errorOf([&] { CacheStore::open(tmp.path()); });
    EXPECT_NE(error.find("refusing cache file " + file), std::string::npos) << error;
    ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  }
  EXPECT_NO_THROW(CacheStore::open(tmp.path()));
}

TEST(CacheStoreTest, GivenDirOwnedByAnotherUserWhenOpenThenRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  TempDir tmp;
  std::string dir = tmp.sub("cache");
  CacheStore::open(dir);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  std::string error = errorOf([&] { CacheStore::open(dir); });
  EXPECT_NE(error.find("owned by uid 65534, not by the current user"), std::string::npos) << error;
  ASSERT_EQ(::chown(dir.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown((dir + "/kernels.sqlite").c_str(), 65534, 65534), 0);
  EXPECT_NE(errorOf([&] { CacheStore::open(dir); }).find("owned by uid 65534"), std::string::npos);
}

}  // namespace
}  // namespace hotkernel::cache
