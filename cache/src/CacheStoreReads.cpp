// The store's reads: one entry, a fingerprint's entries, metadata, and
// verify. Every read that returns an entry recomputes its digests first, and
// in signed mode checks its signature (Note [Entry signature, v1]).

#include <atomic>

#include "hotkernel/cache/CacheStore.h"

#include <iterator>
#include <utility>

#include "EntryRecord.h"
#include "Sqlite.h"
#include "StoreSql.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using detail::Statement;
using detail::WhereClause;
using detail::whereFor;

// Column order of readRow; cubin (optional) comes last, see the schema note.
constexpr const char* kMetadataColumns =
    "fingerprint, op, variant, fingerprint_json, decision, family, params, kernel_name, cubin_sha256, metrics, "
    "created_unix, record_sha256, length(cubin)";

// "SELECT <metadata>, <signature>[, cubin] FROM entries": stores before format 3
// (read-only opens) have no signature column and read as unsigned.
std::string selectEntries(int formatVersion, bool withCubin) {
  return std::string("SELECT ") + kMetadataColumns + (formatVersion >= 3 ? ", signature" : ", '' AS signature") +
         (withCubin ? ", cubin" : "") + " FROM entries";
}

struct StoredRow {
  Entry entry;
  std::string recordSha256;
  std::string signature;
};

StoredRow readRow(const Statement& st, bool withCubin) {
  StoredRow row;
  Entry& e = row.entry;
  e.fingerprint = st.text(0);
  e.op = st.text(1);
  e.variant = st.text(2);
  e.fingerprintJson = st.text(3);
  e.decision = st.text(4);
  e.family = st.text(5);
  e.params = st.text(6);
  e.kernelName = st.text(7);
  e.cubinSha256 = st.text(8);
  e.metrics = st.text(9);
  e.createdUnix = st.integer(10);
  row.recordSha256 = st.text(11);
  e.cubinBytes = st.integer(12);
  row.signature = st.text(13);
  if (withCubin) e.cubin = st.blob(14);
  return row;
}

void logRefusal(const std::string& dbPath, const VerifyReport& r) {
  HOTKERNEL_LOG_ONCE(Warn, "cache-refused:" + dbPath + "|" + r.fingerprint + "|" + r.op + "|" + r.variant)
      << "refusing cache entry op=" << r.op << " variant=" << r.variant << " fingerprint=" << r.fingerprint << " in "
      << dbPath << ": " << toString(r.status) << ": " << r.detail
      << "; the original kernel is used instead (see `hotkernel cache verify`)";
}

}  // namespace

bool CacheStore::acceptForLoading(const VerifyReport& report) const {
  if (report.status == VerifyStatus::Ok) return true;
  if (report.status == VerifyStatus::Unsigned || report.status == VerifyStatus::BadSignature) {
    signatureRefusals_.fetch_add(1, std::memory_order_relaxed);
  }
  logRefusal(dbPath_, report);
  return false;
}

std::optional<Entry> CacheStore::get(const std::string& fingerprint, const std::string& op,
                                     const std::string& variant) const {
  std::lock_guard<std::mutex> guard(mu_);
  Statement st(*db_, selectEntries(formatVersion_, true) + " WHERE fingerprint = ?1 AND op = ?2 AND variant = ?3",
               "read entry");
  st.bindText(1, fingerprint);
  st.bindText(2, op);
  st.bindText(3, variant);
  if (!st.step()) return std::nullopt;
  StoredRow row = readRow(st, /*withCubin=*/true);
  if (!acceptForLoading(detail::verifyStored(row.entry, row.recordSha256, row.signature, trust_))) return std::nullopt;
  return std::move(row.entry);
}

std::vector<Entry> CacheStore::listForFingerprint(const std::string& fingerprint) const {
  std::lock_guard<std::mutex> guard(mu_);
  Statement st(*db_, selectEntries(formatVersion_, true) + " WHERE fingerprint = ?1 ORDER BY op, variant",
               "list entries");
  st.bindText(1, fingerprint);
  std::vector<Entry> out;
  while (st.step()) {
    StoredRow row = readRow(st, /*withCubin=*/true);
    if (acceptForLoading(detail::verifyStored(row.entry, row.recordSha256, row.signature, trust_))) {
      out.push_back(std::move(row.entry));
    }
  }
  return out;
}

std::vector<Entry> CacheStore::listMetadata(const EntryFilter& filter) const {
  WhereClause where = whereFor(filter);
  std::lock_guard<std::mutex> guard(mu_);
  Statement st(*db_, selectEntries(formatVersion_, false) + where.sql + " ORDER BY fingerprint, op, variant",
               "list entries");
  where.bind(st);
  std::vector<Entry> out;
  while (st.step()) out.push_back(readRow(st, /*withCubin=*/false).entry);
  return out;
}

std::vector<VerifyReport> CacheStore::verify(const EntryFilter& filter) const {
  WhereClause where = whereFor(filter);
  std::lock_guard<std::mutex> guard(mu_);
  std::vector<VerifyReport> out;
  auto databaseReport = [&out](std::string detail) {
    VerifyReport r;
    r.status = VerifyStatus::Malformed;
    r.detail = "database: " + std::move(detail);
    out.push_back(std::move(r));
  };
  try {
    if (filter.selectsAll()) {
      // Structural check of every page (b-trees, free list), not just our rows.
      Statement check(*db_, "PRAGMA quick_check(20)", "quick_check");
      std::string problems;
      while (check.step()) {
        std::string line = check.text(0);
        if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
      }
      if (!problems.empty()) databaseReport(problems);
    }
    Statement st(*db_, selectEntries(formatVersion_, true) + where.sql + " ORDER BY fingerprint, op, variant",
                 "verify entries");
    where.bind(st);
    while (st.step()) {
      StoredRow row = readRow(st, /*withCubin=*/true);
      out.push_back(detail::verifyStored(row.entry, row.recordSha256, row.signature, trust_));
    }
    std::vector<VerifyReport> lost = lostReports(filter);
    out.insert(out.end(), std::make_move_iterator(lost.begin()), std::make_move_iterator(lost.end()));
  } catch (const Error& e) {
    // A damaged page stops the scan; report it with whatever was verified before.
    databaseReport(e.what());
  }
  return out;
}

}  // namespace hotkernel::cache
