#pragma once
// The plan table: which variants of one op run a replacement kernel.
//
// Note [Hot swap without re-registration]
// Each overridden op has ONE stateless trampoline registered once in the
// dispatcher (re-registering is not atomic for readers). The trampoline reads
// a PlanSlot: an std::atomic<const PlanTable*>. A PlanTable is immutable once
// published; publishing builds a new table (old plans + the new one) and
// swaps the pointer. Old tables are retired but never freed while the process
// lives, because a call may still be reading them; plans are few (one per hot
// variant), so the memory is bounded by the number of publications.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel {

// The exact variant of a row op: dtype code, device, rows, cols, a word of
// options whose meaning the op's family defines (which optional inputs the call
// passes, a mode such as cross_entropy_loss's reduction: Note [Variant
// options] in kernels/VariantOptions.h), and a third extent, `inner`, for the
// keys that have one (0 for two-extent keys; a reduction over a middle dim is
// rows = outer, cols = the reduced extent, inner = the kept extent after it),
// and four more extents, `more`, for the keys of ops with more dimensions
// (all 0 for every other key; attention: heads, key/value heads, head dims).
// This layer stores, compares and hashes the word and the extents; it knows
// no family.
struct VariantKey {
  int32_t dtype = 0;    // hotkernel::kernels::DType as int
  int32_t device = 0;   // device ordinal (-1 for CPU)
  int64_t rows = 0;
  int64_t cols = 0;
  int32_t options = 0;  // family-defined; 0: none
  int64_t inner = 0;    // family-defined third extent; 0: none
  int64_t more[4] = {};  // family-defined further extents; all 0: none
  bool hasMore() const { return more[0] != 0 || more[1] != 0 || more[2] != 0 || more[3] != 0; }
  bool operator==(const VariantKey& o) const {
    return dtype == o.dtype && device == o.device && rows == o.rows && cols == o.cols && options == o.options &&
           inner == o.inner && more[0] == o.more[0] && more[1] == o.more[1] && more[2] == o.more[2] &&
           more[3] == o.more[3];
  }
};

struct VariantKeyHash {
  size_t operator()(const VariantKey& k) const noexcept {
    uint64_t h = static_cast<uint64_t>(k.rows) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.cols) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.dtype)) << 32) | static_cast<uint32_t>(k.device);
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(k.options)) << 48;
    h ^= static_cast<uint64_t>(k.inner) * 0xD6E8FEB86659FD93ull;
    for (int64_t m : k.more) h = (h ^ static_cast<uint64_t>(m)) * 0x100000001B3ull + (h >> 29);
    return static_cast<size_t>(h * 0xBF58476D1CE4E5B9ull);
  }
};

// Arguments of the row-kernel ABI shared by the last-dim families:
// kernel(const void* in, void* out, long long rows, long long cols).
struct RowKernelArgs {
  const void* in;
  void* out;
  int64_t rows;
  int64_t cols;
};

// Something that runs a replacement kernel. launch() must not throw; false
// means "not launched, run the original kernel".
class KernelLauncher {
 public:
  virtual ~KernelLauncher() = default;
  virtual bool launch(const RowKernelArgs& args, void* stream) const noexcept = 0;
  // The same for a kernel of another ABI (the norm families): the full
  // argument list in the kernel's parameter order (Note [Kernel argument
  // lists]). The default launches nothing.
  virtual bool launchArgs(const KernelArgs& /*args*/, void* /*stream*/) const noexcept { return false; }
  // Required alignment (bytes) of the input and output data pointers.
  virtual size_t alignment() const = 0;
  virtual std::string describe() const = 0;
};

struct Plan {
  VariantKey key;
  std::shared_ptr<const KernelLauncher> launcher;
  std::string description;  // family + params, for logs
  // float32 scratch a launch takes (0: none), its last float a counter that
  // must be 0 at launch: the caller takes it from StreamWorkspaces (a
  // grid-split norm point: RmsNormFamily / LayerNormFamily::workspaceFloats).
  int64_t workspaceFloats = 0;
};

class PlanTable {
 public:
  PlanTable() = default;
  // nullptr when the variant has no plan. Lock-free; the table is immutable.
  const Plan* find(const VariantKey& key) const {
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : &it->second;
  }
  size_t size() const { return plans_.size(); }
  std::vector<const Plan*> all() const;
  // A copy of this table with `plan` added (or replacing the plan of its key).
  std::unique_ptr<PlanTable> with(Plan plan) const;

 private:
  std::unordered_map<VariantKey, Plan, VariantKeyHash> plans_;
};

// The published table of one op.
class PlanSlot {
 public:
  PlanSlot();
  const PlanTable* load() const { return current_.load(std::memory_order_acquire); }
  // Publishes a table with `plan` added. Thread-safe; readers never block.
  void publish(Plan plan);

 private:
  std::atomic<const PlanTable*> current_;
  std::mutex writeMu_;
  // Every table ever published, kept alive for the life of the process.
  // Precondition for mutation: writeMu_ held.
  std::vector<std::unique_ptr<const PlanTable>> tables_;
};

}  // namespace hotkernel
