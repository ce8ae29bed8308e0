#pragma once
// `hotkernel doctor [--json]`: whether this machine and this environment can
// serve with hotkernel, and what it would use (DoctorReport.h). A table for
// people; with --json one object:
//   {"format":"hotkernel-doctor","version":1,"ready":true,"problems":[],
//    "hotkernel_version":..,"torch":{..},"preload":{..},"library":{..},"cuda_driver":{..},
//    "devices":[{..,"fingerprint":..}],"nvrtc":{..},"cache":{..},"enabled":true,"optimize":true,
//    "environment":[{"name":..,"value":..,"resolved":..,"known":true}]}
// Keys are snake_case like `cache ls --json`; a value that is unknown is null.
// Exit codes: 0 ready to serve, 1 something a serving process needs is
// missing (each named under "problems"), 2 bad usage.

#include <nlohmann/json.hpp>
#include <string>

#include "DoctorReport.h"
#include "ExitStatus.h"

namespace CLI {
class App;
}

namespace hotkernel::cli {

inline constexpr const char* kDoctorFormat = "hotkernel-doctor";
inline constexpr int kDoctorVersion = 1;

void addDoctorCommand(CLI::App& app, ExitStatus& status);

nlohmann::ordered_json doctorJson(const DoctorReport& report);
std::string doctorText(const DoctorReport& report);

}  // namespace hotkernel::cli
