#include "tools/kube-sim/names.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reverser::kubesim {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

bool IsDns1123Label(absl::string_view value) {
  if (value.empty() || !IsLowerAlnum(value.front()) || !IsLowerAlnum(value.back())) return false;
  for (char c : value) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool IsDns1123Subdomain(absl::string_view value) {
  for (absl::string_view label : absl::StrSplit(value, '.')) {
    if (!IsDns1123Label(label)) return false;
  }
  return true;
}

bool IsDns1035Label(absl::string_view value) {
  return IsDns1123Label(value) && value.front() >= 'a' && value.front() <= 'z';
}

std::vector<std::string> ValidateSubdomain(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back("must be no more than 253 characters");
  if (!IsDns1123Subdomain(value)) {
    errs.push_back(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  }
  return errs;
}

std::vector<std::string> ValidateLabel(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back("must be no more than 63 characters");
  if (!IsDns1123Label(value)) {
    errs.push_back(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
  }
  return errs;
}

std::vector<std::string> ValidatePathSegment(const std::string& value) {
  if (value == "." || value == "..") return {absl::StrCat("may not be '", value, "'")};
  for (const char* bad : {"/", "%"}) {
    if (absl::StrContains(value, bad)) return {absl::StrCat("may not contain '", bad, "'")};
  }
  return {};
}

}  // namespace reverser::kubesim
