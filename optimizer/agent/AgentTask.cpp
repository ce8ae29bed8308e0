// The task half of the agent protocol: the task, the feedback and the best
// kernel so far as JSON (Note [Agent replies are untrusted] in AgentTask.h
// has the reply's rules, src/AgentReply.cpp reads replies).

#include "hotkernel/optimizer/AgentTask.h"

#include <limits>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel {
namespace {

using nlohmann::json;

std::string cut(const std::string& text) {
  if (text.size() <= kAgentMaxLogBytes) return text;
  return text.substr(0, kAgentMaxLogBytes) + "\n[... " + std::to_string(text.size() - kAgentMaxLogBytes) +
         " bytes cut]";
}

}  // namespace

// ---- AgentTiming -------------------------------------------------------------

json AgentTiming::toJson() const { return {{"atenUs", atenUs}, {"kernelUs", kernelUs}, {"speedup", speedup}}; }

AgentTiming AgentTiming::fromJson(const json& j) {
  AgentTiming t;
  t.atenUs = jsonfield::number(j, "atenUs", "timing");
  t.kernelUs = jsonfield::number(j, "kernelUs", "timing");
  t.speedup = jsonfield::number(j, "speedup", "timing");
  return t;
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
  f.stage = parseAgentStage(jsonfield::string(j, "stage", where));
  f.passed = jsonfield::boolean(j, "passed", where);
  f.error = jsonfield::string(j, "error", where);
  f.log = jsonfield::string(j, "log", where);
  if (jsonfield::present(j, "timing")) f.timing = AgentTiming::fromJson(j.at("timing"));
  if (jsonfield::present(j, "reply")) f.reply = AgentReply::fromJson(j.at("reply"));
  return f;
}

json AgentBest::toJson() const {
  return {{"origin", origin}, {"kernel", kernel.toJson()}, {"timing", timing.toJson()}};
}

AgentBest AgentBest::fromJson(const json& j) {
  AgentBest b;
  b.origin = jsonfield::string(j, "origin", "best");
  HOTKERNEL_REQUIRE(b.origin == "family" || b.origin == "agent", "best.origin must be \"family\" or \"agent\", got \"",
                    b.origin, "\"");
  b.kernel = AgentReply::fromJson(jsonfield::get(j, "kernel", "best"));
  b.timing = AgentTiming::fromJson(jsonfield::get(j, "timing", "best"));
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
  HOTKERNEL_REQUIRE(jsonfield::string(j, "format", where) == kAgentTaskFormat, where, ".format must be \"",
                    kAgentTaskFormat, "\"");
  HOTKERNEL_REQUIRE(jsonfield::integer(j, "version", where) == kAgentTaskVersion, where, ".version must be ",
                    kAgentTaskVersion);
  AgentTask t;
  t.op = jsonfield::string(j, "op", where);
  const json& v = jsonfield::get(j, "variant", where);
  t.variant.dtype = kernels::parseDType(jsonfield::string(v, "dtype", "variant"));
  t.variant.rows = jsonfield::integer(v, "rows", "variant");
  t.variant.cols = jsonfield::integer(v, "cols", "variant");
  t.semantics = jsonfield::string(j, "semantics", where);
  t.tolerance = jsonfield::number(j, "tolerance", where);
  const json& target = jsonfield::get(j, "target", where);
  t.arch = jsonfield::string(target, "arch", "target");
  t.compileOptions = jsonfield::strings(target, "compileOptions", "target");
  const json& abi = jsonfield::get(j, "abi", where);
  t.abiSignature = jsonfield::string(abi, "signature", "abi");
  t.abiRules = jsonfield::strings(abi, "rules", "abi");
  const json& family = jsonfield::get(j, "family", where);
  t.family.name = jsonfield::string(family, "name", "family");
  t.family.kernelName = jsonfield::string(family, "kernelName", "family");
  t.family.source = jsonfield::string(family, "source", "family");
  for (const json& p : jsonfield::array(family, "points", "family")) {
    AgentFamilyPoint point;
    point.params = jsonfield::get(p, "params", "family.points[]");
    for (const auto& d : jsonfield::objectField(p, "defines", "family.points[]").items()) {
      HOTKERNEL_REQUIRE(d.value().is_string(), "family.points[].defines values must be strings");
      point.defines[d.key()] = d.value().get<std::string>();
    }
    point.launch = AgentLaunch::fromJson(jsonfield::get(p, "launch", "family.points[]"));
    t.family.points.push_back(std::move(point));
  }
  if (jsonfield::present(j, "best")) t.best = AgentBest::fromJson(j.at("best"));
  if (jsonfield::present(j, "lastAttempt")) t.lastAttempt = AgentFeedback::fromJson(j.at("lastAttempt"));
  t.attempt = static_cast<int>(jsonfield::integer(j, "attempt", where, 1, std::numeric_limits<int>::max()));
  return t;
}

std::string specializeSource(const std::string& source, const std::map<std::string, std::string>& defines) {
  std::string out;
  for (const auto& [name, value] : defines) {
    HOTKERNEL_REQUIRE(isCIdentifier(name), "specializeSource: \"", name, "\" is not a macro name");
    HOTKERNEL_REQUIRE(value.find('\n') == std::string::npos, "specializeSource: the value of ", name, " spans lines");
    out += "#define " + name + " " + value + "\n";
  }
  return out + source;
}

std::map<std::string, std::string> definesFromOptions(const std::vector<std::string>& options) {
  std::map<std::string, std::string> defines;
  for (const std::string& o : options) {
    HOTKERNEL_REQUIRE(o.rfind("-D", 0) == 0, "definesFromOptions: \"", o, "\" is not a -D option");
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
  HOTKERNEL_REQUIRE(SoftmaxFamily::guardVariant(variant), "the softmax family cannot serve rows=", variant.rows,
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
