#include "hotkernel/chain/ChainJson.h"

#include <limits>
#include <set>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel::chain {
namespace {

namespace jf = hotkernel::jsonfield;

// The keys a node of `op` may have (Note [Chain JSON, v2]).
std::set<std::string> keysOf(OpKind op, int64_t version) {
  std::set<std::string> keys = {"op", "dtype", "shape"};
  if (version >= 2) keys.insert("cols");
  const OpCategory category = opInfo(op).category;
  if (category != OpCategory::Leaf) keys.insert("inputs");
  if (op == OpKind::Constant) keys.insert("value");
  if (op == OpKind::PowScalar) keys.insert("exponent");
  if (op == OpKind::LeakyRelu) keys.insert("slope");
  if (op == OpKind::Add || op == OpKind::Sub) keys.insert("alpha");
  if (category == OpCategory::Reduction) keys.insert({"keepdim", "dim"});
  return keys;
}

void onlyKeys(const nlohmann::json& j, const std::set<std::string>& keys, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    HOTKERNEL_REQUIRE(keys.count(it.key()) > 0, where, " has an unknown key \"", it.key(), "\"");
  }
}

int index(const nlohmann::json& v, const std::string& where, size_t limit) {
  HOTKERNEL_REQUIRE(v.is_number_integer(), where, " must hold integers, got ", jf::describe(v));
  const auto i = v.get<int64_t>();
  HOTKERNEL_REQUIRE(i >= 0 && static_cast<uint64_t>(i) < limit, where, " holds ", i, ", not a node index in [0, ",
                    limit, ")");
  return static_cast<int>(i);
}

Node readNode(const nlohmann::json& j, const std::string& where, size_t nodeCount, int64_t version) {
  jf::object(j, where);
  Node n;
  n.op = parseOpKind(jf::string(j, "op", where));
  HOTKERNEL_REQUIRE(version >= 2 || n.op != OpKind::Cat, where, " is a cat, which version ", version, " has not");
  onlyKeys(j, keysOf(n.op, version), where);
  if (j.contains("cols")) n.cols = jf::integer(j, "cols", where, 1, int64_t{1} << 30);
  n.dtype = kernels::parseDType(jf::string(j, "dtype", where));
  n.shape = parseShapeClass(jf::string(j, "shape", where));
  if (opInfo(n.op).category != OpCategory::Leaf) {
    for (const nlohmann::json& v : jf::array(j, "inputs", where)) {
      n.operands.push_back(index(v, where + ".inputs", nodeCount));
    }
  }
  switch (n.op) {
    case OpKind::Constant:
      n.scalar = jf::number(j, "value", where);
      break;
    case OpKind::PowScalar:
      n.scalar = jf::number(j, "exponent", where);
      break;
    case OpKind::LeakyRelu:
      n.scalar = jf::number(j, "slope", where);
      break;
    case OpKind::Add:
    case OpKind::Sub:
      n.scalar = jf::number(j, "alpha", where);
      break;
    default:
      break;
  }
  if (opInfo(n.op).category == OpCategory::Reduction) {
    n.keepdim = jf::boolean(j, "keepdim", where);
    n.dim = static_cast<int>(jf::integer(j, "dim", where, -8, 8));
  }
  return n;
}

}  // namespace

nlohmann::json chainToJson(const ChainIR& ir) {
  ir.validate();
  nlohmann::json nodes = nlohmann::json::array();
  for (const Node& n : ir.nodes()) {
    nlohmann::json j = {{"op", opInfo(n.op).name}, {"dtype", dtypeName(n.dtype)}, {"shape", shapeClassName(n.shape)}};
    if (opInfo(n.op).category != OpCategory::Leaf) j["inputs"] = n.operands;
    if (n.cols > 0) j["cols"] = n.cols;
    if (n.op == OpKind::Constant) j["value"] = n.scalar;
    if (n.op == OpKind::PowScalar) j["exponent"] = n.scalar;
    if (n.op == OpKind::LeakyRelu) j["slope"] = n.scalar;
    if (n.op == OpKind::Add || n.op == OpKind::Sub) j["alpha"] = n.scalar;
    if (opInfo(n.op).category == OpCategory::Reduction) {
      j["keepdim"] = n.keepdim;
      j["dim"] = n.dim;
    }
    nodes.push_back(std::move(j));
  }
  return {{"format", kChainJsonFormat}, {"version", kChainJsonVersion}, {"nodes", nodes}, {"outputs", ir.outputs()}};
}

ChainIR chainFromJson(const nlohmann::json& j) {
  const std::string where = "chain";
  jf::object(j, where);
  onlyKeys(j, {"format", "version", "nodes", "outputs"}, where);
  const std::string format = jf::string(j, "format", where);
  HOTKERNEL_REQUIRE(format == kChainJsonFormat, "chain.format must be \"", kChainJsonFormat, "\", got \"", format,
                    "\"");
  const int64_t version = jf::integer(j, "version", where);
  HOTKERNEL_REQUIRE(version >= kChainJsonOldestVersion && version <= kChainJsonVersion, "chain.version ", version,
                    " is not supported (this reader knows ", kChainJsonOldestVersion, " to ", kChainJsonVersion, ")");
  const nlohmann::json& nodes = jf::array(j, "nodes", where);
  ChainIR ir;
  for (size_t i = 0; i < nodes.size(); ++i) {
    ir.appendUnchecked(readNode(nodes[i], "chain.nodes[" + std::to_string(i) + "]", nodes.size(), version));
  }
  for (const nlohmann::json& v : jf::array(j, "outputs", where)) {
    ir.appendOutputUnchecked(index(v, "chain.outputs", nodes.size()));
  }
  ir.validate();
  return ir;
}

ChainIR chainFromJsonText(const std::string& text) {
  return chainFromJson(jf::parse(text, "chain JSON", jf::kMaxDepth));
}

}  // namespace hotkernel::chain
