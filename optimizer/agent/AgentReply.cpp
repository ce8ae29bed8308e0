// The reply half of the agent protocol: rules R1-R8 (Note [Agent replies are
// untrusted] in AgentTask.h) and the launch they describe.

#include "hotkernel/optimizer/AgentTask.h"

#include <algorithm>
#include <limits>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel {
namespace {

using nlohmann::json;

// JSON nesting deeper than this is refused before parsing: a reply needs 2.
constexpr int kMaxReplyDepth = 16;

// ---- rule R5 --------------------------------------------------------------

// Translation phases 1-2 done conservatively: trigraphs ??= and ??/ are
// replaced (C++17 removed them; replacing them anyway can only find more),
// then every backslash followed by blanks and a newline is removed.
std::string spliced(const std::string& source) {
  std::string t;
  t.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '?' && i + 2 < source.size() && source[i + 1] == '?' &&
        (source[i + 2] == '=' || source[i + 2] == '/')) {
      t += source[i + 2] == '=' ? '#' : '\\';
      i += 2;
    } else {
      t += source[i];
    }
  }
  std::string s;
  s.reserve(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\') {
      size_t j = i + 1;
      while (j < t.size() && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r')) ++j;
      if (j < t.size() && t[j] == '\n') {
        i = j;
        continue;
      }
    }
    s += t[i];
  }
  return s;
}

bool isIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

bool isCIdentifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), isIdentChar);
}

bool holdsIncludeDirective(const std::string& source) {
  const std::string s = spliced(source);
  const size_t n = s.size();
  for (size_t i = 0; i < n; ++i) {
    size_t j;
    if (s[i] == '#') {
      j = i + 1;
    } else if (s[i] == '%' && i + 1 < n && s[i + 1] == ':') {
      j = i + 2;
    } else {
      continue;
    }
    // Skip blanks (newlines too), block and line comments.
    while (j < n) {
      const char c = s[j];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
        ++j;
      } else if (c == '/' && j + 1 < n && s[j + 1] == '*') {
        const size_t end = s.find("*/", j + 2);
        j = end == std::string::npos ? n : end + 2;
      } else if (c == '/' && j + 1 < n && s[j + 1] == '/') {
        const size_t end = s.find('\n', j + 2);
        j = end == std::string::npos ? n : end + 1;
      } else {
        break;
      }
    }
    if (j < n && s[j] == '\\') return true;  // a universal character name could spell "include"
    size_t k = j;
    while (k < n && isIdentChar(s[k])) ++k;
    const std::string word = s.substr(j, k - j);
    if (word.rfind("include", 0) == 0 || word.rfind("import", 0) == 0) return true;
  }
  return false;
}

void checkAgentSource(const std::string& source) {
  HOTKERNEL_REQUIRE(!source.empty(), "agent reply breaks R4: \"source\" is empty");
  HOTKERNEL_REQUIRE(source.size() <= kAgentMaxSourceBytes, "agent reply breaks R4: \"source\" has ", source.size(),
                    " bytes, more than ", kAgentMaxSourceBytes);
  HOTKERNEL_REQUIRE(source.find('\0') == std::string::npos, "agent reply breaks R4: \"source\" holds a NUL byte");
  HOTKERNEL_REQUIRE(!holdsIncludeDirective(source),
                    "agent reply breaks R5: \"source\" holds an #include (or #import) directive; "
                    "the kernel must be self-contained");
}

// ---- AgentLaunch -----------------------------------------------------------

kernels::LaunchGeometry AgentLaunch::geometry(int64_t rows) const {
  HOTKERNEL_REQUIRE(rows >= 1, "AgentLaunch::geometry needs rows >= 1, got ", rows);
  HOTKERNEL_REQUIRE(rowsPerBlock >= 1, "AgentLaunch: rowsPerBlock must be >= 1");
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
  kernels::LaunchGeometry g;
  const int64_t blocks = (rows + rowsPerBlock - 1) / rowsPerBlock;
  g.gridX = static_cast<unsigned>(std::min(blocks, kMaxGridX));
  g.blockX = static_cast<unsigned>(block);
  g.sharedBytes = static_cast<unsigned>(sharedBytes);
  return g;
}

json AgentLaunch::toJson() const {
  return {{"block", block}, {"rowsPerBlock", rowsPerBlock}, {"sharedBytes", sharedBytes}};
}

AgentLaunch AgentLaunch::fromJson(const json& j) {
  const std::string where = "agent reply breaks R7: \"launch\"";
  for (const auto& item : jsonfield::object(j, where).items()) {
    const std::string& k = item.key();
    HOTKERNEL_REQUIRE(k == "block" || k == "rowsPerBlock" || k == "sharedBytes", where, " has an unknown key \"", k,
                      "\"");
  }
  const int64_t block = jsonfield::integer(j, "block", where);
  const int64_t rowsPerBlock = jsonfield::integer(j, "rowsPerBlock", where);
  const int64_t sharedBytes = jsonfield::integer(j, "sharedBytes", where);
  HOTKERNEL_REQUIRE(block >= kAgentMinBlock && block <= kAgentMaxBlock && block % 32 == 0, where,
                    ".block must be a multiple of 32 in [", kAgentMinBlock, ", ", kAgentMaxBlock, "], got ", block);
  HOTKERNEL_REQUIRE(rowsPerBlock >= 1 && rowsPerBlock <= kAgentMaxRowsPerBlock, where, ".rowsPerBlock must be in [1, ",
                    kAgentMaxRowsPerBlock, "], got ", rowsPerBlock);
  HOTKERNEL_REQUIRE(sharedBytes >= 0 && sharedBytes <= kAgentMaxSharedBytes, where, ".sharedBytes must be in [0, ",
                    kAgentMaxSharedBytes, "], got ", sharedBytes);
  AgentLaunch l;
  l.block = static_cast<int>(block);
  l.rowsPerBlock = static_cast<int>(rowsPerBlock);
  l.sharedBytes = static_cast<int>(sharedBytes);
  return l;
}

// ---- AgentReply --------------------------------------------------------------

json AgentReply::toJson() const {
  return {{"format", kAgentReplyFormat}, {"version", kAgentReplyVersion}, {"source", source},
          {"kernelName", kernelName},    {"launch", launch.toJson()},     {"notes", notes}};
}

AgentReply AgentReply::fromJson(const json& j) {
  HOTKERNEL_REQUIRE(j.is_object(), "agent reply breaks R1: it must be a JSON object, got ", jsonfield::describe(j));
  // R2
  auto format = j.find("format");
  HOTKERNEL_REQUIRE(format != j.end() && format->is_string() && format->get<std::string>() == kAgentReplyFormat,
                    "agent reply breaks R2: \"format\" must be \"", kAgentReplyFormat, "\"");
  auto version = j.find("version");
  HOTKERNEL_REQUIRE(version != j.end() && version->is_number_integer() && version->get<int64_t>() == kAgentReplyVersion,
                    "agent reply breaks R2: \"version\" must be ", kAgentReplyVersion);
  // R3
  static const char* const kKeys[] = {"format", "version", "source", "kernelName", "launch", "notes"};
  for (const auto& item : j.items()) {
    const bool known = std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return item.key() == k; });
    HOTKERNEL_REQUIRE(known, "agent reply breaks R3: unknown key \"", item.key(), "\"");
  }
  for (const char* required : {"source", "kernelName", "launch"}) {
    HOTKERNEL_REQUIRE(j.contains(required), "agent reply breaks R3: \"", required, "\" is missing");
  }
  AgentReply r;
  // R4, R5
  HOTKERNEL_REQUIRE(j.at("source").is_string(), "agent reply breaks R4: \"source\" must be a string, got ",
                    jsonfield::describe(j.at("source")));
  r.source = j.at("source").get<std::string>();
  checkAgentSource(r.source);
  // R6
  HOTKERNEL_REQUIRE(j.at("kernelName").is_string(), "agent reply breaks R6: \"kernelName\" must be a string, got ",
                    jsonfield::describe(j.at("kernelName")));
  r.kernelName = j.at("kernelName").get<std::string>();
  HOTKERNEL_REQUIRE(r.kernelName.size() <= kAgentMaxKernelNameBytes && isCIdentifier(r.kernelName),
                    "agent reply breaks R6: \"kernelName\" must be a C identifier of at most ",
                    kAgentMaxKernelNameBytes, " bytes, got \"", r.kernelName.substr(0, 64), "\"");
  HOTKERNEL_REQUIRE(r.source.find(r.kernelName) != std::string::npos, "agent reply breaks R6: kernel \"", r.kernelName,
                    "\" does not occur in \"source\"");
  // R7
  r.launch = AgentLaunch::fromJson(j.at("launch"));
  // R8
  if (j.contains("notes")) {
    HOTKERNEL_REQUIRE(j.at("notes").is_string(), "agent reply breaks R8: \"notes\" must be a string, got ",
                      jsonfield::describe(j.at("notes")));
    r.notes = j.at("notes").get<std::string>();
    HOTKERNEL_REQUIRE(r.notes.size() <= kAgentMaxNotesBytes, "agent reply breaks R8: \"notes\" has ", r.notes.size(),
                      " bytes, more than ", kAgentMaxNotesBytes);
  }
  return r;
}

AgentReply AgentReply::parse(const std::string& text) {
  return fromJson(jsonfield::parse(text, "agent reply breaks R1", kMaxReplyDepth));
}

}  // namespace hotkernel
