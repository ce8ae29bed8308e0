#pragma once
// The chart of `hotkernel report`: speed-up vs ATen per experiment, as a
// standalone SVG 1.1 document written by hand (no library, no scripts, no
// external references, so it opens in any browser or viewer).
//
// Note [Report chart]
// x is the experiment's index in time order (1-based, as `hotkernel log`
// numbers them), y the measured speed-up vs ATen (ATen time / kernel time).
// One colour per series (a variant; "op variant" when several ops are
// shown), a dashed reference line at 1.0x (its key in the legend, so no
// label covers a marker), the 95% CI as a vertical bar. Each
// experiment is exactly one element with class "marker": an accepted
// candidate is a diamond outlined in black ("marker accepted"), any other
// timed candidate a circle ("marker measured"), and one that failed before it
// could be timed a cross on the bottom edge ("marker failed"). Every marker
// carries a <title> tooltip (id, parent, params, speed-up, decision, reason).

#include <string>
#include <vector>

#include "hotkernel/optimizer/ExperimentLog.h"

namespace hotkernel::cli {

struct SvgReportOptions {
  std::string title = "hotkernel: speed-up vs ATen per experiment";
  std::string subtitle;  // e.g. the filters and the log's path; empty: a summary line only
  int width = 1100;
  int height = 560;
};

// Renders `experiments` (in time order) as an SVG document ("<svg ...>...</svg>\n").
// With no experiments the chart is empty but well-formed.
std::string renderSpeedupSvg(const std::vector<Experiment>& experiments, const SvgReportOptions& options = {});

// "items=16 threads=256 vec=8": a params object in one line (keys in order,
// strings unquoted); "-" for an empty or non-object value. Also used by `hotkernel log`.
std::string formatParams(const nlohmann::json& params);

// Text and attribute escaping for XML: & < > " ' as entities; control
// characters other than tab and newline (invalid in XML 1.0) become spaces.
std::string escapeXml(const std::string& text);

}  // namespace hotkernel::cli
