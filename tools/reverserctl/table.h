#pragma once

// Aligned plain-text tables, the CLI's human-readable output: upper-case headers, columns padded
// to their widest cell, two spaces between columns, no trailing blanks.

#include <string>
#include <vector>

namespace reverser::reverserctl {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

  // Adds a row; missing cells render empty, extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  size_t size() const { return rows_.size(); }

  // The table with a trailing newline; empty cells print as "-" so columns stay readable.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace reverser::reverserctl
