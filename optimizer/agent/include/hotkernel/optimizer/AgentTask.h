#pragma once
// The external agent protocol's two documents (tools/agent/PROTOCOL.md has
// both formats with examples):
//   - the task, "hotkernel-agent-task" version 1: what hotkernel writes on the
//     agent's stdin — the op and variant, the reference semantics, the kernel
//     ABI and launch rules, the family template with its parameter points, the
//     best kernel so far with its timings, and feedback on the agent's last
//     attempt;
//   - the reply, "hotkernel-agent-reply" version 1: what the agent writes on its
//     stdout — CUDA source, the kernel's name, its launch geometry, notes.
//
// Note [Agent replies are untrusted]
// A reply comes from a program hotkernel does not control (an LLM, a search
// script, a bug). AgentReply::fromJson accepts it only if every rule below
// holds, and throws Error naming the first rule broken otherwise; nothing in a
// rejected reply is compiled. Accepted source is still only compiled in a
// child process (SandboxCompile.h) and, once it runs, checked against ATen
// before any timing counts. The rules:
//   R1  the text is one JSON object (UTF-8, nested at most 16 deep), nothing else;
//   R2  "format" is "hotkernel-agent-reply" and "version" is 1;
//   R3  "source", "kernelName" and "launch" are present; "notes" is optional;
//       no other key (a misspelt key is an error, not silently ignored);
//   R4  "source" is a non-empty string of at most kAgentMaxSourceBytes (1 MiB),
//       without NUL bytes;
//   R5  "source" has no #include (nor #include_next, #import), in any spelling
//       the preprocessor accepts: '#' or '%:' or '??=', then blanks, block
//       comments and backslash-newlines, then "include"/"import". The check is
//       textual, so it also fires inside comments and strings: no lexer
//       subtlety can hide a directive from it (NVRTC would read any absolute
//       path it is given; the kernel must be self-contained anyway);
//   R6  "kernelName" is a C identifier ([A-Za-z_][A-Za-z0-9_]*) of at most 256
//       bytes that occurs in "source";
//   R7  "launch" is an object with exactly the integer keys "block",
//       "rowsPerBlock" and "sharedBytes": block in [32, 1024] and a multiple of
//       32; rowsPerBlock in [1, 65536]; sharedBytes in [0, 227 KiB] (232448,
//       the most dynamic shared memory a Hopper CTA can opt into);
//   R8  "notes", when present, is a string of at most 64 KiB.
// Integers must be JSON integers: 256.0 or "256" is rejected.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel {

inline constexpr const char* kAgentTaskFormat = "hotkernel-agent-task";
inline constexpr int kAgentTaskVersion = 1;
inline constexpr const char* kAgentReplyFormat = "hotkernel-agent-reply";
inline constexpr int kAgentReplyVersion = 1;

// The limits of the reply rules (Note [Agent replies are untrusted]).
inline constexpr size_t kAgentMaxSourceBytes = size_t{1} << 20;
inline constexpr size_t kAgentMaxKernelNameBytes = 256;
inline constexpr size_t kAgentMaxNotesBytes = size_t{64} << 10;
inline constexpr int kAgentMinBlock = 32;
inline constexpr int kAgentMaxBlock = 1024;
inline constexpr int kAgentMaxRowsPerBlock = 65536;
inline constexpr int kAgentMaxSharedBytes = 227 * 1024;
// Feedback logs and errors written into a task are cut to this many bytes.
inline constexpr size_t kAgentMaxLogBytes = size_t{64} << 10;

// How an agent kernel is launched, as a function of the row count:
//   grid  = (min(ceil(rows / rowsPerBlock), 2^31 - 1), 1, 1)
//   block = (block, 1, 1)
//   dynamic shared memory = sharedBytes, on the caller's stream.
// When rows > grid.x * rowsPerBlock the kernel must stride over row groups
// (for (g = blockIdx.x; g * rowsPerBlock < rows; g += gridDim.x)).
// JSON: {"block":256,"rowsPerBlock":1,"sharedBytes":0}
struct AgentLaunch {
  int block = 256;
  int rowsPerBlock = 1;
  int sharedBytes = 0;

  // The launch for `rows` rows (>= 1).
  kernels::LaunchGeometry geometry(int64_t rows) const;

  nlohmann::json toJson() const;
  // Rule R7; throws Error naming the broken rule.
  static AgentLaunch fromJson(const nlohmann::json& j);
  bool operator==(const AgentLaunch& o) const {
    return block == o.block && rowsPerBlock == o.rowsPerBlock && sharedBytes == o.sharedBytes;
  }
  bool operator!=(const AgentLaunch& o) const { return !(*this == o); }
};

// One measurement with the benchmark method (medians, microseconds).
// JSON: {"atenUs":191.2,"kernelUs":160.4,"speedup":1.19}
struct AgentTiming {
  double atenUs = 0;
  double kernelUs = 0;
  double speedup = 0;  // the paired median of atenUs_i / kernelUs_i (not atenUs / kernelUs)

  nlohmann::json toJson() const;
  static AgentTiming fromJson(const nlohmann::json& j);
  bool operator==(const AgentTiming& o) const {
    return atenUs == o.atenUs && kernelUs == o.kernelUs && speedup == o.speedup;
  }
};

// The agent's answer: "hotkernel-agent-reply" version 1.
// JSON: {"format":"hotkernel-agent-reply","version":1,"source":"...",
//        "kernelName":"my_softmax","launch":{...},"notes":"..."}
struct AgentReply {
  std::string source;
  std::string kernelName;
  AgentLaunch launch;
  std::string notes;  // free text; echoed back in the next task's lastAttempt

  nlohmann::json toJson() const;
  // Rules R2-R8 (Note [Agent replies are untrusted]). Throws Error.
  static AgentReply fromJson(const nlohmann::json& j);
  // Rule R1, then fromJson. Throws Error ("agent reply breaks R1: it is not JSON ...").
  static AgentReply parse(const std::string& text);
  bool operator==(const AgentReply& o) const {
    return source == o.source && kernelName == o.kernelName && launch == o.launch && notes == o.notes;
  }
};

// Rules R4 and R5 on a source text. Throws Error naming the broken rule.
void checkAgentSource(const std::string& source);
// Rule R5 alone: whether `source` holds an include directive in any spelling.
bool holdsIncludeDirective(const std::string& source);
// [A-Za-z_][A-Za-z0-9_]*
bool isCIdentifier(const std::string& s);

// Where an attempt ended. JSON: the lowercase name.
enum class AgentStage {
  Agent,        // "agent": the program failed (not started, crashed, timed out, exit != 0, output too large)
  Reply,        // "reply": the reply broke a rule (not JSON, a field missing or wrong, #include, ...)
  Compile,      // "compile": NVRTC rejected the source (log holds its messages)
  Load,         // "load": the cubin did not load, the kernel was not found, or the launch was refused
  Correctness,  // "correctness": the kernel ran but its output differs from ATen's (error says where)
  Benchmark,    // "benchmark": it passed every check and was timed (passed = true), or timing failed
};
const char* agentStageName(AgentStage stage);
// Throws Error for an unknown name.
AgentStage parseAgentStage(const std::string& name);

// What happened to the agent's previous reply.
// JSON: {"stage":"compile","passed":false,"error":"...","log":"...","timing":null,"reply":{...}|null}
struct AgentFeedback {
  AgentStage stage = AgentStage::Agent;
  bool passed = false;                // true only when stage == Benchmark and timing is set
  std::string error;                  // why it failed; "" when passed (cut to kAgentMaxLogBytes)
  std::string log;                    // the compile log, "" when none (cut to kAgentMaxLogBytes)
  std::optional<AgentTiming> timing;  // set when it was timed
  std::optional<AgentReply> reply;    // what the agent returned; absent when nothing valid came back

  nlohmann::json toJson() const;
  static AgentFeedback fromJson(const nlohmann::json& j);
};

// The fastest correct kernel so far.
// JSON: {"origin":"family","kernel":{reply fields},"timing":{...}}
struct AgentBest {
  std::string origin = "family";  // "family": a point of the family template; "agent": an agent's reply
  AgentReply kernel;              // a family point is given as the template with its #defines prepended
  AgentTiming timing;

  nlohmann::json toJson() const;
  static AgentBest fromJson(const nlohmann::json& j);
};

// One parameter point of the family template, as the agent can use it:
// source = specializeSource(family.source, defines), launch as given.
// JSON: {"params":{...},"defines":{"HK_DTYPE":"2",...},"launch":{...}}
struct AgentFamilyPoint {
  nlohmann::json params;                       // the family's own description (SoftmaxParams::toJson)
  std::map<std::string, std::string> defines;  // macro -> value
  AgentLaunch launch;
};

// The family template the agent may start from.
// JSON: {"name":"softmax_lastdim","kernelName":"hk_softmax_lastdim","source":"...","points":[...]}
struct AgentFamily {
  std::string name;
  std::string kernelName;
  std::string source;                    // needs the defines of a point to compile
  std::vector<AgentFamilyPoint> points;  // best guess first (SoftmaxFamily::parameterSpace)
};

// The task: "hotkernel-agent-task" version 1 (tools/agent/PROTOCOL.md).
struct AgentTask {
  std::string op = "aten::_softmax";
  kernels::SoftmaxVariant variant;          // JSON {"dtype":"bfloat16","rows":4096,"cols":32000}
  std::string semantics;                    // what the kernel must compute, special values included
  double tolerance = 0;                     // largest absolute difference from ATen allowed
  std::string arch = "sm_90a";              // the compile target
  std::vector<std::string> compileOptions;  // every NVRTC option the compile uses
  std::string abiSignature;                 // the one kernel signature accepted
  std::vector<std::string> abiRules;        // layout, alignment, aliasing, launch, determinism
  AgentFamily family;
  std::optional<AgentBest> best;             // null: nothing beat ATen yet
  std::optional<AgentFeedback> lastAttempt;  // null: first request
  int attempt = 1;                           // 1 for the first request of this variant

  // The JSON document; also carries a "limits" object with the reply rules'
  // constants, for the agent's information (fromJson ignores it).
  nlohmann::json toJson() const;
  // toJson() as text; bytes that are not UTF-8 (a compile log may echo any) are replaced.
  std::string serialize() const;
  // Throws Error unless `j` is a version 1 task with every field of the right type.
  static AgentTask fromJson(const nlohmann::json& j);
};

// A task for one softmax variant: semantics, ABI, the family template and its
// parameter space for the variant, compile options for `arch`; no best, no
// feedback. Throws Error if the family cannot serve the variant at all.
AgentTask makeSoftmaxAgentTask(const kernels::SoftmaxVariant& variant, const std::string& arch);

// "#define NAME VALUE\n" per entry (in map order), then `source`: a family
// point as one self-contained source.
std::string specializeSource(const std::string& source, const std::map<std::string, std::string>& defines);

// A family point's defines from SoftmaxFamily::compileOptions ("-DHK_VEC=8" -> {"HK_VEC","8"}).
std::map<std::string, std::string> definesFromOptions(const std::vector<std::string>& options);

}  // namespace hotkernel
