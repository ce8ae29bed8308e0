#pragma once
// Captures what this process writes to file descriptor 2 (the logger writes
// there with one write() per line) while an object of this class lives.

#include <unistd.h>

#include <cstdio>
#include <string>

namespace hotkernel::test {

class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    file_ = std::tmpfile();
    if (file_ != nullptr) ::dup2(::fileno(file_), STDERR_FILENO);
  }
  ~StderrCapture() {
    stop();
    if (file_ != nullptr) std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Stops capturing (stderr is restored) and returns everything captured.
  std::string text() {
    stop();
    std::string out;
    if (file_ == nullptr) return out;
    std::rewind(file_);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) out.append(buf, n);
    return out;
  }

 private:
  void stop() {
    if (saved_ < 0) return;
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }

  int saved_ = -1;
  std::FILE* file_ = nullptr;
};

// Occurrences of `needle` in `text`.
inline size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace hotkernel::test
