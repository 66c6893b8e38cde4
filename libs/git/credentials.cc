#include "libs/git/credentials.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reverser::git {
namespace {

// Looks up the first present key; a present but empty value is an error.
absl::StatusOr<const std::string*> FirstPresent(const std::map<std::string, std::string>& data,
                                                std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = data.find(key);
    if (it == data.end()) continue;
    if (it->second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("secret key '", key, "' is empty"));
    }
    return &it->second;
  }
  return nullptr;
}

// OpenSSH's match_pattern: '*' any run, '?' any one character.
bool WildcardMatch(absl::string_view pattern, absl::string_view text) {
  size_t p = 0, t = 0, star = absl::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool NameMatches(const KnownHost& entry, const std::string& name) {
  if (!entry.hash.empty()) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    HMAC(EVP_sha1(), entry.hash_salt.data(), static_cast<int>(entry.hash_salt.size()),
         reinterpret_cast<const unsigned char*>(name.data()), name.size(), digest, &digest_len);
    return entry.hash == absl::string_view(reinterpret_cast<const char*>(digest), digest_len);
  }
  bool matched = false;
  for (const std::string& pattern : entry.patterns) {
    if (!pattern.empty() && pattern[0] == '!') {
      if (WildcardMatch(absl::AsciiStrToLower(pattern.substr(1)), name)) return false;
    } else if (WildcardMatch(absl::AsciiStrToLower(pattern), name)) {
      matched = true;
    }
  }
  return matched;
}

}  // namespace

absl::StatusOr<GitCredentials> CredentialsFromSecretData(
    const std::map<std::string, std::string>& data) {
  GitCredentials creds;
  if (auto it = data.find("known_hosts"); it != data.end()) creds.known_hosts = it->second;

  auto ssh_key = FirstPresent(data, {"ssh-privatekey", "identity", "sshPrivateKey"});
  if (!ssh_key.ok()) return ssh_key.status();
  if (*ssh_key != nullptr) {
    creds.kind = GitCredentials::Kind::kSsh;
    creds.ssh_private_key = **ssh_key;
    // With an SSH key present, `password` is the key's passphrase (reference dialect).
    for (const char* key : {"ssh-password", "password"}) {
      if (auto it = data.find(key); it != data.end()) {
        creds.ssh_passphrase = it->second;
        break;
      }
    }
    return creds;
  }

  auto username = FirstPresent(data, {"username"});
  if (!username.ok()) return username.status();
  if (*username != nullptr) {
    auto password = FirstPresent(data, {"password"});
    if (!password.ok()) return password.status();
    if (*password == nullptr) {
      return absl::InvalidArgumentError("secret has 'username' but no 'password'");
    }
    creds.kind = GitCredentials::Kind::kBasic;
    creds.username = **username;
    creds.password = **password;
    return creds;
  }

  auto token = FirstPresent(data, {"bearerToken"});
  if (!token.ok()) return token.status();
  if (*token != nullptr) {
    if (absl::StrContains(**token, '\n') || absl::StrContains(**token, '\r')) {
      return absl::InvalidArgumentError("secret key 'bearerToken' contains a line break");
    }
    creds.kind = GitCredentials::Kind::kBearer;
    creds.bearer_token = **token;
  }
  return creds;
}

std::vector<KnownHost> ParseKnownHosts(absl::string_view text) {
  std::vector<KnownHost> entries;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    KnownHost entry;
    size_t i = 0;
    if (!fields.empty() && fields[0][0] == '@') {
      if (fields[0] == "@revoked") {
        entry.marker = KnownHost::Marker::kRevoked;
      } else if (fields[0] == "@cert-authority") {
        entry.marker = KnownHost::Marker::kCertAuthority;
      } else {
        continue;
      }
      i = 1;
    }
    if (fields.size() < i + 3) continue;
    absl::string_view hosts = fields[i];
    entry.key_type = std::string(fields[i + 1]);
    if (!absl::Base64Unescape(fields[i + 2], &entry.key_blob) || entry.key_blob.empty()) continue;
    if (absl::StartsWith(hosts, "|1|")) {
      std::vector<absl::string_view> parts = absl::StrSplit(hosts.substr(3), '|');
      if (parts.size() != 2 || !absl::Base64Unescape(parts[0], &entry.hash_salt) ||
          !absl::Base64Unescape(parts[1], &entry.hash) || entry.hash.empty()) {
        continue;
      }
    } else {
      entry.patterns = absl::StrSplit(hosts, ',', absl::SkipEmpty());
      if (entry.patterns.empty()) continue;
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string KnownHostsName(absl::string_view host, int port) {
  std::string lower = absl::AsciiStrToLower(host);
  if (port == 22 || port <= 0) return lower;
  return absl::StrCat("[", lower, "]:", port);
}

bool HostKeyTrusted(const std::vector<KnownHost>& known_hosts, absl::string_view host, int port,
                    absl::string_view key_blob) {
  if (key_blob.empty()) return false;
  const std::string name = KnownHostsName(host, port);
  bool trusted = false;
  for (const KnownHost& entry : known_hosts) {
    if (entry.key_blob != key_blob) continue;
    if (entry.marker == KnownHost::Marker::kRevoked) return false;  // revoked anywhere: refuse
    if (entry.marker == KnownHost::Marker::kCertAuthority) continue;
    if (NameMatches(entry, name)) trusted = true;
  }
  return trusted;
}

}  // namespace reverser::git
