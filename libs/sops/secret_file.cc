#include "libs/sops/secret_file.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "libs/core/status.h"
#include "libs/manifest/go_yaml.h"
#include "libs/sops/age.h"

namespace reverser::sops {
namespace {

bool KeyLess(const std::string& a, const std::string& b) { return manifest::goyaml::KeyLess(a, b); }

std::vector<std::string> SortedKeys(const nlohmann::json& object) {
  std::vector<std::string> keys;
  for (const auto& item : object.items()) keys.push_back(item.key());
  std::sort(keys.begin(), keys.end(), KeyLess);
  return keys;
}

// nlohmann::json (sorted std::map) -> ordered tree with go-yaml's key order at every level.
Tree Ordered(const nlohmann::json& value) {
  if (value.is_object()) {
    Tree out = Tree::object();
    for (const std::string& key : SortedKeys(value)) out[key] = Ordered(value[key]);
    return out;
  }
  if (value.is_array()) {
    Tree out = Tree::array();
    for (const auto& item : value) out.push_back(Ordered(item));
    return out;
  }
  return Tree(value);
}

bool ValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t len = manifest::goyaml::Utf8SequenceLength(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

// Every key and string is UTF-8: a YAML file cannot carry anything else, and sops would hash
// bytes kubectl never sees.
absl::Status CheckUtf8(const nlohmann::json& value) {
  if (value.is_string() && !ValidUtf8(value.get_ref<const std::string&>()))
    return absl::InvalidArgumentError("sops: object has a string that is not valid UTF-8");
  if (value.is_object()) {
    for (const auto& item : value.items()) {
      if (!ValidUtf8(item.key()))
        return absl::InvalidArgumentError("sops: object has a key that is not valid UTF-8");
      RETURN_IF_ERROR(CheckUtf8(item.value()));
    }
  }
  if (value.is_array()) {
    for (const auto& item : value) RETURN_IF_ERROR(CheckUtf8(item));
  }
  return absl::OkStatus();
}

std::string StringOr(const nlohmann::json& object, const char* key, const char* fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// "Secret ns/name" for error messages (identity only, never values).
std::string Describe(const nlohmann::json& object) {
  static const nlohmann::json kNone;
  const nlohmann::json& metadata =
      object.is_object() && object.contains("metadata") ? object["metadata"] : kNone;
  const std::string ns = StringOr(metadata, "namespace", "");
  return absl::StrCat(StringOr(object, "kind", "object"), " ", ns.empty() ? "" : ns + "/",
                      StringOr(metadata, "name", ""));
}

}  // namespace

absl::StatusOr<Tree> OrderedSecretTree(const nlohmann::json& object,
                                       manifest::MetadataOrder metadata_order) {
  if (!object.is_object()) return absl::InvalidArgumentError("sops: object is not a mapping");
  if (!object.contains("apiVersion") || !object["apiVersion"].is_string() ||
      !object.contains("kind") || !object["kind"].is_string()) {
    return absl::InvalidArgumentError("sops: object needs string apiVersion and kind");
  }
  if (object.contains("sops"))
    return absl::InvalidArgumentError("sops: object has a top-level `sops` field (reserved)");
  // Before anything recursive walks the object: a sops file cannot hold more levels anyway.
  if (!NestingDepthWithin(object)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sops: ", Describe(object), " nests deeper than ", kMaxNestingDepth, " levels"));
  }
  RETURN_IF_ERROR(CheckUtf8(object));
  Tree tree = Tree::object();
  tree["apiVersion"] = object["apiVersion"];
  tree["kind"] = object["kind"];
  Tree metadata = Tree::object();
  if (object.contains("metadata") && !object["metadata"].is_null()) {
    const nlohmann::json& m = object["metadata"];
    if (!m.is_object()) return absl::InvalidArgumentError("sops: metadata is not a mapping");
    std::vector<std::string> keys;
    if (metadata_order == manifest::MetadataOrder::kIdentityFirst) {
      for (const char* first : {"name", "namespace", "labels", "annotations"}) {
        if (m.contains(first)) keys.push_back(first);
      }
      for (const std::string& key : SortedKeys(m)) {
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
    } else {
      keys = SortedKeys(m);
    }
    for (const std::string& key : keys) metadata[key] = Ordered(m[key]);
  }
  tree["metadata"] = std::move(metadata);
  for (const std::string& key : SortedKeys(object)) {
    if (key == "apiVersion" || key == "kind" || key == "metadata" || key == "status") continue;
    tree[key] = Ordered(object[key]);
  }
  return tree;
}

absl::StatusOr<std::vector<std::string>> NormalizeRecipients(
    const std::vector<std::string>& age_recipients) {
  std::set<std::string> unique;
  for (size_t i = 0; i < age_recipients.size(); ++i) {
    const absl::string_view trimmed = absl::StripAsciiWhitespace(age_recipients[i]);
    if (trimmed.empty()) continue;
    auto recipient = age::X25519Recipient::Parse(trimmed);
    if (!recipient.ok()) {
      return absl::Status(recipient.status().code(),
                          absl::StrCat("age recipient [", i, "]: ", recipient.status().message()));
    }
    unique.insert(recipient->String());
  }
  return std::vector<std::string>(unique.begin(), unique.end());
}

absl::StatusOr<std::string> RecipientFromAgeKey(absl::string_view agekey_content) {
  std::vector<absl::string_view> identities;
  for (absl::string_view line : absl::StrSplit(agekey_content, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    identities.push_back(line);
  }
  if (identities.size() != 1)
    return absl::InvalidArgumentError(
        "agekey entry must contain exactly one AGE-SECRET-KEY identity");
  if (!absl::StartsWith(identities[0], "AGE-SECRET-KEY-"))
    return absl::InvalidArgumentError("agekey entry must contain an AGE-SECRET-KEY identity");
  ASSIGN_OR_RETURN(age::X25519Identity identity, age::X25519Identity::Parse(identities[0]));
  return identity.Recipient().String();
}

absl::StatusOr<std::string> EncryptSecretYaml(const nlohmann::json& sanitized_object,
                                              const std::vector<std::string>& age_recipients,
                                              const SecretFileOptions& options) {
  ASSIGN_OR_RETURN(std::vector<std::string> normalized, NormalizeRecipients(age_recipients));
  if (normalized.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no age recipients configured: refusing to write ", Describe(sanitized_object),
                     " (sensitive objects are never written in plaintext)"));
  }
  if (options.clock == nullptr || options.random == nullptr)
    return absl::InvalidArgumentError("sops: SecretFileOptions needs a clock and a random source");
  std::vector<age::X25519Recipient> recipients;
  for (const std::string& text : normalized) {
    ASSIGN_OR_RETURN(age::X25519Recipient recipient, age::X25519Recipient::Parse(text));
    recipients.push_back(std::move(recipient));
  }
  ASSIGN_OR_RETURN(Tree plaintext, OrderedSecretTree(sanitized_object, options.metadata_order));

  std::string data_key;
  EncryptOptions encrypt;
  encrypt.rule = EncryptionRule{EncryptionRule::Kind::kEncryptedRegex, options.encrypted_regex};
  encrypt.version = options.sops_version;
  encrypt.now = options.clock->Now();
  encrypt.random = options.random;
  encrypt.data_key_out = &data_key;
  auto text = EncryptYaml(plaintext, recipients, encrypt);
  if (!text.ok()) return core::Annotate(text.status(), Describe(sanitized_object));

  // Self-check: what sops will read from these bytes is exactly what we meant to write.
  auto reparsed = ParseSopsYaml(*text);
  if (!reparsed.ok()) return core::Annotate(reparsed.status(), "sops self-check: reparse");
  auto decrypted = DecryptTreeWithDataKey(*reparsed, data_key);
  std::fill(data_key.begin(), data_key.end(), '\0');
  if (!decrypted.ok()) return core::Annotate(decrypted.status(), "sops self-check: decrypt");
  if (decrypted->plaintext != plaintext) {
    return absl::InternalError(absl::StrCat("sops self-check: ", Describe(sanitized_object),
                                            " does not read back as written"));
  }
  return text;
}

bool LooksLikeSopsYaml(absl::string_view text) {
  if (!absl::StrContains(text, "mac: ENC[")) return false;
  auto tree = ParseSopsYaml(text);
  return tree.ok() && tree->contains("sops") && (*tree)["sops"].is_object();
}

absl::StatusOr<nlohmann::json> DecryptSecretYaml(
    absl::string_view text, const std::vector<age::X25519Identity>& identities) {
  ASSIGN_OR_RETURN(DecryptedDocument decrypted, DecryptYaml(text, identities));
  std::fill(decrypted.data_key.begin(), decrypted.data_key.end(), '\0');
  // A value may decrypt to any bytes (whoever holds a recipient's public key can write a file
  // that verifies); JSON holds only UTF-8. The error must not echo the plaintext.
  std::string plaintext_json;
  try {
    plaintext_json = decrypted.plaintext.dump();
  } catch (const nlohmann::json::exception&) {
    return absl::InvalidArgumentError("sops file: a decrypted value is not valid UTF-8");
  }
  return nlohmann::json::parse(plaintext_json);
}

absl::StatusOr<std::string> BootstrapSopsConfig(const std::vector<std::string>& age_recipients) {
  ASSIGN_OR_RETURN(std::vector<std::string> normalized, NormalizeRecipients(age_recipients));
  if (normalized.empty()) {
    return absl::FailedPreconditionError(
        "failed to render bootstrap file .sops.yaml: missing age recipients");
  }
  std::string out =
      "# .sops.yaml\n"
      "creation_rules:\n"
      "  # Encrypt only Kubernetes Secret payloads written as *.sops.yaml files.\n"
      "  - path_regex: '.*\\.sops\\.ya?ml$'\n"
      "    encrypted_regex: '^(data|stringData)$'\n"
      "    key_groups:\n"
      "      - age:\n";
  for (const std::string& recipient : normalized) {
    absl::StrAppend(&out, "          - \"", recipient, "\"\n");
  }
  return out;
}

absl::StatusOr<std::string> SecretFingerprint(const nlohmann::json& sanitized_object,
                                              const std::vector<std::string>& age_recipients,
                                              absl::string_view hmac_key,
                                              const SecretFileOptions& options) {
  if (hmac_key.size() < 16)
    return absl::InvalidArgumentError("fingerprint key must be at least 16 bytes");
  ASSIGN_OR_RETURN(std::vector<std::string> normalized, NormalizeRecipients(age_recipients));
  ASSIGN_OR_RETURN(Tree plaintext, OrderedSecretTree(sanitized_object, options.metadata_order));
  std::string dumped;
  try {
    dumped = plaintext.dump();
  } catch (const nlohmann::json::exception&) {
    return absl::InvalidArgumentError("fingerprint: object has invalid UTF-8");
  }
  // Length-prefixed parts, so no two inputs share an encoding.
  std::string input;
  for (const std::string& part :
       {dumped, absl::StrJoin(normalized, ","), options.encrypted_regex, options.sops_version}) {
    absl::StrAppend(&input, part.size(), ":", part, ";");
  }
  ASSIGN_OR_RETURN(std::string mac, crypto::HmacSha256(hmac_key, input));
  return crypto::HexEncode(mac);
}

}  // namespace reverser::sops
