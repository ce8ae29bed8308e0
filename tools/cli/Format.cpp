#include "Format.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace hotkernel::cli {

std::string formatBytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string formatUtc(int64_t unixSeconds) {
  if (unixSeconds == 0) return "-";
  std::time_t t = static_cast<std::time_t>(unixSeconds);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return std::to_string(unixSeconds);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string formatSpeedup(const std::string& metricsJson) {
  nlohmann::json metrics = nlohmann::json::parse(metricsJson, nullptr, /*allow_exceptions=*/false);
  if (!metrics.is_object()) return "-";
  auto it = metrics.find("speedup");
  if (it == metrics.end() || !it->is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", it->get<double>());
  return buf;
}

}  // namespace hotkernel::cli
