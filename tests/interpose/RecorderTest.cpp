#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>
#include <mutex>
#include <vector>

#include "Recorder.h"
#include "hotkernel/kernels/DType.h"

namespace hotkernel {
namespace {

TEST(RecorderTest, GivenRecorderWhenOpsRunThenVariantsCountedAndHotFiredOnce) {
  std::mutex mu;
  std::vector<VariantKey> hot;
  Recorder& r = Recorder::instance();
  r.start(1.0, /*hotCalls=*/3, [&](const std::string& op, const VariantKey& key) {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_EQ(op, "aten::_softmax");
    hot.push_back(key);
  });
  at::Tensor x = at::randn({5, 7});
  for (int i = 0; i < 6; ++i) (void)at::_softmax(x, -1, false);
  (void)at::_softmax(at::randn({2, 9}), -1, false);  // seen once: not hot

  {
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(hot.size(), 1u);
    EXPECT_EQ(hot[0].rows, 5);
    EXPECT_EQ(hot[0].cols, 7);
    EXPECT_EQ(hot[0].device, -1);
  }
  nlohmann::json p = r.profile();
  EXPECT_EQ(p["format"], "hotkernel-profile");
  EXPECT_EQ(p["version"], 1);
  bool sawOp = false;
  for (const auto& op : p["ops"]) sawOp |= (op["op"] == "aten::_softmax" && op["sampledCalls"].get<int>() >= 7);
  EXPECT_TRUE(sawOp) << p.dump();
  int variants = 0;
  for (const auto& v : p["variants"]) {
    if (v["rows"] == 5 && v["cols"] == 7) {
      EXPECT_EQ(v["dtype"], "float32");
      EXPECT_GE(v["sampledCalls"].get<int>(), 6);
      ++variants;
    }
  }
  EXPECT_EQ(variants, 1);

  const std::string path = ::testing::TempDir() + "/hk-profile.json";
  ASSERT_TRUE(r.writeProfile(path));
  std::ifstream f(path);
  nlohmann::json back = nlohmann::json::parse(f);
  EXPECT_EQ(back["format"], "hotkernel-profile");
  EXPECT_FALSE(r.writeProfile("/nonexistent-dir/profile.json"));
}

}  // namespace
}  // namespace hotkernel
