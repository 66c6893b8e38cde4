#include "libs/git/repo_path.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reverser::git {
namespace {

absl::Status Refuse(absl::string_view path, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid repository path '", absl::CHexEscape(path), "': ", why));
}

}  // namespace

absl::Status ValidateRepoPath(absl::string_view path) {
  if (path.empty()) return Refuse(path, "empty");
  if (path.front() == '/') return Refuse(path, "absolute paths are not allowed");
  if (path.back() == '/') return Refuse(path, "trailing '/'");
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Refuse(path, "control character");
    }
    // Git stores '\' as a plain byte, but on Windows checkouts it is a separator: refuse it so
    // a path can never mean two different files.
    if (c == '\\') return Refuse(path, "backslash");
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty()) return Refuse(path, "empty path component");
    if (part == "." || part == "..") return Refuse(path, "'.' or '..' component");
    if (absl::AsciiStrToLower(part) == ".git") return Refuse(path, "'.git' component");
  }
  return absl::OkStatus();
}

}  // namespace reverser::git
