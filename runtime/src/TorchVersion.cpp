#include "hotkernel/runtime/TorchVersion.h"

#include <fstream>
#include <regex>
#include <sstream>

namespace hotkernel {
namespace {

std::optional<std::string> readSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(64 * 1024, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// A version as torch writes one: digits and dots, then an optional local tag.
bool looksLikeVersion(const std::string& v) {
  static const std::regex kVersion(R"(\d+\.\d+(\.\d+)?[A-Za-z0-9.+_-]*)");
  return std::regex_match(v, kVersion);
}

}  // namespace

std::optional<std::string> torchVersionBeside(const std::string& libraryPath) {
  const size_t slash = libraryPath.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  const std::string parent = libraryPath.substr(0, slash) + "/..";
  if (const std::optional<std::string> py = readSmallFile(parent + "/version.py")) {
    static const std::regex kLine(R"(^__version__\s*=\s*['"]([^'"]+)['"])", std::regex::multiline);
    std::smatch m;
    if (std::regex_search(*py, m, kLine) && looksLikeVersion(m[1].str())) return m[1].str();
  }
  if (const std::optional<std::string> build = readSmallFile(parent + "/build-version")) {
    std::istringstream lines(*build);
    std::string first;
    std::getline(lines, first);
    first = trimmed(first);
    if (looksLikeVersion(first)) return first;
  }
  return std::nullopt;
}

std::string torchMismatch(const std::string& built, const std::string& found) {
  if (built.empty() || built == found) return "";
  const bool builtTagged = built.find('+') != std::string::npos;
  if (!builtTagged && found.substr(0, found.find('+')) == built) return "";
  return "built for torch " + built + ", but this process has torch " + found;
}

}  // namespace hotkernel
