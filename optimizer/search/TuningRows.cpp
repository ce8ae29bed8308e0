#include "hotkernel/optimizer/TuningRows.h"

#include <algorithm>
#include <limits>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

// Note [Tuning on a row subset]
// The row families' kernels (softmax and log_softmax, rms_norm and
// layer_norm, the last-dim reductions) are row-independent: a CTA (or a
// cluster) loops over its rows with 64-bit offsets, a row's outputs depend on
// that row's inputs alone, and two variants that differ only in rows differ
// in the launch geometry only in gridX (the family's launchGeometry). With
// the same cols and dtype, a variant of fewer rows has the same valid points
// (the guards look at rows only for addressability), the same alignment
// classes (a row starts at a multiple of cols x element size) and runs the
// same code on every row. So a variant whose tuning needs more GPU memory
// than the tuner's cap is tuned on a [tunedRows, cols] variant instead: its
// candidates, the five-stage harness (whose sweep adds 1 row and tunedRows
// +/- 1), the timed comparison against ATen and the search all run there, but
// only points valid for the full variant are searched, seeded with the
// family's guesses for the full variant, and the result is the full
// variant's: its plan is made by the family's makePlan for the full rows. The
// outcome records tunedRows (Note [Tune metrics JSON]); its times are the
// tuned rows', its speed-ups the variant's. The target's roofline is the full
// variant's time, so the search's near-roofline stop compares a tuned-rows
// time with the roofline scaled by tunedRows / rows, and the target's bestUs
// is the tuned-rows time scaled by rows / tunedRows (tuneFamily).
//
// tunedRows is the most rows the cap holds, at most the variant's, and at
// least fillRows: kFillCtasPerSm CTAs on every SM for the searched point with
// the most rows a CTA (a cluster point spreads a row over several CTAs, so it
// gets more). An SM runs 2 (1024 threads) to 8 (256 threads) one-row CTAs at
// once: 8 CTAs an SM fill every SM at full occupancy for CTAs of 256 threads
// and up, and leave at most a quarter of the run to a last, partly filled
// round of 1024-thread CTAs; ATen is timed on the same rows. Smaller CTAs
// run below the occupancy an SM allows at 8 an SM, so on a subset the search
// may rank them lower than the full variant would. Fewer rows would time
// every candidate and ATen on a partly idle GPU that the full variant keeps
// busy: a variant whose fillRows do not fit the cap is refused, and one of
// fewer rows than fillRows is tuned on all of them or refused.
//
// Agent kernels bring their own launch and row loop, not known to be
// row-independent: a tuner that tunes on a subset asks the agent nothing.
//
// cross_entropy stays out: its mean and sum reductions fold every row into
// one value (across CTAs, through a workspace), so the full variant's result
// is not made of rows a subset checks.

// Note [A harness on fewer rows]
// A row subset must fill the GPU to time candidates as the variant runs
// them; a variant of few long rows (a middle-dim reduction of 64 outer rows
// of 32 MiB, whose CTAs per row cannot fill the GPU on fewer) has no such
// subset, and its harness (about 12 input-sized buffers) may not fit the cap
// where its timed calls (two inputs and a float64 copy for the checks of
// their outputs) do. A family whose outputs are small (the reductions) then
// runs the harness on fewer rows than the timed calls: the five stages on
// `harness` rows (at least kFewestHarnessRows, or all of a variant with
// fewer), the timed calls on `timed` rows, as many of the variant's as fit
// beside them, never fewer than fill the GPU. The kernel is row-independent
// (above), so the harness's rows check the code every row runs; the timed
// calls' outputs are checked too (Note [Timed outputs are checked] in
// FamilyTuner.cpp), so every row the search's costs come from is checked
// against the reference as well. Only a variant the cap refuses otherwise
// is tuned so: the rows of one that fits are as before.
int64_t TuningMemory::bytes(int64_t rows) const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (rows > 0 && bytesPerRow > (kMax - fixedBytes) / rows) return kMax;
  return fixedBytes + rows * bytesPerRow;
}

int64_t fillRows(int64_t smCount, int64_t maxRowsPerCta) {
  HOTKERNEL_CHECK(smCount >= 1, "a GPU has at least one SM, got ", smCount);
  return kFillCtasPerSm * smCount * std::max<int64_t>(maxRowsPerCta, 1);
}

int64_t fillRowsOfCtas(int64_t smCount, int64_t ctasPerRow) {
  HOTKERNEL_CHECK(smCount >= 1, "a GPU has at least one SM, got ", smCount);
  const int64_t perRow = std::max<int64_t>(ctasPerRow, 1);
  return std::max<int64_t>((kFillCtasPerSm * smCount + perRow - 1) / perRow, 1);
}

std::optional<int64_t> tuningRowCount(int64_t variantRows, int64_t fill, const TuningMemory& memory,
                                      int64_t capBytes) {
  HOTKERNEL_CHECK(variantRows >= 1 && memory.bytesPerRow >= 1 && memory.fixedBytes >= 0,
                  "a variant of ", variantRows, " rows at ", memory.bytesPerRow, " bytes a row");
  if (capBytes <= 0) return variantRows;
  if (capBytes < memory.fixedBytes) return std::nullopt;
  const int64_t fit = (capBytes - memory.fixedBytes) / memory.bytesPerRow;  // the most rows the cap holds
  if (fit >= variantRows) return variantRows;
  if (fit < std::min(fill, variantRows)) return std::nullopt;
  return fit;
}

std::optional<TuningRowCounts> tuningRowCounts(int64_t variantRows, int64_t fill, const TuningMemory& memory,
                                               int64_t capBytes) {
  const std::optional<int64_t> rows = tuningRowCount(variantRows, fill, memory, capBytes);
  if (rows) return TuningRowCounts{*rows, *rows};
  HOTKERNEL_CHECK(memory.timedBytesPerRow >= 0, "negative timed bytes a row: ", memory.timedBytesPerRow);
  if (memory.timedBytesPerRow == 0) return std::nullopt;
  const int64_t fewestTimed = std::min(fill, variantRows);
  const int64_t fewestHarness = std::min(kFewestHarnessRows, fewestTimed);
  // Room for the timed calls beside the fewest harness rows (bytes() saturates: no overflow).
  const int64_t harnessFloor = memory.bytes(fewestHarness);
  if (harnessFloor >= capBytes) return std::nullopt;
  const int64_t timed = std::min(variantRows, (capBytes - harnessFloor) / memory.timedBytesPerRow);
  if (timed < fewestTimed) return std::nullopt;
  const int64_t left = capBytes - memory.fixedBytes - timed * memory.timedBytesPerRow;
  const int64_t harness = std::min(timed, left / memory.bytesPerRow);
  HOTKERNEL_INTERNAL_ASSERT(harness >= fewestHarness, "the harness rows left beside the timed calls: ", harness);
  return TuningRowCounts{timed, harness};
}

TuningRowCounts tuningRowsWithinCap(const std::string& what, int64_t variantRows, int64_t cols, int64_t fill,
                                    const TuningMemory& memory, int64_t capBytes) {
  const std::optional<TuningRowCounts> rows = tuningRowCounts(variantRows, fill, memory, capBytes);
  if (rows) return *rows;
  const int64_t fewest = std::min(fill, variantRows);
  // The least a split takes (Note [A harness on fewer rows]; saturating like bytes()), named when it is less
  // than the fewest rows whole.
  const int64_t harness = std::min(kFewestHarnessRows, fewest);
  TuningMemory timed;
  timed.bytesPerRow = memory.timedBytesPerRow;
  timed.fixedBytes = memory.bytes(harness);
  if (memory.timedBytesPerRow > 0 && timed.bytes(fewest) < memory.bytes(fewest)) {
    HOTKERNEL_THROW("tuning ", what, " ", variantRows, "x", cols, " needs ~", timed.bytes(fewest) >> 20,
                    " MiB of GPU memory even with its timed calls on ", fewest, " rows and its harness on ",
                    harness, ", over the cap of ", capBytes >> 20, " MiB");
  }
  if (fewest == variantRows) {
    HOTKERNEL_THROW("tuning ", what, " ", variantRows, "x", cols, " needs ~", memory.bytes(variantRows) >> 20,
                    " MiB of GPU memory, over the cap of ", capBytes >> 20, " MiB");
  }
  HOTKERNEL_THROW("tuning ", what, " ", variantRows, "x", cols, " needs ~", memory.bytes(fewest) >> 20,
                  " MiB of GPU memory on its fewest rows (", fewest,
                  ", enough to fill the GPU), over the cap of ", capBytes >> 20,
                  " MiB");
}

}  // namespace hotkernel
