#pragma once
// Small value formatters shared by the commands.

#include <cstdint>
#include <string>

namespace hotkernel::cli {

// "512 B", "12.3 KiB", "4.0 MiB", "1.2 GiB".
std::string formatBytes(int64_t bytes);

// "YYYY-MM-DD hh:mm:ss" in UTC; "-" for 0.
std::string formatUtc(int64_t unixSeconds);

// "1.42x" from the number under "speedup" in a metrics JSON object; "-" when absent or not a number.
std::string formatSpeedup(const std::string& metricsJson);

}  // namespace hotkernel::cli
