// The store against its commit log (Note [Commits lost with the WAL] in
// CommitLog.h): at a read-write open, reconcile the two (warn about lost
// commits, number new commits above every logged one, compact the log); for
// verify, report every key whose logged write the database lacks.

#include "hotkernel/cache/CacheStore.h"

#include <sys/stat.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>

#include "CommitLog.h"
#include "SafePath.h"
#include "Sqlite.h"
#include "StoreSql.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using detail::CommitLogContents;
using detail::CommitRecord;
using detail::Database;
using detail::metaInt;
using detail::Statement;
using detail::WriteTransaction;

using Key = std::tuple<std::string, std::string, std::string>;  // (fingerprint, op, variant)

bool matches(const EntryFilter& f, const CommitRecord& r) {
  return (!f.fingerprint || *f.fingerprint == r.fingerprint) && (!f.op || *f.op == r.op) &&
         (!f.variant || *f.variant == r.variant);
}

// The latest record per key of this store's commits in `log`, those matching `filter`.
std::map<Key, CommitRecord> latestCommits(const CommitLogContents& log, const std::string& storeId,
                                          const EntryFilter& filter) {
  std::map<Key, CommitRecord> latest;
  for (const CommitRecord& r : log.records) {
    if (r.store != storeId || !matches(filter, r)) continue;
    auto [it, inserted] = latest.try_emplace(Key{r.fingerprint, r.op, r.variant}, r);
    if (!inserted && r.seq > it->second.seq) it->second = r;
  }
  return latest;
}

// What the database lacks of `latest` (Note [Commits lost with the WAL]): one
// report per key. `latest` must have been read from the log before this call.
std::vector<VerifyReport> findLost(Database& db, const std::map<Key, CommitRecord>& latest) {
  std::vector<VerifyReport> out;
  if (latest.empty()) return out;
  Statement st(db, "SELECT commit_seq FROM entries WHERE fingerprint = ?1 AND op = ?2 AND variant = ?3",
               "check committed entries");
  for (const auto& [key, r] : latest) {
    st.bindText(1, r.fingerprint);
    st.bindText(2, r.op);
    st.bindText(3, r.variant);
    const bool present = st.step();
    const int64_t rowSeq = present ? st.integer(0) : -1;
    st.reset();
    VerifyReport report;
    report.fingerprint = r.fingerprint;
    report.op = r.op;
    report.variant = r.variant;
    report.status = VerifyStatus::Lost;
    const std::string commit = "commit " + std::to_string(r.seq);
    if (r.kind == "put" && !present) {
      report.detail = "stored by " + commit + " but missing from the database";
    } else if (r.kind == "put" && rowSeq < r.seq) {
      report.detail = "stored by " + commit + " but the database holds an older version (commit " +
                      std::to_string(rowSeq) + ")";
    } else if (r.kind == "remove" && present && rowSeq <= r.seq) {
      report.detail = "removed by " + commit + " but back in the database (its version of commit " +
                      std::to_string(rowSeq) + ")";
    } else {
      continue;
    }
    out.push_back(std::move(report));
  }
  return out;
}

}  // namespace

void CacheStore::reconcileCommitLog() {
  std::lock_guard<std::mutex> guard(mu_);
  CommitLogContents log = detail::readCommitLog(commitLogPath_);  // before any database read
  if (!log.exists) {
    const int64_t seq = metaInt(*db_, "commit_seq");
    if (seq > 0) {
      HOTKERNEL_LOG_ONCE(Warn, "cache-no-commit-log:" + dbPath_)
          << "cache commit log " << commitLogPath_ << " is missing; starting a new one (commits up to " << seq
          << " cannot be checked for loss)";
    }
    detail::appendCommitRecords(commitLogPath_, {});
    detail::checkPrivateFile(commitLogPath_);
    return;
  }
  if (!log.readable) {
    HOTKERNEL_LOG_ONCE(Warn, "cache-bad-commit-log:" + dbPath_)
        << "cache commit log " << commitLogPath_ << " is unreadable (" << log.problem
        << "); lost commits cannot be detected; remove it to start a new one";
    return;
  }
  const std::map<Key, CommitRecord> latest = latestCommits(log, storeId_, EntryFilter{});
  const std::vector<VerifyReport> lost = findLost(*db_, latest);
  if (!lost.empty()) {
    HOTKERNEL_LOG_ONCE(Warn, "cache-lost:" + dbPath_)
        << "cache " << dbPath_ << " lost " << lost.size() << (lost.size() == 1 ? " committed entry" : " committed entries")
        << " (e.g. op=" << lost.front().op << " variant=" << lost.front().variant
        << ") that its commit log records: its -wal file was damaged or removed; they will be measured again "
           "(see `hotkernel cache verify`)";
  }
  // New commits must number above every logged one (Note [Commits lost with the WAL]).
  int64_t highest = 0;
  for (const auto& [key, r] : latest) highest = std::max(highest, r.seq);
  if (highest > metaInt(*db_, "commit_seq")) {
    WriteTransaction tx(*db_);
    Statement st(*db_,
                 "UPDATE meta SET value = ?1 WHERE key = 'commit_seq' AND CAST(value AS INTEGER) < ?1",
                 "raise commit number");
    st.bindInt(1, highest);
    st.step();
    tx.commit();
  }
  struct stat st;
  if (::stat(commitLogPath_.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) > detail::kCompactAtBytes) {
    // Lines up to `settled` may go once the database file (not only the -wal) holds that commit.
    const int64_t settled = metaInt(*db_, "commit_seq");
    if (!db_->checkpointPassive()) return;  // readers hold the -wal: compact at a later open
    std::map<Key, bool> lostKeys;
    for (const VerifyReport& r : lost) lostKeys[Key{r.fingerprint, r.op, r.variant}] = true;
    try {
      detail::compactCommitLog(commitLogPath_, [&](const CommitRecord& r) {
        return r.store == storeId_ && (r.seq > settled || lostKeys.count(Key{r.fingerprint, r.op, r.variant}) > 0);
      });
    } catch (const Error& e) {
      HOTKERNEL_LOG_ONCE(Warn, "cache-compact:" + dbPath_) << e.what();
    }
  }
}

std::vector<VerifyReport> CacheStore::lostReports(const EntryFilter& filter) const {
  std::vector<VerifyReport> out;
  if (formatVersion_ < 2) return out;
  CommitLogContents log = detail::readCommitLog(commitLogPath_);  // before any database read
  auto databaseReport = [&out](VerifyStatus status, std::string detail) {
    VerifyReport r;
    r.status = status;
    r.detail = std::move(detail);
    out.push_back(std::move(r));
  };
  if (!log.exists || !log.readable) {
    databaseReport(VerifyStatus::Malformed,
                   "commit log " + commitLogPath_ + (log.exists ? " is unreadable (" + log.problem + ")" : " is missing") +
                       ": committed entries lost with the -wal cannot be detected");
    return out;
  }
  std::vector<VerifyReport> lost = findLost(*db_, latestCommits(log, storeId_, filter));
  if (lost.empty()) return out;
  const int64_t seq = metaInt(*db_, "commit_seq");
  databaseReport(VerifyStatus::Lost,
                 "database: " + std::to_string(lost.size()) +
                     (lost.size() == 1 ? " committed entry is" : " committed entries are") +
                     " missing (listed as lost; the commit log records them, the database ends at commit " +
                     std::to_string(seq) +
                     "): its write-ahead log (-wal) was damaged, truncated or removed, or the database file was "
                     "replaced by an older copy" +
                     (log.damagedLines ? "; " + std::to_string(log.damagedLines) + " damaged commit log lines skipped"
                                       : std::string()));
  out.insert(out.end(), std::make_move_iterator(lost.begin()), std::make_move_iterator(lost.end()));
  return out;
}

}  // namespace hotkernel::cache
