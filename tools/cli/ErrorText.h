#pragma once
// What a user reads of an error: hotkernel::Error's text without the source
// location that HOTKERNEL_THROW appends (" (SafePath.cpp:42)"), which names
// hotkernel's code, not the user's mistake. An internal error (a bug in
// hotkernel) keeps it: that is what a bug report needs.

#include <exception>
#include <string>

namespace hotkernel::cli {

// `text` without a trailing " (<file>.<ext>:<line>)".
std::string withoutSourceLocation(const std::string& text);

// `text` on one line: each line break (and the indentation after it) becomes
// "; ", or a space after a colon.
std::string oneLine(const std::string& text);

// e.what() as the user reads it: without the source location, unless `e` is
// a hotkernel::Error marked internal.
std::string userMessage(const std::exception& e);

}  // namespace hotkernel::cli
