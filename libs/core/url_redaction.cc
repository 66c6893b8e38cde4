#include "libs/core/url_redaction.h"

#include "absl/strings/str_cat.h"

namespace reverser::core {

std::string RedactUrl(absl::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos) return std::string(url);
  const size_t authority = scheme_end + 3;
  // The authority ends at the first '/', '?' or '#'; its last '@' ends the user information.
  size_t end = url.find_first_of("/?#", authority);
  if (end == absl::string_view::npos) end = url.size();
  const size_t at = url.substr(authority, end - authority).rfind('@');
  if (at == absl::string_view::npos) return std::string(url);
  return absl::StrCat(url.substr(0, authority), "***", url.substr(authority + at));
}

}  // namespace reverser::core
