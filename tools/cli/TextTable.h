#pragma once
// Left-aligned text columns separated by two spaces, with a header row.

#include <string>
#include <vector>

namespace hotkernel::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header);
  // A row with fewer cells than the header is padded with empty cells.
  void addRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }
  // Header and rows, one line each, "\n"-terminated; no trailing spaces.
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace hotkernel::cli
