// Note [The process's torch]: the version beside a libtorch, and the match
// against the build's, from files laid out as a wheel and as libtorch.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "hotkernel/runtime/TorchVersion.h"

namespace hotkernel {
namespace {

// A fresh directory tree: <root>/lib/libc10.so and whatever the test writes beside lib/.
class TorchTree {
 public:
  TorchTree() {
    char tmpl[] = "/tmp/hk-torch-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    ::mkdir((root_ + "/lib").c_str(), 0755);
    std::ofstream(root_ + "/lib/libc10.so") << "not a library";
  }
  ~TorchTree() { std::system(("rm -rf " + root_).c_str()); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(root_ + "/" + name) << text; }
  std::string library() const { return root_ + "/lib/libc10.so"; }

 private:
  std::string root_;
};

TEST(TorchVersionTest, GivenAWheelsVersionPyWhenReadBesideLibc10ThenItsVersionWithTheLocalTag) {
  TorchTree t;
  t.write("version.py",
          "from typing import Optional\n\n__all__ = ['__version__']\n__version__ = '2.11.0+cu130'\n"
          "cuda: Optional[str] = '13.0'\n");
  EXPECT_EQ(torchVersionBeside(t.library()), "2.11.0+cu130");
}

TEST(TorchVersionTest, GivenLibtorchsBuildVersionWhenReadThenItsFirstLine) {
  TorchTree t;
  t.write("build-version", "2.11.0+cu130\n");
  EXPECT_EQ(torchVersionBeside(t.library()), "2.11.0+cu130");
}

TEST(TorchVersionTest, GivenNoVersionFileOrAMalformedOneWhenReadThenNone) {
  TorchTree t;
  EXPECT_FALSE(torchVersionBeside(t.library()).has_value());
  t.write("version.py", "__version__ = get_version()\n");
  EXPECT_FALSE(torchVersionBeside(t.library()).has_value());
  t.write("build-version", "\n");
  EXPECT_FALSE(torchVersionBeside(t.library()).has_value());
  EXPECT_FALSE(torchVersionBeside("libc10.so").has_value());  // no directory
}

TEST(TorchVersionTest, GivenBuiltAndFoundVersionsWhenComparedThenOnlyTheSameTorchMatches) {
  EXPECT_EQ(torchMismatch("2.11.0+cu130", "2.11.0+cu130"), "");
  EXPECT_EQ(torchMismatch("", "2.10.0+cu128"), "");           // the build did not record one
  EXPECT_EQ(torchMismatch("2.11.0", "2.11.0+cu130"), "");     // no tag built: any tag
  const std::string other = torchMismatch("2.11.0+cu130", "2.10.0+cu130");
  EXPECT_NE(other.find("built for torch 2.11.0+cu130"), std::string::npos) << other;
  EXPECT_NE(other.find("2.10.0+cu130"), std::string::npos) << other;
  EXPECT_NE(torchMismatch("2.11.0+cu130", "2.11.0+cu128"), "");  // another CUDA runtime
  EXPECT_NE(torchMismatch("2.11.0+cu130", "2.11.0"), "");
  EXPECT_NE(torchMismatch("2.11.0", "2.11.1"), "");
}

}  // namespace
}  // namespace hotkernel
