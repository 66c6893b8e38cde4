#include "tools/kube-sim/names.h"

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace reverser::kubesim {

std::vector<std::string> ValidateSubdomain(const std::string& value) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back("must be no more than 253 characters");
  if (!std::regex_match(value, kRe)) {
    errs.push_back(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  }
  return errs;
}

std::vector<std::string> ValidateLabel(const std::string& value) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back("must be no more than 63 characters");
  if (!std::regex_match(value, kRe)) {
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
