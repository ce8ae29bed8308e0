#include "TextTable.h"

#include <algorithm>

namespace hotkernel::cli {

TextTable::TextTable(std::vector<std::string> header) : header_(std::move(header)) {}

void TextTable::addRow(std::vector<std::string> cells) {
  cells.resize(std::max(cells.size(), header_.size()));
  rows_.push_back(std::move(cells));
}

std::string TextTable::render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&width](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      line += row[i];
      if (i < width.size()) line.append(width[i] - row[i].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace hotkernel::cli
