// remote_entry_gpu_probe: the second process of RemoteEntryGpuTest. With a
// fresh own cache and the first process's Redis and key (HOTKERNEL_CACHE_DIR,
// HOTKERNEL_REMOTE_CACHE, HOTKERNEL_CACHE_KEY_FILE), it asks the engine for
// two softmax variants whose entries the first process planted in Redis,
// signed: a correct kernel and a tampered one (log_softmax's cubin). The
// correct one must be checked, served and stored locally; the tampered one
// refused, tuned here, and replaced in Redis by this process's decision.
// Arguments: the SHA-256 of the correct and of the tampered cubin. Exit 0
// when every expectation holds; each one that does not is one line on stderr.

#include <iostream>
#include <string>

#include "hotkernel/Config.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/RemoteTier.h"
#include "hotkernel/cache/RemoteUrl.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Ranking.h"
#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/Hash.h"

namespace {

using namespace hotkernel;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::cerr << "remote_entry_gpu_probe: expected " << what << "\n";
}

bool served(const std::string& op, const std::string& variant) {
  const nlohmann::json status = Engine::instance().status();
  for (const auto& p : status["plans"]) {
    if (p["op"] == op && p["variant"] == variant) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: remote_entry_gpu_probe GOOD_CUBIN_SHA256 TAMPERED_CUBIN_SHA256\n";
    return 2;
  }
  const std::string goodSha = argv[1], tamperedSha = argv[2];
  const std::string op = "aten::_softmax";
  const VariantKey good{static_cast<int32_t>(kernels::DType::Float32), 0, 512, 1024};
  const VariantKey tampered{static_cast<int32_t>(kernels::DType::Float32), 0, 512, 2048};
  Engine& engine = Engine::instance();
  engine.ensureDevice(0);
  const std::string fp = engine.status()["fingerprints"].value("0", std::string());
  expect(!fp.empty(), "a fingerprint for device 0");
  auto yield = [] { return true; };

  const nlohmann::json first = engine.optimizeVariant(op, good, yield);
  expect(first["decision"] == "remote", "the correct entry loaded from the shared tier, got " + first.dump());
  expect(served(op, kernels::variantString(good)), "a plan for the correct entry");

  RankedTarget target;
  target.target.op = op;
  target.target.variant = kernels::variantString(tampered);
  target.budgetSeconds = 20;
  const nlohmann::json second = engine.optimizeVariant(op, tampered, yield, target);
  const std::string decision = second.value("decision", std::string());
  expect(decision == "kernel" || decision == "keep_aten",
         "the tampered entry refused and the variant tuned here, got " + second.dump().substr(0, 400));

  const std::unique_ptr<cache::CacheStore> own = cache::CacheStore::open(config().cacheDir);
  const std::optional<cache::Entry> goodCopy = own->get(fp, op, kernels::variantString(good));
  expect(goodCopy && sha256Hex(goodCopy->cubin) == goodSha, "the correct entry copied into the own cache");
  const std::optional<cache::Entry> tamperedCopy = own->get(fp, op, kernels::variantString(tampered));
  expect(tamperedCopy && sha256Hex(tamperedCopy->cubin) != tamperedSha,
         "the own cache holding this process's decision for the tampered variant, not the tampered kernel");

  cache::RemoteTierOptions options;
  options.url = cache::parseRemoteUrl(config().remoteCache);
  options.hotkernelVersion = HOTKERNEL_VERSION;
  cache::RemoteTier tier(options, cache::EntryTrust::fromConfig(config().cacheDir));
  const cache::RemoteLookup inRedis = tier.lookup(fp, op, kernels::variantString(tampered));
  expect(inRedis.status == cache::RemoteStatus::Found && inRedis.entry &&
             sha256Hex(inRedis.entry->cubin) != tamperedSha,
         "Redis holding this process's decision for the tampered variant");
  return failures == 0 ? 0 : 1;
}
