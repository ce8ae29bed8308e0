#include "hotkernel/optimizer/AgentTask.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Check.h"

// Like HOTKERNEL_CHECK without its "Check failed: <expression>." prefix: these
// messages reach the agent (or its author) and must read as the rule they state.
#define HK_REQUIRE(cond, ...)       \
  do {                              \
    if (!(cond)) {                  \
      HOTKERNEL_THROW(__VA_ARGS__); \
    }                               \
  } while (0)

namespace hotkernel {
namespace {

using nlohmann::json;

// JSON nesting deeper than this is refused before parsing: a reply needs 2.
constexpr int kMaxReplyDepth = 16;

// ---- strict field access -------------------------------------------------

const char* typeName(const json& j) { return j.type_name(); }

const json& field(const json& j, const char* key, const std::string& where) {
  HK_REQUIRE(j.is_object(), where, " must be a JSON object, got ", typeName(j));
  auto it = j.find(key);
  HK_REQUIRE(it != j.end(), where, " misses \"", key, "\"");
  return *it;
}

std::string stringField(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HK_REQUIRE(v.is_string(), where, ".", key, " must be a string, got ", typeName(v));
  return v.get<std::string>();
}

int64_t intField(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HK_REQUIRE(v.is_number_integer(), where, ".", key, " must be an integer, got ",
             v.is_number() ? "a non-integer number" : typeName(v));
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    HK_REQUIRE(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), where, ".", key, " is out of range");
  }
  return v.get<int64_t>();
}

double numberField(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HK_REQUIRE(v.is_number(), where, ".", key, " must be a number, got ", typeName(v));
  return v.get<double>();
}

bool boolField(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HK_REQUIRE(v.is_boolean(), where, ".", key, " must be true or false, got ", typeName(v));
  return v.get<bool>();
}

std::vector<std::string> stringListField(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HK_REQUIRE(v.is_array(), where, ".", key, " must be an array, got ", typeName(v));
  std::vector<std::string> out;
  for (const json& e : v) {
    HK_REQUIRE(e.is_string(), where, ".", key, " must hold strings only");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// `key` present and not null.
bool present(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

std::string cut(const std::string& text) {
  if (text.size() <= kAgentMaxLogBytes) return text;
  return text.substr(0, kAgentMaxLogBytes) + "\n[... " + std::to_string(text.size() - kAgentMaxLogBytes) +
         " bytes cut]";
}

// Deepest nesting of arrays/objects in `text`, outside strings; stops counting past `limit`.
int jsonDepth(const std::string& text, int limit) {
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
  HK_REQUIRE(!source.empty(), "agent reply breaks R4: \"source\" is empty");
  HK_REQUIRE(source.size() <= kAgentMaxSourceBytes, "agent reply breaks R4: \"source\" has ", source.size(),
             " bytes, more than ", kAgentMaxSourceBytes);
  HK_REQUIRE(source.find('\0') == std::string::npos, "agent reply breaks R4: \"source\" holds a NUL byte");
  HK_REQUIRE(!holdsIncludeDirective(source),
             "agent reply breaks R5: \"source\" holds an #include (or #import) directive; "
             "the kernel must be self-contained");
}

// ---- AgentLaunch -----------------------------------------------------------

kernels::LaunchGeometry AgentLaunch::geometry(int64_t rows) const {
  HK_REQUIRE(rows >= 1, "AgentLaunch::geometry needs rows >= 1, got ", rows);
  HK_REQUIRE(rowsPerBlock >= 1, "AgentLaunch: rowsPerBlock must be >= 1");
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
  HK_REQUIRE(j.is_object(), where, " must be an object, got ", typeName(j));
  for (const auto& item : j.items()) {
    const std::string& k = item.key();
    HK_REQUIRE(k == "block" || k == "rowsPerBlock" || k == "sharedBytes", where, " has an unknown key \"", k, "\"");
  }
  const int64_t block = intField(j, "block", where);
  const int64_t rowsPerBlock = intField(j, "rowsPerBlock", where);
  const int64_t sharedBytes = intField(j, "sharedBytes", where);
  HK_REQUIRE(block >= kAgentMinBlock && block <= kAgentMaxBlock && block % 32 == 0, where,
             ".block must be a multiple of 32 in [", kAgentMinBlock, ", ", kAgentMaxBlock, "], got ", block);
  HK_REQUIRE(rowsPerBlock >= 1 && rowsPerBlock <= kAgentMaxRowsPerBlock, where, ".rowsPerBlock must be in [1, ",
             kAgentMaxRowsPerBlock, "], got ", rowsPerBlock);
  HK_REQUIRE(sharedBytes >= 0 && sharedBytes <= kAgentMaxSharedBytes, where, ".sharedBytes must be in [0, ",
             kAgentMaxSharedBytes, "], got ", sharedBytes);
  AgentLaunch l;
  l.block = static_cast<int>(block);
  l.rowsPerBlock = static_cast<int>(rowsPerBlock);
  l.sharedBytes = static_cast<int>(sharedBytes);
  return l;
}

// ---- AgentTiming -------------------------------------------------------------

json AgentTiming::toJson() const { return {{"atenUs", atenUs}, {"kernelUs", kernelUs}, {"speedup", speedup}}; }

AgentTiming AgentTiming::fromJson(const json& j) {
  AgentTiming t;
  t.atenUs = numberField(j, "atenUs", "timing");
  t.kernelUs = numberField(j, "kernelUs", "timing");
  t.speedup = numberField(j, "speedup", "timing");
  return t;
}

// ---- AgentReply --------------------------------------------------------------

json AgentReply::toJson() const {
  return {{"format", kAgentReplyFormat}, {"version", kAgentReplyVersion}, {"source", source},
          {"kernelName", kernelName},    {"launch", launch.toJson()},     {"notes", notes}};
}

AgentReply AgentReply::fromJson(const json& j) {
  HK_REQUIRE(j.is_object(), "agent reply breaks R1: it must be a JSON object, got ", typeName(j));
  // R2
  auto format = j.find("format");
  HK_REQUIRE(format != j.end() && format->is_string() && format->get<std::string>() == kAgentReplyFormat,
             "agent reply breaks R2: \"format\" must be \"", kAgentReplyFormat, "\"");
  auto version = j.find("version");
  HK_REQUIRE(version != j.end() && version->is_number_integer() && version->get<int64_t>() == kAgentReplyVersion,
             "agent reply breaks R2: \"version\" must be ", kAgentReplyVersion);
  // R3
  static const char* const kKeys[] = {"format", "version", "source", "kernelName", "launch", "notes"};
  for (const auto& item : j.items()) {
    const bool known = std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return item.key() == k; });
    HK_REQUIRE(known, "agent reply breaks R3: unknown key \"", item.key(), "\"");
  }
  for (const char* required : {"source", "kernelName", "launch"}) {
    HK_REQUIRE(j.contains(required), "agent reply breaks R3: \"", required, "\" is missing");
  }
  AgentReply r;
  // R4, R5
  HK_REQUIRE(j.at("source").is_string(), "agent reply breaks R4: \"source\" must be a string, got ",
             typeName(j.at("source")));
  r.source = j.at("source").get<std::string>();
  checkAgentSource(r.source);
  // R6
  HK_REQUIRE(j.at("kernelName").is_string(), "agent reply breaks R6: \"kernelName\" must be a string, got ",
             typeName(j.at("kernelName")));
  r.kernelName = j.at("kernelName").get<std::string>();
  HK_REQUIRE(r.kernelName.size() <= kAgentMaxKernelNameBytes && isCIdentifier(r.kernelName),
             "agent reply breaks R6: \"kernelName\" must be a C identifier of at most ", kAgentMaxKernelNameBytes,
             " bytes, got \"", r.kernelName.substr(0, 64), "\"");
  HK_REQUIRE(r.source.find(r.kernelName) != std::string::npos, "agent reply breaks R6: kernel \"", r.kernelName,
             "\" does not occur in \"source\"");
  // R7
  r.launch = AgentLaunch::fromJson(j.at("launch"));
  // R8
  if (j.contains("notes")) {
    HK_REQUIRE(j.at("notes").is_string(), "agent reply breaks R8: \"notes\" must be a string, got ",
               typeName(j.at("notes")));
    r.notes = j.at("notes").get<std::string>();
    HK_REQUIRE(r.notes.size() <= kAgentMaxNotesBytes, "agent reply breaks R8: \"notes\" has ", r.notes.size(),
               " bytes, more than ", kAgentMaxNotesBytes);
  }
  return r;
}

AgentReply AgentReply::parse(const std::string& text) {
  HK_REQUIRE(jsonDepth(text, kMaxReplyDepth) <= kMaxReplyDepth, "agent reply breaks R1: JSON nested deeper than ",
             kMaxReplyDepth);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    std::string head = text.substr(0, 80);
    std::replace_if(
        head.begin(), head.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    HOTKERNEL_THROW("agent reply breaks R1: it is not JSON (", e.what(), "); it starts with \"", head, "\"");
  }
  return fromJson(j);
}

// ---- AgentStage, AgentFeedback, AgentBest -------------------------------------

const char* agentStageName(AgentStage stage) {
  switch (stage) {
    case AgentStage::Agent:
      return "agent";
    case AgentStage::Reply:
      return "reply";
    case AgentStage::Compile:
      return "compile";
    case AgentStage::Load:
      return "load";
    case AgentStage::Correctness:
      return "correctness";
    case AgentStage::Benchmark:
      return "benchmark";
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown AgentStage ", static_cast<int>(stage));
}

AgentStage parseAgentStage(const std::string& name) {
  for (AgentStage s : {AgentStage::Agent, AgentStage::Reply, AgentStage::Compile, AgentStage::Load,
                       AgentStage::Correctness, AgentStage::Benchmark}) {
    if (name == agentStageName(s)) return s;
  }
  HOTKERNEL_THROW("unknown agent stage \"", name, "\"");
}

json AgentFeedback::toJson() const {
  return {{"stage", agentStageName(stage)},
          {"passed", passed},
          {"error", cut(error)},
          {"log", cut(log)},
          {"timing", timing ? timing->toJson() : json(nullptr)},
          {"reply", reply ? reply->toJson() : json(nullptr)}};
}

AgentFeedback AgentFeedback::fromJson(const json& j) {
  const std::string where = "lastAttempt";
  AgentFeedback f;
  f.stage = parseAgentStage(stringField(j, "stage", where));
  f.passed = boolField(j, "passed", where);
  f.error = stringField(j, "error", where);
  f.log = stringField(j, "log", where);
  if (present(j, "timing")) f.timing = AgentTiming::fromJson(j.at("timing"));
  if (present(j, "reply")) f.reply = AgentReply::fromJson(j.at("reply"));
  return f;
}

json AgentBest::toJson() const {
  return {{"origin", origin}, {"kernel", kernel.toJson()}, {"timing", timing.toJson()}};
}

AgentBest AgentBest::fromJson(const json& j) {
  AgentBest b;
  b.origin = stringField(j, "origin", "best");
  HK_REQUIRE(b.origin == "family" || b.origin == "agent", "best.origin must be \"family\" or \"agent\", got \"",
             b.origin, "\"");
  b.kernel = AgentReply::fromJson(field(j, "kernel", "best"));
  b.timing = AgentTiming::fromJson(field(j, "timing", "best"));
  return b;
}

// ---- AgentTask ---------------------------------------------------------------

json AgentTask::toJson() const {
  json points = json::array();
  for (const AgentFamilyPoint& p : family.points) {
    points.push_back({{"params", p.params}, {"defines", p.defines}, {"launch", p.launch.toJson()}});
  }
  return {
      {"format", kAgentTaskFormat},
      {"version", kAgentTaskVersion},
      {"op", op},
      {"variant", {{"dtype", kernels::dtypeName(variant.dtype)}, {"rows", variant.rows}, {"cols", variant.cols}}},
      {"semantics", semantics},
      {"tolerance", tolerance},
      {"target", {{"arch", arch}, {"compileOptions", compileOptions}}},
      {"abi", {{"signature", abiSignature}, {"rules", abiRules}}},
      {"limits",
       {{"maxSourceBytes", kAgentMaxSourceBytes},
        {"maxKernelNameBytes", kAgentMaxKernelNameBytes},
        {"maxNotesBytes", kAgentMaxNotesBytes},
        {"minBlock", kAgentMinBlock},
        {"maxBlock", kAgentMaxBlock},
        {"blockMultiple", 32},
        {"maxRowsPerBlock", kAgentMaxRowsPerBlock},
        {"maxSharedBytes", kAgentMaxSharedBytes}}},
      {"family",
       {{"name", family.name}, {"kernelName", family.kernelName}, {"source", family.source}, {"points", points}}},
      {"best", best ? best->toJson() : json(nullptr)},
      {"lastAttempt", lastAttempt ? lastAttempt->toJson() : json(nullptr)},
      {"attempt", attempt},
  };
}

std::string AgentTask::serialize() const { return toJson().dump(-1, ' ', false, json::error_handler_t::replace); }

AgentTask AgentTask::fromJson(const json& j) {
  const std::string where = "agent task";
  HK_REQUIRE(stringField(j, "format", where) == kAgentTaskFormat, where, ".format must be \"", kAgentTaskFormat, "\"");
  HK_REQUIRE(intField(j, "version", where) == kAgentTaskVersion, where, ".version must be ", kAgentTaskVersion);
  AgentTask t;
  t.op = stringField(j, "op", where);
  const json& v = field(j, "variant", where);
  t.variant.dtype = kernels::parseDType(stringField(v, "dtype", "variant"));
  t.variant.rows = intField(v, "rows", "variant");
  t.variant.cols = intField(v, "cols", "variant");
  t.semantics = stringField(j, "semantics", where);
  t.tolerance = numberField(j, "tolerance", where);
  const json& target = field(j, "target", where);
  t.arch = stringField(target, "arch", "target");
  t.compileOptions = stringListField(target, "compileOptions", "target");
  const json& abi = field(j, "abi", where);
  t.abiSignature = stringField(abi, "signature", "abi");
  t.abiRules = stringListField(abi, "rules", "abi");
  const json& family = field(j, "family", where);
  t.family.name = stringField(family, "name", "family");
  t.family.kernelName = stringField(family, "kernelName", "family");
  t.family.source = stringField(family, "source", "family");
  const json& points = field(family, "points", "family");
  HK_REQUIRE(points.is_array(), "family.points must be an array");
  for (const json& p : points) {
    AgentFamilyPoint point;
    point.params = field(p, "params", "family.points[]");
    const json& defines = field(p, "defines", "family.points[]");
    HK_REQUIRE(defines.is_object(), "family.points[].defines must be an object");
    for (const auto& d : defines.items()) {
      HK_REQUIRE(d.value().is_string(), "family.points[].defines values must be strings");
      point.defines[d.key()] = d.value().get<std::string>();
    }
    point.launch = AgentLaunch::fromJson(field(p, "launch", "family.points[]"));
    t.family.points.push_back(std::move(point));
  }
  if (present(j, "best")) t.best = AgentBest::fromJson(j.at("best"));
  if (present(j, "lastAttempt")) t.lastAttempt = AgentFeedback::fromJson(j.at("lastAttempt"));
  t.attempt = static_cast<int>(intField(j, "attempt", where));
  return t;
}

std::string specializeSource(const std::string& source, const std::map<std::string, std::string>& defines) {
  std::string out;
  for (const auto& [name, value] : defines) {
    HK_REQUIRE(isCIdentifier(name), "specializeSource: \"", name, "\" is not a macro name");
    HK_REQUIRE(value.find('\n') == std::string::npos, "specializeSource: the value of ", name, " spans lines");
    out += "#define " + name + " " + value + "\n";
  }
  return out + source;
}

std::map<std::string, std::string> definesFromOptions(const std::vector<std::string>& options) {
  std::map<std::string, std::string> defines;
  for (const std::string& o : options) {
    HK_REQUIRE(o.rfind("-D", 0) == 0, "definesFromOptions: \"", o, "\" is not a -D option");
    const size_t eq = o.find('=');
    if (eq == std::string::npos) {
      defines[o.substr(2)] = "1";  // -DNAME means NAME=1, as in a compiler
    } else {
      defines[o.substr(2, eq - 2)] = o.substr(eq + 1);
    }
  }
  return defines;
}

AgentTask makeSoftmaxAgentTask(const kernels::SoftmaxVariant& variant, const std::string& arch) {
  using kernels::SoftmaxFamily;
  HK_REQUIRE(SoftmaxFamily::guardVariant(variant), "the softmax family cannot serve rows=", variant.rows,
             " cols=", variant.cols);
  AgentTask t;
  t.op = "aten::_softmax";
  t.variant = variant;
  t.semantics =
      "out = torch.softmax(in, dim=-1) for a contiguous [rows, cols] tensor, i.e. aten::_softmax(in, -1, "
      "half_to_float=false): for every row r, m = max_j in[r, j] and "
      "out[r, c] = exp(in[r, c] - m) / sum_j exp(in[r, j] - m). Input and output have the variant's dtype; "
      "compute in float32 and round the result once to the output dtype (round to nearest even). "
      "Special values, as ATen: a row holding a NaN is NaN everywhere; a row holding +inf is NaN everywhere "
      "(inf - inf); a row of only -inf is NaN everywhere (exp(-inf - -inf)); a -inf element of a row with a "
      "finite maximum gives 0. The largest absolute difference from ATen's output allowed is `tolerance` "
      "(float32 1e-6, float16 2^-11, bfloat16 2^-8); NaN must be where ATen has NaN. Results must be bitwise "
      "identical from run to run (fixed reduction order, no atomics whose order varies).";
  t.tolerance = SoftmaxFamily::tolerance(variant.dtype, variant.cols);
  t.arch = arch;
  t.compileOptions = {"--gpu-architecture=" + arch, "-std=c++17", "-default-device"};
  t.abiSignature =
      "extern \"C\" __global__ void <kernelName>(const void* in, void* out, long long rows, long long cols)";
  t.abiRules = {
      "in and out each hold rows * cols elements of the variant's dtype, contiguous and row-major: element (r, c) "
      "is at index r * cols + c. float32 is float; float16 and bfloat16 are passed as their 16-bit patterns "
      "(use unsigned short and convert yourself: there are no headers, so no cuda_fp16.h or cuda_bf16.h).",
      "cols is always the variant's cols (the kernel may specialise on it); rows is any value in [1, variant rows] "
      "(the harness also runs fewer rows than the variant's).",
      "in and out are aligned to 16 bytes and never overlap. Row r starts at byte r * cols * elementSize: wider "
      "accesses are only aligned when that is a multiple of their width.",
      "Launch: grid = (min(ceil(rows / rowsPerBlock), 2147483647), 1, 1), block = (block, 1, 1), dynamic shared "
      "memory = sharedBytes, on the caller's stream. When rows > gridDim.x * rowsPerBlock the kernel must stride "
      "over row groups.",
      "The kernel reads only in[0, rows * cols) and writes every element of out[0, rows * cols) and nothing else: "
      "no global scratch memory, no __device__ variables, no printf; several launches may run at once on "
      "different streams.",
      "Compiled by NVRTC with exactly target.compileOptions and no include path: the source must not #include "
      "anything. No fast-math: expf/exp2f/__expf accuracy must keep the result within tolerance.",
  };
  t.family.name = SoftmaxFamily::kName;
  t.family.kernelName = SoftmaxFamily::kKernelName;
  t.family.source = SoftmaxFamily::source();
  for (const kernels::SoftmaxParams& p : SoftmaxFamily::parameterSpace(variant)) {
    AgentFamilyPoint point;
    point.params = p.toJson();
    point.defines = definesFromOptions(SoftmaxFamily::compileOptions(variant.dtype, p));
    point.launch.block = p.threads;
    point.launch.rowsPerBlock = p.rowsPerCta;
    point.launch.sharedBytes = 0;
    t.family.points.push_back(std::move(point));
  }
  return t;
}

}  // namespace hotkernel
