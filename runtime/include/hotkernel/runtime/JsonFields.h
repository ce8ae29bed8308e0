#pragma once
// Strict reading of JSON documents that come from outside the process: an
// agent's reply, a task, a sandbox helper's request, a fingerprint from a
// cache row, a commit-log line, an experiment line.
//
// Note [Strict JSON fields]
// Such a document is read field by field: a field must be present with its
// type before it is converted, and an integer is range-checked before it is
// narrowed (a float, or an integer out of range, converted to int is undefined
// behaviour; the JSON reader keeps every non-negative integer as unsigned, so
// 2^64 - 1 must not read as -1). A failure throws Error (HOTKERNEL_REQUIRE:
// the message states the rule, without a "Check failed" prefix) that names the
// field by its path: `where` is the path of the object being read ("variant",
// "agent task", "family.points[]"), the key is appended after a dot
// ("variant.rows must be an integer, got string"). A caller that states a
// protocol's rules passes the rule as the path ("agent reply breaks R7:
// \"launch\""). parse() refuses text nested deeper than a limit before the
// reader sees it.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hotkernel::jsonfield {

// A nesting limit for parse() deep enough for every document hotkernel reads.
inline constexpr int kMaxDepth = 64;

// What a message says a value is: its type name ("string", "object", "null",
// "array", "boolean"), or for a number the number itself ("1.5", "-3").
std::string describe(const nlohmann::json& value);

// `text` as JSON. Error "<what>: JSON nested deeper than <maxDepth>" (arrays
// and objects, counted outside strings, before parsing) or "<what>: it is not
// JSON (<reason>); it starts with \"<first 80 bytes>\"".
nlohmann::json parse(const std::string& text, const std::string& what, int maxDepth);

// `j` when it is an object; Error "<where> must be a JSON object, got <type>".
const nlohmann::json& object(const nlohmann::json& j, const std::string& where);

// The value of `key` in the object `j`; Error when `j` is not an object or
// "<where> misses \"<key>\"".
const nlohmann::json& get(const nlohmann::json& j, const char* key, const std::string& where);

// Whether the object `j` has `key` with a value other than null.
bool present(const nlohmann::json& j, const char* key);

// The typed value of `key` in the object `j` (present, of the type named);
// Error "<where>.<key> must be <a string, an integer, ...>, got <type>".
std::string string(const nlohmann::json& j, const char* key, const std::string& where);
// An integer (not 256.0, not "256") in [min, max]; Error "<where>.<key> must
// be an integer in [min, max], got <value>" when out of range.
int64_t integer(const nlohmann::json& j, const char* key, const std::string& where,
                int64_t min = std::numeric_limits<int64_t>::min(), int64_t max = std::numeric_limits<int64_t>::max());
double number(const nlohmann::json& j, const char* key, const std::string& where);
bool boolean(const nlohmann::json& j, const char* key, const std::string& where);
const nlohmann::json& array(const nlohmann::json& j, const char* key, const std::string& where);
// An object-valued field: "<where>.<key> must be an object, got <type>".
const nlohmann::json& objectField(const nlohmann::json& j, const char* key, const std::string& where);
// An array of strings: "<where>.<key> must hold strings only".
std::vector<std::string> strings(const nlohmann::json& j, const char* key, const std::string& where);

// The same for an optional field: absent or null reads as nullopt; any other
// value must have the type.
std::optional<std::string> optionalString(const nlohmann::json& j, const char* key, const std::string& where);
std::optional<int64_t> optionalInteger(const nlohmann::json& j, const char* key, const std::string& where,
                                       int64_t min = std::numeric_limits<int64_t>::min(),
                                       int64_t max = std::numeric_limits<int64_t>::max());
std::optional<double> optionalNumber(const nlohmann::json& j, const char* key, const std::string& where);
std::optional<bool> optionalBoolean(const nlohmann::json& j, const char* key, const std::string& where);

}  // namespace hotkernel::jsonfield
