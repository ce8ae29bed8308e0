#include <gtest/gtest.h>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel {
namespace {

Fingerprint h200() {
  Fingerprint f;
  f.gpuName = "NVIDIA H200";
  f.computeCapability = "9.0";
  f.driverVersion = 13000;
  f.nvrtcVersion = 13000;
  f.torchVersion = "2.11.0+cudart13000";
  f.hotkernelVersion = "0.1.0";
  f.kernelSources = "ab12";
  return f;
}

TEST(FingerprintTest, GivenFingerprintWhenRoundTrippedThroughJsonThenSameKey) {
  Fingerprint f = h200();
  Fingerprint g = Fingerprint::fromCanonicalJson(f.canonicalJson());
  EXPECT_EQ(g.canonicalJson(), f.canonicalJson());
  EXPECT_EQ(g.key(), f.key());
  EXPECT_EQ(f.key().size(), 16u);
}

TEST(FingerprintTest, GivenAnyFieldChangedWhenKeyedThenKeyDiffers) {
  const std::string base = h200().key();
  Fingerprint f = h200();
  f.driverVersion = 13010;
  EXPECT_NE(f.key(), base);
  f = h200();
  f.torchVersion = "2.12.0";
  EXPECT_NE(f.key(), base);
  f = h200();
  f.gpuName = "NVIDIA H100";
  EXPECT_NE(f.key(), base);
  f = h200();
  f.hotkernelVersion = "0.2.0";
  EXPECT_NE(f.key(), base);
  f = h200();
  f.kernelSources = "cd34";
  EXPECT_NE(f.key(), base);
}

TEST(FingerprintTest, GivenMalformedJsonWhenParsedThenError) {
  EXPECT_THROW(Fingerprint::fromCanonicalJson("not json"), Error);
  EXPECT_THROW(Fingerprint::fromCanonicalJson("{\"gpu\": 3}"), Error);
}

// Found by fuzz_fingerprint (tests/fuzz): an integer too long for 64 bits is
// kept as a float by the JSON reader, and converting it to int was undefined.
TEST(FingerprintTest, GivenVersionNumberThatIsNoIntWhenParsedThenError) {
  const std::string good = h200().canonicalJson();
  const std::string driver = "\"driver\":13000";
  ASSERT_NE(good.find(driver), std::string::npos);
  for (const std::string bad : {"13000184467440737095516", "1e30", "-1e30", "1.5", "4294967296", "-2147483649",
                                "\"13000\""}) {
    std::string text = good;
    text.replace(text.find(driver), driver.size(), "\"driver\":" + bad);
    EXPECT_THROW(Fingerprint::fromCanonicalJson(text), Error) << text;
  }
  std::string edge = good;
  edge.replace(edge.find(driver), driver.size(), "\"driver\":2147483647");
  EXPECT_EQ(Fingerprint::fromCanonicalJson(edge).driverVersion, 2147483647);
}

}  // namespace
}  // namespace hotkernel
