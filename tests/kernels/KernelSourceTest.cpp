#include "hotkernel/kernels/KernelSource.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

std::string readRepoFile(std::string_view relative) {
  std::ifstream f(std::string(HOTKERNEL_TEST_SOURCE_DIR) + "/" + std::string(relative), std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(KernelSourceTest, GivenEmbeddedSourcesWhenComparedWithTheFilesInTheRepoThenIdentical) {
  ASSERT_FALSE(allKernelSources().empty());
  for (const KernelSource& s : allKernelSources()) {
    EXPECT_FALSE(s.text.empty()) << s.name;
    EXPECT_EQ(std::string(s.text), readRepoFile(s.path)) << s.path << " changed without a rebuild";
  }
}

TEST(KernelSourceTest, GivenSoftmaxSourceWhenLookedUpThenItDefinesTheEntryAndIncludesOnlyThePrelude) {
  const KernelSource& s = kernelSource("softmax_lastdim");
  EXPECT_EQ(s.name, "softmax_lastdim");
  EXPECT_EQ(s.path, "kernels/softmax/softmax_lastdim.cu");
  EXPECT_NE(s.text.find("extern \"C\" __global__"), std::string_view::npos);
  EXPECT_NE(s.text.find("hk_softmax_lastdim("), std::string_view::npos);
  const size_t include = s.text.find("#include");
  ASSERT_NE(include, std::string_view::npos);
  EXPECT_EQ(s.text.substr(include, 25), "#include \"hk_prelude.cuh\"");
  EXPECT_EQ(s.text.find("#include", include + 1), std::string_view::npos);
}

// Every family's source() is one self-contained text: the prelude in place
// of its include line, nothing else changed. pad_rows.cu (mm_pad_n's copy of
// 16-bit elements by their bits) needs nothing of the prelude and includes
// nothing: it expands to itself.
TEST(KernelSourceTest, GivenTemplatesWhenExpandedThenThePreludeReplacesTheIncludeAndNoIncludeIsLeft) {
  const std::string_view prelude = kernelSource("hk_prelude").text;
  EXPECT_EQ(kernelSource("hk_prelude").path, "kernels/common/hk_prelude.cuh");
  for (const KernelSource& s : allKernelSources()) {
    if (s.name == "hk_prelude") continue;
    if (s.name == "pad_rows") {
      EXPECT_EQ(s.text.find("#include"), std::string_view::npos);
      EXPECT_EQ(expandPrelude(s.text), std::string(s.text));
      continue;
    }
    const std::string expanded = expandPrelude(s.text);
    EXPECT_EQ(expanded.find("#include"), std::string::npos) << s.name;
    EXPECT_NE(expanded.find(prelude), std::string::npos) << s.name << " does not use the prelude";
    EXPECT_EQ(expanded.size(), s.text.size() - std::string_view("#include \"hk_prelude.cuh\"\n").size() + prelude.size())
        << s.name;
  }
  EXPECT_EQ(expandPrelude("no include here\n"), "no include here\n");
  EXPECT_THROW(expandPrelude("#include \"hk_prelude.cuh\"\n#include \"hk_prelude.cuh\"\n"), Error);
}

TEST(KernelSourceTest, GivenASourceWhenHashedThenStableLowercaseSha256) {
  const KernelSource& s = kernelSource("softmax_lastdim");
  const std::string h = s.sha256();
  ASSERT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, s.sha256());
}

TEST(KernelSourceTest, GivenUnknownNameWhenLookedUpThenThrows) {
  EXPECT_THROW(kernelSource("no_such_kernel"), Error);
}

}  // namespace
}  // namespace hotkernel::kernels
