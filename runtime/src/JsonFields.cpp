#include "hotkernel/runtime/JsonFields.h"

#include <algorithm>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::jsonfield {
namespace {

using nlohmann::json;

std::string path(const std::string& where, const char* key) { return where + "." + key; }

// Deepest nesting of arrays and objects in `text`, outside strings; stops counting past `limit`.
int depthOf(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      }
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

int64_t integerValue(const json& v, const std::string& at, int64_t min, int64_t max) {
  HOTKERNEL_REQUIRE(v.is_number_integer(), at, " must be an integer, got ", describe(v));
  // The reader keeps every non-negative integer as unsigned: compare it as one.
  const bool inRange = v.is_number_unsigned() ? max >= 0 && v.get<uint64_t>() <= static_cast<uint64_t>(max) &&
                                                    (min <= 0 || v.get<uint64_t>() >= static_cast<uint64_t>(min))
                                              : v.get<int64_t>() >= min && v.get<int64_t>() <= max;
  HOTKERNEL_REQUIRE(inRange, at, " must be an integer in [", min, ", ", max, "], got ", describe(v));
  return v.get<int64_t>();
}

}  // namespace

std::string describe(const json& value) { return value.is_number() ? value.dump() : value.type_name(); }

json parse(const std::string& text, const std::string& what, int maxDepth) {
  HOTKERNEL_REQUIRE(depthOf(text, maxDepth) <= maxDepth, what, ": JSON nested deeper than ", maxDepth);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    std::string head = text.substr(0, 80);
    std::replace_if(
        head.begin(), head.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    HOTKERNEL_THROW(what, ": it is not JSON (", e.what(), "); it starts with \"", head, "\"");
  }
}

const json& object(const json& j, const std::string& where) {
  HOTKERNEL_REQUIRE(j.is_object(), where, " must be a JSON object, got ", describe(j));
  return j;
}

const json& get(const json& j, const char* key, const std::string& where) {
  auto it = object(j, where).find(key);
  HOTKERNEL_REQUIRE(it != j.end(), where, " misses \"", key, "\"");
  return *it;
}

bool present(const json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

std::string string(const json& j, const char* key, const std::string& where) {
  const json& v = get(j, key, where);
  HOTKERNEL_REQUIRE(v.is_string(), path(where, key), " must be a string, got ", describe(v));
  return v.get<std::string>();
}

int64_t integer(const json& j, const char* key, const std::string& where, int64_t min, int64_t max) {
  return integerValue(get(j, key, where), path(where, key), min, max);
}

double number(const json& j, const char* key, const std::string& where) {
  const json& v = get(j, key, where);
  HOTKERNEL_REQUIRE(v.is_number(), path(where, key), " must be a number, got ", describe(v));
  return v.get<double>();
}

bool boolean(const json& j, const char* key, const std::string& where) {
  const json& v = get(j, key, where);
  HOTKERNEL_REQUIRE(v.is_boolean(), path(where, key), " must be true or false, got ", describe(v));
  return v.get<bool>();
}

const json& array(const json& j, const char* key, const std::string& where) {
  const json& v = get(j, key, where);
  HOTKERNEL_REQUIRE(v.is_array(), path(where, key), " must be an array, got ", describe(v));
  return v;
}

const json& objectField(const json& j, const char* key, const std::string& where) {
  const json& v = get(j, key, where);
  HOTKERNEL_REQUIRE(v.is_object(), path(where, key), " must be an object, got ", describe(v));
  return v;
}

std::vector<std::string> strings(const json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  for (const json& e : array(j, key, where)) {
    HOTKERNEL_REQUIRE(e.is_string(), path(where, key), " must hold strings only, got ", describe(e));
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::optional<std::string> optionalString(const json& j, const char* key, const std::string& where) {
  if (!present(object(j, where), key)) return std::nullopt;
  return string(j, key, where);
}

std::optional<int64_t> optionalInteger(const json& j, const char* key, const std::string& where, int64_t min,
                                       int64_t max) {
  if (!present(object(j, where), key)) return std::nullopt;
  return integer(j, key, where, min, max);
}

std::optional<double> optionalNumber(const json& j, const char* key, const std::string& where) {
  if (!present(object(j, where), key)) return std::nullopt;
  return number(j, key, where);
}

std::optional<bool> optionalBoolean(const json& j, const char* key, const std::string& where) {
  if (!present(object(j, where), key)) return std::nullopt;
  return boolean(j, key, where);
}

}  // namespace hotkernel::jsonfield
