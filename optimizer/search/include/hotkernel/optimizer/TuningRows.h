#pragma once
// How many rows a row family's tuner validates and times on (Note [Tuning on
// a row subset] in src/TuningRows.cpp): all of the variant's when they fit
// the tuner's memory cap, else the most rows that fit, but never fewer than
// fill the GPU. The row-independent families (softmax, log_softmax, the norms,
// the last-dim reductions) share it. No torch.

#include <cstdint>
#include <optional>
#include <string>

namespace hotkernel {

// CTAs a tuning's rows give every SM at least, for the searched point with
// the most rows a CTA (Note [Tuning on a row subset]).
inline constexpr int64_t kFillCtasPerSm = 8;

// What tuning a variant takes in GPU memory: `bytesPerRow` for each row tuned
// on (the harness's buffers, the timed calls' inputs and outputs) and
// `fixedBytes` whatever the rows (the L2 flush buffer). `timedBytesPerRow`:
// what a row of the timed calls alone takes (their inputs and the checks of
// their outputs), for a family whose harness may run on fewer rows than its
// timed calls (Note [A harness on fewer rows] in src/TuningRows.cpp); 0: the
// harness and the timed calls run on the same rows.
struct TuningMemory {
  int64_t bytesPerRow = 0;
  int64_t fixedBytes = 0;
  int64_t timedBytesPerRow = 0;
  // The bytes for `rows` rows, saturating at INT64_MAX.
  int64_t bytes(int64_t rows) const;
};

// The fewest rows that fill `smCount` SMs: kFillCtasPerSm CTAs on each, for a
// family point whose CTAs serve `maxRowsPerCta` rows each (at least 1).
int64_t fillRows(int64_t smCount, int64_t maxRowsPerCta);

// The fewest rows that fill `smCount` SMs when each row takes `ctasPerRow`
// CTAs (at least 1): kFillCtasPerSm CTAs on each, at least one row. For the
// middle-dim layouts, whose outer rows each take a CTA per tile of inner
// positions.
int64_t fillRowsOfCtas(int64_t smCount, int64_t ctasPerRow);

// The rows to tune a `variantRows`-row variant on under `capBytes` (<= 0: no
// cap): variantRows when they fit; else the most rows that fit, when that is
// at least min(fill, variantRows); nullopt when not even that fits.
std::optional<int64_t> tuningRowCount(int64_t variantRows, int64_t fill, const TuningMemory& memory, int64_t capBytes);

// The fewest rows a harness on fewer rows than the timed calls runs on (Note
// [A harness on fewer rows]), or all of the variant's when it has fewer.
inline constexpr int64_t kFewestHarnessRows = 4;

// The rows of a tuning: the timed calls' (the search's costs) and the
// five-stage harness's, at most as many.
struct TuningRowCounts {
  int64_t timed = 0;
  int64_t harness = 0;
  bool operator==(const TuningRowCounts& o) const { return timed == o.timed && harness == o.harness; }
};

// tuningRowCount's rows for both when it gives some; else, with
// memory.timedBytesPerRow set, the timed calls on as many of the variant's
// rows as fit beside kFewestHarnessRows harness rows (never fewer than
// min(fill, variantRows)) and the harness on as many rows as the rest holds
// (Note [A harness on fewer rows]); nullopt when not even that fits.
std::optional<TuningRowCounts> tuningRowCounts(int64_t variantRows, int64_t fill, const TuningMemory& memory,
                                               int64_t capBytes);

// tuningRowCounts, or Error "tuning <what> <rows>x<cols> needs ~N MiB of GPU
// memory ..., over the cap of M MiB" when it gives none.
TuningRowCounts tuningRowsWithinCap(const std::string& what, int64_t variantRows, int64_t cols, int64_t fill,
                                    const TuningMemory& memory, int64_t capBytes);

}  // namespace hotkernel
