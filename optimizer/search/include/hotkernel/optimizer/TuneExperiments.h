#pragma once
// The experiment-log lines of one tuning (Note [Experiment line format] in
// ExperimentLog.h), made from the typed outcome (TuneOutcome.h). No torch.

#include <string>
#include <vector>

#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/optimizer/TuneOutcome.h"

namespace hotkernel {

// One line per candidate the tuner tried, in order: "accepted" for the kernel
// that was swapped in (the candidate whose params are the outcome's and that
// was chosen), "rejected" with the reason for every other one; then, when
// nothing was accepted, a "kept_aten" line. The line that closes the search
// (the accepted one, or the kept_aten one) carries the search's stop (Note
// [Ranking in the experiment log]). Lines are stamped when appended.
std::vector<Experiment> tuneExperiments(const std::string& fingerprint, const std::string& op,
                                        const std::string& variant, const TuneOutcome& out);

}  // namespace hotkernel
