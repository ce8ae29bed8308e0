#include "DoctorCommand.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "ErrorText.h"
#include "TextTable.h"
#include "hotkernel/Config.h"

namespace hotkernel::cli {
namespace {

// ordered_json: keys in the order written, "format" and "version" first.
using json = nlohmann::ordered_json;

// Table cells are one line: control characters (a variable's value may hold any) become spaces.
std::string cell(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return text;
}

json orNull(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

json embedJson(const std::string& text) {
  if (text.empty()) return nullptr;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json(text) : j;
}

std::string torchText(const BuildInfo& b) {
  if (!b.withTorch) return "built without torch (HOTKERNEL_ENABLE_TORCH=OFF)";
  std::string text = "built against torch " + b.torchVersion;
  if (!b.torchFullVersion.empty() && b.torchFullVersion != b.torchVersion) text += " (" + b.torchFullVersion + ")";
  if (b.torchCudaRuntime > 0) text += ", CUDA runtime " + cudaVersionText(b.torchCudaRuntime);
  return text;
}

std::string deviceText(const DoctorDevice& d) {
  std::string text = d.info.name + ", sm " + std::to_string(d.info.ccMajor) + "." + std::to_string(d.info.ccMinor);
  if (d.fingerprint.empty()) return text + "; fingerprint " + d.fingerprintNote;
  text += "; fingerprint " + d.fingerprint;
  if (d.cachedEntries) text += ", " + std::to_string(*d.cachedEntries) + " cached entries for it";
  return text;
}

void runDoctor(bool asJson, ExitStatus& status) {
  const DoctorReport report = diagnose();
  if (asJson) {
    std::cout << doctorJson(report).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << doctorText(report);
  }
  status.code = report.ready() ? kExitOk : kExitProblem;
}

}  // namespace

json doctorJson(const DoctorReport& r) {
  json devices = json::array();
  for (const DoctorDevice& d : r.devices) {
    devices.push_back({{"ordinal", d.info.ordinal},
                       {"name", d.info.name},
                       {"compute_capability", std::to_string(d.info.ccMajor) + "." + std::to_string(d.info.ccMinor)},
                       {"fingerprint", orNull(d.fingerprint)},
                       {"environment", embedJson(d.environmentJson)},
                       {"fingerprint_note", orNull(d.fingerprintNote)},
                       {"cached_entries", d.cachedEntries ? json(*d.cachedEntries) : json(nullptr)}});
  }
  json tiers = json::array();
  for (const CacheTierReport& t : r.cacheTiers) {
    tiers.push_back({{"directory", t.directory},
                     {"verdict", toString(t.verdict)},
                     {"detail", t.detail},
                     {"entries", t.entries ? json(*t.entries) : json(nullptr)}});
  }
  json variables = json::array();
  for (const VariableReport& v : r.variables) {
    variables.push_back({{"name", v.name}, {"value", v.value}, {"resolved", v.resolved}, {"known", v.known}});
  }
  return {{"format", kDoctorFormat},
          {"version", kDoctorVersion},
          {"ready", r.ready()},
          {"problems", r.problems},
          {"hotkernel_version", HOTKERNEL_VERSION},
          {"torch",
           {{"built_with", r.build.withTorch},
            {"version", orNull(r.build.torchVersion)},
            {"full_version", orNull(r.build.torchFullVersion)},
            {"cuda_runtime", r.build.torchCudaRuntime > 0 ? json(r.build.torchCudaRuntime) : json(nullptr)}}},
          {"preload", {{"path", orNull(r.preloadPath)}, {"found", r.preloadFound}}},
          {"library", {{"path", orNull(r.libraryPath)}, {"found", r.libraryFound}}},
          {"cuda_driver",
           {{"found", r.cuda.driverFound},
            {"version", r.cuda.driverFound ? json(r.cuda.driverVersion) : json(nullptr)},
            {"error", orNull(r.cuda.error)}}},
          {"devices", devices},
          {"nvrtc",
           {{"found", r.nvrtcFound},
            {"version", r.nvrtcFound ? json(r.nvrtcVersion) : json(nullptr)},
            {"library", orNull(r.nvrtcLibrary)},
            {"error", orNull(r.nvrtcError)}}},
          {"cache",
           {{"directory", orNull(r.cacheDirectory)},
            {"verdict", toString(r.cacheVerdict)},
            {"detail", r.cacheDetail},
            {"entries", r.cacheEntries ? json(*r.cacheEntries) : json(nullptr)}}},
          {"cache_tiers", tiers},
          {"enabled", r.enabled},
          {"optimize", r.optimize},
          {"environment", variables}};
}

std::string doctorText(const DoctorReport& r) {
  TextTable checks({"CHECK", "STATUS", "DETAIL"});
  checks.addRow({"hotkernel", r.enabled ? "on" : "off",
                 std::string(HOTKERNEL_VERSION) + (r.optimize ? "" : "; HOTKERNEL_OPTIMIZE=0: cached kernels only")});
  checks.addRow({"preload", r.preloadFound ? "ok" : "missing", r.preloadPath.empty() ? "-" : r.preloadPath});
  checks.addRow({"library", r.libraryFound ? "ok" : "missing",
                 r.build.withTorch ? r.libraryPath : "none: this build is torch-free"});
  checks.addRow({"torch", "-", torchText(r.build)});
  checks.addRow({"cuda driver", r.cuda.driverFound ? "ok" : "missing",
                 r.cuda.driverFound ? cudaVersionText(r.cuda.driverVersion) : r.cuda.error});
  if (r.devices.empty()) {
    checks.addRow({"gpu", "missing", kNoCudaDevice});
  }
  for (const DoctorDevice& d : r.devices) checks.addRow({"gpu " + std::to_string(d.info.ordinal), "ok", deviceText(d)});
  checks.addRow({"nvrtc", r.nvrtcFound ? "ok" : (r.optimize ? "missing" : "unused"),
                 r.nvrtcFound ? r.nvrtcLibrary + ", " + cudaVersionText(r.nvrtcVersion) : r.nvrtcError});
  checks.addRow({"cache", toString(r.cacheVerdict), r.cacheDirectory + ": " + r.cacheDetail});
  for (size_t i = 0; i < r.cacheTiers.size(); ++i) {
    const CacheTierReport& t = r.cacheTiers[i];
    checks.addRow({"cache tier " + std::to_string(i + 1), toString(t.verdict), t.directory + ": " + t.detail});
  }
  std::string out = checks.render();
  if (!r.variables.empty()) {
    TextTable variables({"VARIABLE", "VALUE", "RESOLVES TO"});
    for (const VariableReport& v : r.variables) variables.addRow({v.name, cell(v.value), cell(v.resolved)});
    out += "\n" + variables.render();
  }
  out += "\n";
  if (r.ready()) return out + "ready to serve\n";
  out += "not ready to serve:\n";
  for (const std::string& p : r.problems) out += "  - " + p + "\n";
  return out;
}

void addDoctorCommand(CLI::App& app, ExitStatus& status) {
  auto asJson = std::make_shared<bool>(false);
  CLI::App* doctor = app.add_subcommand(
      "doctor", "check that this machine can serve with hotkernel: preload, library, driver, GPU, NVRTC, cache");
  doctor->add_flag("--json", *asJson, "print one JSON object (format hotkernel-doctor, version 1)");
  doctor->footer("Exit status: 0 ready to serve; 1 something a serving process needs is missing; 2 bad usage.");
  doctor->callback([asJson, &status] { runDoctor(*asJson, status); });
}

}  // namespace hotkernel::cli
