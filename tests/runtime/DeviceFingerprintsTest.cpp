// One fingerprint per device (Note [A fingerprint per device]), with fake devices.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "hotkernel/runtime/Check.h"
#include "FakeFingerprint.h"
#include "hotkernel/runtime/DeviceFingerprints.h"

namespace hotkernel {
namespace {

TEST(DeviceFingerprintsTest, GivenTwoDifferentDevicesWhenBothAreSetThenEachKeepsItsOwnFingerprint) {
  DeviceFingerprints fps;
  const Fingerprint h200 = testing::fakeFingerprint("NVIDIA H200"), h100 = testing::fakeFingerprint("NVIDIA H100");
  fps.set(0, h200);
  fps.set(1, h100);
  ASSERT_NE(h200.key(), h100.key());
  EXPECT_EQ(fps.keyOf(0), h200.key());
  EXPECT_EQ(fps.keyOf(1), h100.key());
  EXPECT_EQ(fps.of(1)->gpuName, "NVIDIA H100");
  EXPECT_EQ(fps.keys().size(), 2u);
}

TEST(DeviceFingerprintsTest, GivenADeviceNeverSetWhenItsKeyIsAskedThenItThrowsAndOfIsEmpty) {
  DeviceFingerprints fps;
  fps.set(0, testing::fakeFingerprint("NVIDIA H200"));
  EXPECT_FALSE(fps.of(3).has_value());
  EXPECT_THROW(fps.keyOf(3), Error);
}

TEST(DeviceFingerprintsTest, GivenDevicesSetOnManyThreadsWhileReadersReadThenEveryReadIsOneOfTheSetValues) {
  DeviceFingerprints fps;
  std::vector<Fingerprint> devices;
  for (int d = 0; d < 8; ++d) devices.push_back(testing::fakeFingerprint("GPU " + std::to_string(d)));
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int d = 0; d < 8; ++d) {
    threads.emplace_back([&, d] {
      for (int i = 0; i < 500; ++i) fps.set(d, devices[d]);
    });
    threads.emplace_back([&, d] {
      for (int i = 0; i < 500; ++i) {
        const auto f = fps.of(d);
        if (f && f->gpuName != devices[d].gpuName) bad = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(bad.load());
  for (int d = 0; d < 8; ++d) EXPECT_EQ(fps.keyOf(d), devices[d].key());
}

}  // namespace
}  // namespace hotkernel
