// A fused chain's cache entry params, written and read back (ChainEntry.h).

#include "hotkernel/chain/ChainEntry.h"

#include <set>

#include "hotkernel/chain/ChainJson.h"
#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel::chain {
namespace {

namespace jf = hotkernel::jsonfield;

void onlyKeys(const nlohmann::json& j, const std::set<std::string>& keys, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    HOTKERNEL_REQUIRE(keys.count(it.key()) > 0, where, " has an unknown key \"", it.key(), "\"");
  }
}

}  // namespace

nlohmann::json chainParamsToJson(const ChainKernelParams& p) {
  nlohmann::json j = {{"threads", p.threads}, {"vec", p.vec}, {"rowsPerCta", p.rowsPerCta}, {"items", p.items}};
  if (p.atenRounding) j["rounding"] = "aten";  // absent: "fused" (Note [Chain entry params, v2])
  if (p.fold) j["fold"] = true;                // absent: false
  if (p.cluster != 1) j["cluster"] = p.cluster;  // absent: 1 (Note [Rows split over a cluster])
  return j;
}

ChainKernelParams chainParamsFromJson(const nlohmann::json& j, const std::string& where) {
  jf::object(j, where);
  onlyKeys(j, {"threads", "vec", "rowsPerCta", "items", "rounding", "fold", "cluster"}, where);
  ChainKernelParams p;
  p.threads = static_cast<int>(jf::integer(j, "threads", where, 1, 1024));
  p.vec = static_cast<int>(jf::integer(j, "vec", where, 1, 8));
  p.rowsPerCta = static_cast<int>(jf::integer(j, "rowsPerCta", where, 1, 1024));
  p.items = static_cast<int>(jf::integer(j, "items", where, 0, 16));
  if (jf::present(j, "rounding")) {
    const std::string rounding = jf::string(j, "rounding", where);
    HOTKERNEL_REQUIRE(rounding == "aten" || rounding == "fused", where, ".rounding is \"", rounding,
                      "\", not \"aten\" or \"fused\"");
    p.atenRounding = rounding == "aten";
  }
  if (jf::present(j, "fold")) p.fold = jf::boolean(j, "fold", where);
  if (jf::present(j, "cluster")) p.cluster = static_cast<int>(jf::integer(j, "cluster", where, 2, 8));
  return p;
}

nlohmann::json chainEntryParams(const ChainVariant& v, const std::optional<ChainKernelParams>& kernel) {
  nlohmann::json j;
  j["format"] = kChainEntryFormat;
  j["version"] = kChainEntryVersion;
  j["chain"] = chainToJson(v.ir);
  j["chainSha256"] = chainKey(v.ir).sha256;
  j["rows"] = v.rows;
  j["cols"] = v.cols;
  if (!v.layout.contiguous()) j["layout"] = layoutToJson(v.layout);
  if (kernel) {
    const std::string problem = chainVariantProblem(v.ir, *kernel, v.rows, v.cols, v.layout);
    HOTKERNEL_CHECK(problem.empty(), "chain kernel ", kernel->describe(), " does not serve [", v.rows, ", ", v.cols,
                    "]: ", problem);
    j["kernel"] = chainParamsToJson(*kernel);
    j["sourceSha256"] = sha256Hex(generateChainSource(v.ir, *kernel, v.layout));
  }
  return j;
}

std::optional<ChainKernelParams> readChainEntry(const std::string& paramsText, const ChainVariant& v) {
  const std::string where = "chain entry params";
  const nlohmann::json j = jf::parse(paramsText, where, jf::kMaxDepth);
  jf::object(j, where);
  HOTKERNEL_REQUIRE(jf::string(j, "format", where) == kChainEntryFormat, where, ".format must be \"",
                    kChainEntryFormat, "\"");
  const int64_t version = jf::integer(j, "version", where);
  HOTKERNEL_REQUIRE(version >= kChainEntryOldestVersion && version <= kChainEntryVersion, where, ".version ", version,
                    " is not ", kChainEntryOldestVersion, " to ", kChainEntryVersion, ", the versions this build reads");
  const bool kernelEntry = j.contains("kernel");
  std::set<std::string> keys = {"format", "version", "chain", "chainSha256", "rows", "cols"};
  if (version >= 2) keys.insert("layout");
  if (kernelEntry) keys.insert({"kernel", "sourceSha256"});
  onlyKeys(j, keys, where);
  const ChainIR stored = chainFromJson(jf::get(j, "chain", where));
  const std::string storedSha = chainKey(stored).sha256;
  HOTKERNEL_REQUIRE(jf::string(j, "chainSha256", where) == storedSha, where,
                    ".chainSha256 is not the key of the stored chain");
  HOTKERNEL_REQUIRE(storedSha == chainKey(v.ir).sha256, where, ": the stored chain is not the requested one (key ",
                    storedSha.substr(0, 16), ", asked for ", chainKey(v.ir).sha256.substr(0, 16), ")");
  HOTKERNEL_REQUIRE(jf::integer(j, "rows", where) == v.rows && jf::integer(j, "cols", where) == v.cols, where,
                    ": stored for [", jf::integer(j, "rows", where), ", ", jf::integer(j, "cols", where),
                    "], asked for [", v.rows, ", ", v.cols, "]");
  const ChainLayout layout = j.contains("layout") ? layoutFromJson(jf::get(j, "layout", where), where + ".layout")
                                                  : ChainLayout{};
  HOTKERNEL_REQUIRE(!j.contains("layout") || !layout.contiguous(), where, ".layout is empty: a contiguous variant ",
                    "stores none");
  HOTKERNEL_REQUIRE(layout == v.layout, where, ": stored for layout '", layoutText(layout), "', asked for '",
                    layoutText(v.layout), "'");
  if (!kernelEntry) return std::nullopt;
  const ChainKernelParams p = chainParamsFromJson(jf::get(j, "kernel", where), where + ".kernel");
  checkChainKernel(stored, p);
  const std::string problem = chainVariantProblem(stored, p, v.rows, v.cols, layout);
  HOTKERNEL_REQUIRE(problem.empty(), where, ".kernel ", p.describe(), " does not serve the variant: ", problem);
  HOTKERNEL_REQUIRE(jf::string(j, "sourceSha256", where) == sha256Hex(generateChainSource(stored, p, layout)), where,
                    ".sourceSha256 is not the source this build generates for the chain at ", p.describe());
  return p;
}

}  // namespace hotkernel::chain
