#include "tools/reverserctl/table.h"

#include <algorithm>

namespace reverser::reverserctl {
namespace {

// Display width: count UTF-8 code points, not bytes, so "—" in a summary does not skew columns.
size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;
  }
  return width;
}

}  // namespace

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (std::string& cell : cells) {
    if (cell.empty()) cell = "-";
    // One row per line: a multi-line message (e.g. a push error) is folded.
    std::replace(cell.begin(), cell.end(), '\n', ' ');
  }
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) widths[i] = DisplayWidth(headers_[i]);
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  }
  std::string out;
  auto append_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      line += cells[i];
      if (i + 1 < cells.size()) line.append(widths[i] - DisplayWidth(cells[i]) + 2, ' ');
    }
    out += line;
    out += '\n';
  };
  append_line(headers_);
  for (const auto& row : rows_) append_line(row);
  return out;
}

}  // namespace reverser::reverserctl
