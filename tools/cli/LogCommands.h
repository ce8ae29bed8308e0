#pragma once
// `hotkernel log` and `hotkernel report`: read the experiment log
// (<cacheDir>/experiments.jsonl, optimizer/schedule/include/hotkernel/optimizer/ExperimentLog.h)
// and print it as a table or JSON, or draw it as an SVG chart (SvgReport.h).

#include "ExitStatus.h"

namespace CLI {
class App;
}

namespace hotkernel::cli {

// Adds the `log` and `report` commands to `app`. Like the cache commands, each
// writes its result to stdout, diagnostics to stderr, and its exit code to
// `status`; a log that cannot be read (a symlink, no permission) or a chart
// that cannot be written throws hotkernel::Error, which main turns into exit code 2.
//   log:    0 (also when there is no log or nothing matches: an empty listing)
//   report: 0 written; 1 nothing to plot (no experiment matches)
void addLogCommands(CLI::App& app, ExitStatus& status);

}  // namespace hotkernel::cli
