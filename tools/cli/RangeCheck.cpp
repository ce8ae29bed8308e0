#include "RangeCheck.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace hotkernel::cli {

CLI::Validator integerInRange(int64_t minimum, int64_t maximum) {
  const std::string range = "[" + std::to_string(minimum) + ", " + std::to_string(maximum) + "]";
  auto check = [minimum, maximum, range](std::string& input) -> std::string {
    const std::string refusal = "must be an integer in " + range + ", got '" + input + "'";
    const size_t first = input.find_first_not_of(" \t");
    if (first == std::string::npos) return refusal;
    const std::string digits = input.substr(first, input.find_last_not_of(" \t") - first + 1);
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(digits.c_str(), &end, 10);
    if (end == digits.c_str() || *end != '\0' || errno == ERANGE || n < minimum || n > maximum) return refusal;
    input = digits;
    return "";
  };
  return CLI::Validator(check, range);
}

}  // namespace hotkernel::cli
