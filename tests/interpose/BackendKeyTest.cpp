// The key a trampoline runs for (Note [The key a trampoline runs for]).
#include <gtest/gtest.h>

#include <array>
#include <atomic>

#include "hotkernel/interpose/BackendKey.h"

namespace hotkernel {
namespace {

constexpr size_t kKeys = static_cast<size_t>(c10::DispatchKey::EndOfRuntimeBackendKeys) + 1;

struct Installed {
  explicit Installed(std::initializer_list<c10::DispatchKey> keys) {
    for (c10::DispatchKey k : keys) on[static_cast<size_t>(k)].store(true);
  }
  std::array<std::atomic<bool>, kKeys> on{};
};

c10::DispatchKeySet keys(std::initializer_list<c10::DispatchKey> k) { return c10::DispatchKeySet(k); }

TEST(BackendKeyTest, GivenKeysAboveTheBackendWhenResolvedThenTheHighestDenseBackendKey) {
  using K = c10::DispatchKey;
  EXPECT_EQ(backendKeyOf(keys({K::PythonDispatcher, K::AutogradCUDA, K::CUDA})), K::CUDA);
  EXPECT_EQ(backendKeyOf(keys({K::Negative, K::AutogradCPU, K::CPU})), K::CPU);
  EXPECT_EQ(backendKeyOf(keys({K::CPU, K::CUDA})), K::CUDA);  // a CUDA tensor and a CPU scalar tensor
}

TEST(BackendKeyTest, GivenTheArgumentsBackendInstalledWhenResolvedThenThatKey) {
  using K = c10::DispatchKey;
  const Installed both({K::CPU, K::CUDA});
  EXPECT_EQ(installedKeyOf(keys({K::PythonDispatcher, K::AutogradCPU, K::CPU}), both.on), K::CPU);
  EXPECT_EQ(installedKeyOf(keys({K::PythonDispatcher, K::AutogradCUDA, K::CUDA}), both.on), K::CUDA);
}

TEST(BackendKeyTest, GivenArgumentsOfABackendNotInstalledWhenOneKeyIsInstalledThenThatKey) {
  using K = c10::DispatchKey;
  // CUDA's _to_copy of a CPU tensor, asked for by torch's Python dispatcher.
  const Installed cuda({K::CUDA});
  EXPECT_EQ(installedKeyOf(keys({K::PythonDispatcher, K::AutogradCPU, K::CPU}), cuda.on), K::CUDA);
  // Several installed: nothing tells which; the arguments' backend (whose original the caller lacks).
  const Installed both({K::CPU, K::CUDA});
  EXPECT_EQ(installedKeyOf(keys({K::Meta}), both.on), K::Meta);
}

}  // namespace
}  // namespace hotkernel
