#include "libs/commitmeta/identity.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace reverser::commitmeta {
namespace {

bool IsLocalChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-';
}
bool IsDomainChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '-'; }

// Go's strings.TrimSpace for the whitespace that can occur in a claim: ASCII whitespace,
// U+0085 (NEL) and U+00A0 (NBSP).
absl::string_view TrimSpace(absl::string_view s) {
  const auto leading = [](absl::string_view v) -> size_t {
    if (!v.empty() && absl::ascii_isspace(v.front())) return 1;
    if (v.size() >= 2 && v[0] == '\xC2' && (v[1] == '\x85' || v[1] == '\xA0')) return 2;
    return 0;
  };
  const auto trailing = [](absl::string_view v) -> size_t {
    if (!v.empty() && absl::ascii_isspace(v.back())) return 1;
    if (v.size() >= 2 && v[v.size() - 2] == '\xC2' &&
        (v.back() == '\x85' || v.back() == '\xA0')) {
      return 2;
    }
    return 0;
  };
  for (size_t n; (n = leading(s)) > 0;) s.remove_prefix(n);
  for (size_t n; (n = trailing(s)) > 0;) s.remove_suffix(n);
  return s;
}

std::string FirstClaim(const std::map<std::string, std::vector<std::string>>& extra,
                       const char* key) {
  const auto it = extra.find(key);
  if (it == extra.end() || it->second.empty()) return "";
  return it->second.front();
}

}  // namespace

Signature DefaultCommitter() { return {kDefaultCommitterName, kDefaultCommitterEmail}; }

Actor Actor::FromUserInfo(std::string username,
                          const std::map<std::string, std::vector<std::string>>& extra) {
  return Actor{std::move(username), FirstClaim(extra, kDisplayNameClaim),
               FirstClaim(extra, kEmailClaim)};
}

bool IsValidEmail(absl::string_view text) {
  const size_t at = text.find('@');
  if (at == absl::string_view::npos || at == 0) return false;
  for (char c : text.substr(0, at)) {
    if (!IsLocalChar(c)) return false;
  }
  const absl::string_view domain = text.substr(at + 1);
  const size_t dot = domain.rfind('.');
  // The TLD must follow the last dot (letters never include '.'), with a non-empty host before.
  if (dot == absl::string_view::npos || dot == 0 || domain.size() - dot - 1 < 2) return false;
  for (char c : domain.substr(0, dot)) {
    if (!IsDomainChar(c)) return false;
  }
  for (char c : domain.substr(dot + 1)) {
    if (!absl::ascii_isalpha(c)) return false;
  }
  return true;
}

bool IsSafeSignatureField(absl::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '<' || c == '>' || c < 0x20 || c == 0x7F) return false;
    // C1 controls U+0080..U+009F are encoded as C2 80..C2 9F.
    if (c == 0xC2 && i + 1 < text.size()) {
      const unsigned char next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9F) return false;
    }
  }
  return true;
}

std::string ConstructSafeEmail(absl::string_view username, absl::string_view domain) {
  if (IsValidEmail(username)) return std::string(username);
  std::string clean;
  for (size_t i = 0; i < username.size(); ++i) {
    const char c = absl::ascii_tolower(username[i]);
    if (absl::ascii_isdigit(c) || (c >= 'a' && c <= 'z') || c == '.' || c == '-') {
      clean.push_back(c);
    } else if (username.substr(i, 3) == "\xE2\x84\xAA") {
      // Go's strings.ToLower maps U+212A KELVIN SIGN to 'k' (and U+0130 to "i" + a combining
      // dot, which the filter then removes): the only non-ASCII letters that survive.
      clean.push_back('k');
      i += 2;
    } else if (username.substr(i, 2) == "\xC4\xB0") {
      clean.push_back('i');
      i += 1;
    }
  }
  if (clean.empty()) clean = "unknown-user";
  return absl::StrCat(clean, "@noreply.", domain);
}

std::string AuthorName(const Actor& actor) {
  const absl::string_view name = TrimSpace(actor.display_name);
  if (!name.empty() && IsSafeSignatureField(name)) return std::string(name);
  if (IsSafeSignatureField(actor.username) && !TrimSpace(actor.username).empty()) {
    return actor.username;
  }
  std::string clean;
  for (size_t i = 0; i < actor.username.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(actor.username[i]);
    if (c == '<' || c == '>' || c < 0x20 || c == 0x7F) continue;
    if (c == 0xC2 && i + 1 < actor.username.size() &&
        static_cast<unsigned char>(actor.username[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(actor.username[i + 1]) <= 0x9F) {
      ++i;  // a C1 control
      continue;
    }
    clean.push_back(static_cast<char>(c));
  }
  clean = std::string(TrimSpace(clean));
  return clean.empty() ? "unknown-user" : clean;
}

std::string AuthorEmail(const Actor& actor) {
  const absl::string_view email = TrimSpace(actor.email);
  if (IsValidEmail(email)) return std::string(email);
  return ConstructSafeEmail(actor.username);
}

Signature AuthorFor(const std::optional<Actor>& actor, const Signature& committer) {
  if (!actor || actor->username.empty()) return committer;
  return {AuthorName(*actor), AuthorEmail(*actor)};
}

}  // namespace reverser::commitmeta
