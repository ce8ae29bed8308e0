#include "LogCommands.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "Format.h"
#include "RangeCheck.h"
#include "SvgReport.h"
#include "TextTable.h"
#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Config.h"

namespace hotkernel::cli {
namespace {

// The largest --last: more experiments than a log holds (at most 2 x 64 MiB of lines of a few hundred bytes).
constexpr int64_t kMaxLastExperiments = 1000000;

// Options of both commands; owned by the callbacks through a shared_ptr.
struct LogOptions {
  std::string dir;
  std::string op;
  std::string variant;
  std::string fingerprint;
  bool json = false;
  size_t last = 0;  // 0: all
  std::string out;
  std::string title;
};

void addCommonOptions(CLI::App* cmd, LogOptions& o) {
  cmd->add_option(
      "--dir", o.dir,
      "cache directory holding experiments.jsonl (default: $HOTKERNEL_CACHE_DIR, else $XDG_CACHE_HOME/hotkernel "
      "or ~/.cache/hotkernel)");
  cmd->add_option("--op", o.op, "only experiments of this op, e.g. aten::_softmax");
  cmd->add_option("--variant", o.variant, "only experiments of this variant (the cache's variant string)");
  cmd->add_option("--fingerprint", o.fingerprint, "only experiments of this environment");
}

std::string logDir(const LogOptions& o) { return o.dir.empty() ? hotkernel::config().cacheDir : o.dir; }

ExperimentReadResult read(const LogOptions& o) {
  ExperimentFilter filter;
  filter.op = o.op;
  filter.variant = o.variant;
  filter.fingerprint = o.fingerprint;
  ExperimentReadResult r = readExperiments(logDir(o), filter);
  if (r.skipped > 0) {
    std::cerr << "hotkernel: skipped " << r.skipped << (r.skipped == 1 ? " line" : " lines")
              << " of the experiment log that could not be read (corrupt or truncated";
    if (r.newerVersion > 0) std::cerr << "; " << r.newerVersion << " of a newer format version: upgrade hotkernel";
    std::cerr << ")\n";
  }
  return r;
}

// Table cells are one line: control characters become spaces.
std::string cell(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out.empty() ? "-" : out;
}

std::string number(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, *v);
  return buf;
}

std::string id(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

// "pass" when every stage passed, else the stages that did not ("fail:sweep,stability"); "-" when none ran.
std::string stagesCell(const Experiment& e) {
  if (e.stages.empty()) return "-";
  std::string bad;
  for (const auto& [stage, outcome] : e.stages) {
    if (outcome == "pass") continue;
    bad += (bad.empty() ? "" : ",") + stage + (outcome == "fail" ? "" : "=" + outcome);
  }
  return bad.empty() ? "pass" : "fail:" + bad;
}

std::string speedupCell(const Experiment& e) {
  if (!e.timings.speedup) return "-";
  std::string s = number(e.timings.speedup, "%.2fx");
  if (e.timings.speedupCi) {
    s += " [" + number(e.timings.speedupCi->first, "%.2f") + "," + number(e.timings.speedupCi->second, "%.2f") + "]";
  }
  return s;
}

std::string utc(double time) { return formatUtc(static_cast<int64_t>(std::floor(time))); }

// --- log ---------------------------------------------------------------------

// log --json: {"format":"hotkernel-log","version":2,"log":<experiments.jsonl path>,"found":<a log file exists>,
// "matching":N (experiments matching the filters),"skipped":N (lines that could not be read),"experiments":[the
// last --last matching experiments, oldest first, each the log's own object (format "hotkernel-experiment",
// version 2; a version 1 line shown as version 2: Note [Experiment line versions] in ExperimentLog.h)]}.
// Version 1 is the same document whose experiments were version 1 lines (camelCase keys).
constexpr const char* kLogFormat = "hotkernel-log";
constexpr int kLogVersion = 2;

void runLog(const LogOptions& o) {
  ExperimentReadResult r = read(o);
  const size_t n = r.experiments.size();
  const size_t first = o.last > 0 && o.last < n ? n - o.last : 0;
  if (o.json) {
    nlohmann::ordered_json experiments = nlohmann::ordered_json::array();
    for (size_t i = first; i < n; ++i) experiments.push_back(nlohmann::ordered_json(r.experiments[i].toJson()));
    const nlohmann::ordered_json out = {{"format", kLogFormat},
                                        {"version", kLogVersion},
                                        {"log", ExperimentLog::pathFor(logDir(o))},
                                        {"found", !r.files.empty()},
                                        {"matching", n},
                                        {"skipped", r.skipped},
                                        {"experiments", std::move(experiments)}};
    std::cout << out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return;
  }
  if (r.files.empty()) {
    std::cerr << "no experiment log at " << ExperimentLog::pathFor(logDir(o)) << "\n";
    return;
  }
  TextTable table({"#", "TIME (UTC)", "OP", "VARIANT", "CAND", "PARENT", "PARAMS", "STAGES", "SPEEDUP", "KERNEL US",
                   "ATEN US", "DECISION", "REASON"});
  size_t accepted = 0, rejected = 0, keptAten = 0;
  for (size_t i = 0; i < n; ++i) {
    const Experiment& e = r.experiments[i];
    accepted += e.decision == ExperimentDecision::Accepted;
    rejected += e.decision == ExperimentDecision::Rejected;
    keptAten += e.decision == ExperimentDecision::KeptAten;
    if (i < first) continue;
    // # is the index among all matching experiments in time order, as `report` numbers them.
    table.addRow({std::to_string(i + 1), utc(e.time), cell(e.op), cell(e.variant), id(e.candidateId), id(e.parentId),
                  cell(formatParams(e.params)), stagesCell(e), speedupCell(e), number(e.timings.kernelUs, "%.1f"),
                  number(e.timings.atenUs, "%.1f"), toString(e.decision), cell(e.reason)});
  }
  if (table.rows() > 0) std::cout << table.render();
  std::cout << n << (n == 1 ? " experiment" : " experiments") << " (" << accepted << " accepted, " << rejected
            << " rejected, " << keptAten << " kept_aten)";
  if (first > 0) std::cout << ", the last " << (n - first) << " shown";
  std::cout << ", in " << ExperimentLog::pathFor(logDir(o)) << "\n";
}

// --- report ------------------------------------------------------------------

void runReport(const LogOptions& o, ExitStatus& status) {
  ExperimentReadResult r = read(o);
  if (r.experiments.empty()) {
    std::cerr << "hotkernel report: no experiments to plot in " << ExperimentLog::pathFor(logDir(o))
              << (o.op.empty() && o.variant.empty() && o.fingerprint.empty() ? "" : " matching the filters") << "\n";
    status.code = kExitProblem;
    return;
  }
  SvgReportOptions options;
  if (!o.title.empty()) options.title = o.title;
  std::string subtitle;
  if (!o.op.empty()) subtitle += "op " + o.op;
  if (!o.variant.empty()) subtitle += (subtitle.empty() ? "" : ", ") + std::string("variant ") + o.variant;
  if (!o.fingerprint.empty()) subtitle += (subtitle.empty() ? "" : ", ") + std::string("fingerprint ") + o.fingerprint;
  options.subtitle = subtitle;
  const std::string svg = renderSpeedupSvg(r.experiments, options);

  std::ofstream out(o.out, std::ios::binary | std::ios::trunc);
  HOTKERNEL_REQUIRE(out.good(), "cannot write ", o.out);
  out << svg;
  out.close();
  HOTKERNEL_REQUIRE(!out.fail(), "cannot write ", o.out);
  std::cout << "wrote " << o.out << ": " << r.experiments.size()
            << (r.experiments.size() == 1 ? " experiment" : " experiments") << "\n";
}

}  // namespace

void addLogCommands(CLI::App& app, ExitStatus& status) {
  auto o = std::make_shared<LogOptions>();

  CLI::App* log = app.add_subcommand("log", "list the optimizer's experiments (one per candidate evaluation)");
  addCommonOptions(log, *o);
  log->add_flag("--json", o->json, "print one JSON object (format hotkernel-log, version 2) instead of a table");
  log->add_option("--last", o->last, "only the last N matching experiments")
      ->check(integerInRange(1, kMaxLastExperiments));
  log->callback([o] { runLog(*o); });

  CLI::App* report = app.add_subcommand("report", "draw speed-up vs ATen per experiment as a standalone SVG chart");
  addCommonOptions(report, *o);
  report->add_option("--out", o->out, "the SVG file to write")->required();
  report->add_option("--title", o->title, "chart title");
  report->callback([o, &status] { runReport(*o, status); });
}

}  // namespace hotkernel::cli
