#include "ErrorText.h"

#include <cctype>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::cli {
namespace {

// "SafePath.cpp:42": a file name with an extension, a colon, a line number.
bool isSourceLocation(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) return false;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  const std::string file = s.substr(0, colon);
  const size_t dot = file.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == file.size()) return false;
  for (char c : file) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string withoutSourceLocation(const std::string& text) {
  if (text.empty() || text.back() != ')') return text;
  const size_t open = text.rfind(" (");
  if (open == std::string::npos) return text;
  const std::string inside = text.substr(open + 2, text.size() - open - 3);
  return isSourceLocation(inside) ? text.substr(0, open) : text;
}

std::string oneLine(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      out += text[i];
      continue;
    }
    while (i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '\t')) ++i;
    if (i + 1 < text.size()) out += !out.empty() && out.back() == ':' ? " " : "; ";
  }
  return out;
}

std::string userMessage(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e); error != nullptr && error->internal()) return e.what();
  return withoutSourceLocation(e.what());
}

}  // namespace hotkernel::cli
