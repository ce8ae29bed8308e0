// Importing a bundle's entries: Note [Importing a bundle is idempotent] in
// hotkernel/cache/BundleImport.h.

#include "hotkernel/cache/BundleImport.h"

#include <memory>
#include <utility>

#include "EntryRecord.h"
#include "hotkernel/cache/CacheStore.h"

namespace hotkernel::cache {

const char* toString(ImportAction action) {
  switch (action) {
    case ImportAction::Add: return "added";
    case ImportAction::Replace: return "replaced";
    case ImportAction::Unchanged: return "unchanged";
    case ImportAction::KeepLocal: return "kept";
  }
  return "added";
}

ImportAction importActionFor(const Entry& incoming, const std::optional<Entry>& local, bool localFailsChecks) {
  if (!local) return localFailsChecks ? ImportAction::Replace : ImportAction::Add;
  if (detail::recordDigest(*local) == detail::recordDigest(incoming)) return ImportAction::Unchanged;
  return local->createdUnix > incoming.createdUnix ? ImportAction::KeepLocal : ImportAction::Replace;
}

ImportCounts importEntries(const std::string& dir, const EntryTrust& trust, const std::vector<Entry>& entries) {
  ImportCounts counts;
  std::vector<const Entry*> toWrite;
  // Decide on a read-only open: a cache that already holds every entry is never opened for writing.
  std::unique_ptr<CacheStore> reader = CacheStore::openReadOnly(dir, trust);
  for (const Entry& e : entries) {
    std::optional<Entry> local;
    bool failsChecks = false;
    if (reader) {
      local = reader->get(e.fingerprint, e.op, e.variant);
      if (!local) {
        EntryFilter key{e.fingerprint, e.op, e.variant};
        failsChecks = !reader->listMetadata(key).empty();
      }
    }
    switch (importActionFor(e, local, failsChecks)) {
      case ImportAction::Add: ++counts.added; toWrite.push_back(&e); break;
      case ImportAction::Replace: ++counts.replaced; toWrite.push_back(&e); break;
      case ImportAction::Unchanged: ++counts.unchanged; break;
      case ImportAction::KeepLocal: ++counts.kept; break;
    }
  }
  reader.reset();
  if (toWrite.empty()) return counts;
  std::unique_ptr<CacheStore> store = CacheStore::open(dir, trust);
  for (const Entry* e : toWrite) store->put(*e);
  return counts;
}

}  // namespace hotkernel::cache
