#pragma once
// A CLI11 check for integer options that reads as a range:
//   hotkernel log --last 0   ->   --last: must be an integer in [1, 1000000], got '0'
// (CLI11's own Range and PositiveNumber print their bounds as doubles, which for
// PositiveNumber is a 300-digit number).

#include <CLI/CLI.hpp>
#include <cstdint>

namespace hotkernel::cli {

// Accepts a decimal integer in [minimum, maximum] (surrounding blanks allowed).
CLI::Validator integerInRange(int64_t minimum, int64_t maximum);

}  // namespace hotkernel::cli
